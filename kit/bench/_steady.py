"""The steady state of a level: time slices, the warm-up excluded and said.

A level's requests are cut into ``slices`` windows by send time; each window's
median E2E latency is compared with the median of the level's second half (the reference). The
warm-up is the leading windows off the reference by more than ``tol`` (a cold server: graphs
captured, caches empty; an open loop that has not filled the server yet); the steady figures are
over the requests sent after it. Every level says how many requests and seconds were excluded and
why; a level too short to slice (fewer than 3 requests a window) says so and excludes nothing.
"""
from __future__ import annotations

import math

from kit.bench._stats import median

MIN_PER_SLICE = 3


def time_slices(requests: list[dict], slices: int = 10) -> list[dict]:
    """Windows of the level by send time: t0/t1 (s after the first send), requests, E2E and TTFT p50."""
    ok = sorted((r for r in requests if r.get("ok")), key=lambda r: r["start"])
    if not ok:
        return []
    t_first = ok[0]["start"]
    span = max(1e-9, ok[-1]["start"] - t_first)
    out = []
    for k in range(slices):
        lo, hi = span * k / slices, span * (k + 1) / slices
        rs = [r for r in ok if lo <= r["start"] - t_first < hi or (k == slices - 1 and r["start"] - t_first == span)]
        out.append({"t0": lo, "t1": hi, "requests": len(rs),
                    "e2e_ms_p50": median([r["latency"] * 1e3 for r in rs]) if rs else math.nan,
                    "ttft_ms_p50": median([r["ttft"] * 1e3 for r in rs]) if rs else math.nan})
    return out


def steady_state(requests: list[dict], slices: int = 10, tol: float = 0.25) -> dict:
    """Where the level's steady state starts: ``warmup_s`` (s after the first send), the requests
    excluded, the reason, and the windows it was judged on."""
    ok = [r for r in requests if r.get("ok")]
    n = max(1, min(slices, len(ok) // MIN_PER_SLICE))
    win = time_slices(requests, n)
    if n < 3:
        return {"warmup_s": 0.0, "excluded": 0, "slices": win,
                "said": f"not sliced: {len(ok)} requests are too few for 3 windows of {MIN_PER_SLICE}"}
    half = [w["e2e_ms_p50"] for w in win[n // 2:] if w["requests"] and math.isfinite(w["e2e_ms_p50"])]
    ref = median(half) if half else math.nan
    k = 0  # leading windows off the reference (empty ones skipped) up to the first one on it
    for i in range(n // 2):
        if not win[i]["requests"]:
            continue
        if abs(win[i]["e2e_ms_p50"] - ref) <= tol * ref:
            break
        k = i + 1
    cut = win[k]["t0"] if k else 0.0
    t_first = min(r["start"] for r in ok)
    excluded = sum(1 for r in ok if r["start"] - t_first < cut)
    said = (f"warm-up excluded: the first {cut:.2f} s ({excluded} requests), whose median E2E was more than "
            f"{tol:.0%} off the steady {ref:.1f} ms" if k else
            f"no warm-up found: the first window is within {tol:.0%} of the steady median E2E {ref:.1f} ms")
    return {"warmup_s": cut, "excluded": excluded, "reference_e2e_ms": ref, "slices": win, "said": said}
