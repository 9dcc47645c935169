"""Searches over load levels: the saturation knee (over rates) and Pareto sweeps (over lengths x concurrency).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from kit.bench._prompts import new_seed
from kit.bench._result import LoadResult
from kit.bench._sweep import sweep
from kit.errors import BenchError


def knee(rows: list[dict], key: str, min_gain: float = 0.05) -> dict:
    """The knee of a rising sweep: the last level whose ``key`` rose by at least ``min_gain`` over the
    best before it (later levels add load, not ``key``)."""
    best, at = -math.inf, None
    for i, r in enumerate(rows):
        v = r.get(key)
        if v is None or not math.isfinite(v):
            continue
        if at is None or v > best * (1 + min_gain):
            best, at = v, i
    return {"index": at, "value": best if at is not None else math.nan}


def pareto_front(rows: list[dict], maximize: tuple[str, ...] = ("output_tok_s", "user_tok_s")) -> list[int]:
    """Indices of the rows no other row beats on every figure of ``maximize`` (and ties on none)."""
    pts = [tuple(r.get(k, math.nan) for k in maximize) for r in rows]
    front = []
    for i, p in enumerate(pts):
        if any(not math.isfinite(x) for x in p):
            continue
        dominated = any(all(b >= a for a, b in zip(p, q)) and any(b > a for a, b in zip(p, q))
                        for j, q in enumerate(pts) if j != i and all(math.isfinite(x) for x in q))
        if not dominated:
            front.append(i)
    return front


def _merge(results: list[LoadResult]) -> dict[str, Any]:
    data = dict(results[0].data)
    data["levels"] = [lv for r in results for lv in r.levels]
    data["notes"] = [n for r in results for n in r.data.get("notes", [])]
    return data


def saturation(url: str, *, start: float = 1.0, step: float = 1.0, rates: Sequence[float] | None = None,
               max_levels: int = 12, min_gain: float = 0.05, patience: int = 2, slo: dict | None = None,
               seed: int | None = None, warmup: int = 2, **kw) -> LoadResult:
    """Open-loop levels at ``rates`` (or ``start``, ``start + step``, ...) until goodput (request throughput
    without SLOs) has not risen by ``min_gain`` for ``patience`` levels; the knee is the last rate that still
    raised it: the server's useful capacity lies between it and the next rate tried. The result's
    ``data["saturation"]`` gives the knee rate, its goodput, the next rate tried and why the search stopped.
    Every other keyword as :func:`kit.bench.sweep` (e.g. ``requests``, ``arrival``)."""
    plan = list(rates) if rates else [start + step * i for i in range(max_levels)]
    if not plan or any(r <= 0 for r in plan):
        raise BenchError(f"saturation: rates must be positive, not {plan}")
    key = "goodput" if slo else "request_throughput"
    seed = new_seed() if seed is None else int(seed)
    results, rows = [], []
    why = f"all {len(plan)} rates tried; {key} was still rising: raise max_levels or the rates"
    for i, rate in enumerate(plan):
        res = sweep(url, rates=[rate], slo=slo, seed=seed + 7 * i, warmup=warmup if i == 0 else 0, **kw)
        results.append(res)
        rows.append(res.summary()[0])
        at = knee(rows, key, min_gain)["index"]
        if at is not None and len(rows) - 1 - at >= patience:
            why = f"{key} did not rise by {min_gain:.0%} for {patience} rates after {plan[at]:g} req/s"
            break
    at = knee(rows, key, min_gain)["index"]
    if at is None:
        raise BenchError(f"{url}: saturation: no level gave a {key} figure")
    late = [(plan[i], r["late_sends"]) for i, r in enumerate(rows) if r.get("late_sends", 0) > 0.1 * r["requests_ok"]]
    stalled = [plan[i] for i, r in enumerate(rows) if r.get("client_stalled")]
    if late or stalled:
        why += ("; the client itself fell behind (" + ", ".join(f"{n} late sends at {p:g} req/s" for p, n in late)
                + (f"; stalled at {', '.join(f'{p:g}' for p in stalled)} req/s" if stalled else "")
                + "): the knee may be the client's, not the server's")
    if at == 0:
        why += f"; the first rate was already the best: the knee may lie below {plan[0]:g} req/s (start lower)"
    data = _merge(results)
    data["saturation"] = {"figure": key, "knee_rate": plan[at], "knee_value": rows[at][key],
                          "next_rate": plan[at + 1] if at + 1 < len(rows) else None,
                          "rates": plan[:len(rows)], "values": [r[key] for r in rows], "stopped": why,
                          "min_gain": min_gain, "patience": patience}
    return LoadResult(data)


def pareto_sweep(url: str, *, concurrencies: Sequence[int], lengths: Sequence[tuple[int, int]],
                 maximize: tuple[str, ...] = ("output_tok_s", "user_tok_s"), seed: int | None = None,
                 warmup: int = 2, **kw) -> LoadResult:
    """Every (prompt tokens, output tokens) pair of ``lengths`` at every concurrency; each level's
    summary gets ``pareto`` (on the front of ``maximize``: total throughput against one stream's speed, the
    settings worth choosing between) and ``data["pareto"]`` lists the front."""
    if not lengths or not concurrencies:
        raise BenchError("pareto_sweep: give lengths [(prompt, output), ...] and concurrencies")
    seed = new_seed() if seed is None else int(seed)
    results = []
    for i, (n_in, n_out) in enumerate(lengths):
        res = sweep(url, concurrencies=concurrencies, prompt_tokens=int(n_in), max_tokens=int(n_out),
                    seed=seed + 7 * i, warmup=warmup if i == 0 else 0, **kw)
        for lv in res.levels:
            lv["mode"] = f"concurrency in={n_in} out={n_out}"
            lv["label"] = f"in={n_in} out={n_out} c={lv['target']}"
        results.append(res)
    data = _merge(results)
    rows = [lv["summary"] for lv in data["levels"]]
    front = set(pareto_front(rows, maximize))
    for i, lv in enumerate(data["levels"]):
        lv["summary"]["pareto"] = i in front
    data["pareto"] = {"maximize": list(maximize), "front": [data["levels"][i]["label"] for i in sorted(front)]}
    return LoadResult(data)
