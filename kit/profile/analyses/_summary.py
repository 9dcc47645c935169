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
- kernels recorded without duration (CUDA-graph replay on some PyTorch/CUPTI versions) on >= 50% of
  a rank's kernels: category times, idle and exposed communication are NaN with the reason
  (``categories_unavailable``), never 0; the wall time is the steps' spans (GPU-side annotations).
- collectives: CPU-side calls (``record_param_comms``, else ``c10d::`` ops) with their group size and
  bytes, next to the communication kernels seen; calls without any kernel are a warning that says why.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from kit.profile.attribution._categories import ALLREDUCE, COMM, OTHER_COLLECTIVES, category_order
from kit.profile.attribution._evidence import evidence_table, module_table, undecided_detail, undecided_warning
from kit.profile.reading._columns import TIME_CALLS
from kit.profile.steps._arrays import clip_to_windows, length, union, union_len_of
from kit.stats import is_nan


def rank_figures(k: pd.DataFrame, steps: pd.DataFrame) -> dict:
    """Figures of one rank's selected kernels ``k`` (with ``category``) over the selected ``steps``."""
    s = k["start_us"].to_numpy(float)
    e = s + k["dur_us"].to_numpy(float)
    kernel_us = float(k["dur_us"].sum())
    # no kernel start, or step spans unknown (graph replay without kernel durations nor a GPU-side
    # annotation): no wall time, never the 0 us span of zero-duration kernels
    if not len(s) or np.isnan(s).all() or (len(steps) and steps["wall_us"].isna().all()
                                           and steps["span_from"].astype(str).str.startswith("unknown").any()):
        return {**_NO_TIMES, "kernel_us": kernel_us, "wall_us": np.nan}
    if len(steps) and steps["wall_us"].notna().any():
        # windows: the steps' GPU spans, plus the own span of each kernel outside every step (such
        # kernels add their time but no idle)
        st = steps.dropna(subset=["start_us"])
        out = k["step"].to_numpy() < 0
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
    g = k.groupby(["category", "name"], observed=True)[["count", "dur_us"]].sum()
    g = g.rename(columns=TIME_CALLS).reset_index()
    total = g["time_us"].sum()
    cat_t = g.groupby("category", observed=True)["time_us"].transform("sum")
    g["share_of_category"] = g["time_us"] / cat_t.where(cat_t > 0, 1)
    g["share_of_kernel"] = g["time_us"] / (total if total > 0 else 1)
    g = g.sort_values(["category", "time_us", "name"], ascending=[True, False, True])
    return g.groupby("category", observed=True).head(n).astype({"category": str, "name": str}).reset_index(drop=True)


# ---------------------------------------------------------------- the whole summary

# bytes per element of a dtype as traces name it, lower case without ``c10::`` (``c10::BFloat16``, ``long int``)
DTYPE_BYTES = {"float": 4, "float32": 4, "bfloat16": 2, "half": 2, "float16": 2, "double": 8, "float64": 8, "int": 4,
               "int32": 4, "long": 8, "long int": 8, "int64": 8, "byte": 1, "uint8": 1, "char": 1, "signed char": 1,
               "int8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "short": 2, "int16": 2}


def dtype_bytes(name, default=None):
    """Bytes per element of the dtype ``name`` (:data:`DTYPE_BYTES`), ``default`` for one it does not know."""
    return DTYPE_BYTES.get(str(name).lower().removeprefix("c10::"), default)


def collectives(p, k: pd.DataFrame) -> pd.DataFrame:
    """CPU-side collective calls per rank, collective and group size: calls, bytes (input elements x
    dtype size, where the trace records them) and the communication kernels seen on that rank."""
    cols = ["rank", "collective", "group_size", "calls", "bytes", "kernels", "source"]
    if not len(p.comms):
        return pd.DataFrame(columns=cols)
    rows = []
    for r, cr in p.comms.groupby("rank"):
        # record_param_comms carries the arguments; c10d:: ops are counted only where it is absent
        rp = cr[cr["name"] == "record_param_comms"]
        src = "record_param_comms" if len(rp) else "c10d ops"
        use = rp if len(rp) else cr
        kr = k[k["rank"] == r] if len(k) else k
        for (coll, gs), g in use.groupby(["collective", "group_size"], dropna=False):
            size = g["dtype"].map(lambda d: dtype_bytes(d, np.nan)).astype(float)
            nbytes = (g["in_nelems"].where(g["in_nelems"] >= 0) * size).sum(min_count=1)
            cat = ALLREDUCE if "allreduce" in str(coll).replace("_", "").lower() else OTHER_COLLECTIVES
            nk = int(kr.loc[kr["category"] == cat, "count"].sum()) if len(kr) else 0
            rows.append({"rank": int(r), "collective": str(coll), "group_size": int(gs), "calls": int(len(g)),
                         "bytes": int(nbytes) if pd.notna(nbytes) else -1, "kernels": nk, "source": src})
    return pd.DataFrame(rows, columns=cols)


def _collective_warnings(coll: pd.DataFrame) -> list[str]:
    out = []
    for r in coll.itertuples():
        if r.calls and not r.kernels:
            why = ("a process group of size 1 communicates nothing, so NCCL launches no kernel: the "
                   f"{r.collective} share is 0 by construction" if r.group_size == 1 else
                   "the collective kernels are not in this trace (captured in a CUDA graph, or their stream "
                   "was not recorded)")
            out.append(f"rank {r.rank}: {r.calls:,} {r.collective} call(s) on the CPU (group size {r.group_size}, "
                       f"{max(r.bytes, 0):,} bytes) launched no GPU kernel: {why}")
    return out


_RANK_COLUMNS = ["rank", "kernel_us", "wall_us", "busy_us", "idle_us", "comm_us", "exposed_comm_us", "allreduce_us",
                 "allreduce_calls", "allreduce_share_of_kernel"]
_NO_TIMES = {"kernel_us": np.nan, "busy_us": np.nan, "idle_us": np.nan, "comm_us": np.nan, "exposed_comm_us": np.nan}


def summarise(p, phase: str, top: int) -> dict:
    """Every field of a :class:`kit.profile.Summary` for ``phase`` of profile ``p``, in named steps. Where most
    kernels carry no duration (``unavailable``: a graph replay without per-kernel timing), every time figure
    is NaN and said, never 0."""
    warnings = list(p.warnings)
    k, steps, phase_used = _phase_rows(p, phase, warnings)
    per_rank, unavailable = _per_rank(p, k, steps, phase_used, warnings)
    kernel_time = np.nan if unavailable else float(k["dur_us"].sum()) if len(k) else 0.0
    wall = float(per_rank["wall_us"].sum(min_count=1)) if len(per_rank) else np.nan
    idle = float(per_rank["idle_us"].sum(min_count=1)) if len(per_rank) else np.nan
    order = category_order(p.rules)
    per_step = _per_step(k, steps, unavailable)
    spread = allreduce_spread(per_rank, per_step)
    warnings.extend(_spread_warnings(spread))
    coll = collectives(p, k)
    warnings.extend(_collective_warnings(coll))
    und, und_per = (np.nan, {}) if unavailable else undecided_detail(k, p.rules)[:2]
    frames = sum(int(m.get("module_frames") or 0) for m in p.meta.get("ranks", {}).values())
    w = None if unavailable else undecided_warning(k, p.rules, frames)
    warnings += [w] if w else []
    ev, mods, layers = evidence_table(k), module_table(k, "module"), module_table(k, "layer")
    topk = top_kernels(k, top)
    if unavailable:
        _blank_times(ev, mods, layers, topk)
    return dict(phase=phase_used, files=p.files, ranks=p.ranks, steps=int(len(steps)), kernel_time_us=kernel_time,
                wall_time_us=wall, categories=_category_rows(k, order, kernel_time, wall, idle, unavailable),
                per_rank=per_rank, per_step=per_step, allreduce_spread=spread, top=topk, warnings=warnings,
                rank_categories=_rank_categories(k, order, per_rank, unavailable), evidence=ev, modules=mods,
                layers=layers, collectives=coll, categories_unavailable=unavailable, undecided=und,
                undecided_by_category=und_per)


def _phase_rows(p, phase: str, warnings: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The kernels and steps of ``phase`` and the phase used (``all`` when no kernel is in that phase, said)."""
    k, steps = p.kernels, p.steps
    if phase == "all" or not len(k):
        return k, steps, "all"
    sel = k["phase"] == phase
    if not sel.any():
        have = sorted(set(k["phase"].astype(str)))
        warnings.append(f"no kernel is in a {phase} step (phases found: {', '.join(have)}); the summary covers "
                        f"all kernels")
        return k, steps, "all"
    return k[sel], steps[steps["phase"] == phase], phase


def _per_rank(p, k, steps, phase_used: str, warnings: list[str]) -> tuple[pd.DataFrame, str | None]:
    """One row of figures per rank, and why time figures are unavailable (None: they are not)."""
    rows, unavailable = [], None
    for r in p.ranks:
        kr = k[k["rank"] == r] if len(k) else k
        sr = steps[steps["rank"] == r] if len(steps) else steps
        fig = rank_figures(kr, sr) if len(kr) else {**_NO_TIMES, "wall_us": np.nan}
        zero = float((kr["dur_us"] == 0).mean()) if len(kr) else 0.0
        ar = kr[kr["category"] == ALLREDUCE] if len(kr) else kr
        fig.update(rank=r, allreduce_us=float(ar["dur_us"].sum()) if len(ar) else 0.0,
                   allreduce_calls=int(ar["count"].sum()) if len(ar) else 0)
        if zero >= 0.5:
            # most kernels carry no duration (graph replay without per-kernel timing): their time would
            # count as GPU idle and their categories as 0 ms, so neither is given
            src = ", ".join(sorted(set(sr["span_from"].astype(str)))) if len(sr) else "kernels"
            fig.update(_NO_TIMES, allreduce_us=np.nan)
            unavailable = (f"{100 * zero:.0f}% of rank {r}'s {phase_used} kernels were recorded without duration "
                           f"(CUDA-graph replay without per-kernel timing): category times, GPU idle and exposed "
                           f"communication cannot be measured from this trace; step times come from {src}")
            wall = (f"is {fig['wall_us']:,.0f} us" if not is_nan(fig["wall_us"]) else
                    "unknown (no step has a GPU-side span: record a gpu_user_annotation per step)")
            warnings.append(f"rank {r}: {unavailable}; wall time (the steps' GPU spans) {wall}")
        fig["allreduce_share_of_kernel"] = (fig["allreduce_us"] / fig["kernel_us"]
                                            if fig["kernel_us"] and not np.isnan(fig["kernel_us"]) else 0.0)
        rows.append(fig)
    return pd.DataFrame(rows, columns=_RANK_COLUMNS), unavailable


def _category_rows(k, order, kernel_time: float, wall: float, idle: float, unavailable) -> pd.DataFrame:
    """Time, calls and shares per category in table order, GPU idle as its own row."""
    if len(k):
        g = k.groupby("category", observed=False)[["dur_us", "count"]].sum().rename(columns=TIME_CALLS)
        g = g.reindex(order).fillna(0.0)
        cats = g[(g["time_us"] > 0) | (g["calls"] > 0)].reset_index().astype({"category": str, "calls": int})
    else:
        cats = pd.DataFrame({"category": [], "time_us": [], "calls": []})
    if unavailable:
        cats["time_us"] = np.nan
    cats["share_of_kernel"] = cats["time_us"] / kernel_time if kernel_time else np.nan
    cats["share_of_wall"] = cats["time_us"] / wall if wall and not np.isnan(wall) else np.nan
    if np.isnan(idle):
        return cats
    row = {"category": "idle", "time_us": idle, "calls": 0, "share_of_kernel": np.nan,
           "share_of_wall": idle / wall if wall else np.nan}
    return pd.concat([cats, pd.DataFrame([row])], ignore_index=True)


def _per_step(k, steps, unavailable) -> pd.DataFrame:
    """One row per rank and step: name, phase, start, wall, kernels, kernel time and time per category."""
    if not (len(k) and len(steps)):
        return pd.DataFrame(columns=["rank", "step", "name", "phase", "start_us", "wall_us", "kernels", "kernel_us"])
    ks = k[k["step"] >= 0]
    piv = ks.groupby(["rank", "step", "category"], observed=True)["dur_us"].sum().unstack("category", fill_value=0.0)
    piv.columns = [str(c) for c in piv.columns]
    base = steps[["rank", "step", "name", "phase", "start_us", "wall_us", "kernels"]].set_index(["rank", "step"])
    per_step = base.join(piv, how="left").fillna({c: 0.0 for c in piv.columns})
    per_step.insert(4, "kernel_us", piv.sum(axis=1).reindex(per_step.index).fillna(0.0))
    if unavailable:
        per_step[["kernel_us", *piv.columns]] = np.nan
    return per_step.reset_index().sort_values(["rank", "step"]).reset_index(drop=True)


def _rank_categories(k, order, per_rank: pd.DataFrame, unavailable) -> pd.DataFrame:
    """Time per rank and category (columns in table order) and the rank's GPU idle."""
    if not len(k):
        return pd.DataFrame()
    rc = k.groupby(["rank", "category"], observed=True)["dur_us"].sum().unstack("category", fill_value=0.0)
    rc = rc[[c for c in order if c in rc.columns]]
    rc.columns = [str(c) for c in rc.columns]
    rc["idle"] = per_rank.set_index("rank")["idle_us"].reindex(rc.index)
    if unavailable:
        rc[:] = np.nan
    return rc


def _spread_warnings(spread: dict) -> list[str]:
    if spread.get("ranks", 0) > 1 and spread["min_us"] > 0 and spread["max_us"] / spread["min_us"] > 1.5:
        return [f"AllReduce time differs {spread['max_us'] / spread['min_us']:.1f}x across ranks "
                f"({spread['min_us']:,.0f}..{spread['max_us']:,.0f} us): the longer all-reduces likely "
                f"include waiting for a slower rank, not transfer time"]
    return []


def _blank_times(ev, mods, layers, topk) -> None:
    """Time columns of the evidence, module, layer and top-kernel tables set to NaN (times unavailable)."""
    for t in (ev, mods, layers):
        if len(t):
            t[["time_us", "share_of_kernel"]] = np.nan
    if len(topk):
        topk[["time_us", "share_of_category", "share_of_kernel"]] = np.nan


def allreduce_spread(per_rank: pd.DataFrame, per_step: pd.DataFrame) -> dict:
    """Per-rank AllReduce time: min, max, which ranks, spread, and the median per-step spread."""
    if per_rank.empty or per_rank["allreduce_calls"].sum() == 0:
        return {"ranks": 0}
    ar = per_rank.set_index("rank")["allreduce_us"]
    out = {"ranks": int(len(ar)), "min_us": float(ar.min()), "max_us": float(ar.max()), "min_rank": int(ar.idxmin()),
           "max_rank": int(ar.idxmax()), "mean_us": float(ar.mean())}
    out["spread_us"] = out["max_us"] - out["min_us"]
    out["max_over_min"] = out["max_us"] / out["min_us"] if out["min_us"] > 0 else float("inf")
    if ALLREDUCE in per_step.columns and per_step["rank"].nunique() > 1:
        st = per_step.pivot_table(index="step", columns="rank", values=ALLREDUCE, aggfunc="sum").dropna()
        if len(st):
            out["per_step_spread_us_median"] = float((st.max(axis=1) - st.min(axis=1)).median())
    return out
