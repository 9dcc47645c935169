"""Layer boundaries from the repetition of the kernel sequence alone (no reference, no module frames).

A decoder runs the same kernels once per layer, so a decode step's kernel sequence (exact names, its busiest
stream) repeats with the layer's length as its period: the smallest shift under which the sequence agrees with
itself almost as well as under any shift. A run of repetitions covering most of the step: homogeneous layers
(confidence ``high``; ``medium`` where a few kernels differ, e.g. data-dependent MoE kernels). Else (hybrids)
the first kernels of the repeated layer (its input norm) mark where every layer starts, the remainder is the
epilogue (final norm, LM head); confidence ``low``, layers typed by their kernel sequence (``pattern 1`` ...).
A repeated sequence that itself repeats a shorter one is whole forward passes (an annotation around several
forwards): the shorter one's repeats are the layers, confidence ``low``, never one "layer" per forward.
Bounded: ``MAX_PERIOD``, ``MAX_WINDOW``, ``MAX_SEQUENCES`` (the steps not searched are said).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from kit.profile.reading._columns import strings
from kit.profile.steps._arrays import stream_sequences

MIN_PERIOD = 8
MOTIF = 3
MAX_PERIOD = 2048        # kernels of one repeated unit searched (a layer holds tens to a few hundred)
MAX_WINDOW = 16_384      # kernels of a step over which periods are compared
MAX_SEQUENCES = 64       # distinct step sequences searched per profile


@dataclass
class LayerGuess:
    """Layers found by repetition (0: not found), the confidence, how (one line), kernels per layer of the
    repeated pattern, layer -> pattern name, and each layer's (start, end) positions."""

    layers: int
    confidence: str
    how: str
    period: int = 0
    kinds: dict = field(default_factory=dict)
    bounds: list = field(default_factory=list, repr=False)

    def __repr__(self) -> str:
        return (f"LayerGuess(layers={self.layers}, confidence={self.confidence}: {self.how})" if self.layers else
                f"LayerGuess(not found: {self.how})")


def _period(c: np.ndarray) -> tuple[int, int, int, float]:
    """(period, start, end, agreement) of the longest self-repetition of ``c``; period 0 if none."""
    n = len(c)
    if n < 2 * MIN_PERIOD:
        return 0, 0, 0, 0.0
    w = c[:MAX_WINDOW]
    rates = np.zeros(min(len(w) // 2, MAX_PERIOD) + 1)
    for p in range(MIN_PERIOD, len(rates)):
        rates[p] = float((w[:-p] == w[p:]).mean())
    top = rates.max()
    if top < 0.3:
        return 0, 0, 0, float(top)
    p = int(np.flatnonzero(rates >= 0.75 * top)[0])
    eq = c[:-p] == c[p:]
    # the longest run of agreement, bridging isolated disagreements (a data-dependent kernel)
    ok = eq.copy()
    ok[1:-1] |= eq[:-2] & eq[2:]
    best, start, cur = 0, 0, 0
    for i, v in enumerate(ok):
        cur = cur + 1 if v else 0
        if cur > best:
            best, start = cur, i - cur + 1
    return p, start, start + best + p, float(eq[start:start + best].mean()) if best else 0.0


def layers_of(c: np.ndarray) -> LayerGuess:
    """Layers of one kernel sequence (integer codes of exact names)."""
    n = len(c)
    p, a, e, agree = _period(c)
    if p == 0 or (e - a) // p < 2:
        return LayerGuess(0, "not found", "no repeated kernel sequence in the step")
    inner = _forwards(c[a:a + p], (e - a) // p)
    if inner is not None:
        return inner
    grams = np.lib.stride_tricks.sliding_window_view(c, MOTIF)
    need = max(2, (e - a) // p)
    hits: list = []
    for o in range(p):   # the first kernels of the layer that recur at least once per repeated layer
        hits = np.flatnonzero((grams == c[a + o:a + o + MOTIF]).all(1)).tolist()
        if len(hits) >= need:
            a += o
            break
    per = max(1, sum(1 for h in hits if a <= h < a + p))
    groups = [hits[i:i + per] for i in range(0, len(hits) - per + 1, per)]
    if len(groups) < 2:
        return LayerGuess(0, "not found", f"a {p}-kernel sequence repeats only over {100 * (e - a) / n:.0f}% "
                                          f"of the step and its first kernels mark fewer than 2 layers")
    starts = [g[0] for g in groups] + [hits[len(groups) * per] if len(hits) > len(groups) * per else n]
    bounds = list(zip(starts[:-1], starts[1:]))
    sigs: dict = {}
    kinds = {i: f"pattern {sigs.setdefault(c[s:t].tobytes(), len(sigs) + 1)}" for i, (s, t) in enumerate(bounds)}
    if len(sigs) == 1:
        cover = (bounds[-1][1] - bounds[0][0]) / n
        return LayerGuess(len(bounds), "high" if agree >= 0.97 else "medium",
                          f"{len(bounds)} repeats of a {p}-kernel sequence cover {100 * cover:.0f}% of the step",
                          p, kinds, bounds)
    return LayerGuess(len(bounds), "low", f"layers differ ({len(sigs)} patterns): each starts where the first "
                                          f"{MOTIF} kernels of the repeated {p}-kernel layer recur ({per} per layer)",
                      p, kinds, bounds)


def _forwards(unit: np.ndarray, repeats: int) -> LayerGuess | None:
    """The repeated ``unit`` read as one forward pass when it is itself mostly repeats of a shorter
    sequence (its layers): the step holds ``repeats`` forwards; None when the unit does not repeat."""
    q, a, e, agree = _period(unit)
    if q == 0 or (e - a) // q < 2 or agree < 0.9 or (e - a) < 0.6 * len(unit):
        return None
    m = (e - a) // q
    return LayerGuess(m, "low", f"the step repeats a {len(unit)}-kernel sequence {repeats} times, itself {m} repeats "
                                f"of a {q}-kernel layer: {repeats} forward passes in one step (an annotation around "
                                f"several forwards?); {m} layers per forward", q)


def find_layers(profile, assign: bool = False) -> LayerGuess:
    """Layers of ``profile``'s decode steps by repetition (the most common step sequence decides).
    ``assign``: write ``layer`` (and ``layer_kind``: the pattern) into kernels that have none, the
    busiest stream by position, the other streams by time (the layer whose span holds the kernel)."""
    k = profile.kernels
    if not len(k):
        return LayerGuess(0, "not found", "no kernels")
    _, codes = np.unique(strings(k["name"]), return_inverse=True)
    use = k["step"].to_numpy() >= 0
    decode = strings(k["phase"]) == "decode"
    # (rank, step) -> the row positions of its busiest stream in start order (decode steps, where there are any)
    seqs = {key: max(streams.values(), key=len)
            for key, streams in stream_sequences(k, use & decode if decode.any() else use, merge=False).items()}
    if not seqs:
        return LayerGuess(0, "not found", "no steps")
    memo, guesses = {}, {}
    for key, pos in seqs.items():
        c = codes[pos]
        h = c.tobytes()
        if h not in memo:
            if len(memo) >= MAX_SEQUENCES:
                continue   # bounded: a step whose sequence is new past the bound is not searched
            memo[h] = layers_of(c)
        guesses[key] = memo[h]
    counts = pd.Series([g.layers for g in guesses.values()]).value_counts()
    best = next(g for g in guesses.values() if g.layers == counts.index[0])
    if len(guesses) < len(seqs):
        best = replace(best, how=f"{best.how}; {len(guesses)} of {len(seqs)} steps searched (at most "
                                 f"{MAX_SEQUENCES} distinct sequences)")
    if assign and best.layers:
        _assign(k, seqs, guesses)
    return best


def _assign(k: pd.DataFrame, seqs: dict, guesses: dict) -> None:
    layer = k["layer"].to_numpy().copy()
    kind = k["layer_kind"].to_numpy(object).copy()
    free = layer < 0
    start = k["start_us"].to_numpy(float)
    end = start + k["dur_us"].to_numpy(float)
    rank, step = k["rank"].to_numpy(), k["step"].to_numpy()
    for key, pos in seqs.items():
        g = guesses[key]
        spans = []
        for i, (s, t) in enumerate(g.bounds):
            rows = pos[s:t]
            sel = rows[free[rows]]
            layer[sel] = i
            kind[sel] = g.kinds.get(i)
            spans.append((start[rows].min(), end[rows].max(), i))
        others = np.flatnonzero((rank == key[0]) & (step == key[1]) & free & (layer < 0))
        for s0, e0, i in spans:
            inside = others[(start[others] >= s0) & (start[others] < e0)]
            layer[inside] = i
            kind[inside] = g.kinds.get(i)
    k["layer"] = layer
    k["layer_kind"] = pd.Series(kind, index=k.index, dtype=object).astype("category")
