"""Steps and phases: which decode/prefill step each kernel belongs to.

Order of evidence (first that exists on a rank wins; the same rule on a replay and on its reference,
so that their steps correspond):

0. ``marker=``: ranges of that name (``--step-marker``; numbers in names compare as any number:
   ``ProfilerStep`` or ``ProfilerStep#N`` finds ``ProfilerStep#12``), a CPU or GPU annotation or a
   module frame (``LlamaForCausalLM`` finds ``nn.Module: LlamaForCausalLM_0``).
1. The engines' known step annotations, by family (:func:`families`): each engine's step markers
   (``kit.engines.step_markers()``: SGLang ``step[DECODE bs=..]`` / ``step[EXTEND ..]``; vLLM
   ``execute_..._context_N(..)_generation_M(..)``); user ``record_function`` ranges named
   ``prefill*`` / ``decode*`` / ``extend*``. GPU-side copies (``gpu_user_annotation``) place kernels
   by GPU time; CPU-side ranges place a kernel by the time of its launch (runtime event with the same
   correlation id).
2. Any serving loop's own step range: a ``record_function`` range of any name, repeated, at the top
   of its thread's ranges, whose instances hold the launches of most kernels (the range that tiles
   the run, once per iteration, enclosing the forward; :func:`_tiling`). Phase unknown.
3. ``ProfilerStep#N`` (phase unknown).
4. CUDA-graph launches (``cudaGraphLaunch`` / ``hipGraphLaunch``): one step per launch, its kernels
   found by correlation id; phase ``decode`` (serving frameworks graph only decode).
5. The model's forward: the repeated outermost module frame (``with_stack``), each step from one
   call to the next (the kernels after a forward, sampling, belong to its step).
6. Gaps: bursts of GPU work separated by idle gaps much longer than the typical gap.

A step's GPU span is its first kernel's start to its last kernel's end; when most of its kernels were
recorded without duration (CUDA-graph replay) it is the GPU-side annotation's span, or the CPU range in
which the host waits for the GPU, else unknown (``span_from`` says which).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

import kit.engines
from kit.profile.attribution._names import GRAPH_LAUNCH
from kit.profile.reading._columns import matching, strings

_USER = re.compile(r"(?i)^(prefill|decode|extend|generate)(?:$|[_\s\-:\[(#0-9])")
_PSTEP = re.compile(r"^ProfilerStep#\d+$")
FAMILIES = (   # after each engine's own markers (families())
    ("user", _USER, lambda m: "prefill" if m.group(1).lower() in ("prefill", "extend") else "decode"),
)
PROFILER_STEP = ("profiler-step", _PSTEP, lambda m: "unknown")
_NUM = re.compile(r"#?\d+")
MIN_COVER = 0.5   # a repeated range is a step range if its instances hold the launches of this share of kernels
_TIE = 0.02       # ranges within this share of kernels of the best: the outer one (fewer instances) wins


def families() -> tuple:
    """The step-marker families in the order they are tried: each engine's (``kit.engines.step_markers()``,
    read when asked: a new engine module needs no change here), then :data:`FAMILIES`. ``ProfilerStep#N``
    comes later (after a loop's own range: :func:`step_markers`)."""
    return (*((name, m.regex, m.phase) for name, m in kit.engines.step_markers()), *FAMILIES)


def _markers(ann: pd.DataFrame, fams=None) -> tuple[str, pd.DataFrame] | None:
    if ann.empty:
        return None
    names = ann["name"].astype(str)
    for fam, rx, phase_of in (families() if fams is None else fams):
        matches = names.map(rx.match)
        hit = matches.notna()
        if hit.any():
            sel = ann[hit].copy()
            sel["phase"] = [phase_of(m) for m in matches[hit]]
            return fam, sel
    return None


def _norm(name: str) -> str:
    """A range's name with its numbers as ``#``: the instances of one step range (``ProfilerStep#3``,
    ``step_12``, ``nn.Module: LlamaForCausalLM_0``) read the same."""
    return _NUM.sub("#", name)


def _launch_times(k: pd.DataFrame, launches: pd.DataFrame, kt: np.ndarray) -> np.ndarray:
    """Each kernel's launch time (CPU) by correlation id; its GPU start where no launch was recorded."""
    corr_ts = dict(zip(launches["correlation"].to_numpy(), launches["ts"].to_numpy(float))) if len(launches) else {}
    lt = np.array([corr_ts.get(c, np.nan) for c in k["correlation"].to_numpy()], dtype=float)
    return np.where(np.isnan(lt), kt, lt)


def _tiling(rows: pd.DataFrame, lt: np.ndarray, family: str, floor: float = MIN_COVER,
            least: int = 2) -> tuple[str, pd.DataFrame] | None:
    """The repeated range (CPU side) that holds the launches of most kernels: ``rows`` grouped by name
    with numbers as ``#``; a group of at least ``least`` instances (nested ones of the same name dropped) whose
    instances hold at least ``floor`` (default ``MIN_COVER``) of the kernels' launches. The group placing the most wins;
    within ``_TIE`` of it, the one with fewer instances (the outer range: an iteration, not a layer).
    Instances that hold no launch (an idle poll of the loop) are no step."""
    if rows.empty or not len(lt):
        return None
    rows = rows[np.isfinite(rows["ts"].to_numpy(float))]
    key = rows["name"].astype(str).map(_norm)
    counts = key.value_counts()
    best = None
    for name in counts.index[counts.to_numpy() >= least][:64]:
        use = _outermost(rows[key.to_numpy() == name])
        idx = _assign_by_time(lt, *_bounds(use))
        held = np.bincount(idx[idx >= 0], minlength=len(use)) > 0
        cover = float((idx >= 0).mean())
        if held.sum() < least or cover < floor:
            continue
        cand = (cover, int(held.sum()), name, use[held])
        if best is None or cover > best[0] + _TIE or (cover >= best[0] - _TIE and cand[1] < best[1]):
            best = cand
    if best is None:
        return None
    sel = best[3].copy()
    sel["phase"] = "unknown"
    sel.attrs["cover"] = best[0]
    return f"{family}:{best[2]}", sel


def _forwards(frames: pd.DataFrame | None, lt: np.ndarray, t_end: float) -> tuple[str, pd.DataFrame] | None:
    """Steps from the model's forward (module frames, ``with_stack``): the repeated module call that holds
    the most launches, each step from one call to the next (the last to ``t_end``)."""
    if frames is None or not len(frames) or "kind" not in frames:
        return None
    mods = frames[frames["kind"].astype(str) == "module"]
    got = _tiling(mods[["name", "ts", "dur"]].assign(side="cpu"), lt, "forward")
    if got is None:
        return None
    fam, sel = got
    ts = sel["ts"].to_numpy(float)
    nxt = np.append(ts[1:], max(t_end, ts[-1] + sel["dur"].to_numpy(float)[-1]) + 1.0)
    sel["dur"] = nxt - ts - 1e-3
    return fam, sel


def _named(marker: str, ann: pd.DataFrame, frames: pd.DataFrame | None, lt: np.ndarray,
           t_end: float) -> tuple[str, pd.DataFrame] | None:
    """The ranges the user named (``--step-marker``): annotations whose name is ``marker`` (numbers as
    any number), else module frames of that class (tiled, as forwards)."""
    want = _norm(marker.strip())
    want = want[:-2] + "#" if want.endswith("#N") else want
    if len(ann):
        key = ann["name"].astype(str).map(_norm)
        hit = (key == want) | (key == want + "#")
        if hit.any():
            sel = ann[hit.to_numpy()].copy()
            sel["phase"] = "unknown"
            return f"marker:{marker}", sel
    if frames is not None and len(frames) and "kind" in frames:
        mods = frames[frames["kind"].astype(str) == "module"]
        key = mods["name"].astype(str).str.replace(r"^nn\.Module: ", "", regex=True).map(_norm)
        cls = re.sub(r"^nn\.Module: ", "", want)
        hit = (key == cls) | (key == cls + "_#")
        if hit.any():
            got = _forwards(mods[hit.to_numpy()], lt, t_end)
            if got is not None:
                return f"marker:{marker}", got[1]
    return None


def _assign_by_time(t: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Index of the interval containing each t (intervals sorted by start, non-overlapping), or -1."""
    if len(starts) == 0:
        return np.full(len(t), -1)
    i = np.searchsorted(starts, t, side="right") - 1
    ok = (i >= 0) & (t <= ends[np.clip(i, 0, None)])
    return np.where(ok, i, -1)


def _bounds(ranges: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    starts = ranges["ts"].to_numpy(float)
    return starts, starts + ranges["dur"].to_numpy(float)


def _outermost(use: pd.DataFrame) -> pd.DataFrame:
    """Markers in time order, nested ones of the same family dropped (the outermost kept)."""
    use = use.sort_values("ts").drop_duplicates(["name", "ts"])
    keep, last_end = [], -np.inf
    for ts, dur in zip(use["ts"].to_numpy(), use["dur"].to_numpy()):
        keep.append(ts >= last_end)
        if ts >= last_end:
            last_end = ts + dur
    return use[np.array(keep, dtype=bool)]


def step_markers(k: pd.DataFrame, ann: pd.DataFrame, launches: pd.DataFrame, frames: pd.DataFrame | None = None,
                 marker: str | None = None) -> tuple[str, pd.DataFrame] | None:
    """The ranges that are this rank's steps, before graph launches (``(family, ranges)``, or None): the
    user's ``marker``, the engines' known annotations, a repeated range of any name that tiles the run,
    ``ProfilerStep#N``; after graph launches (see :func:`assign_steps`), the model's forwards."""
    if marker:
        return _named(marker, ann, frames, _launch_times(k, launches, k["ts"].to_numpy(float)), _t_end(k, launches))
    got = _markers(ann)
    if got is not None or not len(ann):
        return got
    lt = _launch_times(k, launches, k["ts"].to_numpy(float))
    cpu = ann[ann["side"] == "cpu"]
    is_p = cpu["name"].astype(str).str.match(_PSTEP.pattern).to_numpy()
    pstep = _tiling(cpu[is_p], lt, "profiler-step", 0.0, 1) if is_p.any() else None
    # a range of the loop's own before ProfilerStep#N, where it tiles the run as well (a profiler step of
    # several iterations): a range covering less (a training step's forward) is a part of the step
    floor = max(MIN_COVER, pstep[1].attrs["cover"] - _TIE) if pstep is not None else MIN_COVER
    got = _tiling(cpu[~is_p], lt, "range", floor)
    return got if got is not None else _markers(ann, (PROFILER_STEP,))


def _t_end(k: pd.DataFrame, launches: pd.DataFrame) -> float:
    """The last kernel start or launch of a rank whose kernels are timed."""
    return max(float(np.nanmax(k["ts"].to_numpy(float))), float(launches["ts"].max()) if len(launches) else -np.inf)


def assign_steps(k: pd.DataFrame, ann: pd.DataFrame, launches: pd.DataFrame, frames: pd.DataFrame | None = None,
                 marker: str | None = None) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """For one rank: (step index per kernel (-1 none), phase per kernel, steps table). ``frames``: the
    CPU frames (module calls give the forwards); ``marker``: the step range's name (nothing else is
    tried where it is given: a name not found leaves the steps to none, said by ``source``)."""
    n = len(k)
    step = np.full(n, -1, dtype=np.int64)
    phase = np.full(n, "unknown", dtype=object)
    kt = k["ts"].to_numpy(dtype=float)
    kend = kt + k["dur"].to_numpy(dtype=float)
    timed = n and not np.isnan(kt).all()   # not a summary without timeline (nsys stats), which has no steps
    markers = step_markers(k, ann, launches, frames, marker) if timed else None
    g = launches[matching(launches["name"], GRAPH_LAUNCH)] if len(launches) and not marker else launches.iloc[:0]
    if markers is None and timed and not len(g) and not marker:
        markers = _forwards(frames, _launch_times(k, launches, kt), _t_end(k, launches))
    rows: list = []
    source = None
    if markers is not None:
        step, phase, rows, source = _by_markers(k, launches, kt, kend, markers)
    elif timed and len(g):
        g = g.sort_values("ts")
        pos = {c: i for i, c in enumerate(g["correlation"].to_numpy())}
        idx = np.array([pos.get(c, -1) for c in k["correlation"].to_numpy()], dtype=np.int64)
        if (idx >= 0).any():
            step = idx
            phase = np.where(idx >= 0, "decode", "unknown").astype(object)
            source = "cuda-graph"
            rows = [(i, f"{nm} #{i}", "decode", float(ts), float(ts + dur))
                    for i, (nm, ts, dur) in enumerate(zip(g["name"], g["ts"], g["dur"]))]
    untimed = (kt == 0) & (kend == 0)
    if source is not None and untimed.any():
        r_step = _replay_steps(k, untimed, launches, source, markers, len(rows))
        step[untimed] = r_step
        ph = np.array([r[2] for r in rows], dtype=object)   # a graph launch's row says decode
        phase[untimed] = np.where(r_step >= 0, ph[np.clip(r_step, 0, None)], "unknown")
    if source is None and timed:
        rows, source = ([], f"marker:{marker} not found") if marker else (_bursts(kt, kend, step), "gaps")
    steps = _spans(pd.DataFrame(rows, columns=["step", "name", "phase", "marker_start_us", "marker_end_us"]),
                   step, k, kt, kend, source, launches)
    steps["source"] = source or "none"
    return step, phase.astype(object), steps


def _by_markers(k: pd.DataFrame, launches: pd.DataFrame, kt: np.ndarray, kend: np.ndarray,
                markers: tuple[str, pd.DataFrame]) -> tuple[np.ndarray, np.ndarray, list, str]:
    """(step and phase per kernel, the steps' rows, where they came from) of the step ranges ``markers``:
    their GPU-side copies place kernels by GPU time, their CPU-side ranges by launch time."""
    fam, sel = markers
    gpu = _outermost(sel[sel["side"] == "gpu"])
    cpu = _outermost(sel[sel["side"] == "cpu"])
    idx, use, source = None, gpu, None
    if len(gpu):
        idx = _assign_by_time(kt, *_bounds(gpu))
        source = f"annotation:{fam}:gpu"
    timed = not ((kt == 0) & (kend == 0)).any()
    if len(cpu) and (idx is None or (timed and len(cpu) == len(gpu) and (idx < 0).any())):
        # GPU copies of the ranges can miss most kernels (torch.compile'd steps: the GPU range covers only
        # the last eager kernels); the CPU ranges place each kernel by its launch: used where they place at
        # least twice as many
        by_cpu = _assign_by_time(_launch_times(k, launches, kt), *_bounds(cpu))
        if idx is None or (by_cpu >= 0).sum() >= 2 * max(1, (idx >= 0).sum()):
            idx, use, source = by_cpu, cpu, f"annotation:{fam}:cpu"
    starts, ends = _bounds(use)
    names, phases = use["name"].to_numpy(), use["phase"].to_numpy()
    phase = np.where(idx >= 0, phases[np.clip(idx, 0, None)] if len(phases) else "unknown", "unknown")
    rows = [(i, str(names[i]), str(phases[i]), starts[i], ends[i]) for i in range(len(use))]
    return idx.astype(np.int64), phase, rows, source


def _bursts(kt: np.ndarray, kend: np.ndarray, step: np.ndarray) -> list:
    """The steps' rows where no range says them: bursts of GPU work separated by idle gaps much longer than
    the typical gap (each kernel's burst written into ``step``)."""
    order = np.argsort(kt, kind="stable")
    s, e = kt[order], np.maximum.accumulate(kend[order])
    gaps = s[1:] - e[:-1]
    pos_gaps = gaps[gaps > 0]
    thr = max(100.0, 20.0 * float(np.median(pos_gaps))) if len(pos_gaps) else np.inf
    bounds = np.concatenate([[0], np.flatnonzero(gaps > thr) + 1, [len(kt)]])
    rows = []
    for i in range(len(bounds) - 1):
        step[order[bounds[i]:bounds[i + 1]]] = i
        rows.append((i, f"burst {i}", "unknown", float(s[bounds[i]]), float(e[bounds[i + 1] - 1])))
    return rows


def _spans(steps: pd.DataFrame, step: np.ndarray, k: pd.DataFrame, kt: np.ndarray, kend: np.ndarray, source,
           launches: pd.DataFrame) -> pd.DataFrame:
    """The steps table with each step's span (its kernels', or where they carry no duration its GPU
    annotation or the host's wait), kernels, wall time and the GPU idle before it."""
    m = len(steps)
    if not m:
        return steps.assign(start_us=[], end_us=[], span_from=[], kernels=[], wall_us=[], gap_before_us=[])
    sel = step >= 0
    idx = step[sel]
    cnt = np.bincount(idx, minlength=m)
    start, end = np.full(m, np.inf), np.full(m, -np.inf)
    np.minimum.at(start, idx, kt[sel])
    np.maximum.at(end, idx, kend[sel])
    start[cnt == 0] = end[cnt == 0] = np.nan
    span_from = np.full(m, "kernels", dtype=object)
    # kernels recorded without duration (CUDA-graph replay on some PyTorch/CUPTI versions): the kernel span
    # is not the step (never a span of 0 us); GPU-side annotations are (they bracket the GPU work), else the
    # CPU-side step range where the host waits for the GPU inside each step (a sync), else unknown
    zero = np.bincount(idx, weights=(k["dur"].to_numpy(dtype=float)[sel] == 0).astype(float), minlength=m)
    mostly_zero = (cnt > 0) & (zero >= 0.5 * np.maximum(cnt, 1))
    if mostly_zero.any():
        gpu, cpu = (bool(source) and source.endswith(x) for x in (":gpu", ":cpu"))
        waits = np.ones(m, bool) if gpu else _host_waits(steps, launches) if cpu else np.zeros(m, bool)
        use, unk = mostly_zero & waits, mostly_zero & ~waits
        start = np.where(use, steps["marker_start_us"].to_numpy(float), start)
        end = np.where(use, steps["marker_end_us"].to_numpy(float), end)
        span_from[use] = "gpu annotation" if gpu else "cpu range (the host waits for each step)"
        start[unk] = end[unk] = np.nan
        span_from[unk] = "unknown (kernels without durations, no GPU-side annotation)"
    # GPU idle between the previous step's last kernel and this step's first one (launch latency, host
    # work): a CUDA-event timing of the step includes part of it
    gap = np.full(m, np.nan)
    gap[1:] = start[1:] - end[:-1]
    return steps.assign(start_us=start, end_us=end, span_from=span_from, kernels=cnt, wall_us=end - start,
                        gap_before_us=np.clip(gap, 0, None))


_SYNC = re.compile(r"(?i)(?:Stream|Device|Event|Ctx)Synchronize$|^cuda(?:Memcpy|Memcpy2D)$|"
                   r"^hip(?:Stream|Device)Synchronize$")


def _host_waits(steps: pd.DataFrame, launches: pd.DataFrame) -> np.ndarray:
    """Per step: a runtime call that blocks the host until the GPU is done (a stream/device/event
    synchronize, a synchronous memcpy) runs inside its CPU-side range, so that range spans the step's
    GPU work."""
    if not len(launches):
        return np.zeros(len(steps), bool)
    t = np.sort(launches["ts"].to_numpy(float)[matching(launches["name"], _SYNC)])
    return (np.searchsorted(t, steps["marker_end_us"].to_numpy(float), side="right")
            > np.searchsorted(t, steps["marker_start_us"].to_numpy(float), side="left"))


def _period(names: np.ndarray, want: list[int]) -> int:
    """Length of one replay in a repeated kernel-name sequence: the first of ``want`` (replay counts the
    trace names: graph launches, steps) that the names repeat with, else their smallest period."""
    n = len(names)
    for r in want:
        if r > 0 and n % r == 0 and (r == 1 or (names[: n - n // r] == names[n // r:]).all()):
            return n // r
    for p in range(1, n + 1):
        if n % p == 0 and (names[: n - p] == names[p:]).all():
            return p
    return n


def _replay_steps(k: pd.DataFrame, untimed: np.ndarray, launches: pd.DataFrame, source: str, markers,
                  nsteps: int) -> np.ndarray:
    """Step of each untimed kernel (``ts = dur = 0``: a CUDA-graph replay recorded without per-kernel
    timing), from the order the replays were written.

    Per correlation id, the kernels in file order are one replay or several replays one after the
    other (when every replay repeats the first one's ids). Several ids, each a graph launch: one
    replay per id, placed by its launch. One id: the replays repeat its kernel names; replay r is the
    r-th graph launch from the one with that id (by CPU time). A launch is placed in the step whose
    CPU range holds it (the r-th step when the steps are GPU ranges with CPU twins, or the launches
    themselves); without launches, the r-th step when there are as many replays as steps; else -1."""
    out = np.full(int(untimed.sum()), -1, dtype=np.int64)
    names = strings(k["name"])[untimed]
    corr = k["correlation"].to_numpy()[untimed]
    g = launches[matching(launches["name"], GRAPH_LAUNCH)].sort_values("ts") if len(launches) else launches
    g_ts = g["ts"].to_numpy(float) if len(g) else np.empty(0)
    g_pos = {c: i for i, c in enumerate(g["correlation"].to_numpy())} if len(g) else {}
    ids = pd.unique(corr)
    one_each = len(ids) > 1 and all(c in g_pos for c in ids)
    for c in ids:
        sel = np.flatnonzero(corr == c)
        i0 = g_pos.get(c)
        left = len(g_ts) - i0 if i0 is not None else 0
        per = len(sel) if one_each else _period(names[sel], [left, nsteps])
        rep = np.arange(len(sel)) // per
        nrep = int(rep.max()) + 1
        if i0 is not None and nrep <= left:
            st = i0 + rep if source == "cuda-graph" else _step_of_times(g_ts, source, markers, nsteps)[i0 + rep]
        elif nrep == nsteps:
            st = rep
        else:
            st = np.full(len(sel), -1)
        out[sel] = st
    return out


def _step_of_times(t: np.ndarray, source: str, markers, nsteps: int) -> np.ndarray:
    """Step index of CPU times ``t`` (graph launches) from the CPU-side markers of the step family."""
    _, sel = markers
    cpu = _outermost(sel[sel["side"] == "cpu"])
    if source.endswith(":gpu") and len(cpu) != nsteps:
        return np.full(len(t), -1)   # GPU ranges without matching CPU twins: no way to pair them
    return _assign_by_time(t, *_bounds(cpu))
