"""Summary arithmetic: category shares, GPU idle, per step / per rank, exposed comm, AllReduce spread.

Definitions (all per rank, then summed over ranks so shares are of rank-time):
- kernel time: sum of kernel (+ memcpy/memset) durations in the window; overlapping kernels on
  several streams each count, so category shares of *kernel* time always add to 100%.
- wall time: the union of the selected steps' GPU spans (first kernel start to last kernel end of
  each step) plus the own span of every selected kernel outside all steps; without steps, the
  span of the selected kernels (first start to last end).
- idle: wall time not covered by any kernel (interval union), its own row.
- communication: union of ``allreduce`` + ``other-collectives`` kernels; exposed communication is
  the part of it not overlapped by any other kernel (on any stream) of the same rank.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from kit.profile._categories import COMM


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted segments covering the intervals."""
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], ends[o]
    emax = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > emax[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def length(seg: tuple[np.ndarray, np.ndarray]) -> float:
    return float((seg[1] - seg[0]).sum()) if len(seg[0]) else 0.0


def union_len_of(a: tuple, b: tuple) -> float:
    return length(union(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]])))


def clip_to_windows(s: np.ndarray, e: np.ndarray, ws: np.ndarray, we: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intervals clipped to the (disjoint, sorted) windows; parts outside are dropped."""
    if len(ws) == 0:
        return s, e
    i = np.searchsorted(ws, s, side="right") - 1
    i = np.clip(i, 0, len(ws) - 1)
    cs = np.maximum(s, ws[i])
    ce = np.minimum(e, we[i])
    ok = ce > cs
    return cs[ok], ce[ok]


def rank_figures(k: pd.DataFrame, steps: pd.DataFrame) -> dict:
    """Figures of one rank's selected kernels ``k`` (with ``category``) over the selected ``steps``."""
    s = k["start_us"].to_numpy(float)
    e = s + k["dur_us"].to_numpy(float)
    kernel_us = float(k["dur_us"].sum())
    has_time = len(s) > 0 and not np.isnan(s).all()
    if not has_time:
        return {"kernel_us": kernel_us, "wall_us": np.nan, "busy_us": np.nan, "idle_us": np.nan,
                "comm_us": np.nan, "exposed_comm_us": np.nan}
    if len(steps) and steps["wall_us"].notna().any():
        # windows: the steps' GPU spans, plus the own span of each kernel outside every step (such
        # kernels add their time but no idle)
        st = steps.dropna(subset=["start_us"])
        out = (k["step"].to_numpy() < 0) if "step" in k else np.zeros(len(k), bool)
        ws, we = union(np.concatenate([st["start_us"].to_numpy(float), s[out]]),
                       np.concatenate([st["end_us"].to_numpy(float), e[out]]))
    else:
        ws, we = np.array([np.nanmin(s)]), np.array([np.nanmax(e)])
    wall = float((we - ws).sum())
    busy = union(*clip_to_windows(s, e, ws, we))
    busy_us = length(busy)
    is_comm = k["category"].isin(COMM).to_numpy()
    comm = union(*clip_to_windows(s[is_comm], e[is_comm], ws, we))
    comp = union(*clip_to_windows(s[~is_comm], e[~is_comm], ws, we))
    comm_us = length(comm)
    overlap = comm_us + length(comp) - union_len_of(comm, comp)
    return {"kernel_us": kernel_us, "wall_us": wall, "busy_us": busy_us, "idle_us": max(wall - busy_us, 0.0),
            "comm_us": comm_us, "exposed_comm_us": max(comm_us - overlap, 0.0)}


def top_kernels(k: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """Top ``n`` kernel names by time within each category."""
    if k.empty:
        return pd.DataFrame(columns=["category", "name", "calls", "time_us", "share_of_category", "share_of_kernel"])
    g = k.groupby(["category", "name"], observed=True).agg(calls=("count", "sum"), time_us=("dur_us", "sum")).reset_index()
    total = g["time_us"].sum()
    cat_t = g.groupby("category", observed=True)["time_us"].transform("sum")
    g["share_of_category"] = g["time_us"] / cat_t.where(cat_t > 0, 1)
    g["share_of_kernel"] = g["time_us"] / (total if total > 0 else 1)
    g = g.sort_values(["category", "time_us", "name"], ascending=[True, False, True])
    g = g.groupby("category", observed=True).head(n)
    g["category"] = g["category"].astype(str)
    g["name"] = g["name"].astype(str)
    return g.reset_index(drop=True)
