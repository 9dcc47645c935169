"""One tool result: the answer with its provenance, trust verdict and warnings as fields, paged,
redacted and capped. Every result has the same top-level keys, so an agent finds the caveats where it
finds the numbers::

    {"tool": ..., "ok": true, "result": {...}, "provenance": [...], "trust": {"verdict": ..., "reasons": [...]},
     "warnings": [...], "page": {"table": "rows", "offset": 0, "limit": 200, "total": 1234, "next_offset": 200},
     "redacted": 0}

A tool that has no trust check of its own says ``not assessed`` with the reason, never ``usable``."""
from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from typing import Any

from kit.provenance import provenance_of
from kit.redact import redact_json_text, redact_text
from kit.util import jsonable

# the verdicts, and the order of the first three from best to worst (written here once)
TRUST = ("usable", "degraded", "unreliable", "undecided", "not assessed")
_RANK = {"usable": 0, "degraded": 1, "unreliable": 2}


def worse(a: str, b: str) -> str:
    """The worse of two health verdicts (usable < degraded < unreliable)."""
    return b if _RANK[b] > _RANK[a] else a


def now() -> str:
    """The time a host was read, for provenance."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def file_provenance(host: str, path: str, role: str) -> dict[str, Any]:
    """Where a file came from: the session manifest's word for a local file, else 'unknown' (a file on a
    host is what it is now; the kit cannot say who wrote it)."""
    if host == "local":
        return {"artefact": path, "role": role, **provenance_of(path).to_dict()}
    return {"artefact": f"{host}:{path}", "role": role, "kind": "unknown",
            "note": f"read from host {host} at {now()}; who wrote it is not recorded"}


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
    """The JSON-ready result: paged, within ``cap`` characters (the page shrinks until it fits; measured
    before redaction, so redaction's work is bounded by the cap), redacted as one text (every string of
    the result joined, so a secret split across lines or fields is found), and refused outright when it
    holds private-key material."""
    if answer.trust not in TRUST:
        raise ValueError(f"{tool}: trust verdict {answer.trust!r} is not one of {TRUST}")
    while True:
        out = _page(tool, answer, offset, limit)
        text = json.dumps(out, allow_nan=False, default=str)
        if len(text) <= cap:
            break
        if out["page"] and limit > 1:
            limit = max(1, limit // 2)
            continue
        return failure(tool, f"result of {len(text):,} characters is over the server's cap of {cap:,}; "
                             "ask for fewer rows (limit) or a narrower range")
    if key_material(out):
        return failure(tool, "the result holds private-key material; the server never returns it", refused=True)
    masked, n = redact_json_text(text)
    out = json.loads(masked) if n else out
    out["redacted"] = n
    return out


# a PEM/OpenSSH private key (or its base64), or two lines of a key's base64 body without the armour
_KEY = re.compile(r"PRIVATE KEY(?: BLOCK)?-----|b3BlbnNzaC1rZXktdjE|LS0tLS1CRUdJTi|PuTTY-User-Key-File")
_BODY_LINE = re.compile(r"[A-Za-z0-9+/]{60,}={0,2}")


def key_material(value: Any) -> bool:
    """Whether a result holds private-key material: its armour, or a line of a key's base64 body returned
    without it (``source_slice`` of lines 2-5 of an id_ed25519), in any of its strings."""
    for text in _strings(value):
        if _KEY.search(text):
            return True
        for line in text.splitlines():
            line = line.strip()
            if _BODY_LINE.fullmatch(line) and all(re.search(c, line) for c in ("[0-9]", "[a-z]", "[A-Z]")):
                return True
    return False


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def failure(tool: str, message: str, *, refused: bool = False) -> dict[str, Any]:
    """An error result: one line saying what was wrong; ``refused`` when the server would not do it."""
    text, _ = redact_text(message, markup=False)
    return {"tool": tool, "ok": False, "refused": refused, "error": text, "result": None, "provenance": [],
            "trust": {"verdict": "not assessed", "reasons": ["the call did not produce a result"]},
            "warnings": [], "page": None, "redacted": 0}


def _page(tool: str, a: Answer, offset: int, limit: int) -> dict[str, Any]:
    result = jsonable(a.result)
    page = None
    if a.table is not None and isinstance(result.get(a.table), list):
        rows = result[a.table]
        total = len(rows)
        result[a.table] = rows[offset:offset + limit]
        nxt = offset + limit if offset + limit < total else None
        page = {"table": a.table, "offset": offset, "limit": limit, "total": total, "next_offset": nxt}
    return {"tool": tool, "ok": True, "result": result, "provenance": jsonable(a.provenance),
            "trust": {"verdict": a.trust, "reasons": list(a.reasons)}, "warnings": [str(w) for w in a.warnings],
            "page": page}

