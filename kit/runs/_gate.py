"""The regression gate: a run against a named baseline, with ``kit.profile.compare``'s noise rules.

``compare`` already splits the step-time difference into parts and gives each its noise (two standard
errors of the difference of per-step means, from both runs' step-to-step spread). The gate adds the bar
a CI job needs: the run **regressed** when its step time is longer than the baseline's by more than that
noise *and* by more than ``threshold`` of the baseline's step time (default 2%: a difference real but
too small to matter does not fail a build), or when one kernel category's time per step grew by more
than its own noise and that threshold (GPU work that grew while idle time absorbed it: it shows up as
step time wherever the GPU is busier); **improved** when the step time fell by as much; otherwise it
**passes**.
Where the time went is the parts and kernel families beyond their own noise. A baseline whose inputs
are gone or changed (sha256 recorded with it) is an error naming the file, never a silent pass.

:func:`profile_gate` is what ``kit profile compare --baseline NAME`` calls; :meth:`Gate.html` writes the
one-page HTML diff.
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.errors import UsageError
from kit.runs._record import file_hash
from kit.util import recorded

VERDICTS = ("regression", "improvement", "pass")
EXIT_REGRESSION = 3


@dataclass(eq=False)
class Gate:
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

    @property
    def regression(self) -> bool:
        return self.verdict == "regression"

    def exit_code(self, fail_on_regression: bool = True) -> int:
        """3 when the run regressed and ``fail_on_regression``, else 0 (what ``--fail-on-regression`` returns)."""
        return EXIT_REGRESSION if fail_on_regression and self.regression else 0

    def headline(self) -> str:
        a, b = self.step_us
        rel = self.delta_us / a if a else float("nan")
        return (f"{self.verdict.upper()}: step {b:,.1f} us vs baseline {self.baseline} {a:,.1f} us "
                f"({self.delta_us:+,.1f} us, {rel:+.1%}; noise +-{self.noise_us:,.1f} us, "
                f"threshold {self.threshold_us:,.1f} us)")

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this gate: the difference, its noise, the threshold, the verdict."""
        from kit.util import call_settings

        figs = [("delta_us", self.delta_us), ("noise_us", self.noise_us), ("threshold_us", self.threshold_us),
                ("step_us", self.step_us[0], self.baseline), ("step_us", self.step_us[1], "this run")]
        return {"inputs": [("b", f) for f in self.files], "settings": call_settings(args), "figures": figs,
                "facts": {"verdict": self.verdict, "baseline": self.baseline, "baseline_run": self.baseline_run},
                "tables": {"where": self.where, "parts": self.comparison.parts}, "warnings": list(self.warnings),
                "label": f"against {self.baseline}"}

    def __repr__(self) -> str:
        lines = [self.headline()]
        for r in self.where.itertuples():
            lines.append(f"  {r.what:<10} {str(r.name)[:60]:<62} {r.delta_us:+10,.1f} us  (noise +-{r.noise_us:,.1f})")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        from kit.util import frame_records

        return {"baseline": self.baseline, "baseline_run": self.baseline_run, "verdict": self.verdict,
                "step_us": list(self.step_us), "delta_us": self.delta_us, "noise_us": self.noise_us,
                "threshold_us": self.threshold_us, "where": frame_records(self.where), "files": self.files,
                "warnings": self.warnings}

    def html(self, path: str | Path | None = None) -> str:
        """The one-page HTML diff (self-contained: no script, no network); written to ``path`` if given."""
        page = _page(self)
        if path is not None:
            from kit.util import write_atomic

            write_atomic(path, page)
        return page


def _where(cmp) -> Any:
    import pandas as pd

    parts = cmp.parts[(cmp.parts["beyond_noise"]) & (cmp.parts["kind"] != "total")]
    fam = cmp.families[cmp.families["beyond_noise"]] if "beyond_noise" in cmp.families else cmp.families.iloc[:0]
    rows = [{"what": "part", "name": r.part, "a_us": r.a_us, "b_us": r.b_us, "delta_us": r.delta_us,
             "noise_us": r.noise_us} for r in parts.itertuples()]
    rows += [{"what": "family", "name": r.family, "a_us": r.a_us, "b_us": r.b_us, "delta_us": r.delta_us,
              "noise_us": r.noise_us} for r in fam.itertuples()]
    df = pd.DataFrame(rows, columns=["what", "name", "a_us", "b_us", "delta_us", "noise_us"])
    return df.reindex(df["delta_us"].abs().sort_values(ascending=False).index).reset_index(drop=True)


def gate(cmp, *, baseline: str = "A", baseline_run: str = "", threshold: float = 0.02) -> Gate:
    """The verdict on ``cmp`` (a ``kit.profile.Comparison`` of the baseline A against the run B)."""
    if not 0 <= threshold < 1:
        raise UsageError(f"gate: threshold is a fraction of the baseline's step time (0-1), not {threshold!r}")
    a, b = cmp.step_us
    if cmp.measured_ms:
        a, b = cmp.measured_ms[0] * 1e3, cmp.measured_ms[1] * 1e3
    delta, noise = cmp.delta_us, cmp.noise_us
    bar = threshold * a
    warnings = list(cmp.warnings)
    if not math.isfinite(noise):
        warnings.append("the step-to-step noise could not be estimated (fewer than two steps in a run): "
                        "the verdict rests on the threshold alone")
        noise = 0.0
    parts = cmp.parts
    grown = parts[(parts["kind"] == "category") & (parts["delta_us"] > parts["noise_us"].clip(lower=bar))]
    if delta > max(noise, bar) or len(grown):
        verdict = "regression"
    else:
        verdict = "improvement" if -delta > max(noise, bar) else "pass"
    if len(grown) and delta <= max(noise, bar):
        grew = f"{grown['delta_us'].sum():+,.1f}"
        warnings.append(f"kernel time of {', '.join(grown['part'])} grew by {grew} us per step, "
                        f"beyond its noise and the threshold, while the step time moved {delta:+,.1f} us (GPU idle "
                        "absorbed it here; it will not be absorbed where the GPU is busy)")
    fams = cmp.families.reindex(cmp.families["delta_us"].abs().sort_values(ascending=False).index).head(20)
    return Gate(baseline, baseline_run, verdict, (a, b), delta, noise, bar, _where(cmp), fams, cmp,
                [f for fs in cmp.files for f in fs][len(cmp.files[0]):], warnings)


def baseline_inputs(name: str, *, stores=None) -> tuple[dict, list[str]]:
    """The baseline run and its trace files (the run's own, or run B's of a comparison), each checked
    against the sha256 recorded with it."""
    from kit.runs._share import baseline as get_baseline

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
                 stores=None, label: str = "this run") -> Gate:
    """Compare the run of ``traces`` with the baseline named ``baseline`` (``kit runs baseline``) and decide:
    regression, improvement or pass (see the module docstring)."""
    from kit.profile import compare, load

    run, paths = baseline_inputs(baseline, stores=stores)
    pa = load(paths, cache=cache)
    pb = load(list(traces) if not isinstance(traces, (str, Path)) else [str(traces)], cache=cache)
    cmp = compare(pa, pb, phase=phase, labels=(baseline, label))
    return gate(cmp, baseline=baseline, baseline_run=run["run_id"], threshold=threshold)


_CSS = ("body{font:14px system-ui,sans-serif;max-width:1100px;margin:24px auto;color:#222}"
        "h1{font-size:20px}.v{padding:10px 14px;border-radius:6px;font-weight:600;margin:12px 0}"
        ".regression{background:#fde2e1;color:#8a1c14}.improvement{background:#e0f3e4;color:#1d6b30}"
        ".pass{background:#eef1f5;color:#333}table{border-collapse:collapse;width:100%;margin:8px 0 20px}"
        "td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:right}td:first-child,th:first-child,"
        "td.n{text-align:left}tr.up td{color:#8a1c14}tr.down td{color:#1d6b30}.muted{color:#777}")


def _rows(df, cols, label_cols=1) -> str:
    out = []
    for r in df.to_dict("records"):
        beyond = r.get("beyond_noise", True)
        cls = "" if not beyond else ("up" if r.get("delta_us", 0) > 0 else "down")
        cells = []
        for i, c in enumerate(cols):
            v = r.get(c)
            if isinstance(v, float):
                v = "" if v != v else f"{v:,.2f}"
            text = html.escape(str(v if v is not None else ""))
            cells.append(f"<td{' class=n' if i < label_cols else ''}>{text}</td>")
        out.append(f"<tr class='{cls}'>{''.join(cells)}</tr>")
    return "".join(out)


def _page(g: Gate) -> str:
    cmp = g.comparison
    pcols = ["part", "kind", "a_us", "b_us", "delta_us", "noise_us", "beyond_noise"]
    fcols = [c for c in ["family", "category", "presence", "a_us", "b_us", "delta_us", "noise_us", "beyond_noise"]
             if c in g.families.columns]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in pcols)
    fhead = "".join(f"<th>{html.escape(c)}</th>" for c in fcols)
    warn = "".join(f"<li>{html.escape(w)}</li>" for w in g.warnings)
    files = ", ".join(html.escape(Path(f).name) for f in g.files)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>kit gate: {html.escape(g.verdict)}</title>"
            f"<style>{_CSS}</style></head><body><h1>Regression gate: this run against baseline "
            f"<code>{html.escape(g.baseline)}</code></h1>"
            f"<div class='v {g.verdict}' id='verdict'>{html.escape(g.headline())}</div>"
            f"<p class='muted'>baseline run {html.escape(g.baseline_run)}; this run: {files}; "
            f"phase {html.escape(cmp.phase)}; "
            f"{cmp.steps[0]} / {cmp.steps[1]} steps. A part is beyond noise when its difference exceeds two standard "
            f"errors of the difference of per-step means; the run regressed when its step time grew by more than the "
            f"noise and the threshold.</p>"
            f"<h2>Where the step time went (per step, us)</h2><table id='parts'><tr>{head}</tr>"
            f"{_rows(cmp.parts, pcols)}</table>"
            f"<h2>Kernel families that moved most</h2><table id='families'><tr>{fhead}</tr>"
            f"{_rows(g.families, fcols)}</table>"
            f"{'<h2>Warnings</h2><ul>' + warn + '</ul>' if warn else ''}</body></html>")
