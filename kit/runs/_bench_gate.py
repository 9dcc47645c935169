"""A benchmark result against a named baseline benchmark: the same noise rule as the profile gate.

The baseline is a recorded benchmark parse (``kit bench parse FILE`` or ``kit.logs.parse_bench``: its
``rows`` table). For each latency metric whose spread the result files carry (``std_*_ms`` beside
``mean_*_ms``, with ``completed`` requests), the noise is two standard errors of the difference of the
two means, as ``kit.profile.compare`` uses for step times; a metric regressed when it is worse by more
than that noise and by more than ``threshold`` of the baseline. A metric without a spread in the files
(throughputs, and latencies of tools that print no standard deviation) is judged on the threshold alone,
and the row says so. Rows are paired by concurrency / request rate / batch size where several were run.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from kit.errors import UsageError
from kit.runs._record import recorded

# metric, its standard deviation column, which way is better
METRICS = (("mean_tpot_ms", "std_tpot_ms", "lower"), ("mean_itl_ms", "std_itl_ms", "lower"),
           ("mean_ttft_ms", "std_ttft_ms", "lower"), ("median_tpot_ms", None, "lower"),
           ("p99_itl_ms", None, "lower"), ("output_throughput", None, "higher"), ("decode_tok_s", None, "higher"))
_KEYS = ("max_concurrency", "request_rate", "batch_size", "concurrency")


@dataclass(eq=False)
class BenchGate:
    """A benchmark against its baseline: ``verdict`` (regression / improvement / pass) and ``table`` (one
    row per metric and paired run: baseline, this run, relative change, noise, how it was decided)."""

    baseline: str
    baseline_run: str
    verdict: str
    table: Any
    source: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def regression(self) -> bool:
        return self.verdict == "regression"

    def exit_code(self, fail_on_regression: bool = True) -> int:
        return 3 if fail_on_regression and self.regression else 0

    def __repr__(self) -> str:
        worse = self.table[self.table["verdict"] == "regression"]
        lines = [f"{self.verdict.upper()}: {self.source} against baseline {self.baseline} "
                 f"({len(self.table)} metrics compared, {len(worse)} regressed)"]
        for r in self.table.itertuples():
            noise = "threshold only: no spread in the files" if r.noise != r.noise else f"noise +-{r.noise:,.3g}"
            lines.append(f"  {r.metric:<18} {r.baseline_value:>10,.3f} -> {r.value:>10,.3f} ({r.change:+.1%}; "
                         f"{noise}) {r.verdict}")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        from kit.util import frame_records

        return {"baseline": self.baseline, "baseline_run": self.baseline_run, "verdict": self.verdict,
                "source": self.source, "metrics": frame_records(self.table), "warnings": self.warnings}


def _pairs(base, new) -> list[tuple[Any, Any]]:
    if len(base) == 1 and len(new) == 1:
        return [(base.iloc[0], new.iloc[0])]
    keys = [k for k in _KEYS if k in base.columns and k in new.columns]
    if keys:
        at = {tuple(r[k] for k in keys): r for _, r in base.iterrows()}
        return [(at[t], r) for _, r in new.iterrows() if (t := tuple(r[k] for k in keys)) in at]
    if len(base) == len(new):
        return list(zip((r for _, r in base.iterrows()), (r for _, r in new.iterrows())))
    return []


def _num(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def _judge(metric, std, better, a, b, threshold) -> dict | None:
    va, vb = _num(a.get(metric)), _num(b.get(metric))
    if va != va or vb != vb or va == 0:
        return None
    worse = (vb - va) if better == "lower" else (va - vb)
    noise = math.nan
    if std and _num(a.get(std)) == _num(a.get(std)) and _num(b.get(std)) == _num(b.get(std)):
        na, nb = _num(a.get("completed")), _num(b.get("completed"))
        if na > 1 and nb > 1:
            noise = 2 * math.sqrt(_num(a[std]) ** 2 / na + _num(b[std]) ** 2 / nb)
    bar = max(0.0 if noise != noise else noise, threshold * abs(va))
    verdict = "regression" if worse > bar else "improvement" if -worse > bar else "pass"
    key = next((f"{k}={a.get(k)}" for k in _KEYS if a.get(k) == a.get(k) and a.get(k) is not None), "")
    return {"metric": metric, "run": key, "baseline_value": va, "value": vb, "change": (vb - va) / abs(va),
            "noise": noise, "threshold": threshold * abs(va), "verdict": verdict,
            "decided_by": "spread and threshold" if noise == noise else "threshold only"}


def bench_rows(source):
    """Benchmark output as rows (``kit.logs.parse_bench``: other tools' output, and the kit's own results
    through its one reader, ``kit.logs.read_kit_result``); an older kit single-stream file, whose figures
    the parser does not compute, through ``kit.bench.read_result``."""
    from kit.errors import LogFormatError
    from kit.logs import parse_bench

    try:
        return parse_bench(source)
    except LogFormatError:
        from kit import bench

        own = bench.read_result(source) if isinstance(source, (str, os.PathLike)) and os.path.isfile(source) else None
        if own is None:
            raise
        return own.rows()


@recorded("gate")
def bench_gate(baseline: str, source, *, threshold: float = 0.02, stores=None) -> BenchGate:
    """Benchmark output ``source`` (what ``kit.logs.parse_bench`` reads) against the benchmark baseline
    named ``baseline``: regression / improvement / pass per metric and overall (module docstring)."""
    import pandas as pd

    from kit.runs._query import table
    from kit.runs._share import baseline as get_baseline

    run = get_baseline(baseline, stores=stores)
    if "rows" not in (run["tables"] or []):
        raise UsageError(f"baseline {baseline}: run {run['run_id']} ({run['kind']}) holds no benchmark rows "
                         "(name a 'kit bench parse' run)")
    base = table(run["run_id"], "rows", stores=stores)
    new = bench_rows(source)
    pairs = _pairs(base, new)
    warnings = []
    if not pairs:
        raise UsageError(f"{source}: no run pairs with the baseline {baseline} ({len(base)} vs {len(new)} rows, "
                         f"no {'/'.join(_KEYS)} column to pair them by)")
    if len(pairs) < max(len(base), len(new)):
        warnings.append(f"{max(len(base), len(new)) - len(pairs)} run(s) without a partner left out")
    rows = [j for a, b in pairs for m, s, better in METRICS if (j := _judge(m, s, better, a, b, threshold))]
    t = pd.DataFrame(rows, columns=["metric", "run", "baseline_value", "value", "change", "noise", "threshold",
                                    "verdict", "decided_by"])
    if t.empty:
        raise UsageError(f"{source}: none of {', '.join(m for m, _, _ in METRICS)} in both it and baseline {baseline}")
    verdict = ("regression" if (t["verdict"] == "regression").any() else
               "improvement" if (t["verdict"] == "improvement").any() else "pass")
    if (t["decided_by"] == "threshold only").any():
        warnings.append("metrics without a standard deviation in the files are judged on the threshold alone")
    return BenchGate(baseline, run["run_id"], verdict, t, str(source), warnings)
