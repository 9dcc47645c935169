"""Where the gap goes: two runs compared step by step, kernel family by kernel family.

For each run (and rank) the decode steps of ``phase`` are taken from the profile's steps table.
A step's **time** is its GPU span (first kernel start to last kernel end) plus the launch gap
before it (GPU idle between the previous step's last kernel and this step's first one; the first
selected step's gap, which follows another phase, is left out). Per step, exactly::

    step time = sum over categories of kernel time - multi-stream overlap + GPU idle inside the step
                + launch gap before the step

so the per-step means of these parts add up to the mean step time, and their differences add up
to the difference of the two runs' step times. When step times measured outside the profiler are
given (``step_ms``, e.g. CUDA events), the difference to explain is theirs and what the trace does
not account for is the ``unattributed`` row; without them it is the traces' own difference and
``unattributed`` is 0. Each part's noise is two standard errors of the difference of its per-step
means (from the step-to-step spread of both runs); a part smaller than that (or than 0.1% of A's
step time) is "within noise".

Kernels are matched across runs by **family**: the kernel name without ``void``, template
arguments and argument list, so the same kernel with other template parameters matches and kernels
of another backend do not; families found in one run only are listed as such. Where both profiles
link kernels to CPU ops (eager traces: the ``op_top`` and ``module`` columns the reader keeps for
every kernel) the difference is also split by top-level aten op and by ``nn.Module`` class. For
the GPU-idle and launch-gap parts the CPU side of both runs says why (``_cpu.py``: kernel launches
per step, graph or eager, CPU time, syncs, verdict). Only the Profiles are read, never the trace
files: profiles from the cache or parsed on a host compare by op too. Multi-rank runs are compared rank by rank; the headline is the
slowest rank of each run (largest mean step time).
"""
from __future__ import annotations

import html
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kit.errors import TraceError
from kit.profile import _cpu
from kit.profile import _summary as S

__all__ = ["Comparison", "compare", "kernel_family"]

_TEMPLATE = re.compile(r"<[^<>]*>")


def kernel_family(name: str) -> str:
    """``void ns::kernel<T, 4>(args)`` -> ``ns::kernel``: what matches across two runs."""
    s = str(name).strip().replace("(anonymous namespace)::", "")
    if s.startswith("void "):
        s = s[5:]
    for _ in range(8):
        t = _TEMPLATE.sub("", s)
        if t == s:
            break
        s = t
    i = s.find("(")
    if i > 0:
        s = s[:i]
    return s.strip() or str(name)


@dataclass
class _Run:
    rank: int
    steps: pd.DataFrame           # step, wall_us, gap_us
    cat: pd.DataFrame             # step x category kernel time
    fam: pd.DataFrame             # step x family kernel time
    fam_calls: pd.Series          # family -> calls per step
    fam_cat: dict                 # family -> category
    idle: pd.Series               # step -> idle inside
    overlap: pd.Series            # step -> overlap (>= 0)
    by_op: pd.DataFrame | None = None
    by_module: pd.DataFrame | None = None

    @property
    def step_us(self) -> float:
        return float(self.steps["wall_us"].mean() + _mean(self.steps["gap_us"]))

    @property
    def spread_us(self) -> float:
        t = self.steps["wall_us"] + self.steps["gap_us"].fillna(_mean(self.steps["gap_us"]))
        return float(t.std(ddof=1)) if len(t) > 1 else float("nan")


def _mean(s: pd.Series) -> float:
    s = s.dropna()
    return float(s.mean()) if len(s) else 0.0


def _rank_run(prof, rank: int, phase: str, ops: bool) -> _Run:
    st = prof.steps
    st = st[(st["rank"] == rank)].sort_values("start_us")
    if phase != "all":
        sel = st[st["phase"] == phase]
        if not len(sel):
            have = ", ".join(sorted(set(st["phase"].astype(str)))) or "none"
            raise TraceError(f"{', '.join(os.path.basename(f) for f in prof.files)}: rank {rank} has no {phase} step "
                             f"(phases: {have})")
    else:
        sel = st
    sel = sel.dropna(subset=["start_us"])
    idx = list(st["step"])
    prev_selected = set(sel["step"])
    gaps = []
    for s, g in zip(sel["step"], sel["gap_before_us"]):
        i = idx.index(s)
        gaps.append(g if i > 0 and idx[i - 1] in prev_selected else np.nan)
    steps = pd.DataFrame({"step": sel["step"].to_numpy(), "wall_us": sel["wall_us"].to_numpy(float),
                          "gap_us": np.asarray(gaps, float)})
    k = prof.kernels
    k = k[(k["rank"] == rank) & k["step"].isin(steps["step"])].copy()
    names = k["name"].astype(str)
    k["family"] = names.map({n: kernel_family(n) for n in names.unique()})
    k["category"] = k["category"].astype(str)
    steps_idx = pd.Index(steps["step"], name="step")
    cat = k.pivot_table(index="step", columns="category", values="dur_us", aggfunc="sum", fill_value=0.0)
    cat = cat.reindex(steps_idx).fillna(0.0)
    fam = k.pivot_table(index="step", columns="family", values="dur_us", aggfunc="sum", fill_value=0.0)
    fam = fam.reindex(steps_idx).fillna(0.0)
    calls = k.groupby("family")["count"].sum() / max(len(steps), 1)
    fc = k.groupby(["family", "category"]).size().reset_index(name="n").sort_values(["family", "n"], ascending=[True, False])
    fam_cat = dict(zip(fc.drop_duplicates("family")["family"], fc.drop_duplicates("family")["category"]))
    busy = {}
    for s, g in k.groupby("step"):
        b0 = g["start_us"].to_numpy(float)
        busy[s] = S.length(S.union(b0, b0 + g["dur_us"].to_numpy(float)))
    busy_s = pd.Series(busy).reindex(steps_idx).fillna(0.0)
    ksum = cat.sum(axis=1)
    wall = pd.Series(steps["wall_us"].to_numpy(), index=steps_idx)
    run = _Run(rank, steps, cat, fam, calls, fam_cat, (wall - busy_s).clip(lower=0.0), (ksum - busy_s).clip(lower=0.0))
    if ops:
        for key, col in (("by_op", "op_top"), ("by_module", "module")):
            if col not in k:
                continue
            lab = k[col].astype(object)
            if not len(lab) or lab.notna().mean() < 0.5:
                continue
            g = k.assign(label=lab.fillna("(no CPU op)")).groupby("label")["dur_us"].sum() / max(len(steps), 1)
            setattr(run, key, g)
    return run


def _diff_rows(a: pd.DataFrame, b: pd.DataFrame, names) -> list[dict]:
    rows = []
    for n in names:
        sa = a[n] if n in a.columns else pd.Series(0.0, index=a.index)
        sb = b[n] if n in b.columns else pd.Series(0.0, index=b.index)
        rows.append(_row(n, sa, sb))
    return rows


def _row(name: str, sa: pd.Series, sb: pd.Series) -> dict:
    sa, sb = sa.dropna(), sb.dropna()
    ma = float(sa.mean()) if len(sa) else 0.0
    mb = float(sb.mean()) if len(sb) else 0.0
    va = float(sa.var(ddof=1)) / len(sa) if len(sa) > 1 else 0.0
    vb = float(sb.var(ddof=1)) / len(sb) if len(sb) > 1 else 0.0
    noise = 2.0 * math.sqrt(va + vb)
    return {"part": name, "a_us": ma, "b_us": mb, "delta_us": mb - ma, "noise_us": noise}


@dataclass(eq=False)
class Comparison:
    """Run A against run B: per-step times, the difference split into parts that add up to it.

    ``parts``: part, kind (category / overlap / gpu-idle / launch-gap / unattributed), a_us, b_us
    (per step), delta_us (B - A), noise_us, beyond_noise, share (of the difference), cause (the CPU
    side of both runs, on the gpu-idle and launch-gap rows).
    ``families``: family, category, presence (both / only A / only B), a_us, b_us, delta_us, calls
    per step in each, noise_us, beyond_noise. ``only_in_one``: the families of one run only.
    ``by_op`` / ``by_module``: per-step time by top-level aten op / nn.Module (None unless both
    traces link kernels to CPU ops; modules by class) and ``by_module_instances`` (per class and layer).
    ``cpu``: one row per run (``_cpu.run_table``: launches per step, graph or eager, CPU time, syncs,
    GPU idle by cause, verdict); ``cause``: what differs there, in one sentence. ``per_rank``: one row
    per rank. ``warnings``: what the numbers cannot show (a trace-only difference made of GPU idle that
    the profiler inflates, steps far slower than the median).
    """

    labels: tuple[str, str]
    phase: str
    files: tuple[list[str], list[str]]
    ranks: tuple[int, int]                  # the ranks compared in the headline (slowest of each run)
    steps: tuple[int, int]
    step_us: tuple[float, float]            # traces' mean step time
    spread_us: tuple[float, float]          # step-to-step standard deviation
    measured_ms: tuple[float, float] | None
    measured_source: str | None
    delta_us: float                         # the difference explained (measured if given, else traces')
    parts: pd.DataFrame
    families: pd.DataFrame
    per_rank: pd.DataFrame
    by_op: pd.DataFrame | None = None
    by_module: pd.DataFrame | None = None
    warnings: list[str] = field(default_factory=list)
    cpu: pd.DataFrame | None = None                  # one row per run: the CPU side and its verdict (_cpu.py)
    by_module_instances: pd.DataFrame | None = None  # by_module's drill-down: per class and layer index

    @property
    def cause(self) -> str:
        """What differs on the CPU side (launches, graph or eager, syncs), in one sentence."""
        return _cpu.cause(self.cpu) if self.cpu is not None else ""

    @property
    def only_in_one(self) -> pd.DataFrame:
        return self.families[self.families["presence"] != "both"].reset_index(drop=True)

    @property
    def noise_us(self) -> float:
        """Two standard errors of the step-time difference."""
        row = self.parts[self.parts["kind"] == "total"]
        return float(row["noise_us"].iloc[0]) if len(row) else float("nan")

    def share(self, part: str) -> float:
        """Share of the difference in one part (e.g. a category): delta_us / the difference."""
        row = self.parts[self.parts["part"] == part]
        return float(row["delta_us"].iloc[0]) / self.delta_us if len(row) and self.delta_us else 0.0

    def to_dict(self) -> dict[str, Any]:
        def clean(df):
            if df is None:
                return None
            return [{k: (None if isinstance(v, float) and math.isnan(v) else
                         round(v, 6) if isinstance(v, float) else v) for k, v in r.items()} for r in df.to_dict("records")]
        return {"labels": list(self.labels), "phase": self.phase, "files": [list(map(os.path.basename, f)) for f in self.files],
                "ranks": list(self.ranks), "steps": list(self.steps), "step_us": [round(x, 6) for x in self.step_us],
                "spread_us": [round(x, 6) for x in self.spread_us],
                "measured_ms": list(self.measured_ms) if self.measured_ms else None,
                "measured_source": self.measured_source, "delta_us": round(self.delta_us, 6),
                "parts": clean(self.parts), "families": clean(self.families), "per_rank": clean(self.per_rank),
                "by_op": clean(self.by_op), "by_module": clean(self.by_module),
                "by_module_instances": clean(self.by_module_instances), "cpu": clean(self.cpu), "cause": self.cause,
                "warnings": list(self.warnings)}

    def _head(self) -> list[str]:
        a, b = self.labels
        out = [f"Comparison({a} -> {b}, phase {self.phase}, ranks {self.ranks[0]}/{self.ranks[1]}, steps "
               f"{self.steps[0]}/{self.steps[1]})",
               f"step time (trace): {a} {self.step_us[0]:,.1f} us (spread {self.spread_us[0]:,.1f}), {b} "
               f"{self.step_us[1]:,.1f} us (spread {self.spread_us[1]:,.1f})"]
        if self.measured_ms:
            out.append(f"step time ({self.measured_source or 'given by the caller, source not stated'}): {a} {self.measured_ms[0] * 1e3:,.1f} us, "
                       f"{b} {self.measured_ms[1] * 1e3:,.1f} us")
        out.append(f"difference to explain: {self.delta_us:+,.1f} us per step (noise +-{self.noise_us:,.1f} us)")
        return out

    def __repr__(self) -> str:
        lines = self._head()
        lines.append(f"{'part':<24}{'A us':>10}{'B us':>10}{'delta':>10}{'noise':>8}{'share':>8}  verdict")
        for r in self.parts.itertuples():
            if r.kind == "total":
                continue
            lines.append(f"{r.part:<24}{r.a_us:>10.1f}{r.b_us:>10.1f}{r.delta_us:>+10.1f}{r.noise_us:>8.1f}"
                         f"{100 * r.share:>7.1f}%  {'beyond noise' if r.beyond_noise else 'within noise'}")
        lines += _cpu.cause_lines(self.cpu)
        if self.by_module is not None and len(self.by_module):
            lines.append("by nn.Module class (kernel time per step; by_module_instances: per layer):")
            lines += [f"  {str(r.module)[:40]:<40}{r.a_us:>10.1f}{r.b_us:>10.1f}{r.delta_us:>+10.1f}"
                      for r in self.by_module.head(5).itertuples()]
        one = self.only_in_one
        if len(one):
            lines.append("kernel families in one run only:")
            for r in one.itertuples():
                us = r.a_us if r.presence == "only A" else r.b_us
                lines.append(f"  {r.presence:<7} {r.category:<16}{us:>10.1f} us/step  {r.family[:80]}")
        if len(self.per_rank) > 1:
            for r in self.per_rank.itertuples():
                lines.append(f"rank {r.rank}: {r.a_us:,.1f} -> {r.b_us:,.1f} us ({r.delta_us:+,.1f})")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        def tr(cells, tag="td"):
            return "<tr>" + "".join(f"<{tag}>{html.escape(str(c))}</{tag}>" for c in cells) + "</tr>"
        rows = "".join(tr([r.part, f"{r.a_us:,.1f}", f"{r.b_us:,.1f}", f"{r.delta_us:+,.1f}", f"{r.noise_us:,.1f}",
                           f"{100 * r.share:.1f}%", "beyond noise" if r.beyond_noise else "within noise"])
                       for r in self.parts.itertuples() if r.kind != "total")
        one = self.only_in_one
        only = "".join(tr([r.presence, r.category, f"{(r.a_us if r.presence == 'only A' else r.b_us):,.1f}", r.family])
                       for r in one.itertuples())
        head = "<br>".join(html.escape(x) for x in self._head())
        warn = "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings)
        return (f"<div><b>{head}</b><table><thead>"
                + tr(["part", "A us/step", "B us/step", "delta", "noise", "share", "verdict"], "th")
                + f"</thead><tbody>{rows}</tbody></table>"
                + (f"<p>Kernel families in one run only:</p><table>{tr(['run', 'category', 'us/step', 'family'], 'th')}"
                   f"{only}</table>" if len(one) else "")
                + "".join(f"<p>{html.escape(x)}</p>" for x in _cpu.cause_lines(self.cpu))
                + (f"<p>Warnings:</p><ul>{warn}</ul>" if warn else "") + "</div>")


def _as_profile(x):
    from kit.profile._profile import Profile, load

    if isinstance(x, Profile):
        return x
    return load(x)


def _module_layers(prof_a, prof_b, ra: _Run, rb: _Run, classes: pd.DataFrame | None) -> pd.DataFrame | None:
    """``by_module``'s drill-down: per module class and layer index (-1: outside the decoder layers),
    per-step kernel time in each run, in the order of the class rows."""
    if classes is None:
        return None
    side = []
    for prof, run in ((prof_a, ra), (prof_b, rb)):
        k = prof.kernels
        k = k[(k["rank"] == run.rank) & k["step"].isin(run.steps["step"])]
        g = (k.assign(module=k["module"].astype(object).fillna("(no CPU op)"))
             .groupby(["module", "layer"])["dur_us"].sum() / max(len(run.steps), 1))
        side.append(g)
    t = pd.DataFrame({"a_us": side[0], "b_us": side[1]}).fillna(0.0)
    t["delta_us"] = t["b_us"] - t["a_us"]
    t = t.reset_index()
    order = {m: i for i, m in enumerate(classes["module"])}
    t["_k"] = t["module"].map(order).fillna(len(order))
    t = t.sort_values(["_k", "layer"], kind="stable").drop(columns="_k")
    return t.reset_index(drop=True)


def compare(a, b, *, phase: str = "decode", labels: tuple[str, str] | None = None,
            step_ms: tuple[float, float] | None = None, measured_source: str | None = None,
            ops: bool = True) -> Comparison:
    """Compare run ``a`` with run ``b`` (Profiles, or trace paths to load): see the module docstring.

    ``step_ms``: per-step times of A and B measured outside the profiler (ms); the difference to
    explain is then theirs and the trace's shortfall is the ``unattributed`` row. ``ops``: also
    split by aten op / nn.Module where both profiles link kernels to CPU ops (from the Profiles'
    kernel tables; the trace files are not read again).
    """
    pa, pb = _as_profile(a), _as_profile(b)
    la, lb = labels or ("A", "B")
    warnings = [f"{la}: {w}" for w in pa.warnings] + [f"{lb}: {w}" for w in pb.warnings]
    if not pa.ranks or not pb.ranks:
        raise TraceError("compare: a run without ranks/kernels")
    runs_a = {r: _rank_run(pa, r, phase, ops) for r in pa.ranks}
    runs_b = {r: _rank_run(pb, r, phase, ops) for r in pb.ranks}
    if sorted(runs_a) != sorted(runs_b):
        warnings.append(f"ranks differ ({sorted(runs_a)} vs {sorted(runs_b)}): rank by rank only where both have it")
    per_rank = pd.DataFrame([{"rank": r, "a_us": runs_a[r].step_us, "b_us": runs_b[r].step_us,
                              "delta_us": runs_b[r].step_us - runs_a[r].step_us}
                             for r in sorted(set(runs_a) & set(runs_b))], columns=["rank", "a_us", "b_us", "delta_us"])
    ra = max(runs_a.values(), key=lambda x: x.step_us)
    rb = max(runs_b.values(), key=lambda x: x.step_us)
    # parts
    cats = [c for c in list(dict.fromkeys(list(ra.cat.columns) + list(rb.cat.columns)))]
    rows = []
    for r in _diff_rows(ra.cat, rb.cat, cats):
        rows.append({**r, "kind": "category"})
    rows.append({**_row("multi-stream overlap", -ra.overlap, -rb.overlap), "kind": "overlap"})
    rows.append({**_row("GPU idle in step", ra.idle, rb.idle), "kind": "gpu-idle"})
    rows.append({**_row("launch gap", ra.steps["gap_us"], rb.steps["gap_us"]), "kind": "launch-gap"})
    ta = ra.steps["wall_us"] + ra.steps["gap_us"].fillna(_mean(ra.steps["gap_us"]))
    tb = rb.steps["wall_us"] + rb.steps["gap_us"].fillna(_mean(rb.steps["gap_us"]))
    total = {**_row("step time", ta, tb), "kind": "total"}
    total.update(a_us=ra.step_us, b_us=rb.step_us, delta_us=rb.step_us - ra.step_us)
    trace_delta = total["delta_us"]
    if step_ms is not None:
        ma, mb = float(step_ms[0]), float(step_ms[1])
        delta = (mb - ma) * 1e3
        un = {"part": "unattributed", "a_us": ma * 1e3 - ra.step_us, "b_us": mb * 1e3 - rb.step_us,
              "delta_us": delta - trace_delta, "noise_us": total["noise_us"], "kind": "unattributed"}
    else:
        ma = mb = None
        delta = trace_delta
        un = {"part": "unattributed", "a_us": 0.0, "b_us": 0.0, "delta_us": 0.0, "noise_us": 0.0,
              "kind": "unattributed"}
    rows.append(un)
    parts = pd.DataFrame(rows)
    parts = parts[(parts["kind"] != "category") | (parts["a_us"] != 0) | (parts["b_us"] != 0)]
    parts = pd.concat([parts, pd.DataFrame([total])], ignore_index=True)
    # beyond noise: larger than two standard errors and than 0.1% of A's step (timer resolution, rounding)
    floor_us = 1e-3 * ra.step_us
    parts["beyond_noise"] = parts["delta_us"].abs() > np.maximum(parts["noise_us"], floor_us)
    parts["share"] = parts["delta_us"] / delta if delta else np.nan
    parts = parts[["part", "kind", "a_us", "b_us", "delta_us", "noise_us", "beyond_noise", "share"]]
    # families
    fams = sorted(set(ra.fam.columns) | set(rb.fam.columns))
    frows = []
    for r in _diff_rows(ra.fam, rb.fam, fams):
        f = r.pop("part")
        in_a, in_b = f in ra.fam.columns, f in rb.fam.columns
        frows.append({"family": f, "category": ra.fam_cat.get(f) or rb.fam_cat.get(f),
                      "presence": "both" if in_a and in_b else "only A" if in_a else "only B", **r,
                      "a_calls": float(ra.fam_calls.get(f, 0.0)), "b_calls": float(rb.fam_calls.get(f, 0.0))})
    families = pd.DataFrame(frows, columns=["family", "category", "presence", "a_us", "b_us", "delta_us", "noise_us",
                                            "a_calls", "b_calls"])
    families["beyond_noise"] = families["delta_us"].abs() > np.maximum(families["noise_us"], floor_us)
    families = families.reindex(families["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
    families = families.reset_index(drop=True)
    by_op = by_module = None
    for key in ("by_op", "by_module"):
        ga, gb = getattr(ra, key), getattr(rb, key)
        if ga is not None and gb is not None:
            t = pd.DataFrame({"a_us": ga, "b_us": gb}).fillna(0.0)
            t["delta_us"] = t["b_us"] - t["a_us"]
            t = t.reindex(t["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
            t = t.rename_axis("op" if key == "by_op" else "module").reset_index()
            if key == "by_op":
                by_op = t
            else:
                by_module = t
    by_module_instances = _module_layers(pa, pb, ra, rb, by_module)
    if ops and (by_op is None):
        warnings.append("no by-op split: at least one trace does not link its kernels to CPU ops (CUDA-graph replay, "
                        "or recorded without CPU activity)")
    cpu, cpu_warnings = _cpu.compare_side((pa, pb), (ra.rank, rb.rank), phase, (la, lb), parts, step_ms is not None)
    warnings += cpu_warnings
    if abs(delta) < total["noise_us"]:
        warnings.append(f"the step-time difference ({delta:+,.1f} us) is within the step-to-step noise "
                        f"(+-{total['noise_us']:,.1f} us): no part of it is a finding")
    if step_ms is not None and delta and abs(un["delta_us"]) > 0.05 * abs(delta):
        warnings.append(f"the traces account for {trace_delta:+,.1f} of the measured {delta:+,.1f} us: "
                        f"{un['delta_us']:+,.1f} us unattributed (profiler overhead, or time outside the GPU steps)")
    return Comparison((la, lb), phase, (list(pa.files), list(pb.files)), (ra.rank, rb.rank),
                      (len(ra.steps), len(rb.steps)), (ra.step_us, rb.step_us), (ra.spread_us, rb.spread_us),
                      (ma, mb) if step_ms is not None else None, measured_source, delta, parts, families, per_rank,
                      by_op, by_module, warnings, cpu, by_module_instances)
