"""The ITL reconciliation at the level an engine's records allow, when it is coarser than a token (private).

``kit.bench.reconcile`` splits each client gap token by token when the engine records each token
(tinyserve). Real engines publish less, and the reconciliation says at which level it ran
(``Reconciliation.level``, the table's ``attrs["level"]``, its first warning):

- ``request`` (vLLM's OpenTelemetry spans, SGLang's request time statistics): one row per request matched
  by its response id; the client's mean gap over the request against the engine's decode time per token,
  split where the engine splits it (vLLM with ``--collect-detailed-traces``: model forward, the rest of model
  execute, the engine between executes), the rest ``outside`` the engine (output path, detokenising,
  HTTP, the client). Bands: requests around the median client ITL and the slowest 1 %.
- ``interval`` (SGLang decode lines, vLLM throughput lines): each client gap falls in the logging interval
  of the engine's clock that holds it (the clocks assumed the same, to the second the lines print); per
  interval the client's mean gap against ``#running / throughput``.
- ``distribution`` (TensorRT-LLM iteration statistics, which name no request; or intervals no client gap
  falls in): the client's gaps and the engine's per-token periods compared as distributions (mean, median,
  99th percentile of each), not matched gap by gap: ``outside`` is a difference of percentiles.
"""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from kit.stats import is_nan

# part -> (label, where its time comes from)
COARSE_PARTS: dict[str, tuple[str, str]] = {
    "forward": ("model forward", "engine per request: time in model forward / output tokens"),
    "execute_other": ("model execute beyond the forward", "engine per request: (execute - forward) / output tokens "
                                                          "(sampling, sync across workers)"),
    "engine_other": ("engine between executes", "engine per request: decode time per token - execute per token "
                                                "(scheduler, Python, the engine's output path)"),
    "engine_decode": ("engine decode per token", "engine per request: decode time / (output tokens - 1)"),
    "engine_forward": ("engine forward per token (prefill included)",
                       "engine per request: forward duration / output tokens (SGLang: forward entry to completion)"),
    "engine_period": ("engine time per token", "engine per interval: #running requests / generation throughput"),
    "outside": ("outside the engine", "client gap - the engine's time per token (output path, detokenize, HTTP, "
                                     "client)"),
    "residual": ("residual", "client gap - the parts (rows whose engine record lacks a part)"),
    "gap": ("client ITL", "the kit's client records"),
}
LEVEL_NOTE = {
    "request": "per request, not per token: each row is one request's mean gap (the engine records requests, "
               "not tokens)",
    "interval": "per logging interval, not per token: each row is one interval's mean gap (the engine prints "
                "a throughput per interval, to the second)",
    "distribution": "as distributions, not matched gap by gap: the engine's records name no request or fall in no "
                    "client interval; 'outside' is a difference of percentiles",
}


def reconcile_coarse(reqs: list[dict], recs, base, table):
    """Fill ``base`` (a Reconciliation with the records' warnings) at the level ``recs`` allow; ``table``: the
    token reconciliation's band table (rows with ``gap`` and the parts -> mean, p50, p99 per part)."""
    if recs.level == "request":
        rows, parts = _request_rows(reqs, recs, base.warnings)
        level = "request"
        if not rows:
            base.refused = ("no client request matches an engine request record by response id (client records "
                            "without response_id, or engine records of another run)")
    else:
        rows, parts, level = _interval_rows(reqs, recs)
    base.level = level
    base.parts = parts
    base.warnings.insert(0, f"reconciled {LEVEL_NOTE[level]}; engine records: {recs.source}")
    if base.refused:
        return base
    if level == "distribution":
        base.tokens = pd.DataFrame({"gap": [1e3 * g for r in reqs for g in (r.get("itl") or []) if g is not None]})
        base.table = _distribution_table(reqs, recs, parts)
    else:
        base.tokens = pd.DataFrame(rows)
        base.table = table(base.tokens, parts, "", labels=COARSE_PARTS)
    base.table.attrs["level"] = level
    return base


def _norm_id(s) -> str:
    s = str(s)
    for p in ("chatcmpl-", "cmpl-"):
        if s.startswith(p):
            return s[len(p):]
    return s


def _request_rows(reqs: list[dict], recs, warnings: list[str]) -> tuple[list[dict], list[str]]:
    e = recs.requests
    by_id = {_norm_id(i): row for i, row in zip(e["id"], e.to_dict("records"))} if len(e) and "id" in e else {}
    detailed = {"forward", "execute"} <= set(e.columns)
    parts = (["forward", "execute_other", "engine_other"] if detailed else
             ["engine_decode"] if "decode" in e.columns or {"e2e", "ttft"} <= set(e.columns) else ["engine_forward"])
    parts = [*parts, "outside"]
    rows, unmatched, uneven = [], 0, 0
    for r in reqs:
        rec = by_id.get(_norm_id(r.get("response_id") or ""))
        if rec is None:
            unmatched += 1
            continue
        itl = [g for g in (r.get("itl") or []) if g is not None]
        chunks, span = len(itl) + 1, float(sum(itl))
        n = rec.get("output_tokens")
        if chunks < 2 or not n or is_nan(n) or n < 2:
            continue
        uneven += chunks != n
        gap = span / (chunks - 1)
        row = {"request": r.get("response_id"), "gap": 1e3 * gap}
        per_token = _engine_per_token(rec, n, parts)
        if per_token is None:
            continue
        total, split = per_token
        row.update({k: 1e3 * v for k, v in split.items()})
        row["outside"] = 1e3 * (gap - total)
        rows.append(row)
    if unmatched:
        warnings.append(f"{unmatched} of {len(reqs)} client requests have no engine request record (left out)")
    if rows and "engine_forward" in parts:
        warnings.append("SGLang's forward duration runs from the request's forward entry to its completion: the "
                        "engine's time per token includes its prefill, so 'outside' is understated by about "
                        "prefill / output tokens")
    if rows and "decode_execute" in e.columns and detailed:
        warnings.append("model forward and execute per token are over the decode steps only (the engine's per-step "
                        "spans summed over the iterations after the first token, / (output tokens - 1)), the "
                        "interval its decode time spans: not over output tokens")
    if uneven:
        warnings.append(f"{uneven} requests received a different number of chunks than the engine counted output "
                        "tokens (several tokens per chunk): their client gap is per chunk, the engine's per token")
    return rows, parts


def _num(rec: dict, key: str) -> float:
    v = rec.get(key)
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def _engine_per_token(rec: dict, n: float, parts: list[str]) -> tuple[float, dict] | None:
    """(engine seconds per token, the parts of it) for one request record, or None when it lacks them."""
    decode = _num(rec, "decode")
    if is_nan(decode):
        decode = _num(rec, "e2e") - _num(rec, "ttft")
    if "engine_forward" in parts:
        fwd = _num(rec, "forward_total")
        return (fwd / n, {"engine_forward": fwd / n}) if not is_nan(fwd) else None
    if is_nan(decode):
        return None
    per = decode / (n - 1)
    if "engine_decode" in parts:
        return per, {"engine_decode": per}
    fwd, exe = _num(rec, "forward") / n, _num(rec, "execute") / n
    if not is_nan(_num(rec, "decode_execute")):   # summed over the decode steps (transformers)
        fwd, exe = _num(rec, "decode_forward") / (n - 1), _num(rec, "decode_execute") / (n - 1)
    if is_nan(fwd) or is_nan(exe):
        return per, {"forward": math.nan, "execute_other": math.nan, "engine_other": math.nan}
    return per, {"forward": fwd, "execute_other": exe - fwd, "engine_other": per - exe}


def _epoch(t, year: int) -> float:
    """A naive engine wall-clock time (the host's local time, as the engines print it) in epoch seconds; a
    time printed without its year (vLLM: ``MM-DD hh:mm:ss``, read as 1900) takes the client's ``year``."""
    if t.year == 1900:
        t = t.replace(year=year)
    return time.mktime(t.timetuple()) + t.microsecond / 1e6


def _interval_rows(reqs: list[dict], recs) -> tuple[list[dict], list[str], str]:
    iv = recs.intervals
    parts = ["engine_period", "outside"]
    if recs.level == "interval" and "time" in iv and iv["time"].notna().all() and len(iv) >= 2:
        year = time.localtime(min((r["start"] for r in reqs), default=time.time())).tm_year
        ends = np.array([_epoch(t, year) for t in iv["time"]]) + 1.0   # printed to the second: its second ends later
        starts = np.r_[ends[0] - 2.0, ends[:-1]]
        gaps: dict[int, list[float]] = {}
        for r in reqs:
            t = r["start"] + r["ttft"]
            for g in r.get("itl") or []:
                t += g
                i = int(np.searchsorted(ends, t, side="left"))
                if i < len(ends) and t > starts[i]:
                    gaps.setdefault(i, []).append(g)
        rows = []
        for i, gs in sorted(gaps.items()):
            period = float(iv["period"].iloc[i])
            gap = float(np.mean(gs))
            rows.append({"interval": i, "line": iv["line"].iloc[i] if "line" in iv else None, "gaps": len(gs),
                         "gap": 1e3 * gap, "engine_period": 1e3 * period, "outside": 1e3 * (gap - period)})
        if rows:
            return rows, parts, "interval"
    return [], parts, "distribution"


def _distribution_table(reqs: list[dict], recs, parts: list[str]) -> pd.DataFrame:
    client = np.array([g for r in reqs for g in (r.get("itl") or []) if g is not None], dtype=float)
    period = pd.to_numeric(recs.intervals["period"], errors="coerce").dropna().to_numpy(float)
    stats = {"mean": np.mean, "p50": lambda a: np.quantile(a, 0.5), "p99": lambda a: np.quantile(a, 0.99)}
    rows = []
    for name in [*parts, "gap"]:
        label, source = COARSE_PARTS[name]
        row = {"part": "client ITL" if name == "gap" else name, "label": label}
        for b, f in stats.items():
            c = 1e3 * f(client) if len(client) else math.nan
            e = 1e3 * f(period) if len(period) else math.nan
            row[b] = {"engine_period": e, "outside": c - e}.get(name, c)
        if name == "engine_period":
            source = recs.source
        row["source"] = source
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs.update(unit="ms", tokens=len(client))
    return out

