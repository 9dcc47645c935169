"""Kernel attribution: each GPU kernel -> its launch -> the CPU frames enclosing the launch -> a category.

A kernel's ``correlation`` id names the runtime call that launched it; the launch's thread and time place
it inside the CPU frames the reader kept (ops, ``record_function`` ranges, with ``with_stack`` the
``nn.Module`` and python-function frames): one sweep per thread gives every launch its stack.

The category is decided by the first evidence that exists, in this order (``decided_by`` says which):

1. ``user rule``: the user's kernel-name rules;
2. ``collective arg`` / ``kernel name (sure)``: a collective's ``Collective name`` argument, and kernel
   names that cannot be anything else (NCCL and custom all-reduce kernels, memcpy/memset);
3. the frames around the launch, innermost out (``op`` / ``module`` / ``function`` / ``range``): the
   innermost frame a ``[[role]]`` (a module class, by its name's suffix) or ``[[frame]]`` rule claims; a
   ``generic`` one (``mm``, ``topk``) gives way to the first enclosing frame with a meaning (the SDPA op
   around math attention's ``bmm``); an enclosing ``container`` (an MoE block, an SSM mixer) overrides what
   it encloses except the categories it ``keep``s; a weight GEMM (``aten::linear`` / ``addmm``) is gemm
   inside any role but a container, a product of two activations the role's. ``enclosing module``: only a
   module around an innermost class no rule claims gave the role (a guess, undecided). ``structure``: a class
   a role calls attention that runs no softmax, SDPA/flash op or attention kernel is a linear recurrence
   (RWKV, lightning attention): ssm, undecided. Graph replays take no frame evidence (their frames enclose
   the replay). ``sequence``: where no frame decided (or a generic op did), the ``[[sequence]]`` rule
   claiming the outermost op around the launch (``_sequences.py``). ``kernel sequence``: kernels with no CPU
   op around their launch (graph replays, CUDA-only traces) read as the ops their names stand for, through
   the same rules;
4. ``fused name``: inductor's ``triton_{poi,red,per,tem}_fused_<ops>_N`` names read as the fused ops;
5. ``kernel name``: the kernel-name rules (``kernel name (no launch)``: the launch is not in the trace);
   else ``none`` (category ``other``).

The same sweep: ``op``/``op_top`` the innermost/outermost enclosing ``cpu_op``, ``op_call`` the row of the
innermost op that recorded ``Input Dims`` (-1: none) and ``input_dims``/``input_types`` its shapes as JSON
text; ``module`` the innermost ``nn.Module`` class, ``block`` the class directly inside the outermost layer
(a class with no role named ``*Layer``/``*Block``), ``layer`` that layer's index by first call (the profiler
numbers instances per class), ``layer_kind`` the roles inside it (``attention+mlp``; a container's hold is
the container's).
"""
from __future__ import annotations

import re
from bisect import bisect_right

import numpy as np
import pandas as pd

from kit.profile.attribution._categories import (
    ALLREDUCE,
    ATTENTION,
    COMM,
    FRAME_KINDS,
    GEMM,
    MEMCPY,
    OTHER,
    OTHER_COLLECTIVES,
    PACKAGED,
    Rule,
    fold,
    layer_kind,
)
from kit.profile.attribution._names import GRAPH_LAUNCH
from kit.profile.attribution._sequences import claim, kernel_token, outermost
from kit.profile.reading._columns import matching, strings

SURE = set(COMM) | {MEMCPY}
EVIDENCE = ("user rule", "collective arg", "kernel name (sure)", "op", "module", "function", "range",
            "enclosing module", "structure", "sequence", "kernel sequence", "fused name", "kernel name",
            "kernel name (no launch)", "none",
            "reference")  # the counterpart's category in a reference run (_place.py)
_MODULE = re.compile(r"^nn\.Module: (.*?)(?:_(\d+))?$")
_LAYER = re.compile(r"(?:Layer|Block|layer|block)$")   # a class with no role whose name says layer
_FUSED = re.compile(r"^triton_(poi|red|per|tem)_fused_?(.*?)(?:_\d+)*$")
# the object columns of ``link``'s result (besides launch, graph, layer, op_call)
LINKED_OBJECT = ("frame_category", "frame_kind", "frame_name", "module", "block", "layer_kind", "op", "op_top",
                 "input_dims", "input_types")


def fused_category(name: str, rules: list[Rule]) -> str | None:
    """Category of an inductor fused Triton kernel from the ops in its name, or None (not such a name)."""
    m = _FUSED.match(name)
    if not m:
        return None
    kind, ops = m.group(1), m.group(2)
    return next((r.category for r in rules if (not r.kinds or kind in r.kinds) and r.matches(ops)), None)


class _FrameInfo:
    __slots__ = ("cat", "container", "generic", "keep", "kind", "name", "module", "role", "layer_like")

    def __init__(self, name: str, kind: str, rules: list[Rule], memo: dict | None = None) -> None:
        """``memo``: (kind, subject) -> the deciding rule's fields, shared by the frames of one load; a
        module's instances (``nn.Module: Linear_12``, ``Linear_13`` ...) are one class, matched once."""
        self.name, self.kind, self.module, subject = name, kind, None, name
        if kind == "module":
            m = _MODULE.match(name)
            self.module = subject = m.group(1) if m else name[len("nn.Module: "):]
        elif kind == "function":
            subject = name.rsplit("): ", 1)[-1]   # the function's name, not its file (modeling_qwen2_moe.py)
        memo = {} if memo is None else memo
        if kind == "op" and name.startswith("triton_"):   # one Triton kernel's range: its fused name decides
            got = (None, False, False, (), None, False)
        elif (kind, subject) in memo:
            got = memo[(kind, subject)]
        else:   # the first rule on ``kind`` that finds ``subject``; layer_like: a class no role claims named as a layer
            low = fold(subject)
            r = next((r for r in rules if kind in r.on and r.matches(subject, low)), None)
            got = (r.category, r.container, r.generic, r.keep, r.role or None) if r else (None, False, False, (), None)
            got = memo[(kind, subject)] = (*got, bool(kind == "module" and got[4] is None and _LAYER.search(subject)))
        self.cat, self.container, self.generic, self.keep, self.role, self.layer_like = got


def _decide_stack(stack: list[_FrameInfo]) -> tuple[_FrameInfo | None, str | None]:
    """The deciding frame of a stack (innermost first; the module docstring's step 3), and the unclaimed
    innermost class when only an enclosing module's role decided (a guess: GPT-2's ``Conv1D`` inside its
    attention), else None."""
    dec = inner = None   # inner: the innermost module frame
    for inf in stack:
        if inner is None and inf.module is not None:
            inner = inf
        if inf.cat is None:
            continue
        if (dec is None or (dec.generic and not inf.generic)
                or (inf.container and inf.cat != dec.cat and dec.cat not in inf.keep)
                # the Linear around a weight GEMM op: decided by module, as before the op rule
                or (dec.kind == "op" and dec.cat == GEMM and inf.kind == "module" and inf.cat == GEMM)):
            dec = inf
    weak = (dec is not None and dec.kind == "module" and not dec.container and inner is not None
            and inner is not dec and inner.cat is None and not inner.layer_like)
    return dec, inner.module if weak else None


# what the sweep finds per launch (a position in the launch table), copied to the kernels that launch linked;
# besides these, ``layer_name`` (the layer frame) and ``op_call`` (the shaped op call, -1: none)
_FOUND = ("frame_category", "frame_kind", "frame_name", "module", "block", "op", "op_top")


def _sweep_thread(fr: dict, rows: np.ndarray, li: np.ndarray, lts: np.ndarray, infos: dict, decided: dict,
                  fr_rules: list, seq_rules: list, res: dict, layer_ids: dict, att_launch: np.ndarray) -> None:
    """One thread's launches ``li`` (by time) against its CPU frames ``rows`` of ``fr``: the stack open at each
    launch decides (``_decide_stack``), unfused op sequences over the outermost ops may override a generic op;
    placement goes into ``res`` (per launch). ``infos``/``decided``: the load's memos of frames and decisions."""
    order = np.lexsort((-fr["dur"][rows], fr["ts"][rows]))   # by start, the longest (outer) first
    rows = rows[order]
    fts, fend = fr["ts"][rows], fr["ts"][rows] + fr["dur"][rows]
    names, kinds = fr["name"][rows], fr["kind"][rows]
    has_dims = (fr["dims"][rows] != None).tolist()  # noqa: E711 - elementwise on objects
    for nm, kd in set(zip(names.tolist(), kinds.tolist())) - infos.keys():
        infos[(nm, kd)] = _FrameInfo(nm, kd, fr_rules, decided)
    finfo = [infos[key] for key in zip(names.tolist(), kinds.tolist())]
    att_ts = np.sort(lts[li[att_launch[li]]])
    nosoft = _attention_without_softmax(finfo, fts, fend, names, kinds, att_ts)
    top = outermost(fts, fend, kinds == "op")   # unfused op sequences over the outermost ops
    seq_of = claim([names[i] for i in top], seq_rules) if len(top) and seq_rules else []
    top_ts, top_end = fts[top].tolist(), fend[top].tolist()
    # the sweep reads single elements: Python lists (same float64 values) index ~5x faster than arrays
    fts_l, fend_l, names_l, rows_l = fts.tolist(), fend.tolist(), names.tolist(), rows.tolist()
    stack: list[int] = []
    j, nf = 0, len(fts_l)
    for L, t in zip(li.tolist(), lts[li].tolist()):
        while j < nf and fts_l[j] <= t:
            while stack and fend_l[stack[-1]] < fts_l[j]:
                stack.pop()
            stack.append(j)
            j += 1
        while stack and fend_l[stack[-1]] < t:
            stack.pop()
        live = [f for f in reversed(stack) if fend_l[f] >= t]   # innermost first
        stack_info = [finfo[f] for f in live]
        dec, weak = _decide_stack(stack_info)
        _place(stack_info, live, names_l, has_dims, rows_l, res, L, fts_l, layer_ids)
        dcat, dkind, dname = (dec.cat, dec.kind, dec.name) if dec else (None, None, None)
        if weak is not None:
            dkind, dname = "enclosing module", weak
        elif nosoft and dec is not None and dec.kind == "module" and dec.cat == ATTENTION:
            f = next(f for f, inf in zip(live, stack_info) if inf is dec)
            if f in nosoft:   # an "attention" class whose call runs no softmax: a linear recurrence
                dcat, dkind, dname = "ssm", "structure", f"{dec.module}: no softmax"
        if seq_of:
            q = bisect_right(top_ts, t) - 1
            r = seq_of[q] if q >= 0 and top_end[q] >= t else None
            if r is not None and (dec is None or (dec.kind == "op" and dec.cat != r.category
                                                  and (dec.generic or r.container))):
                dcat, dkind, dname = r.category, "sequence", r.role or r.pattern
        res["frame_category"][L], res["frame_kind"][L], res["frame_name"][L] = dcat, dkind, dname


# ops that make an attention an attention: a softmax over scores, an SDPA / flash / paged kernel op
_SOFTMAX = re.compile(r"(?i)softmax|scaled_dot_product|attention|attn|flash|fmha|_mla|paged|decode_with|prefill_with|"
                      r"flex_")


_ATT_KERNEL = re.compile(r"(?i)flash|fmha|attn|attention|softmax|BatchDecode|BatchPrefill|SingleDecode|"
                         r"SinglePrefill|paged|mla|sdpa")


def _attention_without_softmax(finfo: list, fts: np.ndarray, fend: np.ndarray, names: np.ndarray,
                               kinds: np.ndarray, att_ts: np.ndarray) -> set:
    """The module frames (positions) a role calls attention whose call runs ops but none that makes an attention
    (a softmax, an SDPA / flash / paged op) and launches no kernel named as one (``att_ts``: their launch times):
    a linear-attention or recurrent mixer named ``*Attention`` (RWKV's time mixing, MiniMax's lightning one)."""
    cand = [f for f, inf in enumerate(finfo) if inf.kind == "module" and inf.cat == ATTENTION and not inf.container]
    if not cand:
        return set()
    is_op = kinds == "op"
    op_ts = fts[is_op]
    soft_ts = op_ts[matching(pd.Series(names[is_op], dtype=object), _SOFTMAX)]
    a, b = fts[cand], fend[cand]   # ops, softmax-like ops and attention kernels inside each candidate's call
    n_ops, n_soft, n_att = (np.searchsorted(t, b, "right") - np.searchsorted(t, a, "left")
                            for t in (op_ts, soft_ts, att_ts))
    return {f for f, yes in zip(cand, (n_ops >= 4) & (n_soft == 0) & (n_att == 0)) if yes}


def _place(stack_info: list, live: list[int], names_l: list, has_dims: list, rows_l: list, res: dict, L: int,
           fts_l: list, layer_ids: dict) -> None:
    """One launch's module, block, layer frame, ops and shaped op call from its open frames (innermost first)."""
    module = block = layer_name = inner_mod = op = op_top = None
    roles: list = []
    shaped = -1
    for inf, f in zip(stack_info, live):
        if inf.kind == "op":
            op = op or inf.name
            op_top = inf.name
            if shaped < 0 and has_dims[f]:
                shaped = f
        if inf.module is not None:
            if module is None:
                module = inf.module
            if inf.layer_like:
                layer_name, block = names_l[f], inner_mod   # the outermost layer frame wins
            inner_mod = inf.module
            if inf.role and layer_name is None:
                if inf.container:
                    roles = []   # what a container holds is the container's (an MoE's shared MLP)
                roles.append(inf.role)
    if layer_name is not None:
        if layer_name not in layer_ids:   # its start: the innermost open frame of that name
            layer_ids[layer_name] = (fts_l[next(f for f in live if names_l[f] == layer_name)], set())
        layer_ids[layer_name][1].update(roles)
    for c, v in (("module", module), ("block", block), ("layer_name", layer_name), ("op", op), ("op_top", op_top)):
        res[c][L] = v
    if shaped >= 0:
        res["op_call"][L] = rows_l[shaped]


def _frame_columns(frames: pd.DataFrame, ann: pd.DataFrame) -> dict[str, np.ndarray] | None:
    """The CPU frames a launch can sit in as numpy columns (``name, ts, dur, tid, kind, dims, types``): the kept
    frames, then the CPU-side annotations (kind ``range``); None when there is neither."""
    cpu = ann[ann["side"] == "cpu"] if len(ann) else ann
    parts = [{"name": strings(t["name"]) if is_fr else t["name"].astype(str).to_numpy(object),
              "ts": t["ts"].to_numpy(float), "dur": t["dur"].to_numpy(float),
              "tid": t["tid"].to_numpy(object) if is_fr else t["tid"].astype(str).to_numpy(object),
              "kind": strings(t["kind"]) if is_fr else np.full(len(t), "range", dtype=object),
              **{c: t[c].astype(object).to_numpy() if c in t and is_fr else np.full(len(t), None, dtype=object)
                 for c in ("dims", "types")}}
             for t, is_fr in ((frames, True), (cpu, False)) if len(t)]
    return {c: np.concatenate([p[c] for p in parts]) for c in parts[0]} if parts else None


def link(k: pd.DataFrame, launches: pd.DataFrame, frames: pd.DataFrame, ann: pd.DataFrame,
         rules: list[Rule]) -> dict[str, np.ndarray]:
    """Per kernel of one rank, columns aligned with ``k``: ``launch`` (runtime call name or ''), ``graph``,
    the deciding frame (``frame_category``/``frame_kind``/``frame_name``), the module placement and ops of the
    module docstring (``layer``, ``op_call``: -1 for none). Numpy arrays, text as object arrays: no text column
    goes to arrow strings and back before ``_assemble`` makes it categorical."""
    n = len(k)
    out = {"launch": np.full(n, "", dtype=object), "graph": np.zeros(n, bool),
           **{c: np.full(n, None, dtype=object) for c in LINKED_OBJECT},
           "layer": np.full(n, -1, dtype=np.int64), "op_call": np.full(n, -1, dtype=np.int64)}
    if not n or not len(launches):
        out["launch"][:] = None   # no launch records at all (nsys stats, old traces): not "missing"
        return out
    la = launches.drop_duplicates("correlation")
    la = la[la["correlation"] >= 0]
    pos = pd.Index(la["correlation"].to_numpy()).get_indexer(k["correlation"].to_numpy())
    has = pos >= 0
    out["launch"][has] = strings(la["name"])[pos[has]]
    out["graph"][has] = matching(la["name"], GRAPH_LAUNCH)[pos[has]]
    seq_rules = [r for r in rules if "sequence" in r.on]
    fr = _frame_columns(frames, ann)   # kept CPU frames + CPU-side annotations (record_function ranges)
    # launches that need a stack: linked, not graph replays (graph kernels still get no frames)
    need = np.unique(pos[has & ~out["graph"]])
    if fr is not None and len(need):
        _stacks(k, la, pos, has, need, fr, [r for r in rules if set(r.on) & FRAME_KINDS], seq_rules, out)
    _kernel_sequences(k, pos, out, seq_rules)
    return out


def _stacks(k: pd.DataFrame, la: pd.DataFrame, pos: np.ndarray, has: np.ndarray, need: np.ndarray, fr: dict,
            fr_rules: list[Rule], seq_rules: list[Rule], out: dict) -> None:
    """:func:`link`'s frame evidence and module placement of the launches ``need``, thread by thread."""
    infos: dict[tuple[str, str], _FrameInfo] = {}
    decided: dict[tuple[str, str], tuple] = {}   # (kind, subject) -> the rule's fields (_FrameInfo)
    lts, ltid = la["ts"].to_numpy(float), strings(la["tid"])
    res = {c: [None] * len(la) for c in (*_FOUND, "layer_name")} | {"op_call": [-1] * len(la)}
    layer_ids: dict[str, tuple[float, set]] = {}   # layer frame name -> (first start, roles inside)
    att_launch = np.zeros(len(la), bool)   # launches of a kernel named as attention (flash, fmha, paged ...)
    att_launch[pos[has & matching(k["name"], _ATT_KERNEL)]] = True
    for tid in np.unique(ltid[need]):
        rows = np.flatnonzero(fr["tid"] == tid)
        if not len(rows):
            continue
        li = need[ltid[need] == tid]
        li = li[np.argsort(lts[li], kind="stable")]
        _sweep_thread(fr, rows, li, lts, infos, decided, fr_rules, seq_rules, res, layer_ids, att_launch)
    # layers: numbered by their first call (the profiler numbers instances per class, so a hybrid's
    # attention and Mamba layers would both start at 0), kind from the roles found inside
    order_l = sorted(layer_ids, key=lambda x: layer_ids[x][0])
    lindex = {nm: i for i, nm in enumerate(order_l)}
    lkind = {nm: layer_kind(layer_ids[nm][1]) for nm in order_l}
    idx = np.flatnonzero(has & ~out["graph"])
    at = pos[idx]
    for c in _FOUND:
        out[c][idx] = np.asarray(res[c], dtype=object)[at]
    calls = np.asarray(res["op_call"], dtype=np.int64)
    out["op_call"][idx] = calls[at]
    have = calls[at] >= 0
    out["input_dims"][idx[have]] = fr["dims"][calls[at][have]]
    out["input_types"][idx[have]] = fr["types"][calls[at][have]]
    out["layer"][idx] = np.asarray([lindex.get(x, -1) for x in res["layer_name"]], dtype=np.int64)[at]
    out["layer_kind"][idx] = np.asarray([lkind.get(x) for x in res["layer_name"]], dtype=object)[at]


def _kernel_sequences(k: pd.DataFrame, pos: np.ndarray, out: dict, seq_rules: list[Rule]) -> None:
    """Kernels with no CPU op around their launch read through the sequence rules as the ops their names stand
    for: one graph replay at a time, the other op-less kernels with a launch (traces without CPU ops) per stream,
    in the order they ran. Kernels queued before the window (no launch) keep their name's category."""
    if not seq_rules or not len(k):
        return
    graph = out["graph"]
    bare = ~graph & (pos >= 0) & np.array([o is None for o in out["op"]], dtype=bool) & \
        np.array([c is None for c in out["frame_category"]], dtype=bool)
    names = strings(k["name"])
    ts = k["ts"].to_numpy(float)
    memo: dict[tuple, list] = {}
    g = np.flatnonzero(graph)
    b = np.flatnonzero(bare)
    groups = [g[ix] for ix in pd.Series(g).groupby(pos[g]).indices.values()] if len(g) else []
    if len(b):
        groups += [b[ix] for ix in pd.Series(b).groupby(k["stream"].to_numpy()[b]).indices.values()]
    for rows in groups:
        rows = rows[np.argsort(ts[rows], kind="stable")]   # untimed replays (ts 0) keep their file order
        key = tuple(names[rows])
        if key not in memo:
            memo[key] = claim([kernel_token(x) for x in key], seq_rules)
        for i, r in zip(rows, memo[key]):
            if r is not None and out["frame_category"][i] is None:
                out["frame_category"][i], out["frame_kind"][i] = r.category, "kernel sequence"
                out["frame_name"][i] = r.role or r.pattern


def decide(names: pd.Series, collective: pd.Series, linked: pd.DataFrame, rules: list[Rule],
           name_cats: dict[str, str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(category, decided_by, evidence) per kernel, in the order of the module docstring."""
    cat, by, ev = (np.full(len(names), v, dtype=object) for v in (OTHER, "none", None))
    user = [r for r in rules if "kernel" in r.on and r.source != PACKAGED]
    fused_rules = [r for r in rules if "fused" in r.on]
    nm = strings(names)
    distinct = pd.unique(nm)
    user_cat = {x: c for x in distinct if (c := next((r.category for r in user if r.matches(x)), None)) is not None}
    fused = {x: fused_category(x, fused_rules) for x in distinct}

    def put(where: np.ndarray, category: np.ndarray, decided_by, evidence=None) -> None:
        cat[where] = category[where]
        by[where] = decided_by[where] if isinstance(decided_by, np.ndarray) else decided_by
        ev[where] = evidence[where] if evidence is not None else None

    # from the weakest evidence to the strongest, each overwriting the ones before
    nc = np.array([name_cats.get(x, OTHER) for x in nm], dtype=object)   # 5. kernel name rules
    put(nc != OTHER, nc, "kernel name")
    if "launch" in linked:   # kernels whose launch is not in the trace (queued before the profiled window)
        by[(nc != OTHER) & np.array([x == "" for x in linked["launch"].astype(object).to_numpy()], bool)] = \
            "kernel name (no launch)"
    fc = np.array([fused[x] for x in nm], dtype=object)   # 4. fused names
    put(np.array([f is not None for f in fc], dtype=bool), fc, "fused name")
    put(pd.notna(linked["frame_category"]).to_numpy(), linked["frame_category"].to_numpy(),   # 3. frames
        linked["frame_kind"].to_numpy(), linked["frame_name"].to_numpy())
    # 2. names that cannot be anything else, and collective arguments
    put(np.array([c in SURE for c in nc], dtype=bool) & ~np.array([x in user_cat for x in nm], dtype=bool), nc,
        "kernel name (sure)")
    coll = collective.astype(object)
    if coll.notna().any():
        is_ar = coll.astype(str).str.replace("_", "").str.lower().str.contains("allreduce").to_numpy(bool)
        cc = np.where(is_ar, ALLREDUCE, np.where(np.isin(cat, list(COMM)), cat, OTHER_COLLECTIVES))
        put(coll.notna().to_numpy(), cc, "collective arg", coll.to_numpy())
    uc = np.array([user_cat.get(x) for x in nm], dtype=object)   # 1. user rules
    put(np.array([u is not None for u in uc], dtype=bool), uc, "user rule")
    return cat, by, ev
