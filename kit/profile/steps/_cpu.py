"""The CPU side of a step: launches, syncs, host time, and why the GPU waited (GPU-, launch- or host-bound).

From the profile's ``runtime`` table and the kernels' launch links, per rank and step:

- the step's **CPU window**: the CPU-side annotation of the step holding the launch of its first kernel;
  without one, from the first launch of the step to the first launch of the next (``cpu_window_from``);
- in that window: kernel launches (a driver launch nested in a runtime launch on the same thread counts
  once), graph launches, memcpy and memset calls, synchronisations (``cuda*Synchronize`` / ``cu*Synchronize``
  and ``aten::_local_scalar_dense``, the op behind ``.item()``), time in launch calls and blocked in syncs;
- on the GPU: busy time and every idle gap inside the step and before it, each with a **cause** read from
  the launch of the kernel that ended it: ``launch`` (launched after the GPU ran dry: the GPU waited for the
  CPU), ``sync`` (the same, and a synchronisation returned inside the gap: the CPU had waited for the GPU to
  drain), ``queued`` (already launched: dependencies, launch latency), ``unknown`` (no launch in the trace).
  A kernel's launch is the latest runtime call with its correlation id before it (graph replays may
  repeat ids).

The verdict of a phase (per rank; the slowest rank for the whole), from the per-step means: ``GPU-bound``
when the idle the CPU caused is under ``CPU_IDLE_BOUND`` of the step; else ``host-bound`` when the step
synchronises and sync-caused idle is at least ``SYNC_SHARE`` of the CPU-caused idle or ``SYNC_STEP`` of the
step (each sync drains the GPU's queue, and a step that synchronises cannot be captured in a CUDA graph,
the cure for launch-bound steps), or when one gap per step holds ``ONE_GAP_SHARE`` of it (host work in one
place); else ``launch-bound`` (the CPU issues kernels slower than the GPU runs them); ``undecided`` with
the reason where kernels lack durations or launch records. The longest CPU-caused gaps name where the CPU
was: the sync that returned inside the gap, else the op and ``nn.Module`` that launched the kernel ending it.

Profiled eager runs are slower on the CPU than unprofiled ones (the profiler records every op and launch),
so ``launch-bound`` from a trace is an upper bound: compare step times measured outside the profiler.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from kit.profile.attribution._names import GRAPH_LAUNCH, SYNC_OPS
from kit.profile.steps import _arrays
from kit.stats import is_nan

LAUNCH = re.compile(r"^(?:cuda|hip)(?:Ext)?LaunchKernel|^cuLaunchKernel|^(?:cuda|cu|hip)LaunchCooperativeKernel|"
                    r"^hip(?:Ext)?ModuleLaunchKernel|^cudaLaunchKernelExC")
MEMCPY = re.compile(r"^(?:cuda|hip)Memcpy|^cuMemcpy")
MEMSET = re.compile(r"^(?:cuda|hip)Memset|^cuMemset")
SYNC = re.compile(r"^(?:cuda|hip)(?:Device|Stream|Event)Synchronize$|^cu(?:Ctx|Stream|Event)Synchronize$")
CPU_IDLE_BOUND = 0.25
SYNC_SHARE = 1 / 3
SYNC_STEP = 0.05
ONE_GAP_SHARE = 0.5
CPU_SPAN = 3.0   # CPU range this many times the step's GPU time: said in the reason
_TOL_US = 2.0   # clock jitter between a launch record and the GPU timeline

STEP_COLUMNS = ["rank", "step", "name", "phase", "cpu_window_from", "cpu_us", "gpu_wall_us", "gap_before_us",
                "gpu_busy_us", "gpu_idle_us", "idle_launch_us", "idle_sync_us", "idle_queued_us", "idle_unknown_us",
                "max_gap_us", "launches", "driver_launches", "graph_launches", "memcpy", "memset", "syncs",
                "item_calls", "launch_api_us", "sync_wait_us"]
GAP_COLUMNS = ["rank", "step", "start_us", "idle_us", "cause", "sync", "op", "module", "next_kernel"]


def _kind_of(n: str) -> str:
    return ("graph" if GRAPH_LAUNCH.search(n) else "launch" if LAUNCH.search(n) else "memcpy" if MEMCPY.search(n)
            else "memset" if MEMSET.search(n) else "sync" if SYNC.search(n) else "other")


def classify(names: pd.Series) -> pd.Series:
    """Kind of each runtime/driver call: launch, graph, memcpy, memset, sync or other."""
    codes, uniq = _arrays.text(names)
    return pd.Series(np.array([_kind_of(n) for n in uniq], dtype=object)[codes], index=names.index, name=names.name)


def _nested(start: np.ndarray, end: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Calls lying inside an earlier call on the same thread (a driver launch under a runtime launch): ending
    by the latest end of the earlier calls on that thread (+1 ns), in order of start, longest first."""
    t_next, t_same = tid[1:] > tid[:-1], tid[1:] == tid[:-1]
    if (t_next | (t_same & (start[1:] > start[:-1]))).all():
        order = np.arange(len(start))                # already by thread and start, no tie (one thread, mostly)
    else:
        order = np.lexsort((-end, start, tid))
    t, e = tid[order], end[order]
    prev = np.full(len(e), -np.inf)                  # the latest end of the earlier calls on the thread
    cut = np.flatnonzero(t[1:] != t[:-1]) + 1
    for lo, hi in zip(np.concatenate([[0], cut]).tolist(), np.concatenate([cut, [len(e)]]).tolist()):
        prev[lo + 1:hi] = np.maximum.accumulate(e[lo:hi])[:-1]
    inside = e <= prev + 1e-6
    if np.isnan(e).any() or (e[inside] > prev[inside]).any():
        # an end unknown, or within the tolerance past an earlier one: which calls count as containers
        # then depends on the order, so walk them one by one
        return _nested_walk(start, end, tid)
    out = np.zeros(len(start), bool)
    out[order[inside]] = True
    return out


def _nested_walk(start: np.ndarray, end: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """:func:`_nested` call by call: a call is nested when it ends by the end of the last call that was not."""
    out = np.zeros(len(start), bool)
    order = np.lexsort((-end, start, tid))
    last_tid, last_end = None, -np.inf
    # plain Python lists: a loop over numpy scalars is several times slower
    for i, t, e in zip(order.tolist(), tid[order].tolist(), end[order].tolist()):
        if t == last_tid and e <= last_end + 1e-6:
            out[i] = True
            continue
        if t != last_tid or e > last_end:
            last_tid, last_end = t, e
    return out


def _cpu_windows(st: pd.DataFrame, first_launch: dict, ann: pd.DataFrame) -> dict:
    """step -> its CPU window (start, end, where it came from): the CPU-side annotation of the step's name
    (``record_function`` range) holding its first launch, else its launches up to the next step's."""
    by_name = {}                                   # name -> (starts, ends) of the CPU-side annotations, by start
    if len(ann):
        a = ann[(ann["side"] == "cpu").to_numpy(bool)]
        o = np.argsort(a["start_us"].to_numpy(float), kind="stable")
        a0 = a["start_us"].to_numpy(float)[o]
        a1 = a0 + a["dur_us"].to_numpy(float)[o]
        names = np.array([str(x) for x in a["name"].to_numpy(object)[o]], dtype=object)
        by_name = {name: (a0[ix], a1[ix]) for name, ix in _arrays.groups(names).items()}
    out = {}
    fl = np.array([first_launch.get(s, np.nan) for s in st["step"].tolist()], dtype=float)
    for i, (s, name) in enumerate(zip(st["step"].tolist(), st["name"].tolist())):
        t, name, w = fl[i], str(name), None
        if name in by_name and not np.isnan(t):
            a0, a1 = by_name[name]
            j = np.searchsorted(a0, t + _TOL_US, side="right") - 1   # the latest range starting before the launch
            if j >= 0 and a1[j] >= t - _TOL_US:
                w = (a0[j], a1[j], "cpu annotation")
        if w is None and not np.isnan(t):
            later = fl[i + 1:][~np.isnan(fl[i + 1:])]
            w = (t, later[0] if len(later) else np.nan, "launches")
        out[s] = w or (np.nan, np.nan, "none")
    return out


def _launch_times(kcorr: np.ndarray, kstart: np.ndarray, ccorr: np.ndarray, cstart: np.ndarray) -> np.ndarray:
    """Per kernel: start of the runtime call that launched it, the latest one with its correlation id at or
    before the kernel's start (graph replays on some PyTorch versions repeat the same ids every replay), else
    the first call with that id (a launch recorded after its kernel's start: clock skew); NaN where the trace
    has none. The calls (``ccorr``, ``cstart``) come sorted by start."""
    out = np.full(len(kcorr), np.nan)
    if not len(kcorr) or not len(ccorr):
        return out
    o = _arrays.stable_order(ccorr)                       # by id; one id's calls stay in order of start
    ids, t = ccorr[o], cstart[o]
    lo, hi = np.searchsorted(ids, kcorr, side="left"), np.searchsorted(ids, kcorr, side="right")
    has = hi > lo
    out[has] = t[lo[has]]                         # the first call with the id: the only one, mostly
    rep = np.flatnonzero(hi - lo > 1)
    if len(rep):
        m = np.isin(ids, kcorr[rep])
        out[rep] = _latest_call(kcorr[rep], kstart[rep], ids[m], t[m], out[rep])
    return out


def _latest_call(kcorr: np.ndarray, kstart: np.ndarray, ccorr: np.ndarray, cstart: np.ndarray,
                 default: np.ndarray) -> np.ndarray:
    """Per kernel: start of the latest call with its id at or before the kernel's start, ``default`` where
    none is. Kernels and calls sorted together by (id, time), a call before a kernel at the same time."""
    out = default.copy()
    corr, t = np.concatenate([ccorr, kcorr]), np.concatenate([cstart, kstart])
    is_k = np.concatenate([np.zeros(len(ccorr), bool), np.ones(len(kcorr), bool)])
    o = np.lexsort((is_k, t, corr))
    last_call = np.maximum.accumulate(np.where(is_k[o], -1, np.arange(len(o))))
    kp = np.flatnonzero(is_k[o])
    j = last_call[kp]
    hit = (j >= 0) & (corr[o][np.maximum(j, 0)] == corr[o][kp])
    out[o[kp[hit]] - len(ccorr)] = t[o][j[hit]]
    return out


def _gaps(start: np.ndarray, end: np.ndarray, st: pd.DataFrame, klaunch: np.ndarray, by_step: dict) -> dict:
    """GPU idle gaps inside and before each step (arrays): step, start, length, the kernel that ended it
    (its position), whether it is the launch gap before the step, and that kernel's launch."""
    parts: dict[str, list] = {c: [] for c in _GAP_TYPES}
    for s, gap_before in zip(st["step"].tolist(), st["gap_before_us"].tolist()):
        idx = by_step.get(s)
        if idx is None:
            continue
        idx = idx[np.argsort(start[idx], kind="stable")]
        b, e = start[idx], end[idx]
        # gap i lies between the running end of kernels [0..i-1] and the start of kernel i; gap 0 is
        # the launch gap before the step (from the steps table: the previous step's last kernel)
        before = b[0] - gap_before if not is_nan(gap_before) else np.nan
        g0 = np.concatenate([[before], np.maximum.accumulate(e)[:-1]])
        ln = b - g0
        sel = np.flatnonzero(ln > 0)
        for c, v in zip(parts, (np.full(len(sel), s), g0[sel], ln[sel], idx[sel], sel == 0, klaunch[idx[sel]])):
            parts[c].append(v)
    return {c: np.concatenate(v) if v else np.empty(0, _GAP_TYPES[c]) for c, v in parts.items()}


_GAP_TYPES = {"step": np.int64, "start_us": float, "idle_us": float, "kernel": np.int64, "before_step": bool,
              "launch_us": float}


# a gap's cause as its index in CAUSES: the per-step sums compare small integers, not strings
CAUSES = ("launch", "sync", "queued", "unknown")
_C_LAUNCH, _C_SYNC, _C_QUEUED, _C_UNKNOWN = range(4)


def _cause(g: dict, waits: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """launch / sync / queued / unknown per gap (see module docstring), as indices into ``CAUSES``."""
    g0 = g["start_us"]
    lt = g["launch_us"]
    starved = ~np.isnan(lt) & (lt >= g0 - _TOL_US)
    cause = np.where(starved, _C_LAUNCH, np.where(np.isnan(lt), _C_UNKNOWN, _C_QUEUED)).astype(np.int8)
    ws, we = waits
    if len(ws) and len(g0):
        o = np.argsort(we)
        we_sorted = we[o]
        # a wait that returned between the GPU running dry and the next launch
        lo = np.searchsorted(we_sorted, g0 - _TOL_US, side="left")
        hi = np.searchsorted(we_sorted, np.where(np.isnan(lt), -np.inf, lt) + _TOL_US, side="right")
        cause[starved & (hi > lo)] = _C_SYNC
    return cause


# a runtime call's kind as a small integer: one comparison per array, not one per row's string
KINDS = ("other", "launch", "graph", "memcpy", "memset", "sync", "op")
_LAUNCH, _GRAPH, _MEMCPY, _MEMSET, _SYNC, _OP = range(1, 7)


class _Calls:
    """One rank's runtime/driver calls and GPU-waiting ops, sorted by start: a step's calls are a slice.
    Text columns are read through their codes: each distinct name is classified once."""

    def __init__(self, rt: pd.DataFrame, rows) -> None:
        """``rows``: the positions (or slice) of the rank's calls in ``rt``."""
        start = rt["start_us"].to_numpy(float)[rows]
        o = _arrays.stable_order(start)
        self.start = start[o]
        self.dur = rt["dur_us"].to_numpy(float)[rows][o]
        self.end = self.start + self.dur
        codes, uniq = _arrays.text(rt["name"])
        self.codes, self.uniq = codes[rows][o], uniq
        kind = np.array([KINDS.index(_kind_of(n)) for n in uniq], np.int8)[self.codes]
        kc, ku = _arrays.text(rt["kind"])
        kind[(ku == "op")[kc[rows][o]]] = _OP
        self.kind = kind
        is_l = kind == _LAUNCH
        self.nested = np.zeros(len(kind), bool)
        self.nested[is_l] = _nested(self.start[is_l], self.end[is_l], _arrays.text(rt["tid"])[0][rows][o][is_l])
        self.driver = np.array([n.startswith("cu") and not n.startswith("cuda") for n in uniq], bool)[self.codes]
        self.item_name = np.isin(uniq, SYNC_OPS)[self.codes]
        corr = rt["correlation"].to_numpy(np.int64)[rows][o]
        launcher = (kind != _OP) & (corr >= 0)
        self.launchers = (corr[launcher], self.start[launcher])
        items = self._items()
        self.i_s, self.i_e = self.start[items], self.end[items]
        sync = kind == _SYNC
        self.waits = (np.concatenate([self.start[sync], self.i_s]), np.concatenate([self.end[sync], self.i_e]))

    def _items(self) -> np.ndarray:
        """The GPU-waiting ops (``.item()``): ``_local_scalar_dense`` where recorded, else ``aten::item``."""
        ops = (self.kind == _OP) & self.item_name
        inner = ops & (self.uniq == SYNC_OPS[0])[self.codes]
        return inner if inner.any() else ops

    def counts(self, w0: float, w1: float) -> dict:
        """Launches, graph launches, memcpy/memset, syncs and their time in the CPU window [w0, w1)."""
        def cut(x):
            lo = np.searchsorted(x, w0, side="left") if not is_nan(w0) else len(x)
            hi = np.searchsorted(x, w1, side="left") if not is_nan(w1) else len(x)
            return slice(lo, hi)
        c, i = cut(self.start), cut(self.i_s)
        ck, cs, ce = self.kind[c], self.start[c], self.end[c]
        it_s, it_e = self.i_s[i], self.i_e[i]
        lw = (ck == _LAUNCH) & ~self.nested[c]
        sw = ck == _SYNC
        own = _arrays.inside(cs[sw], it_s, it_e)   # a sync call inside an .item() is that item's own wait
        wait = _arrays.union_len_of((cs[sw], ce[sw]), (it_s, it_e))
        return {"launches": int(lw.sum()), "driver_launches": int((lw & self.driver[c]).sum()),
                "graph_launches": int((ck == _GRAPH).sum()), "memcpy": int((ck == _MEMCPY).sum()),
                "memset": int((ck == _MEMSET).sum()), "syncs": int((~own).sum() + len(it_s)),
                "item_calls": int(len(it_s)), "launch_api_us": float(self.dur[c][lw].sum()), "sync_wait_us": wait}

    def wait_names(self) -> tuple[np.ndarray, np.ndarray]:
        """(end, name) of the calls and ops that wait for the GPU: syncs and ``.item()`` ops."""
        wm = (self.kind == _SYNC) | ((self.kind == _OP) & self.item_name)
        return self.end[wm], self.uniq[self.codes[wm]]


def _gpu_figures(ix: np.ndarray, kstart: np.ndarray, kdur: np.ndarray, gl: np.ndarray, gc: np.ndarray,
                 wall: float) -> dict:
    """Busy time of a step's kernels (``ix``) and its idle gaps (lengths ``gl``, causes ``gc``) by cause."""
    busy = _arrays.length(_arrays.union(kstart[ix], kstart[ix] + kdur[ix])) if len(ix) else 0.0
    if len(ix) and (kdur[ix] == 0).mean() >= 0.5:   # graph replay without per-kernel timing
        nan = {f"idle_{x}_us": np.nan for x in CAUSES}
        return {"gpu_busy_us": np.nan, "gpu_idle_us": np.nan, **nan, "max_gap_us": 0.0}
    caused = gc <= _C_SYNC
    return {"gpu_busy_us": busy, "gpu_idle_us": max(wall - busy, 0.0),
            **{f"idle_{x}_us": float(gl[gc == i].sum()) for i, x in enumerate(CAUSES)},
            "max_gap_us": float(gl[caused].max()) if caused.any() else 0.0}


def phase_steps(p, rank: int, phase: str) -> pd.DataFrame:
    """Rank ``rank``'s steps of ``phase`` (every phase for ``"all"``) with a known start, by start."""
    st = p.steps
    m = (st["rank"].to_numpy() == rank) & st["start_us"].notna().to_numpy(bool)
    if phase != "all":
        m &= (st["phase"] == phase).to_numpy(bool)
    return st[m].sort_values("start_us")


def rank_cpu(p, rank: int, steps: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-step CPU-side table, GPU-idle gaps with their cause and CPU frame) of one rank's ``steps``
    (:func:`phase_steps`). The runtime and kernel tables are read as arrays of the rank's rows (no copy)."""
    rt, k = p.runtime, p.kernels
    rt_rows, ann = _arrays.rows_of(rt, rank), p.annotations.iloc[_arrays.rows_of(p.annotations, rank)]
    if not (len(rt) if isinstance(rt_rows, slice) else len(rt_rows)) or not len(steps):
        return pd.DataFrame(columns=STEP_COLUMNS), pd.DataFrame(columns=GAP_COLUMNS)
    calls = _Calls(rt, rt_rows)
    kpos = np.flatnonzero(k["rank"].to_numpy() == rank)
    kstart, kdur = k["start_us"].to_numpy(float)[kpos], k["dur_us"].to_numpy(float)[kpos]
    by_step = _arrays.groups(k["step"].to_numpy()[kpos])
    klaunch = _launch_times(k["correlation"].to_numpy(np.int64)[kpos], kstart, *calls.launchers)
    first_launch = {st_: np.nanmin(klaunch[ix]) if np.isfinite(klaunch[ix]).any() else np.nan
                    for st_, ix in by_step.items()}
    wins = _cpu_windows(steps, first_launch, ann)
    gaps = _gaps(kstart, kstart + kdur, steps, klaunch, by_step)
    gaps["cause"] = _cause(gaps, calls.waits)
    gap_by_step = _arrays.groups(gaps["step"])
    g_len, g_cause, g_first = gaps["idle_us"], gaps["cause"], gaps["before_step"]
    rows = []
    for r in steps.itertuples():
        w0, w1, src = wins[r.step]
        gi = gap_by_step.get(r.step, np.empty(0, int))
        rows.append({"rank": rank, "step": int(r.step), "name": r.name, "phase": r.phase, "cpu_window_from": src,
                     "cpu_us": float(w1 - w0), "gpu_wall_us": float(r.wall_us),
                     "gap_before_us": float(r.gap_before_us) if g_first[gi].any() else np.nan,
                     **_gpu_figures(by_step.get(r.step, np.empty(0, int)), kstart, kdur, g_len[gi], g_cause[gi],
                                    float(r.wall_us)),
                     **calls.counts(w0, w1)})
    return pd.DataFrame(rows, columns=STEP_COLUMNS), _gap_table(gaps, k, kpos, calls, rank)


def _gap_table(g: dict, k: pd.DataFrame, kpos: np.ndarray, calls: _Calls, rank: int) -> pd.DataFrame:
    """The 10 longest gaps the CPU caused: where the CPU was (the sync that returned inside the gap,
    else the op and ``nn.Module`` the next kernel was launched from) and the kernel that ended it."""
    cand = np.flatnonzero(g["cause"] <= _C_SYNC)
    top = cand[pd.Series(g["idle_us"][cand]).nlargest(10).index.to_numpy()]
    if not len(top):
        return pd.DataFrame(columns=GAP_COLUMNS)
    at = kpos[g["kernel"][top]]                  # the kernels that ended the gaps, as rows of ``k``

    def col(c):
        return [x if isinstance(x, str) and x else None for x in _arrays.values_at(k[c], at)]

    op_top, op = col("op_top"), col("op")
    next_op = [o or t for o, t in zip(op, op_top)]
    frame = [None] * len(top)
    we, names = calls.wait_names()
    if len(we):
        for i, (g0, lt, c) in enumerate(zip(g["start_us"][top], g["launch_us"][top], g["cause"][top])):
            if c == _C_SYNC:
                hit = np.flatnonzero((we >= g0 - _TOL_US) & (we <= lt + _TOL_US))
                # the outermost wait (an .item() op ends after the sync call inside it)
                frame[i] = names[hit[np.argmax(we[hit])]] if len(hit) else None
    kernel = [x if x is None else str(x) for x in _arrays.values_at(k["name"], at)]
    return pd.DataFrame({"rank": rank, "step": g["step"][top], "start_us": g["start_us"][top],
                         "idle_us": g["idle_us"][top], "cause": np.array(CAUSES, dtype=object)[g["cause"][top]],
                         "sync": frame, "op": next_op, "module": col("module"), "next_kernel": kernel},
                        columns=GAP_COLUMNS)


def verdict(t: pd.DataFrame, gaps: pd.DataFrame) -> dict:
    """The verdict of one rank's per-step table and gaps (:func:`rank_cpu`; module docstring), with the
    figures that decide it (per-step means)."""
    out = {"verdict": "undecided", "reason": "", "steps": int(len(t))}
    if not len(t):
        out["reason"] = "no step with launch records (runtime events) in this trace"
        return out
    gap = t["gap_before_us"].to_numpy(float)
    gap_fill = np.where(np.isnan(gap), _arrays.nanmean(gap) if (~np.isnan(gap)).any() else 0.0, gap)
    step = _arrays.nanmean(t["gpu_wall_us"].to_numpy(float) + gap_fill)
    m = {c: _arrays.nanmean(t[c].to_numpy(float)) for c in (
        "max_gap_us", "driver_launches", "cpu_us", "gpu_busy_us", "gpu_idle_us", "idle_launch_us", "idle_sync_us",
        "idle_queued_us", "launches", "graph_launches", "memcpy", "memset", "syncs", "item_calls",
        "launch_api_us", "sync_wait_us")}
    mode = ("graph" if m["graph_launches"] and not m["launches"] else "eager" if m["launches"] and not
            m["graph_launches"] else "mixed" if m["launches"] else "none")
    out.update(step_us=step, mode=mode, **m)
    busy = m["gpu_busy_us"]
    if is_nan(busy):
        out["reason"] = ("most kernels were recorded without duration (CUDA-graph replay without per-kernel timing): "
                         "GPU busy time and idle gaps cannot be measured from this trace")
        return out
    caused = m["idle_launch_us"] + m["idle_sync_us"]
    out.update(gpu_busy_share=busy / step if step else np.nan, cpu_idle_share=caused / step if step else np.nan,
               sync_share_of_cpu_idle=m["idle_sync_us"] / caused if caused else 0.0)
    figs = (f"GPU busy {busy:,.0f} of {step:,.0f} us/step ({100 * busy / step:.0f}%), GPU idle the CPU caused "
            f"{caused:,.0f} us ({100 * caused / step:.0f}%: launch {m['idle_launch_us']:,.0f}, sync "
            f"{m['idle_sync_us']:,.0f}; idle with work queued {m['idle_queued_us']:,.0f}); {_launch_words(m, mode)}, "
            f"CPU {us_text(m['cpu_us'])} us/step, "
            f"{m['syncs']:g} sync(s)/step")
    if caused < CPU_IDLE_BOUND * step:
        out["verdict"] = "GPU-bound"
    elif m["syncs"] > 0 and (m["idle_sync_us"] >= SYNC_SHARE * caused or m["idle_sync_us"] >= SYNC_STEP * step):
        out["verdict"] = "host-bound"
        figs += (f" blocking {m['sync_wait_us']:,.0f} us: each sync drains the GPU's queue "
                 f"({m['idle_sync_us']:,.0f} us of GPU idle per step follow one, "
                 f"{100 * m['idle_sync_us'] / step:.0f}% of the step), and a step that "
                 f"synchronises cannot be captured in a CUDA graph")
    elif m["max_gap_us"] >= ONE_GAP_SHARE * caused:
        out["verdict"] = "host-bound"
        where = f" ({gap_where(gaps.iloc[0])})" if len(gaps) else ""
        figs += (f"; one gap per step holds {m['max_gap_us']:,.0f} us ({100 * m['max_gap_us'] / caused:.0f}% of "
                 f"that idle){where}: host work, not launch overhead")
    else:
        out["verdict"] = "launch-bound"
    if m["cpu_us"] > CPU_SPAN * step:
        figs += (f"; the steps' CPU ranges last {m['cpu_us'] / step:.0f}x their GPU time: host time outside the GPU "
                 f"work (scheduling, the profiler starting or stopping) that the GPU did not wait for")
    out["reason"] = figs
    return out


def us_text(x: float) -> str:
    return "n/a" if is_nan(x) else f"{x:,.0f}"


def _launch_words(m: dict, mode: str) -> str:
    return {"graph": f"{m['graph_launches']:g} graph launch(es)/step",
            "mixed": f"{m['launches']:g} kernel launches + {m['graph_launches']:g} graph launch(es)/step"}.get(
        mode, f"{m['launches']:g} kernel launches/step (eager)")


def cpu_side(p, phase: str = "all") -> dict:
    """Per-step table, longest CPU-caused gaps and verdicts (per rank and headline) of ``phase``."""
    st = p.steps if phase == "all" else p.steps[p.steps["phase"] == phase]
    steps, gaps, per_rank = [], [], []
    for r in p.ranks:
        sr = phase_steps(p, r, phase)
        t, g = rank_cpu(p, r, sr)
        steps.append(t)
        gaps.append(g)
        v = verdict(t, g)
        if not len(sr) and (st["rank"] == r).any():
            v["reason"] = ("no step has a known span (kernels without durations and no GPU-side annotation or "
                           "host wait per step): step time unknown")
        per_rank.append({"rank": r, **v})
    # a Profile has a rank per trace file; the headline is the slowest rank's
    return {"steps": pd.concat(steps, ignore_index=True), "gaps": pd.concat(gaps, ignore_index=True),
            "per_rank": pd.DataFrame(per_rank), "verdict": max(per_rank, key=lambda d: d.get("step_us", -1.0))}


def to_json(verdict: dict, per_rank: pd.DataFrame, gaps: pd.DataFrame, steps: pd.DataFrame | None = None) -> dict:
    """The ``cpu`` object of the summary JSON (README: ``kit profile summary --json``)."""
    d = {"verdict": {k: _arrays.clean(v) for k, v in verdict.items()}, "per_rank": _arrays.records(per_rank),
         "gaps": _arrays.records(gaps)}
    if steps is not None:
        d["per_step"] = _arrays.records(steps)
    return d


def lines(verdict: dict, per_rank: pd.DataFrame, gaps: pd.DataFrame, n: int = 3) -> list[str]:
    """Text lines of the verdict, per-rank verdicts (several ranks) and the longest CPU-caused gaps."""
    if not verdict:
        return []
    out = [f"verdict: {verdict.get('verdict')}" + (f" (rank {verdict['rank']})" if len(per_rank) > 1 else "")
           + (f": {verdict['reason']}" if verdict.get("reason") else "")]
    if len(per_rank) > 1:
        out += [f"  rank {r.rank}: {r.verdict}" for r in per_rank.itertuples()]
    for _, r in gaps.head(n).iterrows():
        out.append(f"  GPU idle {r['idle_us']:,.0f} us (step {r['step']}): {gap_where(r)}")
    return out


def gap_where(r) -> str:
    """Where a CPU-caused gap sat, in words."""
    op = r["op"] if isinstance(r["op"], str) and r["op"] != str(r["next_kernel"]) else None
    mod = f" in {r['module']}" if isinstance(r["module"], str) else ""
    launched = (f"until the CPU launched {str(r['next_kernel'])[:60]} from {op}{mod}" if op else
                f"until the CPU launched {str(r['next_kernel'])[:60]}{mod} (no CPU op recorded around the launch)")
    if r["cause"] == "sync" and isinstance(r["sync"], str):
        return f"after {r['sync']} returned (the GPU had drained), {launched}"
    return launched
