"""The reconciliation's input step: an engine's step and request records checked before any gap is split.

Whatever reader produced them (an engine's log, a saved file, another engine's records), a record the
arithmetic cannot use is dropped and counted, never computed with: times that are not finite numbers
(strings, NaN, inf), a forward that ends before it starts, a request whose token times run backwards,
a step or request recorded twice. With no step record left there is nothing to put the forward in,
and the reconciliation is refused with the reason (not a forward of 0 and a residual of 100 %).
"""
from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

_STEP_TIMES = ("fwd0", "fwd1")
_STEP_OPTIONAL = ("pf0", "pf1", "host", "host_exposed")
_REQUEST_TIMES = ("emit", "sent")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _optional_number(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or _number(v)


def _step_problem(s: dict) -> str | None:
    if not all(_number(s.get(k)) for k in _STEP_TIMES) or not all(_optional_number(s.get(k)) for k in _STEP_OPTIONAL):
        return "times that are not finite numbers (strings, NaN or inf)"
    if s["fwd1"] < s["fwd0"]:
        return "a forward that ends before it starts (start and end swapped)"
    if not isinstance(s.get("rids"), list) or not all(isinstance(r, int) and not isinstance(r, bool)
                                                      for r in s["rids"]):
        return "request ids that are not a list of integers"
    return None


def _request_problem(r: dict) -> str | None:
    times = [r.get(k) for k in _REQUEST_TIMES]
    if not all(isinstance(t, list) and all(_number(x) for x in t) for t in times):
        return "token times that are not lists of finite numbers (strings, NaN or inf)"
    if not _optional_number(r.get("arrival")):
        return "an arrival time that is not a finite number"
    if any(b < a for t in times for a, b in zip(t, t[1:])):
        return "token times that run backwards (descending emit or write times)"
    return None


def _kept(rows: list[dict], key: str, problem, what: str, said: list[str]) -> list[dict]:
    counts: dict[str, int] = {}
    out, seen = [], set()
    for r in rows:
        why = problem(r)
        ident = repr(r.get(key))
        if why is None and ident in seen:
            why = f"the same {key} recorded twice (kept the first)"
        if why is not None:
            counts[why] = counts.get(why, 0) + 1
            continue
        seen.add(ident)
        out.append(r)
    said += [f"{n} {what} record{'s' if n > 1 else ''} with {why.removeprefix('the ')}: dropped"
             if not why.startswith("the same") else f"{n} {what} record{'s' if n > 1 else ''}: {why}"
             for why, n in counts.items()]
    return out


def checked(recs):
    """``(records, warnings, refusal)``: ``recs`` (a ``StepRecords``) without the records the
    reconciliation cannot use, one warning per kind of fault with its count, and the reason to refuse
    (or ``""``)."""
    said: list[str] = []
    steps = _kept(recs.steps.to_dict("records") if len(recs.steps) else [], "step", _step_problem, "step", said)
    reqs = _kept(recs.requests.to_dict("records") if len(recs.requests) else [], "id", _request_problem,
                 "request", said)
    said = [f"{recs.name}: {s}" for s in said]
    out = replace(recs, steps=pd.DataFrame(steps, columns=list(recs.steps.columns)),
                  requests=pd.DataFrame(reqs, columns=list(recs.requests.columns)))
    refusal = ""
    if not steps:
        refusal = (f"{recs.name}: no usable step record ({len(recs.steps)} given): the forward and the scheduler "
                   "cannot be placed (start the engine with its step records, e.g. TINYSERVE_STEP_RECORDS=1)")
    elif not reqs:
        refusal = f"{recs.name}: no usable request record ({len(recs.requests)} given): no token can be followed"
    return out, said, refusal


def offset_note(offset_ms: float, bound_ms: float, median_gap_ms: float) -> str | None:
    """A warning when the engine's clock is off the client's by more than the median gap: the parts are
    differences on one clock and do not move with it, but the hosts' clocks differ that much."""
    if not (math.isfinite(offset_ms) and math.isfinite(median_gap_ms)) or median_gap_ms <= 0:
        return None
    ratio = abs(offset_ms) / median_gap_ms
    if ratio <= 1.0:
        return None
    return (f"clock offset {offset_ms:+.2f} +/- {bound_ms:.2f} ms is {ratio:.1f}x the median ITL "
            f"({median_gap_ms:.2f} ms): engine and client clocks differ by more than a token; the parts are "
            "differences on one clock, but check the hosts' clock sync before comparing absolute times")
