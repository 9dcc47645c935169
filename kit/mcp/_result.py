"""One tool result: the answer with its provenance, trust verdict and warnings as fields, paged,
redacted and capped.

Every result has the same top-level keys, so an agent finds the caveats where it finds the numbers::

    {"tool": ..., "ok": true, "result": {...}, "provenance": [...], "trust": {"verdict": ..., "reasons": [...]},
     "warnings": [...], "page": {"table": "rows", "offset": 0, "limit": 200, "total": 1234, "next_offset": 200},
     "redacted": 0}

``trust.verdict`` is one of ``usable`` / ``degraded`` / ``unreliable`` / ``undecided`` / ``not assessed``;
a tool that has no trust check of its own says ``not assessed`` with the reason, never ``usable``.
Secrets are masked by kit.redact (the same rules the HTML report applies) in every
string of the result, keys included.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from kit.redact import redact_text

TRUST = ("usable", "degraded", "unreliable", "undecided", "not assessed")


@dataclass
class Answer:
    """What a tool function returns: the result and its caveats, before paging, redaction and the cap.

    ``table``: the key of ``result`` holding a list of rows that may be long (paged by the caller's
    ``offset``/``limit``)."""

    result: dict[str, Any]
    provenance: list[dict[str, Any]] = field(default_factory=list)
    trust: str = "not assessed"
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    table: str | None = None


def envelope(tool: str, answer: Answer, *, offset: int, limit: int, cap: int) -> dict[str, Any]:
    """The JSON-ready result: paged, redacted, and within ``cap`` characters (the page shrinks until it fits)."""
    if answer.trust not in TRUST:
        raise ValueError(f"{tool}: trust verdict {answer.trust!r} is not one of {TRUST}")
    while True:
        out = _page(tool, answer, offset, limit)
        out, n = _redact(out)
        out["redacted"] = n
        text = json.dumps(out, allow_nan=False, default=str)
        if len(text) <= cap:
            return out
        if out["page"] and limit > 1:
            limit = max(1, limit // 2)
            continue
        return failure(tool, f"result of {len(text):,} characters is over the server's cap of {cap:,}; "
                             "ask for fewer rows (limit) or a narrower range")


def failure(tool: str, message: str, *, refused: bool = False) -> dict[str, Any]:
    """An error result: one line saying what was wrong; ``refused`` when the server would not do it."""
    text, _ = redact_text(message, markup=False)
    return {"tool": tool, "ok": False, "refused": refused, "error": text, "result": None, "provenance": [],
            "trust": {"verdict": "not assessed", "reasons": ["the call did not produce a result"]},
            "warnings": [], "page": None, "redacted": 0}


def _page(tool: str, a: Answer, offset: int, limit: int) -> dict[str, Any]:
    result = _plain(a.result)
    page = None
    if a.table is not None and isinstance(result.get(a.table), list):
        rows = result[a.table]
        total = len(rows)
        result[a.table] = rows[offset:offset + limit]
        nxt = offset + limit if offset + limit < total else None
        page = {"table": a.table, "offset": offset, "limit": limit, "total": total, "next_offset": nxt}
    return {"tool": tool, "ok": True, "result": result, "provenance": _plain(a.provenance),
            "trust": {"verdict": a.trust, "reasons": list(a.reasons)}, "warnings": [str(w) for w in a.warnings],
            "page": page}


def _plain(v: Any) -> Any:
    """JSON values: NaN/inf to None, numpy scalars to Python ones, tuples to lists, other objects to text."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [_plain(x) for x in v]
    if hasattr(v, "item") and callable(v.item) and not isinstance(v, (str, bytes)):
        try:
            v = v.item()
        except (ValueError, TypeError):
            return str(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return str(v)


def _redact(v: Any) -> tuple[Any, int]:
    if isinstance(v, str):
        return redact_text(v, markup=False)
    if isinstance(v, list):
        pairs = [_redact(x) for x in v]
        return [p[0] for p in pairs], sum(p[1] for p in pairs)
    if isinstance(v, dict):
        out, total = {}, 0
        for k, x in v.items():
            key, n1 = _redact(k)
            val, n2 = _redact(x)
            out[key] = val
            total += n1 + n2
        return out, total
    return v, 0
