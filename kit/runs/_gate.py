"""The regression gate: a run against a named baseline, judged on what the traces can measure.

``kit.profile.compare`` splits the step-time difference into parts (means, two standard errors). A gate
needs more than that: one stalled step must not hide a slowdown of every step in its own noise, and a
run whose steps are launch-bound under the profiler must not pass on a wall time the profiler decides.
So the gate reads each run's steps itself (the busiest rank, ``phase``) and compares **medians** of the
per-step distributions, the noise being two standard errors of the difference of medians (each from
the median absolute deviation: 1.2533 x 1.4826 x MAD / sqrt(n)); one stall moves neither.

What it judges on (``basis``):

- ``wall``: both runs GPU-bound (or undecided) under the profiler: the step time (start of a step's
  GPU work to the next one's), and the kernel time of each category;
- ``kernel``: either run launch- or host-bound under the profiler (its wall time is the profiler's own
  CPU overhead, whose sign may not hold without it): kernel time per step, per category, kernel
  launches per step and host syncs per step; the profiled step time is shown but does not decide;
- ``measured``: step times measured outside the profiler were given (``step_ms``): their difference
  decides, against the threshold (no spread known); kernel time, launches and syncs are shown beside.

A check **regressed** when it is worse by more than its noise and ``threshold`` of the baseline's value
(default 2%; one more launch or sync per step at least); the run regressed when any deciding check
did (on the ``kernel`` basis: and no other whole figure improved, else the checks
disagree and the gate cannot weigh them under the profiler: inconclusive). It is **inconclusive**
(exit :data:`EXIT_INCONCLUSIVE` with ``--fail-on-regression``) when the gate cannot decide: a run with
fewer than :data:`MIN_STEPS` steps, a deciding check worse but inside a noise larger than the threshold
(a regression of the threshold's size cannot be ruled out), those disagreeing checks, or, on the
``kernel`` basis, a profiled step time that grew beyond noise and threshold while kernel time,
launches and syncs did not (measure the step time without the profiler: ``--step-ms``). A gate that
cannot decide never passes. Otherwise **improved** when a deciding check improved by as much, else it
**passes**. Where the time went is ``compare``'s parts and kernel families beyond their own noise.
A baseline whose inputs are gone or changed (sha256 recorded with it) is an error naming the file,
never a silent pass.

:func:`profile_gate` is what ``kit profile compare --baseline NAME`` calls; :meth:`Gate.html` writes the
one-page HTML diff.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kit import profile, stats
from kit.errors import UsageError
from kit.runs._record import file_hash
from kit.runs._share import baseline as get_baseline
from kit.stats import is_nan
from kit.util import call_settings, frame_records, recorded, write_atomic

VERDICTS = ("regression", "improvement", "pass", "inconclusive")
EXIT_REGRESSION = 3
EXIT_INCONCLUSIVE = 4     # --fail-on-regression and the gate could not decide (never a pass)
MIN_STEPS = 5             # fewer steps in a run: no spread to judge a difference against
_MED_SE = 1.2533 * 1.4826  # standard error of a median from the MAD (normal steps): x MAD / sqrt(n)
_CHECKS = ["check", "unit", "baseline_value", "value", "delta", "noise", "threshold", "verdict", "decides"]


class Verdict:
    """What both gates (this one and ``_bench_gate.BenchGate``) answer from their ``verdict``."""

    verdict: str

    @property
    def regression(self) -> bool:
        return self.verdict == "regression"

    def exit_code(self, fail_on_regression: bool = True) -> int:
        """With ``fail_on_regression``: 3 on a regression, 4 when the gate could not decide; else 0."""
        if not fail_on_regression:
            return 0
        return {"regression": EXIT_REGRESSION, "inconclusive": EXIT_INCONCLUSIVE}.get(self.verdict, 0)


@dataclass(eq=False)
class Gate(Verdict):
    """A run against a baseline: ``verdict`` (regression / improvement / pass), the step times, the
    difference with its noise and the threshold, and ``where``: the parts and kernel families that moved
    beyond their noise, largest first. ``comparison`` is the full ``kit.profile.Comparison``."""

    baseline: str
    baseline_run: str
    verdict: str
    step_us: tuple[float, float]
    delta_us: float
    noise_us: float
    threshold_us: float
    where: Any
    families: Any
    comparison: Any = field(repr=False)
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    basis: str = "wall"
    checks: Any = None
    reason: str = ""

    def headline(self) -> str:
        a, b = self.step_us
        rel = f"{self.delta_us / a:+.1%}" if a else "n/a"
        noise = f"+-{self.noise_us:,.1f} us" if math.isfinite(self.noise_us) else "unknown"
        what = {"wall": "step", "kernel": "step (profiled)", "measured": "step (measured)"}[self.basis]
        return (f"{self.verdict.upper()}: {what} {b:,.1f} us vs baseline {self.baseline} {a:,.1f} us "
                f"({self.delta_us:+,.1f} us, {rel}; noise {noise}, threshold {self.threshold_us:,.1f} us)")

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this gate: the difference, its noise, the threshold, the verdict."""
        figs = [("delta_us", self.delta_us), ("noise_us", self.noise_us), ("threshold_us", self.threshold_us),
                ("step_us", self.step_us[0], self.baseline), ("step_us", self.step_us[1], "this run")]
        return {"inputs": [("b", f) for f in self.files], "settings": call_settings(args), "figures": figs,
                "facts": {"verdict": self.verdict, "baseline": self.baseline, "baseline_run": self.baseline_run},
                "tables": {"where": self.where, "parts": self.comparison.parts}, "warnings": list(self.warnings),
                "label": f"against {self.baseline}"}

    def __repr__(self) -> str:
        lines = [self.headline(),
                 f"  judged on {_BASIS_WORDS[self.basis]}" + (f": {self.reason}" if self.reason else "")]
        if self.checks is not None:
            for r in self.checks.itertuples():
                noise = "unknown" if is_nan(r.noise) else f"+-{r.noise:,.1f}"
                lines.append(f"  {'*' if r.decides else ' '} {r.check:<22} {r.baseline_value:>10,.1f} -> "
                             f"{r.value:>10,.1f} {r.unit:<6} ({r.delta:+,.1f}; noise {noise}, "
                             f"threshold {r.threshold:,.1f}) {r.verdict}")
        for r in self.where.itertuples():
            lines.append(f"  {r.what:<10} {str(r.name)[:60]:<62} {r.delta_us:+10,.1f} us  (noise +-{r.noise_us:,.1f})")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "baseline_run": self.baseline_run, "verdict": self.verdict,
                "step_us": list(self.step_us), "delta_us": self.delta_us,
                "noise_us": self.noise_us if math.isfinite(self.noise_us) else None,   # measured: no spread known
                "threshold_us": self.threshold_us, "basis": self.basis, "reason": self.reason,
                "checks": frame_records(self.checks) if self.checks is not None else [],
                "where": frame_records(self.where), "files": self.files, "warnings": self.warnings}

    def html(self, path: str | Path | None = None) -> str:
        """The one-page HTML diff (self-contained: no script, no network); written to ``path`` if given."""
        page = _page(self)
        if path is not None:
            write_atomic(path, page)
        return page


def _where(cmp) -> Any:
    parts = cmp.parts[(cmp.parts["beyond_noise"]) & (cmp.parts["kind"] != "total")]
    fam = cmp.families[cmp.families["beyond_noise"]] if "beyond_noise" in cmp.families else cmp.families.iloc[:0]
    rows = [{"what": "part", "name": r.part, "a_us": r.a_us, "b_us": r.b_us, "delta_us": r.delta_us,
             "noise_us": r.noise_us} for r in parts.itertuples()]
    rows += [{"what": "family", "name": r.family, "a_us": r.a_us, "b_us": r.b_us, "delta_us": r.delta_us,
              "noise_us": r.noise_us} for r in fam.itertuples()]
    df = pd.DataFrame(rows, columns=["what", "name", "a_us", "b_us", "delta_us", "noise_us"])
    return df.reindex(df["delta_us"].abs().sort_values(ascending=False).index).reset_index(drop=True)


_BASIS_WORDS = {"wall": "the step time and kernel time per category (GPU-bound under the profiler)",
                "kernel": "kernel time, launches and syncs per step (launch- or host-bound under the profiler: "
                          "its wall time is the profiler's)",
                "measured": "the step times measured outside the profiler (--step-ms); kernel time, launches and syncs "
                            "shown beside"}


def step_series(profile, phase: str = "decode") -> Any:
    """Per step of ``profile``'s busiest rank in ``phase`` (all steps when none is marked so): ``step_us``
    (start of the step's GPU work to the next step's; the last step its GPU span plus the median gap),
    ``kernel_us`` (its kernels' time) and one column per kernel category (``cat:<name>``)."""
    k, steps = profile.kernels, profile.steps
    if not len(k) or not len(steps):
        return pd.DataFrame(columns=["step", "step_us", "kernel_us"])
    rank = int(k.groupby("rank")["dur_us"].sum().idxmax())
    k, steps = k[k["rank"] == rank], steps[steps["rank"] == rank]
    if phase != "all" and (steps["phase"] == phase).any():
        steps = steps[steps["phase"] == phase]
    k = k[k["step"].isin(steps["step"])]
    first = k.groupby("step")["start_us"].min()
    end = (k["start_us"] + k["dur_us"]).groupby(k["step"]).max()
    order = first.sort_values().index
    starts = first.loc[order].to_numpy(float)
    spans = (end.loc[order] - first.loc[order]).to_numpy(float)
    periods = np.diff(starts)
    gaps = periods - spans[:-1] if len(periods) else np.array([])
    last = spans[-1] + (float(np.median(gaps)) if len(gaps) else 0.0) if len(spans) else float("nan")
    out = pd.DataFrame({"step": order, "step_us": np.concatenate([periods, [last]]) if len(spans) else []})
    out["kernel_us"] = k.groupby("step")["dur_us"].sum().reindex(order).to_numpy(float)
    cats = k.groupby([k["step"], k["category"].astype(str)])["dur_us"].sum().unstack(fill_value=0.0)
    for c in cats.columns:
        out[f"cat:{c}"] = cats[c].reindex(order, fill_value=0.0).to_numpy(float)
    return out.reset_index(drop=True)


def median_difference(a, b) -> tuple[float, float, float, float]:
    """(median of ``a``, of ``b``, their difference, its noise: two standard errors of the difference of
    medians from each side's MAD); NaN noise with fewer than two values on a side."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if not len(a) or not len(b):
        return float("nan"), float("nan"), float("nan"), float("nan")
    ma, mb = float(np.median(a)), float(np.median(b))

    def se(x, m):
        return _MED_SE * float(np.median(np.abs(x - m))) / math.sqrt(len(x)) if len(x) > 1 else float("nan")

    return ma, mb, mb - ma, stats.noise(se(a, ma) ** 2, se(b, mb) ** 2)


def _judge(check: str, unit: str, a: float, b: float, noise: float, bar: float, decides: bool) -> dict:
    """One check's row: worse by more than its noise and the bar -> regression; better -> improvement; worse but
    inside a noise wider than the bar -> undecided (a regression of the bar's size cannot be ruled out)."""
    delta = b - a
    known = not is_nan(noise)
    edge = max(noise if known else 0.0, bar)
    if delta > edge:
        verdict = "regression"
    elif -delta > edge:
        verdict = "improvement"
    elif known and noise > bar and delta > 0:
        verdict = "undecided"
    else:
        verdict = "pass"
    return dict(zip(_CHECKS, (check, unit, a, b, delta, noise, bar, verdict, decides)))


def _checks(cmp, sa, sb, threshold: float, basis: str) -> list[dict]:
    """The gate's checks (module docstring): step time, kernel time and each category's, launches, syncs."""
    rows = []
    a, b, d, noise = median_difference(sa["step_us"], sb["step_us"])
    rows.append(_judge("step time (profiled)", "us", a, b, noise, threshold * a, basis == "wall"))
    if cmp.measured_ms:
        ma, mb = cmp.measured_ms[0] * 1e3, cmp.measured_ms[1] * 1e3
        rows.append(_judge("step time (measured)", "us", ma, mb, float("nan"), threshold * ma, True))
    ka, kb, _, knoise = median_difference(sa["kernel_us"], sb["kernel_us"])
    kbar = threshold * (ka if basis != "wall" else a)
    gpu = basis != "measured"     # measured step times given: they decide; the trace's figures are shown
    rows.append(_judge("kernel time", "us", ka, kb, knoise, kbar, gpu))
    for c in sorted({c for c in list(sa.columns) + list(sb.columns) if c.startswith("cat:")}):
        ca, cb, _, cnoise = median_difference(sa[c] if c in sa else [0.0] * len(sa),
                                              sb[c] if c in sb else [0.0] * len(sb))
        row = _judge(f"kernel time: {c[4:]}", "us", ca, cb, cnoise, kbar, gpu)
        if row["verdict"] != "pass":       # categories only where they moved: the table stays short
            rows.append(row)
    if cmp.cpu is not None and len(cmp.cpu) == 2:
        ca, cb = cmp.cpu.iloc[0], cmp.cpu.iloc[1]
        la, lb = (float(x["launches"]) + float(x["graph_launches"]) for x in (ca, cb))
        if not (is_nan(la) or is_nan(lb)):
            rows.append(_judge("launches per step", "calls", la, lb, 0.0, max(0.5, threshold * la), gpu))
        if not (is_nan(ca["syncs"]) or is_nan(cb["syncs"])):
            rows.append(_judge("syncs per step", "calls", float(ca["syncs"]), float(cb["syncs"]), 0.0, 0.5, gpu))
    return rows


def _basis(cmp) -> str:
    if cmp.measured_ms:
        return "measured"
    verdicts = set(cmp.cpu["verdict"]) if cmp.cpu is not None and len(cmp.cpu) else set()
    return "kernel" if verdicts & {"launch-bound", "host-bound"} else "wall"


def _decide(checks, basis: str, steps: tuple[int, int]) -> tuple[str, str]:
    """The verdict and, where the gate could not decide, why."""
    deciding = checks[checks["decides"]]
    worse = deciding[deciding["verdict"] == "regression"]
    top = deciding[~deciding["check"].str.startswith("kernel time: ")]   # whole figures, not one category
    worse_top, better = top[top["verdict"] == "regression"], top[top["verdict"] == "improvement"]
    if len(worse_top) and len(better) and basis == "kernel":
        # e.g. eager -> CUDA graph: kernel time +2% (the graph's input copies), launches 136 -> 1 per step; the
        # profiled wall time cannot weigh them against each other
        w, b = worse_top.iloc[0], better.iloc[0]
        return "inconclusive", (f"{w['check']} is worse ({w['delta']:+,.1f} {w['unit']}) while {b['check']} is better "
                                f"({b['delta']:+,.1f} {b['unit']}), and the profiled wall time cannot weigh them: give "
                                "step times measured outside the profiler (--step-ms BASELINE_MS THIS_MS)")
    if len(worse):
        return "regression", ""
    if min(steps) < MIN_STEPS:
        return "inconclusive", (f"{min(steps)} step(s) in a run: at least {MIN_STEPS} are needed to judge a "
                                "difference against the step-to-step spread")
    open_ = deciding[deciding["verdict"] == "undecided"]
    kernel = checks[checks["check"] == "kernel time"]
    if len(kernel) and kernel["verdict"].iloc[0] != "undecided" and basis != "measured":
        # a wall time too spread to resolve the threshold is decided by the kernel time, launches and syncs,
        # which are measured within it (the gate's warning says so)
        open_ = open_[open_["check"] != "step time (profiled)"]
    if len(open_):
        r = open_.iloc[0]
        return "inconclusive", (f"{r['check']} is {r['delta']:+,.1f} {r['unit']} worse, inside a noise of "
                                f"+-{r['noise']:,.1f} wider than the threshold ({r['threshold']:,.1f}): a regression "
                                "of the threshold's size cannot be ruled out (more steps would decide)")
    wall = checks[checks["check"] == "step time (profiled)"].iloc[0]
    if basis == "kernel" and wall["verdict"] == "regression":
        return "inconclusive", (f"the profiled step time grew {wall['delta']:+,.1f} us beyond noise and threshold "
                                "while kernel time, launches and syncs per step did not, and the runs are launch-bound "
                                "under the profiler (its wall time is the profiler's): give step times measured "
                                "outside the profiler (--step-ms BASELINE_MS THIS_MS) to decide")
    return ("improvement" if (deciding["verdict"] == "improvement").any() else "pass"), ""


def gate(cmp, profiles: tuple, *, baseline: str = "A", baseline_run: str = "", threshold: float = 0.02) -> Gate:
    """The verdict on ``cmp`` (a ``kit.profile.Comparison`` of the baseline A against the run B), whose two
    ``profiles`` (A, B) give the per-step distributions (:func:`step_series`)."""
    if not 0 <= threshold < 1:
        raise UsageError(f"gate: threshold is a fraction of the baseline's step time (0-1), not {threshold!r}")
    series = tuple(step_series(p, cmp.phase) for p in profiles)
    basis = _basis(cmp)
    checks = pd.DataFrame(_checks(cmp, series[0], series[1], threshold, basis), columns=_CHECKS)
    verdict, reason = _decide(checks, basis, (len(series[0]), len(series[1])))
    said = "step time (measured)" if basis == "measured" else "step time (profiled)"
    head = checks[checks["check"] == said].iloc[0]
    a, b, delta, noise, bar = (float(head[c]) for c in ("baseline_value", "value", "delta", "noise", "threshold"))
    warnings = list(cmp.warnings)
    wall = checks[checks["check"] == "step time (profiled)"].iloc[0]
    if basis == "wall" and wall["verdict"] == "undecided" and verdict != "inconclusive":
        warnings.append(f"the step time's noise (+-{wall['noise']:,.1f} us) is wider than the threshold "
                        f"({wall['threshold']:,.1f} us): the verdict rests on kernel time, launches and syncs per "
                        "step, whose noise is within it")
    if basis == "kernel":
        warnings.append("launch- or host-bound under the profiler: the gate judged kernel time, launches and syncs per "
                        "step, not the profiled step time")
    fams = cmp.families.reindex(cmp.families["delta_us"].abs().sort_values(ascending=False).index).head(20)
    return Gate(baseline, baseline_run, verdict, (a, b), delta, noise, bar, _where(cmp), fams, cmp,
                [f for fs in cmp.files for f in fs][len(cmp.files[0]):], warnings, basis, checks, reason)


def baseline_inputs(name: str, *, stores=None) -> tuple[dict, list[str]]:
    """The baseline run and its trace files (the run's own, or run B's of a comparison), each checked
    against the sha256 recorded with it."""
    run = get_baseline(name, stores=stores)
    ins = run["inputs"] or []
    picked = [i for i in ins if i["role"] == "b"] or [i for i in ins if i["role"] in ("", None)]
    if not picked:
        raise UsageError(f"baseline {name}: run {run['run_id']} ({run['kind']}) names no input files to compare with")
    paths = []
    for i in picked:
        p = Path(i["path"])
        if i["host"] != "local":
            paths.append(f"{i['host']}:{i['path']}")
            continue
        if not p.is_file():
            raise UsageError(f"baseline {name}: {p}: recorded with run {run['run_id']} but no longer there")
        if i["sha256"] and file_hash(p) != i["sha256"]:
            raise UsageError(f"baseline {name}: {p}: changed since run {run['run_id']} recorded it (sha256 differs)")
        paths.append(str(p))
    return run, paths


@recorded("gate")
def profile_gate(baseline: str, traces, *, phase: str = "decode", threshold: float = 0.02, cache: bool = True,
                 stores=None, label: str = "this run", step_ms: tuple[float, float] | None = None) -> Gate:
    """Compare the run of ``traces`` with the baseline named ``baseline`` (``kit runs baseline``) and decide:
    regression, improvement, pass or inconclusive (see the module docstring). ``step_ms``: the baseline's and
    this run's step times measured outside the profiler (ms), the step time the gate then judges."""
    run, paths = baseline_inputs(baseline, stores=stores)
    pa = profile.load(paths, cache=cache)
    pb = profile.load(list(traces) if not isinstance(traces, (str, Path)) else [str(traces)], cache=cache)
    cmp = profile.compare(pa, pb, phase=phase, labels=(baseline, label), step_ms=step_ms,
                  measured_source="--step-ms" if step_ms else None)
    return gate(cmp, (pa, pb), baseline=baseline, baseline_run=run["run_id"], threshold=threshold)


_CSS = ("body{font:14px system-ui,sans-serif;max-width:1100px;margin:24px auto;color:#222}"
        "h1{font-size:20px}.v{padding:10px 14px;border-radius:6px;font-weight:600;margin:12px 0}"
        ".regression{background:#fde2e1;color:#8a1c14}.improvement{background:#e0f3e4;color:#1d6b30}"
        ".pass{background:#eef1f5;color:#333}.inconclusive{background:#fff4d6;color:#6b4e00}"
        "table{border-collapse:collapse;width:100%;margin:8px 0 20px;table-layout:fixed}"
        "td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:right;overflow-wrap:anywhere}"
        "td:first-child,th:first-child{width:34%}td:first-child,th:first-child,"
        "td.n{text-align:left}tr.up td{color:#8a1c14}tr.down td{color:#1d6b30}.muted{color:#777}")


def _rows(df, cols, label_cols=1) -> str:
    """The header row of ``cols`` and a row per record of ``df``, coloured by the sign of a difference beyond noise."""
    out = ["<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>"]
    for r in df.to_dict("records"):
        beyond = r.get("beyond_noise", True)
        cls = "" if not beyond else ("up" if r.get("delta_us", 0) > 0 else "down")
        cells = []
        for i, c in enumerate(cols):
            v = r.get(c)
            if isinstance(v, float):
                v = "" if is_nan(v) else f"{v:,.2f}"
            text = html.escape(str(v if v is not None else ""))
            cells.append(f"<td{' class=n' if i < label_cols else ''}>{text}</td>")
        out.append(f"<tr class='{cls}'>{''.join(cells)}</tr>")
    return "".join(out)


def _page(g: Gate) -> str:
    cmp = g.comparison
    pcols = ["part", "kind", "a_us", "b_us", "delta_us", "noise_us", "beyond_noise"]
    fcols = [c for c in ["family", "category", "presence", "a_us", "b_us", "delta_us", "noise_us", "beyond_noise"]
             if c in g.families.columns]
    warn = "".join(f"<li>{html.escape(w)}</li>" for w in g.warnings)
    checks = g.checks
    files = ", ".join(html.escape(Path(f).name) for f in g.files)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>kit gate: {html.escape(g.verdict)}</title>"
            f"<style>{_CSS}</style></head><body><h1>Regression gate: this run against baseline "
            f"<code>{html.escape(g.baseline)}</code></h1>"
            f"<div class='v {g.verdict}' id='verdict'>{html.escape(g.headline())}</div>"
            f"<p>Judged on {html.escape(_BASIS_WORDS[g.basis])}{': ' + html.escape(g.reason) if g.reason else ''}.</p>"
            + ("<h2>Checks (medians per step; decides: the check counts for the verdict)</h2>"
               "<table id='checks'>"
               f"{_rows(checks.assign(beyond_noise=checks['verdict'] != 'pass', delta_us=checks['delta']), _CHECKS)}"
               "</table>" if checks is not None else "") +
            f"<p class='muted'>baseline run {html.escape(g.baseline_run)}; this run: {files}; "
            f"phase {html.escape(cmp.phase)}; "
            f"{cmp.steps[0]} / {cmp.steps[1]} steps. The checks compare medians of the per-step distributions (noise: "
            f"two standard errors of the difference of medians); a part below is beyond noise when its difference "
            f"exceeds two standard errors of the difference of per-step means.</p>"
            f"<h2>Where the step time went (per step, us)</h2><table id='parts'>"
            f"{_rows(cmp.parts, pcols)}</table>"
            f"<h2>Kernel families that moved most</h2><table id='families'>"
            f"{_rows(g.families, fcols)}</table>"
            f"{'<h2>Warnings</h2><ul>' + warn + '</ul>' if warn else ''}</body></html>")
