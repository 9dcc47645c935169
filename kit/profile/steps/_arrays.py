"""Array helpers for the profile's tables: a text column read once per distinct value, pandas' NaN means
and sums to the bit on plain arrays, a stable order without the sort where the data is sorted, a rank's
rows without a copy, each step's kernels by stream, intervals (membership, union, clipping), JSON-able rows.

Used by the CPU side (``_cpu.py``, ``_cpu_compare.py``), ``compare`` (``_compare.py``), placement and layer
finding: plain numpy over the tables' columns, no knowledge of traces.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from kit.stats import is_nan


def coded(s: pd.Series) -> tuple[np.ndarray, list[str]]:
    """(code of each row as int64, -1 where the value is missing; the distinct values as ``str``): a
    categorical's codes and categories, else factorized, so that work on a text column runs once per
    distinct value instead of converting every row to a string."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes, uniq = s.cat.codes.to_numpy(), s.cat.categories
    else:
        codes, uniq = pd.factorize(s)
    return codes.astype(np.int64, copy=False), [str(x) for x in uniq]


def nanmean(x: np.ndarray) -> float:
    """pandas' ``Series.mean`` of a float array, to the bit: unknown values summed as 0 in place (pairwise
    sums), divided by the known count; NaN where none is known."""
    known = ~np.isnan(x)
    n = int(known.sum())
    return float(np.where(known, x, 0.0).sum() / n) if n else float("nan")


def stable_order(x: np.ndarray) -> np.ndarray:
    """``np.argsort(x, kind="stable")``, without the sort where ``x`` is already in order (the usual case:
    a trace's tables come sorted by time, its correlation ids grow with time)."""
    if len(x) < 2 or (x[1:] >= x[:-1]).all():
        return np.arange(len(x))
    return np.argsort(x, kind="stable")


def text(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """:func:`coded` with a missing value read as the text ``nan``: (code of each row, distinct texts as an
    object array)."""
    codes, uniq = coded(s)
    if (codes < 0).any():
        codes, uniq = np.where(codes < 0, len(uniq), codes), [*uniq, "nan"]
    return codes, np.array(uniq, dtype=object)


def groups(values: np.ndarray) -> dict:
    """value -> the positions holding it, ascending (``groupby(...).indices`` of an array)."""
    o = stable_order(values)
    v = values[o]
    cut = np.flatnonzero(v[1:] != v[:-1]) + 1
    keys = v[np.concatenate([[0], cut])] if len(v) else v
    return dict(zip(keys.tolist(), np.split(o, cut)))


def stream_sequences(k: pd.DataFrame, use: np.ndarray | None = None, merge: bool = True) -> dict:
    """(rank, step) -> {stream: positions of its kernels (of the rows ``use`` selects) in start order}; with
    ``merge``, where a step runs on more than two streams, the busiest one and the others merged in start
    order under -1 (a CUDA graph replays a forked branch on streams of its own). Read by placement and
    layer finding."""
    pos = np.arange(len(k)) if use is None else np.flatnonzero(use)
    rank, step, stream = (k[c].to_numpy() for c in ("rank", "step", "stream"))
    start = k["start_us"].to_numpy(float)
    pos = pos[np.lexsort((start[pos], stream[pos], step[pos], rank[pos]))]
    out: dict = {}
    keys = np.stack([rank[pos], step[pos], stream[pos]], 1)
    cut = np.flatnonzero((keys[1:] != keys[:-1]).any(1)) + 1
    for chunk in np.split(np.arange(len(pos)), cut) if len(pos) else ():
        r, st, sm = keys[chunk[0]]
        out.setdefault((int(r), int(st)), {})[int(sm)] = pos[chunk]
    for key, streams in out.items():
        if merge and len(streams) > 2:
            main = max(streams, key=lambda s: len(streams[s]))
            rest = np.concatenate([v for s, v in streams.items() if s != main])
            out[key] = {main: streams[main], -1: rest[np.argsort(start[rest], kind="stable")]}
    return out


def rows_of(df: pd.DataFrame, rank: int):
    """The positions of ``rank``'s rows, or ``slice(None)`` where all rows are (a one-rank trace)."""
    if not len(df):
        return slice(None)
    m = df["rank"].to_numpy() == rank
    return slice(None) if m.all() else np.flatnonzero(m)


def inside(t: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Whether each time lies inside one of the intervals (s, e)."""
    if not len(s) or not len(t):
        return np.zeros(len(t), bool)
    o = np.argsort(s)
    s, e = s[o], np.maximum.accumulate(e[o])
    i = np.searchsorted(s, t, side="right") - 1
    return (i >= 0) & (t <= e[np.clip(i, 0, None)])


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted segments covering the intervals (starts, ends)."""
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], ends[o]
    idx = np.flatnonzero(np.concatenate([[True], s[1:] > np.maximum.accumulate(e)[:-1]]))
    return s[idx], np.maximum.reduceat(e, idx)


def length(seg: tuple[np.ndarray, np.ndarray]) -> float:
    return float((seg[1] - seg[0]).sum()) if len(seg[0]) else 0.0


def union_len_of(a: tuple, b: tuple) -> float:
    return length(union(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]])))


def clip_to_windows(s: np.ndarray, e: np.ndarray, ws: np.ndarray, we: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intervals clipped to the (disjoint, sorted) windows; parts outside are dropped."""
    if len(ws) == 0:
        return s, e
    i = np.clip(np.searchsorted(ws, s, side="right") - 1, 0, len(ws) - 1)
    cs, ce = np.maximum(s, ws[i]), np.minimum(e, we[i])
    return cs[ce > cs], ce[ce > cs]


def values_at(s: pd.Series, rows: np.ndarray) -> list:
    """The values of ``s`` at positions ``rows`` as Python objects (None where missing), read through a
    categorical's codes where it is one."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = s.cat.categories.to_numpy(object)
        return [cats[c] if c >= 0 else None for c in s.cat.codes.to_numpy()[rows].tolist()]
    return [None if x is None or is_nan(x) else x for x in s.iloc[rows].astype(object)]


def clean(v, digits: int = 3):
    """A cell as JSON wants it: a Python scalar, NaN as None, floats rounded to ``digits`` decimals."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return None if math.isnan(v) else round(v, digits)
    return v


def records(df: pd.DataFrame | None, digits: int = 3) -> list[dict] | None:
    """``df``'s rows as dicts of :func:`clean` cells (None for None), built column by column: pandas boxes
    every cell of a ``to_dict("records")`` one by one."""
    if df is None:
        return None
    cols = {}
    for c in df.columns:
        v = df[c]
        if v.dtype.kind == "f":
            cols[c] = [None if is_nan(x) else round(x, digits) for x in v.tolist()]
        elif v.dtype.kind in "iub":
            cols[c] = v.tolist()
        else:
            cols[c] = [clean(x, digits) for x in v.tolist()]
    return [dict(zip(cols, row)) for row in zip(*cols.values())]
