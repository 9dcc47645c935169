"""Placement by alignment: the kernels of a trace without CPU placement (CUDA-graph replays, traces
recorded without ``with_stack``) take the layer, module, op and category of their counterpart in a
reference run of the same model and configuration.

Each target step is aligned with a reference step, stream by stream in start order (the busiest stream, the
others merged): Needleman-Wunsch with linear gaps over a kernel-name similarity in tiers (the same name; the
same without templates, parameters and numbers; the same kind; else a mismatch); kernels on one side only
(memcpy, a split-K reduction) become gaps. Which reference step: step i with step i where both sides have as
many; else the best-matching of the reference's distinct steps; else the streams as wholes (``Placement.how``).

A matched kernel takes the reference's ``layer``, ``module``, ``block``, ``layer_kind``, its ``op``/``op_top``
where it has none, and its category (``decided_by='reference'``) unless its own evidence is sure; a kernel in a
gap between two placed kernels of one layer and module takes them (``placed='neighbours'``). A step or layer
scoring (Dice) under ``MIN_SCORE`` is ``unplaced``; a reference leaving over ``REFUSE_SHARE`` of kernel time
unmatched, scoring under ``REFUSE_SCORE`` or with another layer count (by repetition, where sure) is refused.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kit.profile.attribution._layers import find_layers
from kit.profile.attribution._names import canonical
from kit.profile.reading._columns import strings
from kit.profile.steps._arrays import stream_sequences
from kit.util import recorded

MIN_SCORE = 0.8      # a step or layer aligned worse than this is unplaced
REFUSE_SHARE = 0.2   # more target kernel time unmatched than this: the reference is another program
REFUSE_SCORE = 0.9   # or an alignment score (matched share of both sides' kernels) under this
GAP = -1.0
TIERS = (0.5, 1.5, 2.0)  # kind, canonical name, exact name
MISMATCH = -2.5          # worse than two gaps: unrelated kernels are not paired
SURE = ("user rule", "collective arg", "kernel name (sure)")
_KINDS = (("memcpy", re.compile(r"(?i)memcpy")), ("memset", re.compile(r"(?i)memset")),
          ("comm", re.compile(r"(?i)nccl|all_?reduce|allgather|reduce_scatter")),
          ("attention", re.compile(r"(?i)attention|attn|fmha|flash|sdpa|mha_")),
          ("gemm", re.compile(r"(?i)gemm|gemv|nvjet|cutlass|xmma|splitk|cublas|matmul|_mm_|bmm|grouped_mm|sm\d+_")),
          ("triton", re.compile(r"^triton_")), ("reduce", re.compile(r"(?i)reduce|softmax|norm")),
          ("elementwise", re.compile(r"(?i)elementwise|vectorized|unrolled")))


def kind(name: str) -> str:
    """The coarse kind of a kernel by its name (the last similarity tier)."""
    c = canonical(name)
    return next((k for k, rx in _KINDS if rx.search(c)), c.rsplit("::", 1)[-1][:24])


class Codes:
    """Integer codes of kernel names at the three tiers, shared by target and reference."""

    def __init__(self) -> None:
        self.maps: tuple[dict, dict, dict] = ({}, {}, {})
        self.memo: dict[str, tuple[int, int, int]] = {}

    def of(self, names: np.ndarray) -> np.ndarray:
        out = np.empty((len(names), 3), np.int64)
        for i, n in enumerate(names):
            if n not in self.memo:
                self.memo[n] = tuple(m.setdefault(k, len(m)) for m, k in zip(self.maps, (kind(n), canonical(n), n)))
            out[i] = self.memo[n]
        return out


MAX_CELLS = 64_000_000  # one alignment's traceback matrix (bytes); a longer pair is left unplaced, said


def scores(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Similarity of each ``a`` code row with each ``b`` row (``len(a) x len(b)``; ``a`` may be one row)."""
    a = np.atleast_2d(a)
    s = np.full((len(a), len(b)), MISMATCH, np.float32)
    for tier, w in enumerate(TIERS):
        s[a[:, tier][:, None] == b[:, tier][None, :]] = w
    return s


def align(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Global alignment of code arrays ``a`` (target) and ``b`` (reference): each ``a`` kernel's ``b`` counterpart
    or -1 (a gap); all -2 over ``MAX_CELLS``. Row by row (one int8 traceback matrix): diagonal and vertical moves
    are one vector operation, the horizontal gap chain ``max_k(cand[k] + GAP*(j-k))`` a running maximum."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return np.full(n, -1, np.int64)
    if n * (m + 1) > MAX_CELLS:
        return np.full(n, -2, np.int64)
    idx = np.arange(m + 1, dtype=np.float32)
    prev = GAP * idx
    ptr = np.zeros((n, m + 1), np.int8)   # 0 diagonal, 1 up (gap in b), 2 left (gap in a)
    for i in range(n):
        diag = prev[:-1] + scores(a[i], b)[0]
        up = prev[1:] + GAP
        best = np.maximum(diag, up)
        cand = np.concatenate(([GAP * (i + 1)], best))
        row = np.maximum.accumulate(cand - GAP * idx) + GAP * idx
        p = np.where(diag >= up, 0, 1).astype(np.int8)
        ptr[i, 1:] = np.where(row[1:] > best, 2, p)
        ptr[i, 0] = 1
        prev = row
    out = np.full(n, -1, np.int64)
    i, j = n, m
    while i > 0 and j > 0:
        p = ptr[i - 1, j]
        if p == 0:
            if (a[i - 1] == b[j - 1]).any():   # a mismatch is never a counterpart
                out[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif p == 1:
            i -= 1
        else:
            j -= 1
    return out


@dataclass
class Placement:
    """What alignment with a reference placed: the Dice ``score``, placed and unplaced shares of kernel time,
    tables per step and per layer, unplaced share per reason, why it was ``refused`` (or None), where the
    reference's layers came from (its module frames, or its repetition: a compiled reference)."""

    reference: str
    score: float
    placed_share: float
    unplaced_share: float
    steps: pd.DataFrame
    layers: pd.DataFrame
    reasons: dict = field(default_factory=dict)
    refused: str | None = None
    layers_from: str = "the reference's module frames"
    how: str = "per step"

    @property
    def provenance(self) -> str:
        return f"placed by alignment with {self.reference} ({self.how}; score {self.score:.3f})"

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this placement: its score, placed and unplaced shares, why."""
        figs = [("score", self.score), ("placed_share", self.placed_share), ("unplaced_share", self.unplaced_share)]
        figs += [(f"unplaced_share.{k}", v) for k, v in self.reasons.items()]
        return {"inputs": [self.reference] if isinstance(self.reference, str) else [], "figures": figs,
                "facts": {"refused": self.refused, "layers_from": self.layers_from}, "label": self.reference,
                "tables": {"steps": self.steps, "layers": self.layers}}

    def __repr__(self) -> str:
        if self.refused:
            return f"Placement(reference={self.reference}, refused: {self.refused})"
        why = "; ".join(f"{k} {100 * v:.1f}%" for k, v in self.reasons.items())
        return (f"Placement(reference={self.reference}, score={self.score:.3f}, placed {100 * self.placed_share:.1f}% "
                f"of kernel time, unplaced {100 * self.unplaced_share:.1f}%{': ' + why if why else ''}; "
                f"aligned {self.how}; layers from {self.layers_from})")


_TAKE = ("layer", "module", "block", "layer_kind")
_FILL = ("op", "op_top")


class _Aligner:
    """Memoised alignments of target stream sequences with reference stream sequences."""

    def __init__(self, t_codes: np.ndarray, r_codes: np.ndarray) -> None:
        self.t, self.r = t_codes, r_codes
        self.memo: dict = {}
        self.too_long: set = set()   # target rows in a pair too long to align

    def pair(self, tpos: np.ndarray, rpos: np.ndarray) -> np.ndarray:
        key = (self.t[tpos, 2].tobytes(), rpos.tobytes())
        if key not in self.memo:
            self.memo[key] = align(self.t[tpos], self.r[rpos])
        return self.memo[key]

    def stream(self, tpos: np.ndarray, ref: dict) -> tuple[np.ndarray, int]:
        """Best reference stream for one target stream: (reference rows per target kernel, -1 gap)."""
        best, best_n = np.full(len(tpos), -1, np.int64), -1
        for rpos in sorted(ref.values(), key=lambda v: abs(len(v) - len(tpos))):
            m = self.pair(tpos, rpos)
            if (m == -2).all() and len(m):
                self.too_long.update(tpos.tolist())
                continue
            n = int((m >= 0).sum())
            if n > best_n:
                best, best_n = np.where(m >= 0, rpos[np.maximum(m, 0)], -1), n
            if n >= 0.95 * len(tpos):
                break
        return best, best_n


def _ref_steps(ref_seqs: dict, rank: int, codes: np.ndarray, most: int = 16) -> list[dict]:
    """The reference's distinct steps on ``rank`` (or its first), the most common first (at most ``most``)."""
    ranks = sorted({r for r, _ in ref_seqs})
    r = rank if rank in ranks else ranks[0]
    steps = [v for (rr, s), v in sorted(ref_seqs.items()) if rr == r and s >= 0] or \
            [v for (rr, s), v in sorted(ref_seqs.items()) if rr == r]
    seen: dict = {}
    for v in steps:
        sig = b"|".join(codes[x, 2].tobytes() for _, x in sorted(v.items()))   # equal steps read the same
        seen.setdefault(sig, [0, v])[0] += 1
    return [v for _, v in sorted(seen.values(), key=lambda x: -x[0])][:most]


_COLS = ["rank", "step", "kernels", "ref_kernels", "matched", "score"]


def _dice(matched, kernels, ref_kernels):
    """The Dice share of matched kernels: both sides' matches over both sides' kernels."""
    return 2 * matched / np.maximum(kernels + ref_kernels, 1)


def _step_table(rows: list[tuple]) -> pd.DataFrame:
    """Per target step (rank, step, kernels, reference kernels, matched) with its Dice score."""
    t = pd.DataFrame(rows, columns=_COLS[:-1])
    return t.assign(score=_dice(t["matched"], t["kernels"], t["ref_kernels"]).astype(float))


def _per_step(t_seqs: dict, aligner: "_Aligner", ref_of, n: int) -> tuple[np.ndarray, pd.DataFrame]:
    """Each target step aligned with the reference step(s) ``ref_of(rank, step)`` gives (the best of them)."""
    ref_row = np.full(n, -1, np.int64)
    rows = []
    for (rank, step), streams in sorted(t_seqs.items()):
        n_t = sum(len(v) for v in streams.values())
        best = None
        for ref in ref_of(rank, step):
            got, matched = {}, 0
            for key, tpos in streams.items():
                got[key], m = aligner.stream(tpos, ref)
                matched += max(m, 0)
            if best is None or matched > best[0]:
                best = (matched, got, sum(len(v) for v in ref.values()))
            if matched >= 0.95 * n_t:
                break
        matched, got, n_r = best if best is not None else (0, {}, 0)
        for key, tpos in streams.items():
            if key in got:
                ref_row[tpos] = got[key]
        rows.append((rank, step, n_t, n_r, matched))
    return ref_row, _step_table(rows)


def _whole(target: pd.DataFrame, reference: pd.DataFrame, phase, aligner: "_Aligner",
           r_phase) -> tuple[np.ndarray, pd.DataFrame]:
    """The target's stream as a whole (all steps, per rank) aligned with the reference's; per target step its
    kernels, those matched, and the reference kernels of the span its matches cover."""
    use = _in_phase(target, phase)
    t_all = stream_sequences(target.assign(step=0), use)
    r_all = stream_sequences(reference.assign(step=0), _in_phase(reference, r_phase))
    ref_row = np.full(len(target), -1, np.int64)
    if not r_all:
        return ref_row, pd.DataFrame(columns=_COLS)
    # a reference kernel's place in its stream, and which stream (a span is counted within one)
    ref_order, ref_stream = np.full(len(reference), -1, np.int64), np.full(len(reference), -1, np.int64)
    for streams in r_all.values():
        for v in streams.values():
            ref_order[v] = np.arange(len(v))
            ref_stream[v] = ref_stream.max() + 1
    for (rank, _), streams in t_all.items():
        r = rank if (rank, 0) in r_all else sorted(r_all)[0][0]
        for tpos in streams.values():
            ref_row[tpos] = aligner.stream(tpos, r_all[(r, 0)])[0]
    steps, ranks = target["step"].to_numpy(), target["rank"].to_numpy()
    rows = []
    for rank, step in sorted({(int(a), int(b)) for a, b in zip(ranks[use], steps[use])}):
        sel = use & (ranks == rank) & (steps == step)
        hit = ref_row[sel & (ref_row >= 0)]
        n_t, matched = int(sel.sum()), int(len(hit))
        n_r = max(matched, sum(int(np.ptp(ref_order[hit[ref_stream[hit] == sid]]) + 1)
                               for sid in np.unique(ref_stream[hit])))
        rows.append((rank, step, n_t, n_r, matched))
    return ref_row, _step_table(rows)


def _in_phase(t: pd.DataFrame, phase: str | None) -> np.ndarray:
    """Which kernels of ``t`` are in ``phase`` (all where None)."""
    return np.ones(len(t), bool) if phase is None else (t["phase"].astype(str) == phase).to_numpy()


def _shares(dur: np.ndarray, matched: np.ndarray, steps: pd.DataFrame) -> tuple[float, float]:
    """(share of kernel time not aligned, alignment score: Dice share of both sides' kernels)."""
    tot = float(dur.sum())
    return (float(dur[~matched].sum()) / tot if tot > 0 else 1.0,
            _dice(steps["matched"].sum(), steps["kernels"].sum(), steps["ref_kernels"].sum()))


def _passes(target: pd.DataFrame, phase, ref_row: np.ndarray, steps: pd.DataFrame) -> tuple[bool, float]:
    """Whether an alignment places enough (the refusal thresholds), and its score."""
    use = _in_phase(target, phase)
    miss, score = _shares(target["dur_us"].to_numpy(float)[use], (ref_row >= 0)[use], steps)
    return miss <= REFUSE_SHARE and score >= REFUSE_SCORE, score


def match(target: pd.DataFrame, reference: pd.DataFrame,
          phase: str | None = None) -> tuple[np.ndarray, pd.DataFrame, str]:
    """Each target kernel's reference row (-1: none; -2: stream too long, ``MAX_CELLS``), the table per step and
    the way of the module docstring used (the first that places enough, else the best)."""
    codes = Codes()
    aligner = _Aligner(codes.of(strings(target["name"])), codes.of(strings(reference["name"])))
    t_seqs = stream_sequences(target, _in_phase(target, phase))
    r_phase = phase if phase and (reference["phase"].astype(str) == phase).any() else None
    r_seqs = stream_sequences(reference, _in_phase(reference, r_phase))
    if not r_seqs:
        return np.full(len(target), -1, np.int64), pd.DataFrame(columns=_COLS), "per step"
    tries = []
    t_ranks = sorted({r for r, _ in t_seqs})
    t_steps = {r: [s for rr, s in sorted(t_seqs) if rr == r and s >= 0] for r in t_ranks}
    r_steps = {r: [s for rr, s in sorted(r_seqs) if rr == r and s >= 0] for r in {r for r, _ in r_seqs}}
    if all(len(t_steps[r]) > 1 and len(t_steps[r]) == len(r_steps.get(r, [])) for r in t_ranks):
        pair = {(r, s): r_seqs[(r, rs)] for r in t_ranks for s, rs in zip(t_steps[r], r_steps[r])}
        tries.append(("per step, steps corresponding", lambda r, s: [pair[(r, s)]] if (r, s) in pair else
                      _ref_steps(r_seqs, r, aligner.r)))
    tries.append(("per step, the best-matching reference step", lambda r, s: _ref_steps(r_seqs, r, aligner.r)))
    best = None
    for name, ref_of in tries:
        ref_row, steps = _per_step(t_seqs, aligner, ref_of, len(target))
        ok, score = _passes(target, phase, ref_row, steps)
        if best is None or score > best[0]:
            best = (score, name, ref_row, steps)
        if ok:
            break
    else:
        ref_row, steps = _whole(target, reference, phase, aligner, r_phase)
        ok, score = _passes(target, phase, ref_row, steps)
        if ok or score > best[0]:
            best = (score, "the stream as a whole (steps differ)", ref_row, steps)
    _, name, ref_row, steps = best
    long_rows = np.array(sorted(aligner.too_long), dtype=np.int64)
    if len(long_rows):
        ref_row[long_rows[ref_row[long_rows] < 0]] = -2
    return ref_row, steps, name


def _neighbours(ref_row: np.ndarray, seqs: dict, layer: np.ndarray, module: np.ndarray) -> np.ndarray:
    """Target kernels in a gap whose placed neighbours on the stream share layer and module: their row
    of the neighbour (to copy layer/module from), else -1."""
    out = np.full(len(ref_row), -1, np.int64)
    for streams in seqs.values():
        for pos in streams.values():
            r = ref_row[pos]
            have = np.flatnonzero(r >= 0)
            if not len(have):
                continue
            for i in np.flatnonzero(r < 0):
                k = np.searchsorted(have, i)
                if k == 0 or k == len(have):
                    continue
                a, b = r[have[k - 1]], r[have[k]]
                if layer[a] == layer[b] and layer[a] >= 0 and module[a] == module[b]:
                    out[pos[i]] = a
    return out


def _refusal(dur: np.ndarray, matched: np.ndarray, steps: pd.DataFrame, n_ref_layers: int, found,
             whole: bool = False) -> str | None:
    """Why the reference is another program, or None: too little kernel time aligned, a score under
    ``REFUSE_SCORE``, or another layer count (not where the streams were aligned as a whole: the target's steps
    are not its iterations there, so its repetition finds iterations, not layers)."""
    miss, score = _shares(dur, matched, steps)
    said = f"{100 * miss:.1f}% of kernel time not aligned, alignment score {score:.2f}"
    if miss > REFUSE_SHARE:
        return (f"{100 * miss:.1f}% of kernel time not aligned (over {100 * REFUSE_SHARE:g}%), "
                f"alignment score {score:.2f}")
    if score < REFUSE_SCORE:   # the reason is the score: "0.0% not aligned" alone read as a success
        return (f"alignment score {score:.2f} under {REFUSE_SCORE:g}: the two kernel sequences differ "
                f"({100 * (1 - miss):.1f}% of kernel time found a partner)")
    if not whole and n_ref_layers and found is not None and found.confidence == "high" and found.layers != n_ref_layers:
        return f"the target repeats {found.layers} layers, the reference has {n_ref_layers} ({said})"
    return None


def _layer_scores(t: pd.DataFrame, ref: pd.DataFrame, ref_row: np.ndarray, src: np.ndarray,
                  steps: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, step, layer): reference kernels of the layer, target kernels given it, those matched; Dice."""
    rl = ref["layer"].to_numpy()
    layer_of = np.where(src >= 0, rl[np.maximum(src, 0)], -1)
    sel = layer_of >= 0
    cols = ["rank", "step", "layer", "kernels", "matched", "time_us", "ref_kernels", "score"]
    if not sel.any():
        return pd.DataFrame(columns=cols)
    keys = np.stack([t["rank"].to_numpy()[sel], t["step"].to_numpy()[sel], layer_of[sel]], 1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    kernels = np.bincount(inv, minlength=len(uniq))
    matched = np.bincount(inv, weights=(ref_row >= 0)[sel].astype(float), minlength=len(uniq)).astype(int)
    time_us = np.bincount(inv, weights=t["dur_us"].to_numpy(float)[sel], minlength=len(uniq))
    lays, per = np.unique(rl[rl >= 0], return_counts=True)
    n_ref_steps = max(1, len(np.unique(ref["step"].to_numpy()[rl >= 0])))
    per_ref = dict(zip(lays.tolist(), np.round(per / n_ref_steps).astype(int).tolist()))
    ref_k = np.array([per_ref.get(int(x), 0) for x in uniq[:, 2]], dtype=int)
    return pd.DataFrame({"rank": uniq[:, 0], "step": uniq[:, 1], "layer": uniq[:, 2], "kernels": kernels,
                         "matched": matched, "time_us": time_us, "ref_kernels": ref_k,
                         "score": _dice(matched, kernels, ref_k)})


@recorded("placement")
def place(profile, reference, label: str | None = None) -> Placement:
    """Place ``profile``'s kernels by aligning them with ``reference`` (a :class:`Profile`): the placed columns
    written into ``profile.kernels`` (``placed``: aligned / neighbours / unplaced, ``place_score``,
    ``place_reason``), a warning for what stays unplaced or for a refused reference, and the :class:`Placement`
    returned (also ``profile.meta['placement']``)."""
    t, r = profile.kernels, reference.kernels
    label = label or ", ".join(os.path.join(os.path.basename(os.path.dirname(f)), os.path.basename(f))
                               for f in reference.files)
    phase = "decode" if (t["phase"].astype(str) == "decode").any() and (r["phase"].astype(str) == "decode").any() \
        else None
    layers_from = "the reference's module frames"
    if not (r["layer"].to_numpy() >= 0).any():   # a compiled or stack-less reference: its layers by repetition
        g = find_layers(reference, assign=True)
        layers_from = (f"repetition in the reference ({g.layers} layers, confidence {g.confidence})" if g.layers
                       else f"nowhere: none in the reference ({g.how})")
    ref_row, steps, how = match(t, r, phase)
    dur = t["dur_us"].to_numpy(float)
    consider = _in_phase(t, phase)
    rl = r["layer"].to_numpy()
    why = _refusal(dur[consider], (ref_row >= 0)[consider], steps, len(np.unique(rl[rl >= 0])), find_layers(profile),
                   how.startswith("the stream as a whole"))
    n_long = int((ref_row == -2).sum())
    if why and n_long:
        why += f"; {n_long:,} kernels in streams too long to align (over {MAX_CELLS:,} cells)"
    if why:
        pl = Placement(label, float(steps["score"].mean()) if len(steps) else 0.0, 0.0, 1.0, steps,
                       pd.DataFrame(), {}, refused=why, how=how)
        profile.warnings.append(f"reference {label} refused: not a run of the same model and configuration: {why}; "
                                f"nothing placed, no layer table from it")
        profile.meta["placement"] = pl
        return pl
    nb = _neighbours(ref_row, stream_sequences(t, consider), rl, strings(r["module"]))
    src = np.where(ref_row >= 0, ref_row, nb)
    layers = _layer_scores(t, r, ref_row, src, steps)
    state, reason, score = _gate(t, src, ref_row, nb, consider, steps, layers, rl)
    _write(t, r, src, ref_row, state, reason, score)
    pl = _summarise(label, dur, consider, steps, layers, state, reason, layers_from, how)
    note = f"kernels {pl.provenance}: layer, module, op and category of {100 * pl.placed_share:.1f}% of kernel time"
    if pl.unplaced_share > 0.005:
        note += (f"; {100 * pl.unplaced_share:.1f}% of kernel time not placed by the reference: "
                 + "; ".join(f"{k} {100 * v:.1f}%" for k, v in pl.reasons.items()))
    profile.warnings.append(note)
    profile.meta["placement"] = pl
    return pl


def _gate(t, src, ref_row, nb, consider, steps, layers, rl):
    """Each kernel's state (aligned / neighbours / unplaced), the reason when unplaced, its score."""
    n = len(t)
    state = np.where(ref_row >= 0, "aligned", np.where(nb >= 0, "neighbours", "unplaced")).astype(object)
    reason = np.where(src < 0, "no counterpart in the reference", None).astype(object)
    reason[ref_row == -2] = f"stream too long to align (over {MAX_CELLS:,} cells)"
    key = pd.MultiIndex.from_arrays([t["rank"].to_numpy(), t["step"].to_numpy()])
    sscore = pd.Series(steps["score"].to_numpy(), index=pd.MultiIndex.from_frame(steps[["rank", "step"]]))
    score = sscore.reindex(key).to_numpy(float)
    low = score < MIN_SCORE
    reason[low] = [f"step aligned with score {s:.2f} < {MIN_SCORE}" for s in score[low]]
    lay = np.where(src >= 0, rl[np.maximum(src, 0)], -1)
    lk = pd.MultiIndex.from_arrays([t["rank"].to_numpy(), t["step"].to_numpy(), lay])
    ls = pd.Series(layers["score"].to_numpy(), index=pd.MultiIndex.from_frame(layers[["rank", "step", "layer"]]))
    lscore = ls.reindex(lk).to_numpy(float)
    bad = (lay >= 0) & (lscore < MIN_SCORE) & ~low
    reason[bad] = [f"layer aligned with score {s:.2f} < {MIN_SCORE}" for s in lscore[bad]]
    score = np.where(lay >= 0, np.fmin(score, np.nan_to_num(lscore, nan=1.0)), score)
    state[low | bad] = "unplaced"
    state[~consider] = None
    reason[~consider] = None
    return state, reason, np.where(consider, score, np.nan) if n else score


def _write(t: pd.DataFrame, r: pd.DataFrame, src, ref_row, state, reason, score) -> None:
    """Copy the reference's labels into the placed target rows."""
    al = state == "aligned"
    s = np.maximum(src, 0)
    for c in (*_TAKE, *_FILL):   # each where the kernel has none of its own
        layer = c == "layer"
        rv, tv = r[c].to_numpy(None if layer else object), t[c].to_numpy(None if layer else object).copy()
        put = (al | (state == "neighbours") if c in _TAKE else al) & ~((tv >= 0) if layer else pd.notna(tv))
        tv[put] = rv[s][put]
        t[c] = tv if layer else pd.Series(tv, index=t.index, dtype=object).astype("category")
    by = strings(t["decided_by"])
    take = al & ~np.isin(by, SURE)
    cats = list(dict.fromkeys([*t["category"].cat.categories, *r["category"].cat.categories]))
    cv = t["category"].astype(object).to_numpy().copy()
    cv[take] = r["category"].astype(object).to_numpy()[s][take]
    t["category"] = pd.Categorical(cv, categories=cats)
    dv = by.astype(object).copy()
    dv[take] = "reference"
    t["decided_by"] = pd.Categorical(dv, categories=list(dict.fromkeys([*t["decided_by"].cat.categories, "reference"])))
    ev = t["evidence"].astype(object).to_numpy().copy()
    rev = strings(r["decided_by"]).astype(object)
    ev[take] = rev[s][take]
    t["evidence"] = pd.Series(ev, index=t.index, dtype=object).astype("category")
    t["placed"] = pd.Categorical(state, categories=["aligned", "neighbours", "unplaced"])
    t["place_score"] = score
    t["place_reason"] = pd.Series(reason, index=t.index, dtype=object).astype("category")


def _summarise(label, dur, consider, steps, layers, state, reason, layers_from, how) -> Placement:
    tot = float(dur[consider].sum()) or 1.0
    placed = float(dur[(state == "aligned") | (state == "neighbours")].sum()) / tot
    un = state == "unplaced"
    reasons: dict = {}
    for rs in pd.unique(reason[un]):
        short = str(rs).split(" with score")[0] + (" (score < {:.2f})".format(MIN_SCORE) if "score" in str(rs) else "")
        reasons[short] = reasons.get(short, 0.0) + float(dur[un & (reason == rs)].sum()) / tot
    tl = layers.groupby("layer").agg(kernels=("kernels", "sum"), matched=("matched", "sum"),
                                     ref_kernels=("ref_kernels", "sum"), time_us=("time_us", "sum")).reset_index()
    tl["score"] = _dice(tl["matched"], tl["kernels"], tl["ref_kernels"])
    score = _dice(steps["matched"].sum(), steps["kernels"].sum(), steps["ref_kernels"].sum())
    return Placement(label, float(score), placed, float(dur[un].sum()) / tot, steps, tl, reasons, None, layers_from,
                     how)
