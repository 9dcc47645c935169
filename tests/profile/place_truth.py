"""Truth for placement by alignment that does not use the kit's aligner: where a target step and a
reference step have the same number of kernels on a stream, kernel i is kernel i (per step, in start
order: the busiest stream with the busiest, the other streams merged, since a graph replays a forked
branch on streams of its own). Where the counts differ (the hybrids' replays hold a few extra
elementwise kernels) only a weaker check exists: each layer's kernel names (``layer_names``).

``mode``: ``"any"`` (a target step against any reference step of the same counts: decode loops, every step
alike), ``"paired"`` (target step i against reference step i: a serving loop's replay and its eager run of
the same requests, each step its own batch), ``"whole"`` (each run's kernels as one sequence, steps
ignored: runs whose steps were found differently)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

LABELS = ("layer", "module", "category")


def _streams(k: pd.DataFrame, rank: int, step: int) -> list[np.ndarray]:
    g = k[(k["rank"] == rank) & (k["step"] == step)]
    if not len(g):
        return []
    main = g["stream"].value_counts().idxmax()
    return [g[g["stream"] == main].sort_values("start_us").index.to_numpy(),
            g[g["stream"] != main].sort_values("start_us").index.to_numpy()]


def truth(target: pd.DataFrame, reference: pd.DataFrame, mode: str = "any") -> tuple[pd.Series, dict]:
    """Each target kernel's reference row by position where the counts agree (NaN elsewhere), and per
    step whether they did."""
    if mode == "whole":
        target, reference = target.assign(step=0), reference.assign(step=0)
    ref_steps = sorted(s for s in reference["step"].unique() if s >= 0)
    r0 = int(reference["rank"].min())
    refs = [_streams(reference, r0, s) for s in ref_steps]
    row = pd.Series(np.nan, index=target.index)
    same = {}
    for i, ((rank, step), _) in enumerate(target[target["step"] >= 0].groupby(["rank", "step"])):
        ts = _streams(target, rank, step)
        pool = refs if mode != "paired" else refs[i:i + 1]
        cand = [r for r in pool if [len(x) for x in r] == [len(x) for x in ts]]
        same[(rank, step)] = bool(cand)
        if cand:
            for t, r in zip(ts, cand[-1]):
                row[t] = r
    return row, same


def score(placed: pd.DataFrame, reference: pd.DataFrame, mode: str = "any") -> dict:
    """Against the truth: placed share of kernel time (with the reference's labels: module or op, and
the layer where the reference kernel has one), per-kernel label
    agreement, category shares' largest difference (points), each layer's time error (largest)."""
    row, same = truth(placed, reference, mode)
    known = row.notna()
    k = placed[known]
    r = reference.loc[row[known].astype(int).to_numpy()]
    dur = k["dur_us"].to_numpy(float)
    ok = np.ones(len(k), bool)
    for c in LABELS:
        a, b = k[c].astype(object).to_numpy(), r[c].astype(object).to_numpy()
        ok &= (a == b) | (pd.isna(a) & pd.isna(b))
    pl = placed["placed"].isin(["aligned", "neighbours"]).to_numpy().copy()
    pl &= (placed["module"].notna() | placed["op"].notna()).to_numpy()
    tot = float(placed["dur_us"].sum())
    cat_p = k.groupby(k["category"].astype(str))["dur_us"].sum() / dur.sum()
    cat_t = pd.Series(dur, index=r["category"].astype(str).to_numpy()).groupby(level=0).sum() / dur.sum()
    cats = cat_p.reindex(cat_p.index.union(cat_t.index), fill_value=0) - cat_t.reindex(
        cat_p.index.union(cat_t.index), fill_value=0)
    lay_p = k[k["layer"] >= 0].groupby("layer")["dur_us"].sum()
    lay_t = pd.Series(dur, index=r["layer"].to_numpy()).groupby(level=0).sum()
    lay_t = lay_t[lay_t.index >= 0]
    lay_err = ((lay_p.reindex(lay_t.index, fill_value=0) - lay_t).abs() / lay_t).max() if len(lay_t) else 0.0
    return {"steps_with_truth": sum(same.values()), "steps": len(same),
            "placed_share": float(placed["dur_us"].to_numpy(float)[pl].sum()) / tot if tot else 0.0,
            "label_agreement": float(ok.mean()) if len(ok) else float("nan"),
            "category_points": float(100 * cats.abs().max()) if len(cats) else 0.0,
            "layer_time_error": float(lay_err)}


def layer_names(placed: pd.DataFrame, reference: pd.DataFrame) -> dict:
    """Per layer: kernel names placed there in one target step that the reference step's layer lacks,
    and names of the reference layer that no target kernel got (multisets; empty: the same kernels)."""
    t = placed[(placed["step"] == placed["step"].max()) & (placed["layer"] >= 0)]
    r = reference[(reference["step"] == reference["step"].max()) & (reference["layer"] >= 0)]
    out = {}
    for lay in sorted(set(r["layer"]) | set(t["layer"])):
        a = Counter(t.loc[t["layer"] == lay, "name"].astype(str))
        b = Counter(r.loc[r["layer"] == lay, "name"].astype(str))
        out[int(lay)] = (sum((a - b).values()), sum((b - a).values()), sum(b.values()))
    return out
