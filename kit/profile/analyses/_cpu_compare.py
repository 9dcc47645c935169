"""Compare's CPU side: the cause of GPU idle and launch gaps in both runs, in words.

For ``compare(a, b)``: each run's CPU side and verdict (from ``steps/_cpu.py``), the sentence saying what
differs, written as the cause of the GPU-idle and launch-gap rows, and the warnings about GPU idle the
profiler inflates and about outlier steps.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from kit.profile.steps._cpu import gap_where, phase_steps, rank_cpu, us_text, verdict
from kit.stats import is_nan

RUN_COLUMNS = ["run", "label", "rank", "verdict", "mode", "launches", "graph_launches", "memcpy", "syncs",
               "sync_wait_us", "cpu_us", "gpu_busy_us", "idle_launch_us", "idle_sync_us", "idle_queued_us", "step_us",
               "reason"]
PROFILER_IDLE_SHARE = 0.5


def run_table(cpu: list, ranks: tuple[int, int], labels: tuple[str, str]) -> pd.DataFrame:
    """One row per run (A, B): the CPU side (``cpu``: each run's :func:`rank_cpu`) of the compared rank's
    steps and its verdict."""
    rows = []
    for run, (t, g), r, lab in zip(("A", "B"), cpu, ranks, labels):
        v = verdict(t, g)
        rows.append({"run": run, "label": lab, "rank": r, **{c: v.get(c, np.nan) for c in RUN_COLUMNS[3:]}})
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def _run_words(r) -> str:
    if r.verdict == "undecided" and is_nan(r.mode):
        return f"{r.label}: {r.reason}"
    launches = ("1 CUDA graph replayed" if r.mode == "graph" and r.graph_launches == 1 else
                f"{r.graph_launches:g} graph launches" if r.mode == "graph" else
                f"{r.launches:g} kernel launches (eager)" if r.mode == "eager" else
                f"{r.launches:g} kernel launches + {r.graph_launches:g} graph launches" if r.mode == "mixed" else
                "no launch recorded")
    syncs = f"{r.syncs:g} sync(s) blocking {r.sync_wait_us:,.0f} us" if r.syncs else "no sync"
    return f"{r.label}: {launches}, CPU {us_text(r.cpu_us)} us, {syncs} per step -> {r.verdict}"


def cause(runs: pd.DataFrame) -> str:
    """What differs on the CPU side between the two runs, in one sentence (empty when nothing does)."""
    if len(runs) != 2:
        return ""
    a, b = runs.iloc[0], runs.iloc[1]
    said = []
    if a["mode"] != b["mode"] and "graph" in (a["mode"], b["mode"]):
        e, g = (a, b) if b["mode"] == "graph" else (b, a)
        said.append(f"{e['label']} launches {e['launches']:g} kernels per step one by one, {g['label']} replays "
                    f"{'a CUDA graph' if g['graph_launches'] == 1 else f'{g.graph_launches:g} CUDA graphs'}")
    elif a["launches"] != b["launches"] and max(a["launches"], b["launches"]) > 0:
        hi, lo = (a, b) if a["launches"] > b["launches"] else (b, a)
        said.append(f"{hi['label']} launches {hi['launches']:g} kernels per step against {lo['launches']:g} in "
                    f"{lo['label']}")
    if a["syncs"] != b["syncs"]:
        hi, lo = (a, b) if a["syncs"] > b["syncs"] else (b, a)
        said.append(f"{hi['label']} synchronises {hi['syncs']:g} times per step (blocking {hi['sync_wait_us']:,.0f} "
                    f"us) against {lo['syncs']:g} in {lo['label']}")
    if not said:
        return ""
    return "; ".join(said) + f" (CPU {a['cpu_us']:,.0f} -> {b['cpu_us']:,.0f} us per step)"


def cause_lines(runs: pd.DataFrame) -> list[str]:
    """Text lines: the cause sentence, then each run's CPU side and verdict."""
    if runs is None or not len(runs):
        return []
    out = ["the CPU side (cause of GPU idle and launch gaps):"]
    c = cause(runs)
    if c:
        out.append(f"  {c}")
    out += [f"  {_run_words(r)}" for r in runs.itertuples()]
    return out


def compare_side(profiles: tuple, ranks: tuple[int, int], phase: str, labels: tuple[str, str], parts: pd.DataFrame,
                 measured: bool) -> tuple[pd.DataFrame, list[str]]:
    """For ``compare``: the runs' CPU side (:func:`run_table`), written as the ``cause`` of the GPU-idle
    and launch-gap rows of ``parts`` (in place), and the warnings about profiler idle and outlier steps."""
    cpu = [rank_cpu(p, r, phase_steps(p, r, phase)) for p, r in zip(profiles, ranks)]
    runs = run_table(cpu, ranks, labels)
    parts["cause"] = np.where(parts["kind"].isin(["gpu-idle", "launch-gap"]), "; ".join(cause_lines(runs)[1:]).strip(),
                              "")
    w = profiler_warning(parts, runs, measured)
    return runs, ([w] if w else []) + outlier_warning(profiles, ranks, phase, labels, cpu)


def profiler_warning(parts: pd.DataFrame, runs: pd.DataFrame, measured: bool) -> str | None:
    """A warning when the trace-measured difference is mostly GPU idle of an eager run, which the
    profiler inflates (it adds CPU time to every op and launch), and no outside step times were given."""
    if measured:
        return None
    kind, d = parts["kind"].to_numpy(object), parts["delta_us"].to_numpy(float)
    tot = np.flatnonzero(kind == "total")
    if not len(tot) or not d[tot[0]]:
        return None
    delta = float(d[tot[0]])
    idle = float(np.nansum(d[np.isin(kind, ["gpu-idle", "launch-gap"])]))   # pandas' sum: NaN summed as 0
    eager = runs[runs["launches"].fillna(0) > 0]
    if idle / delta < PROFILER_IDLE_SHARE or not len(eager):
        return None
    who = ", ".join(f"{r.label} launches {r.launches:g} kernels per step" for r in eager.itertuples())
    return (f"{100 * idle / delta:.0f}% of the trace-measured difference ({delta:+,.1f} us) is GPU idle and launch "
            f"gaps, and {who} under the profiler, which adds CPU time to every op and launch: part of that idle is "
            f"the profiler's own, so the size (even the sign) of the difference may not hold without it. Give step "
            f"times measured outside the profiler (CUDA events): --step-ms A_MS B_MS, or compare(step_ms=...)")


OUTLIER = 3.0


def outlier_warning(profiles: tuple, ranks: tuple[int, int], phase: str, labels: tuple[str, str],
                    cpu: list) -> list[str]:
    """Steps that took more than ``OUTLIER`` times the median step of their run (first-call warm-up, a
    host hiccup): they move the means the comparison explains; named with their longest CPU-caused gap."""
    out = []
    for p, r, lab, (_, g) in zip(profiles, ranks, labels, cpu):
        st = phase_steps(p, r, phase)
        if len(st) < 3:
            continue
        t = st["wall_us"] + st["gap_before_us"].fillna(0.0)
        med = float(t.median())
        slow = st[t > OUTLIER * med]
        if not len(slow):
            continue
        for s in slow.itertuples():
            gs = g[g["step"] == s.step]
            where = (f"; its longest CPU-caused gap: {gs['idle_us'].iloc[0]:,.0f} us {gap_where(gs.iloc[0])}"
                     if len(gs) else "")
            took = s.wall_us + (0 if is_nan(s.gap_before_us) else s.gap_before_us)
            out.append(f"{lab}: step {s.step} took {took:,.0f} us, "
                       f"{(s.wall_us) / med:.1f}x the median step ({med:,.0f} us) (warm-up or a host hiccup){where}; "
                       f"it moves the mean step time and the noise of this comparison")
    return out
