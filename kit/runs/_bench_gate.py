"""A benchmark result against a named baseline benchmark: per metric, with the spread the files carry.

The baseline is a recorded benchmark parse (``kit bench parse FILE`` or ``kit.logs.parse_bench``: its
``rows`` table). Rows are paired by their load (concurrency / request rate / batch size); two results of
different loads (a concurrency-1 baseline against a concurrency-64 run) are refused, never compared.
Per paired row the gate judges:

- latencies (lower is better): TTFT, TPOT and ITL, each as mean, median, p90/p95/p99 where the files
  give them. The noise is two standard errors of the difference, from the metric's standard deviation
  (``std_*_ms``) and the ``completed`` requests: for a mean sigma/sqrt(n), for a percentile p the
  quantile's standard error sqrt(p(1-p)/n)/phi(z_p) x sigma (normal requests); with m metrics judged at
  once, two standard errors widen to the Bonferroni z for 2.5%/m (so a dozen metrics together keep one
  metric's false-alarm rate); without a spread in the files the metric is judged on the threshold alone
  and the row says so;
- throughputs (higher is better): output, request and decode throughput, on the threshold;
- failures: the share of requests that failed, regressed when it grew by more than the threshold.

A metric regressed when it is worse by more than its noise and ``threshold`` of the baseline (default 2%).
A metric the baseline has but this run does not give as a number (dropped by the parser as not a number,
missing) or gives as zero or less (a latency of zero is not a measurement) is **not compared**, named in
the table with why, and the verdict is **inconclusive** (exit 4 with ``--fail-on-regression``) unless a
compared metric regressed: a gate never passes what it could not compare.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import pandas as pd

from kit import stats
from kit.errors import LogFormatError, UsageError
from kit.logs import parse_bench
from kit.runs._gate import Verdict
from kit.runs._query import table
from kit.runs._share import baseline as get_baseline
from kit.stats import is_nan, sq_se
from kit.util import call_settings, frame_records, recorded

# metric, its standard deviation column, which way is better, the quantile (None: a mean or a rate)
_LAT = [(f"{stat}_{m}_ms", f"std_{m}_ms", "lower", q) for m in ("ttft", "tpot", "itl")
        for stat, q in (("mean", None), ("median", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))]
METRICS = tuple(_LAT) + (("output_throughput", None, "higher", None), ("request_throughput", None, "higher", None),
                         ("decode_tok_s", None, "higher", None))
_KEYS = ("max_concurrency", "request_rate", "batch_size", "concurrency")
COLUMNS = ["metric", "run", "baseline_value", "value", "change", "noise", "threshold", "verdict", "decided_by"]


@dataclass(eq=False)
class BenchGate(Verdict):
    """A benchmark against its baseline: ``verdict`` (regression / improvement / pass) and ``table`` (one
    row per metric and paired run: baseline, this run, relative change, noise, how it was decided)."""

    baseline: str
    baseline_run: str
    verdict: str
    table: Any
    source: str = ""
    warnings: list[str] = field(default_factory=list)

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this gate: each metric's relative change and the verdict."""
        figs = [(f"change.{r.metric}", r.change, r.run or None) for r in self.table.itertuples()
                if r.change == r.change]   # a metric not compared has no change
        src = args.get("source")
        return {"inputs": [("b", src)] if isinstance(src, (str, os.PathLike)) else [], "settings": call_settings(args),
                "figures": figs,
                "facts": {"verdict": self.verdict, "baseline": self.baseline, "baseline_run": self.baseline_run},
                "tables": {"metrics": self.table}, "warnings": list(self.warnings), "label": f"against {self.baseline}"}

    def __repr__(self) -> str:
        done = self.table[self.table["verdict"] != "not compared"]
        worse = done[done["verdict"] == "regression"]
        lines = [f"{self.verdict.upper()}: {self.source} against baseline {self.baseline} "
                 f"({len(done)} metrics compared, {len(worse)} regressed, "
                 f"{len(self.table) - len(done)} not compared)"]
        for r in self.table.itertuples():
            if r.verdict == "not compared":
                lines.append(f"  {r.metric:<18} not compared: {r.decided_by}")
                continue
            noise = "threshold only: no spread in the files" if is_nan(r.noise) else f"noise +-{r.noise:,.3g}"
            lines.append(f"  {r.metric:<18} {r.baseline_value:>10,.3f} -> {r.value:>10,.3f} ({r.change:+.1%}; "
                         f"{noise}) {r.verdict}")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "baseline_run": self.baseline_run, "verdict": self.verdict,
                "source": self.source, "metrics": frame_records(self.table), "warnings": self.warnings}


def _load(r) -> str:
    """A row's load, as words (``max_concurrency=1, request_rate=inf``); '' when it names none."""
    return ", ".join(f"{k}={r.get(k)}" for k in _KEYS if _known(r.get(k)))


def _known(v) -> bool:
    return v is not None and not is_nan(v) and str(v) not in ("", "None", "nan")


def _pairs(base, new) -> list[tuple[Any, Any]]:
    keys = [k for k in _KEYS if k in base.columns and k in new.columns]
    if len(base) == 1 and len(new) == 1:
        a, b = base.iloc[0], new.iloc[0]
        differ = [k for k in keys if _known(a.get(k)) and _known(b.get(k)) and str(a.get(k)) != str(b.get(k))]
        if differ:
            raise UsageError(f"not the same load: the baseline ran {_load(a)}, this run {_load(b)}; a benchmark is "
                             "compared only with one of the same load")
        return [(a, b)]
    if keys:
        at = {tuple(str(r[k]) for k in keys): r for _, r in base.iterrows()}
        return [(at[t], r) for _, r in new.iterrows() if (t := tuple(str(r[k]) for k in keys)) in at]
    if len(base) == len(new):
        return list(zip((r for _, r in base.iterrows()), (r for _, r in new.iterrows())))
    return []


def _num(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def _quantile_se(q: float | None) -> float:
    """The standard error of a sample quantile ``q`` in units of sigma/sqrt(n) (normal values); 1 for a mean."""
    if q is None:
        return 1.0

    z = NormalDist().inv_cdf(q)
    return math.sqrt(q * (1 - q)) / NormalDist().pdf(z)


def _skipped(metric: str, key: str, why: str) -> dict:
    return dict(zip(COLUMNS, (metric, key, math.nan, math.nan, math.nan, math.nan, math.nan, "not compared", why)))


def _judge(metric, std, better, q, a, b, threshold, dropped: set, z: float = stats.NOISE_SE) -> dict | None:
    key = _load(a)
    va, vb = _num(a.get(metric)), _num(b.get(metric))
    if is_nan(va):
        return None                                 # the baseline does not have it: nothing to compare with
    if is_nan(vb):
        why = ("this run's value was not a number (dropped by the parser)" if metric in dropped
               else "not in this run's results")
        return _skipped(metric, key, why)
    if not (math.isfinite(va) and math.isfinite(vb)):
        return _skipped(metric, key, f"not a finite value ({va:g} -> {vb:g})")
    if better == "lower" and (va <= 0 or vb <= 0):
        return _skipped(metric, key, f"a latency of {min(va, vb):g} ms is not a measurement")
    if va == 0:
        return _skipped(metric, key, "the baseline's value is 0: no relative change")
    worse = (vb - va) if better == "lower" else (va - vb)
    noise = math.nan
    sa, sb = (_num(a.get(std)), _num(b.get(std))) if std else (math.nan, math.nan)
    na, nb = _num(a.get("completed")), _num(b.get("completed"))
    if not (is_nan(sa) or is_nan(sb)) and na > 1 and nb > 1:
        noise = _quantile_se(q) * stats.noise(sq_se(sa, na), sq_se(sb, nb), z)
    bar = max(0.0 if is_nan(noise) else noise, threshold * abs(va))
    verdict = "regression" if worse > bar else "improvement" if -worse > bar else "pass"
    return dict(zip(COLUMNS, (metric, key, va, vb, (vb - va) / abs(va), noise, threshold * abs(va), verdict,
                              "spread and threshold" if not is_nan(noise) else "threshold only")))


def bench_rows(source):
    """Benchmark output as rows (``kit.logs.parse_bench``: other tools' output, and the kit's own results
    through its one reader, ``kit.logs.read_kit_result``); an older kit single-stream file, whose figures
    the parser does not compute, through ``kit.bench.read_result``."""
    try:
        return parse_bench(source)
    except LogFormatError:
        from kit import bench  # deferred: it loads HTTP; kit bench parse reads other files without it

        own = bench.read_result(source) if isinstance(source, (str, os.PathLike)) and os.path.isfile(source) else None
        if own is None:
            raise
        return own.rows()


def _z(m: int) -> float:
    """Standard errors a difference must exceed when ``m`` metrics are judged together: two for one metric
    (the house rule), widened so that all ``m`` together keep its false-alarm rate (Bonferroni, 2.5% / m one-sided):
    20 clean repeats of a dozen metrics must pass."""
    return max(2.0, NormalDist().inv_cdf(1 - 0.025 / max(m, 1)))


def _failures(a, b, threshold: float) -> dict | None:
    """The share of requests that failed, in each run (``failed`` over ``completed + failed``)."""
    fa, fb, ca, cb = (_num(x.get(k)) for x, k in ((a, "failed"), (b, "failed"), (a, "completed"), (b, "completed")))
    if is_nan(fa) and is_nan(fb):
        return None
    if is_nan(fb) or is_nan(cb):
        return _skipped("failed_share", _load(a), "this run does not say how many requests failed")
    sa = fa / (fa + ca) if not (is_nan(fa) or is_nan(ca)) and fa + ca > 0 else 0.0
    sb = fb / (fb + cb) if fb + cb > 0 else 1.0
    verdict = "regression" if sb - sa > threshold else "improvement" if sa - sb > threshold else "pass"
    why = "share of requests failed (change: the difference of the shares), against the threshold"
    return dict(zip(COLUMNS, ("failed_share", _load(a), sa, sb, sb - sa, math.nan, threshold, verdict, why)))


def _dropped(new) -> set:
    """The metrics whose values the parser dropped as not numbers (its warnings name them)."""
    out = set()
    for w in new.attrs.get("warnings", []) if hasattr(new, "attrs") else []:
        m = re.search(r"value\(s\) of (\w+) dropped", str(w))
        if m:
            out.add(m.group(1))
    return out


@recorded("gate")
def bench_gate(baseline: str, source, *, threshold: float = 0.02, stores=None) -> BenchGate:
    """Benchmark output ``source`` (what ``kit.logs.parse_bench`` reads) against the benchmark baseline
    named ``baseline``: regression / improvement / pass per metric and overall (module docstring)."""
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
    dropped = _dropped(new)
    warnings += [f"{source}: {w}" for w in new.attrs.get("warnings", [])] if hasattr(new, "attrs") else []
    rows = [j for a, b in pairs for j in [_failures(a, b, threshold)] if j]
    z = _z(sum(math.isfinite(_num(a.get(m))) and math.isfinite(_num(b.get(m))) for a, b in pairs for m, *_ in METRICS))
    rows += [j for a, b in pairs for m, s, better, q in METRICS
             if (j := _judge(m, s, better, q, a, b, threshold, dropped, z))]
    t = pd.DataFrame(rows, columns=COLUMNS)
    done = t[t["verdict"] != "not compared"]
    if done.empty:
        raise UsageError(f"{source}: none of {', '.join(m for m, _, _, _ in METRICS)} in both it and baseline "
                         f"{baseline}")
    skipped = t[t["verdict"] == "not compared"]
    verdict = ("regression" if (done["verdict"] == "regression").any() else
               "inconclusive" if len(skipped) else
               "improvement" if (done["verdict"] == "improvement").any() else "pass")
    if len(skipped):
        warnings.append(f"not compared: {', '.join(f'{r.metric} ({r.decided_by})' for r in skipped.itertuples())}")
    if (done["decided_by"] == "threshold only").any():
        warnings.append("metrics without a standard deviation in the files are judged on the threshold alone")
    return BenchGate(baseline, run["run_id"], verdict, t, str(source), warnings)
