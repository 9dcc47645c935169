"""Two runs side by side by structure: layer kind x operation family, whatever the kernels are called.

Two engines (or two versions) run the same model with different kernel names, fusions and launch
structure, so a comparison by kernel name lists kernels found on one side only. Here every kernel is
placed in a node ``(layer kind, family)``: the layer kind from the kernel table (``layer_kind``: from
the model's module paths, or from placed kernels of a graph replay), the family from what the kernel
does where it runs (data: ``categories.toml``'s ``[[role]]`` and ``[[category]]`` families): the role
of its block (attention, MLP, MoE, state-space, norm, rotary), its category, and its place in the
block (a GEMM before the block's attention kernel is the qkv projection, after it the o projection;
before the MLP's activation gate/up, after it down).
Whatever one side fuses (a fused add+norm, a fused gate/up+activation) stays in the node of the block
that runs it, so a fusion on one side is a smaller node, not a missing kernel; a node that holds
kernels of several families on one side only because of a fusion is reported as ``merged``.

Time per node (``basis="kernel"``, the default) is the GPU time of its kernels; the step's time with
no kernel running (``GPU idle``: launch gaps, host work) and the kernel time that ran beside other
kernels (``overlap``, negative) are nodes of their own, so the nodes add up to the step. With
``basis="wall"`` each kernel owns the part of the step it extends (from the later of its
start and the end of everything before it to its end), so a launch gap belongs to the kernel that waited
for it, and the nodes of a step add up to the step exactly (the time after the last kernel is the
``step tail`` node). A launch-bound eager step whose norm is six kernels instead of one puts its extra
launch gaps in the norm node, where the difference is caused. Kernel time per node is given beside.

Noise: two standard errors of the difference of per-step means (as ``compare``), and 0.1 % of A's step
(timer resolution); a node's difference beyond both is "beyond noise". Settings: given both runs'
effective settings (``kit.logs.settings``), each setting that differs is listed with whether the
engine reported it (took effect / ignored / unknown) and the nodes it can explain (:data:`SETTING_NODES`).

Each side's structure comes from its module frames; a side without them (a CUDA-graph replay, an engine
written without ``nn.Module``s, a trace without stack) from its placement against its own reference run
(``references=``, see ``kit.profile.load(reference=)``) where one is given and accepted, else from its layers
found by repetition (``Profile.find_layers``) and its kernels' categories: each layer's kind from the
categories it runs (attention, state-space, MoE, MLP), the mixer and the FFN split at the norm between
them, so a GEMM is a projection by its place as with frames. ``StructuralDiff.structure`` says how each
side's was found; what no rule decides (a GEMM between the blocks with no norm between, kernels of steps
whose layers were not found) stays in unnamed nodes, and their share is said.

Refused (``TraceError``, one line): runs whose layer kinds or layer counts differ (not the same model
shape), or a run with no kernel in the phase.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kit.errors import TraceError, UsageError
from kit.profile._profile import Profile
from kit.profile.analyses._compare import diff_rows
from kit.profile.attribution._categories import GEMM, OTHER, layer_kind, role_of, structure
from kit.profile.attribution._layers import find_layers
from kit.stats import is_nan
from kit.util import call_settings, frame_records, recorded

# the block roles, their families and the categories' families are data: categories.toml ([[role]], [[category]])
LM_HEAD = "lm head"                  # the last GEMM of a step, its N the vocabulary (the widest GEMM of the step)
LM_HEAD_BY_PLACE = "lm head (by place, no shape)"   # the last GEMM of a step whose shape the trace did not record
UNDECIDED = "undecided"             # a side without module frames: kernels no rule placed in a block or outside
UNPLACED_GEMM = "gemm (unplaced)"    # categories.toml: a GEMM's family outside the layers, until _lm_head names it
# family -> the families a fusing engine folds it into, nearest first (fused gate/up+activation, add+norm ...)
FUSES_INTO = {"activation": ("gate/up", "down"), "elementwise": ("norm", "all-reduce"),
              "rope": ("qkv proj", "attention"), "all-reduce": ("norm", "elementwise"), "router": ("experts",),
              "norm": ("elementwise", "qkv proj", "gate/up"), "qkv proj": ("attention",), "o proj": ("attention",)}
# normalised setting -> the nodes' families it can move
SETTING_NODES: dict[str, tuple[str, ...]] = {
    "attention_backend": ("attention",), "kv_cache_dtype": ("attention",),
    "custom_all_reduce": ("all-reduce",), "nccl_proto": ("all-reduce",), "nccl_algo": ("all-reduce",),
    "tp_size": ("all-reduce",), "cuda_graph": ("GPU idle",), "cuda_graph_max_bs": ("GPU idle",),
    "overlap_schedule": ("GPU idle",), "torch_compile": ("norm", "activation", "rope", "GPU idle"),
    "quantization": ("qkv proj", "o proj", "gate/up", "down", "experts"),
    "moe_backend": ("experts", "router"), "sampling_backend": ("sampling",),
    "speculative": ("every node: another decode program",),
}
STRUCTURAL = ("experts", "ssm mixer")   # families whose presence on one side only means another model (a router
# comes with experts; a side without module frames runs its router's kernels under their categories)
# a side without module frames: a layer's blocks from the categories of their kernels (the roles' anchors)
MIXERS = {"attention": ("attention", "kv-cache write"), "ssm": ("ssm",)}
FFNS = {"moe": ("moe",), "mlp": ("activation",)}
TAIL = "step tail"
IDLE = "GPU idle"            # kernel basis: the step's time with no kernel running (launch gaps, host work)
OVERLAP = "overlap"          # kernel basis: kernel time that ran beside other kernels (counted once in the step)
BASES = ("kernel", "wall")
OUTLIER = 2.5   # a step this many times the median step is a warm-up or a stall, not the program's step


@dataclass
class StructuralDiff:
    """Per node ``(layer_kind, family)``: ``a_us``/``b_us`` wall time per step, ``delta_us``, ``noise_us``,
    ``beyond_noise``, ``share`` of the step difference, kernel time per step on each side, ``merged``
    (families one side runs fused into this node); ``step_us`` of A and B, ``residual_us`` (step difference
    minus the node differences), ``structural_share`` (each side's time in named nodes, not ``other``: of
    its kernel time with ``basis="kernel"``, of its step with ``"wall"``),
    ``settings`` (differing settings and the nodes they can explain), ``warnings``."""

    nodes: pd.DataFrame
    step_us: tuple[float, float]
    residual_us: float
    structural_share: tuple[float, float]
    labels: tuple[str, str]
    settings: pd.DataFrame = field(default_factory=pd.DataFrame)
    warnings: list[str] = field(default_factory=list)
    basis: str = "kernel"
    structure: tuple[str, str] = ("module frames", "module frames")

    @property
    def undecided_share(self) -> tuple[float, float]:
        """Each side's share (as ``structural_share``) in nodes no rule named: the structure not decided."""
        return tuple(max(0.0, 1.0 - s) for s in self.structural_share)

    @property
    def delta_us(self) -> float:
        return self.step_us[1] - self.step_us[0]

    def top(self, n: int = 5) -> pd.DataFrame:
        """The ``n`` nodes with the largest difference, beyond noise first."""
        t = self.nodes.assign(_abs=self.nodes["delta_us"].abs())
        return t.sort_values(["beyond_noise", "_abs"], ascending=False).head(n).drop(columns="_abs")

    def to_dict(self) -> dict:
        return {"labels": list(self.labels), "step_us": list(self.step_us), "delta_us": self.delta_us,
                "residual_us": self.residual_us, "structural_share": list(self.structural_share),
                "structure": list(self.structure), "undecided_share": list(self.undecided_share),
                "nodes": frame_records(self.nodes), "settings": frame_records(self.settings),
                "warnings": list(self.warnings)}

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this diff: both steps, the residual, each node's difference."""
        a, b = self.labels
        figs = [("step_us", self.step_us[0], a), ("step_us", self.step_us[1], b), ("delta_us", self.delta_us),
                ("residual_us", self.residual_us), ("structural_share", self.structural_share[0], a),
                ("structural_share", self.structural_share[1], b)]
        figs += [(f"delta_us.{r.layer_kind}/{r.family}", r.delta_us) for r in self.nodes.itertuples()]
        return {"inputs": [x for x in (args.get("a"), args.get("b")) if isinstance(x, str)],
                "settings": {"basis": self.basis, **call_settings(args)}, "figures": figs,
                "facts": {"labels": " -> ".join(self.labels), "structure": " | ".join(self.structure)},
                "label": " -> ".join(self.labels),
                "tables": {"nodes": self.nodes, "settings": self.settings}, "warnings": list(self.warnings)}

    def __repr__(self) -> str:
        a, b = self.labels
        lines = [f"StructuralDiff {a} -> {b}: step {self.step_us[0]:,.1f} -> {self.step_us[1]:,.1f} us "
                 f"({self.delta_us:+,.1f}; residual {self.residual_us:+,.1f})"]
        for side, how, und in zip(self.labels, self.structure, self.undecided_share):
            lines.append(f"  {side}: structure from {how}; undecided {100 * und:.1f}%")
        for r in self.top(6).itertuples():
            lines.append(f"  {r.layer_kind:<16} {r.family:<14} {r.a_us:>10,.1f} {r.b_us:>10,.1f} {r.delta_us:>+10,.1f}"
                         f"  {'beyond noise' if r.beyond_noise else 'within noise'}")
        for r in self.settings.itertuples():
            lines.append(f"  setting {r.setting}: {r.a!s} -> {r.b!s} ({r.status}; can explain {r.explains})")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return "<pre>" + repr(self).replace("&", "&amp;").replace("<", "&lt;") + "</pre>"


def families(kernels: pd.DataFrame) -> pd.Series:
    """The operation family of each kernel (index-aligned with ``kernels``): its block role's family for
    its category (a GEMM by its place around the block's anchor kernel), else an embedding module's
    ``embedding``, else its category's family (categories.toml's ``[[role]]`` and ``[[category]]``)."""
    k, table = kernels, structure()
    roles = k["block"].map(role_of) if "block" in k else pd.Series("", index=k.index)
    if "role" in k:   # roles found by place in a side without module frames (found_structure)
        roles = k["role"].where(k["role"] != "", roles)
    cats = k["category"].astype(str)
    cat_key = cats.copy()
    order = k.sort_values(["step", "start_us"], kind="stable") if len(k) else k
    for r, anchor in table.anchors.items():
        in_role = (roles == r) & (k["layer"] >= 0) if "layer" in k else roles == r
        if not in_role.any():
            continue
        rows = order[in_role.reindex(order.index)]
        first = rows[rows["category"].astype(str) == anchor].groupby(["step", "layer"])["start_us"].min()
        at = pd.Series(pd.MultiIndex.from_frame(rows[["step", "layer"]]).map(first.to_dict().get), index=rows.index,
                       dtype=float)
        gemm = rows["category"].astype(str) == GEMM
        place = np.where(rows["start_us"] < at.fillna(np.inf), "gemm:before", "gemm:after")
        cat_key.loc[rows.index[gemm.to_numpy()]] = place[gemm.to_numpy()]
    inside = (k["layer"] >= 0).tolist() if "layer" in k else [False] * len(k)
    embed = (k["module"].map(role_of) == "embedding" if "module" in k else pd.Series(False, index=k.index)).tolist()
    fams = table.families
    out = []
    for r, c, plain, lay, emb in zip(roles.tolist(), cat_key.tolist(), cats.tolist(), inside, embed):
        fam = UNDECIDED if r == UNDECIDED else fams.get((r, c)) or fams.get((r, "*"))
        out.append(fam or ("embedding" if emb else table.family_of_category(plain, lay)))
    return _lm_head(k, pd.Series(out, index=k.index, dtype=object))


def found_structure(profile) -> tuple[Profile, str]:
    """``profile`` with its kernels in layers and blocks, and how they were found: its module frames, its
    placement against its reference run, else its layers by repetition (``find_layers``) with each layer's
    blocks by place (:func:`_blocks_by_place`); a profile none of these places comes back as it is, said."""
    placement = profile.placement
    if layer_shape(profile):
        if placement is not None and not placement.refused:
            return profile, f"{placement.provenance}, layers from {placement.layers_from}"
        return profile, "module frames"
    why = f"reference refused ({placement.refused}); " if placement is not None and placement.refused else ""
    found = dataclasses.replace(profile, kernels=profile.kernels.copy())
    guess = find_layers(found, assign=True)
    if not guess.bounds:
        return profile, f"{why}no module frames, no layers found by repetition ({guess.how})"
    found.kernels = _blocks_by_place(found.kernels, open_end=guess.confidence == "low")
    return found, f"{why}layers by repetition ({guess.confidence}: {guess.how}), blocks by place"


def _blocks_by_place(k: pd.DataFrame, open_end: bool = False) -> pd.DataFrame:
    """Kernels of layers found by repetition with the ``role`` of their block and their layer's kind (module
    docstring): a block holds the kernels from its first GEMM or anchor kernel to its last; with no norm
    between mixer and FFN the GEMMs between them have no block, and beside a layer's experts an MLP's GEMMs
    and activation (a shared expert) are :data:`UNDECIDED`. ``open_end`` (layers found by their first
    kernels only): the last layer's kernels past the longest other layer are :data:`UNDECIDED`."""
    cats = k["category"].astype(str).to_numpy()
    role = np.full(len(k), "", dtype=object)
    kinds: dict = {}
    inside = k[k["layer"] >= 0].sort_values(["step", "layer", "start_us"], kind="stable")
    for (_, layer), g in inside.groupby(["step", "layer"], sort=False):
        pos = k.index.get_indexer(g.index)
        c = cats[pos]
        blocks = [(r, np.flatnonzero(np.isin(c, cs))) for r, cs in (*MIXERS.items(), *FFNS.items())]
        blocks = [(r, at) for r, at in blocks if len(at)]
        kinds.setdefault(layer, []).append(layer_kind({r for r, _ in blocks}))
        mixer = next(((r, at) for r, at in blocks if r in MIXERS), None)
        ffn = next(((r, at) for r, at in blocks if r in FFNS), None)
        spans = [(mixer, 0, len(c)), (ffn, 0, len(c))]
        if mixer and ffn:
            norms = [i for i in np.flatnonzero(c == "norm") if mixer[1][-1] < i < ffn[1][0]]
            lo, hi = (norms[0], norms[0]) if norms else (mixer[1][-1] + 1, ffn[1][0])
            spans = [(mixer, 0, lo), (ffn, hi, len(c))]
        for block, lo, hi in spans:
            at = [] if block is None else sorted({*block[1][(block[1] >= lo) & (block[1] < hi)].tolist(),
                                                  *(i for i in range(lo, hi) if c[i] == GEMM)})
            if at:
                role[pos[at[0]:at[-1] + 1]] = block[0]
        if ffn and ffn[0] == "moe" and "mlp" in kinds[layer][-1]:   # a shared MLP beside the experts: which
            lo = spans[-1][1]                                          # GEMM is whose, no rule decides
            role[pos[lo:][np.isin(c[lo:], (GEMM, "activation"))]] = UNDECIDED
    if open_end:
        at = inside.groupby("step", sort=False)["layer"]
        last = inside["layer"] == at.transform("max")
        nth = inside.groupby(["step", "layer"]).cumcount()
        longest = nth[~last].groupby(inside.loc[~last, "step"]).max().reindex(inside["step"]).to_numpy()
        role[k.index.get_indexer(inside.index[last.to_numpy() & (nth.to_numpy() > longest)])] = UNDECIDED
    out = k.copy()
    out["role"] = role
    kind_of = {layer: pd.Series(v).mode().iloc[0] for layer, v in kinds.items()}
    out["layer_kind"] = out["layer"].map(kind_of).astype(object).astype("category")
    return out


def gemm_n(op, dims) -> float:
    """The output width N of a GEMM from its launching op and input shapes (``aten::mm``/``addmm``/``bmm``/
    ``matmul``: the last dimension of the last matrix; ``aten::linear``: the weight's first dimension);
    NaN when the trace recorded no shape for it."""
    if not isinstance(dims, str) or not dims.startswith("["):
        return float("nan")
    shapes = [[int(x) for x in re.findall(r"-?\d+", m)] for m in re.findall(r"\[([\d,\s-]*)\]", dims)]
    mats = [d for d in shapes if len(d) >= 2]
    if not mats:
        return float("nan")
    if str(op).endswith("linear"):
        return float(mats[1][0]) if len(mats) > 1 else float("nan")
    return float(mats[-1][-1])


def _lm_head(k: pd.DataFrame, fams: pd.Series) -> pd.Series:
    """A step's GEMMs outside the layers are the lm head only when they are one: the last run of GEMM kernels
    of the step (no other kernel between them: a split-K GEMM and its reduce) whose N, where the trace
    recorded shapes, is the widest of the step's GEMMs (the vocabulary); without shapes it is the lm head by
    place only (:data:`LM_HEAD_BY_PLACE`). Every other GEMM outside a layer is :data:`UNPLACED_GEMM`."""
    if not len(k) or "category" not in k:
        return fams
    outside = fams == UNPLACED_GEMM
    is_gemm = (k["category"].astype(str) == GEMM).to_numpy()
    fams = fams.copy()
    op = k["op"] if "op" in k else pd.Series(None, index=k.index, dtype=object)

    def widths(ix) -> list[float]:
        return [gemm_n(o, d) for o, d in zip(op.loc[ix], k.loc[ix, "input_dims"])] if "input_dims" in k else []

    for _, g in k.sort_values(["step", "start_us"], kind="stable").groupby("step", sort=False):
        gi = g.index
        gm = is_gemm[k.index.get_indexer(gi)]
        if not gm.any():
            continue
        last = int(np.flatnonzero(gm)[-1])
        first = last
        while first > 0 and gm[first - 1]:
            first -= 1
        tail = gi[first:last + 1]
        if not outside.loc[tail].all():
            continue
        known = [w for w in widths(tail) if not is_nan(w)]
        if not known:
            fams.loc[tail] = LM_HEAD_BY_PLACE
        elif max(known) >= max(w for w in widths(gi[gm]) if not is_nan(w)):
            fams.loc[tail] = LM_HEAD
    return fams


def wall_shares(k: pd.DataFrame, steps: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each kernel's share of its step's wall time (from the end of everything before it, or the step's
    start, to its end: the launch gap before it included) and of the GPU's busy time (the part of its own
    run no earlier kernel covers); zero for a kernel inside another's time."""
    wall, busy = pd.Series(0.0, index=k.index), pd.Series(0.0, index=k.index)
    starts = steps.set_index("step")["start_us"].to_dict()
    for step, g in k.sort_values("start_us", kind="stable").groupby("step", sort=False):
        s, e = g["start_us"].to_numpy(float), (g["start_us"] + g["dur_us"]).to_numpy(float)
        frontier = np.maximum.accumulate(np.concatenate([[starts.get(step, s[0])], e]))[:-1]
        wall.loc[g.index] = np.clip(e - frontier, 0.0, None)
        busy.loc[g.index] = np.clip(e - np.maximum(s, frontier), 0.0, None)
    return wall, busy


def node_table(profile, phase: str, warnings: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
    """(per-step wall time per node: steps x nodes, per-step kernel time per node, per-step wall) of one run's
    busiest rank in ``phase`` (all steps when none is marked with it). Steps longer than
    :data:`OUTLIER` times the median step (a first step's lazy initialisation, a stall) are left out and
    counted in ``warnings``."""
    k, steps = profile.kernels, profile.steps
    rank = int(k.groupby("rank")["dur_us"].sum().idxmax()) if len(k) else 0
    k, steps = k[k["rank"] == rank], steps[steps["rank"] == rank]
    if phase != "all" and (steps["phase"] == phase).any():
        steps = steps[steps["phase"] == phase]
    slow = steps["wall_us"] > OUTLIER * steps["wall_us"].median()
    if slow.any() and slow.sum() < len(steps) / 2:
        warnings.append(f"{', '.join(profile.files)}: {int(slow.sum())} of {len(steps)} steps over {OUTLIER:g}x "
                        f"the median step left out (warm-up or stall): steps {steps.loc[slow, 'step'].tolist()}")
        steps = steps[~slow]
    k = k[k["step"].isin(steps["step"]) & (k["dur_us"] > 0)]
    if not len(k):
        raise TraceError(f"{', '.join(profile.files)}: no kernel in a {phase} step: no structure to compare")
    kind = k["layer_kind"].astype(object).where(k["layer"] >= 0, "outside layers").fillna("unplaced")
    fam = families(k)
    node = kind.astype(str) + " | " + fam.astype(str)
    wall, busy = wall_shares(k, steps)
    walls = steps.set_index("step")["wall_us"].astype(float)

    def per_step(values: pd.Series) -> pd.DataFrame:
        return values.groupby([k["step"], node]).sum().unstack(fill_value=0.0).reindex(walls.index, fill_value=0.0)

    by_wall, by_kernel = per_step(wall), per_step(k["dur_us"].astype(float))
    by_wall[f"(all) | {TAIL}"] = walls - by_wall.sum(axis=1)
    busy_per_step = busy.groupby(k["step"]).sum().reindex(walls.index, fill_value=0.0)
    by_kernel[f"(all) | {IDLE}"] = walls - busy_per_step
    over = busy_per_step - by_kernel.drop(columns=[f"(all) | {IDLE}"]).sum(axis=1)
    by_kernel[f"(all) | {OVERLAP}"] = over.where(over.abs() > 1e-6, 0.0)   # float sums' residue is no overlap
    return by_wall, by_kernel, walls


def layer_shape(profile) -> dict[str, int]:
    """Layers per layer kind in a run's kernel table (``{}`` when no kernel is placed in a layer)."""
    k = profile.kernels
    k = k[k["layer"] >= 0]
    return {str(kind): int(n) for kind, n in k.groupby(k["layer_kind"].astype(object).fillna("unplaced"))["layer"]
            .nunique().items()}


@recorded("structure")
def diff_structure(a, b, *, phase: str = "decode", labels: tuple[str, str] | None = None,
                   settings: tuple | None = None, basis: str = "kernel",
                   references: tuple | None = None) -> StructuralDiff:
    """Compare runs ``a`` and ``b`` (Profiles or trace paths) node by node, on ``basis`` ``"kernel"`` or
    ``"wall"`` (module docstring). ``settings``: the two runs' ``kit.logs.Settings`` (or dicts of effective
    settings) for the settings diff beside the nodes. ``references``: a reference run for each side (None
    where none is needed) for ``kit.profile.load(..., reference=)``; a side given as a Profile is used as is."""
    if basis not in BASES:
        raise UsageError(f"diff_structure: basis must be one of {', '.join(BASES)}, not {basis!r}")
    refs = tuple(references) if references else (None, None)
    (pa, how_a), (pb, how_b) = (found_structure(Profile.of(x, reference=r)) for x, r in zip((a, b), refs))
    la, lb = labels or ("A", "B")
    sa, sb = layer_shape(pa), layer_shape(pb)
    if sa != sb:
        why = "; ".join(f"{side}'s structure: {how}" for side, how, s in ((la, how_a, sa), (lb, how_b, sb)) if not s)
        raise TraceError(f"diff_structure: {la} has layers {sa or 'none placed'}, {lb} has {sb or 'none placed'}: "
                         f"not the same model shape (or one run's kernels are not placed in layers{': ' if why else ''}"
                         f"{why})")
    warnings: list[str] = []
    (wa, ka, step_a), (wb, kb, step_b) = node_table(pa, phase, warnings), node_table(pb, phase, warnings)
    fa, fb = ({n.split(" | ", 1)[1] for n in w.columns if w[n].sum() > 0} & set(STRUCTURAL) for w in (ka, kb))
    if fa != fb:
        raise TraceError(f"diff_structure: {la} runs {', '.join(sorted(fa)) or 'no MoE or state-space layers'}, {lb} "
                         f"runs {', '.join(sorted(fb)) or 'none'}: not the same model shape")
    if not sa:
        warnings.append("no kernel is placed in a layer (no module frames, no placement): nodes are families only; "
                        f"'{UNPLACED_GEMM}' holds the layers' GEMMs")
    if any((w.columns.str.endswith(LM_HEAD_BY_PLACE)).any() for w in (ka, kb)):
        warnings.append(f"'{LM_HEAD_BY_PLACE}': the last GEMM of each step, taken as the lm head by its place; the "
                        "trace recorded no shapes to confirm that its N is the vocabulary (record_shapes=True would)")
    nodes = _node_rows(*((wa, wb, ka, kb) if basis == "wall" else (ka, kb, ka, kb)))
    nodes["beyond_noise"] = nodes["delta_us"].abs() > np.maximum(nodes["noise_us"], 1e-3 * float(step_a.mean()))
    delta = float(step_b.mean() - step_a.mean())
    nodes["share"] = nodes["delta_us"] / delta if delta else np.nan
    nodes["merged"] = _merged(nodes)
    named = ~nodes["family"].isin([OTHER, "gemm (other)", UNPLACED_GEMM, UNDECIDED, IDLE, OVERLAP, TAIL])
    named &= nodes["layer_kind"] != "unplaced"
    whole = ~nodes["family"].isin([IDLE, OVERLAP]) if basis == "kernel" else nodes["family"].notna()
    share = tuple(float(nodes.loc[named, c].sum() / nodes.loc[whole, c].sum()) if nodes.loc[whole, c].sum() else
                  float("nan") for c in ("a_us", "b_us"))
    residual = delta - float(nodes["delta_us"].sum())
    table = _settings_diff(settings or ({}, {}))
    idle = nodes[nodes["family"] == IDLE]
    if basis == "kernel" and len(idle) and float(idle[["a_us", "b_us"]].max(axis=None)) > 0.3 * float(step_a.mean()):
        warnings.append("GPU idle is over 30% of a step (launch-bound, or host work between kernels): its difference "
                        "is CPU time; basis='wall' gives each node the launch gaps before its kernels")
    for side, how, named_share in zip((la, lb), (how_a, how_b), share):
        if how != "module frames":
            warnings.append(f"{side}: structure from {how}; {max(0.0, 100 * (1 - named_share)):.1f}% undecided "
                            "(in unnamed nodes)")
    return StructuralDiff(nodes, (float(step_a.mean()), float(step_b.mean())), residual, share, (la, lb), table,
                          warnings, basis, (how_a, how_b))


def _node_rows(wa, wb, ka, kb) -> pd.DataFrame:
    """One row per node: per-step means of A and B, their difference and its noise (compare's rows), and the
    kernel time per step on each side."""
    names = sorted(set(wa.columns) | set(wb.columns))
    (a, b), (ka, kb) = ([t.reindex(columns=names, fill_value=0.0).to_numpy(float).T for t in pair]
                        for pair in ((wa, wb), (ka, kb)))
    kind, fam = zip(*(n.split(" | ", 1) for n in names))
    rows = pd.DataFrame(diff_rows(names, a, b)).drop(columns="part")
    return rows.assign(layer_kind=kind, family=fam, a_kernel_us=ka.mean(axis=1), b_kernel_us=kb.mean(axis=1))[
        ["layer_kind", "family", "a_us", "b_us", "delta_us", "noise_us", "a_kernel_us", "b_kernel_us"]]


def _merged(nodes: pd.DataFrame) -> list[str]:
    """For each node: the families one side runs fused into it (present on the other side only, in the
    same layer kind, and next to this node's family in :data:`FUSES_INTO`), as text; '' when none."""
    out = {i: [] for i in nodes.index}
    for _, g in nodes.groupby("layer_kind"):
        both = {r.family: i for i, r in g.iterrows() if r.a_us > 0 and r.b_us > 0}
        for r in g.itertuples():
            side = "B" if r.a_us > 0 and r.b_us == 0 else "A" if r.b_us > 0 and r.a_us == 0 else None
            target = next((t for t in FUSES_INTO.get(r.family, ()) if t in both), None) if side else None
            if target is not None:
                out[both[target]].append(f"{side} fuses {r.family}")
    return ["; ".join(out[i]) for i in nodes.index]


def _effective(s) -> dict:
    return dict(s.effective) if hasattr(s, "effective") else dict(s or {})


def _settings_diff(settings) -> pd.DataFrame:
    """One row per setting that differs: its effective values, whether it took effect (both runs report it:
    ``took effect``; asked differently but reported the same: ``ignored``; not reported: ``unknown``) and
    the nodes it can explain."""
    a, b = settings
    ea, eb = _effective(a), _effective(b)
    rows = []
    for key in sorted(set(ea) | set(eb)):
        if str(ea.get(key)) == str(eb.get(key)):
            continue
        said = [s.reported(key) if hasattr(s, "reported") else None for s in (a, b)]
        rows.append({"setting": key, "a": ea.get(key), "b": eb.get(key),
                     "status": "took effect" if all(said) else "unknown",
                     "explains": ", ".join(SETTING_NODES.get(key, ())) or "no node known"})
    asked_a, asked_b = (dict(getattr(s, "args", {}) or {}) for s in (a, b))
    key_for = getattr(type(a), "key_for", None)
    for arg in sorted(set(asked_a) | set(asked_b)):
        key = key_for("--" + arg) if key_for else None
        both = arg in asked_a and arg in asked_b and key in ea and key in eb
        if key and both and str(asked_a[arg]) != str(asked_b[arg]) and str(ea[key]) == str(eb[key]):
            rows.append({"setting": arg, "a": asked_a.get(arg), "b": asked_b.get(arg),
                         "status": f"ignored (both runs report {key}={ea[key]})",
                         "explains": ", ".join(SETTING_NODES.get(key, ())) or "no node known"})
    return pd.DataFrame(rows, columns=["setting", "a", "b", "status", "explains"])
