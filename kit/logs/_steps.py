"""An engine's own per-step and per-request records, read from its log: the engine's clock of a token.

A latency reconciliation (``kit.bench.reconcile``) needs, for each token a client received, when the
engine's scheduler handed it over and when the engine wrote it to the socket, and for each decode step
when its forward ran and what else the iteration did. Engines publish this in their own shapes; each
shape is one row of :data:`FORMATS` (a marker that starts the JSON payload on a line, and the kind of
record it is). Today: tinyserve's ``Step record: {json}`` / ``Request record: {json}`` lines (the kit's
sample engine, ``TINYSERVE_STEP_RECORDS=1``). SGLang's ``Decode batch`` lines and vLLM's periodic
throughput lines carry only a throughput per logging interval, on a clock printed to the second: they
cannot be aligned with a client's tokens, so they are not step records here.

A line whose payload is not JSON, or lacks a field the kind needs, is dropped and counted in
``warnings`` with its first line number; a file with no record at all raises ``LogFormatError``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from kit.errors import LogFormatError

# marker on a log line -> (record kind, fields the kind needs)
FORMATS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Step record: ": ("step", ("step", "fwd0", "fwd1", "rids")),
    "Request record: ": ("request", ("rid", "id", "emit", "sent")),
}


@dataclass
class StepRecords:
    """The records of one log: ``steps`` (one row per decode step: step, pf0, pf1 (a co-scheduled
    prefill), host, host_exposed, fwd0, fwd1, batch, rids) and ``requests`` (one row per request: rid,
    id, arrival, and emit, got, sent: lists of engine-clock seconds, one per token)."""

    name: str
    steps: pd.DataFrame
    requests: pd.DataFrame
    warnings: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"StepRecords({self.name!r}: {len(self.steps)} steps, {len(self.requests)} requests"
                + (f"; {len(self.warnings)} warnings)" if self.warnings else ")"))


def step_records(source, *, name: str | None = None) -> StepRecords:
    """Read the engine's step and request records from a log (a path, or the text itself)."""
    text, name = _text(source, name)
    rows: dict[str, list[dict]] = {"step": [], "request": []}
    bad: dict[str, tuple[int, int]] = {}   # kind -> (count, first line)
    for no, line in enumerate(text.splitlines(), 1):
        for marker, (kind, need) in FORMATS.items():
            at = line.find(marker)
            if at < 0:
                continue
            try:
                rec = json.loads(line[at + len(marker):])
                if not isinstance(rec, dict) or any(k not in rec for k in need):
                    raise ValueError
            except ValueError:
                n, first = bad.get(kind, (0, no))
                bad[kind] = (n + 1, first)
                break
            rows[kind].append(rec)
            break
    warnings = [f"{name}: {n} {kind} record line{'s' if n > 1 else ''} unreadable (first at line {first}), dropped"
                for kind, (n, first) in bad.items()]
    if not rows["step"] and not rows["request"]:
        raise LogFormatError(f"{name}: no engine step or request records (start tinyserve with "
                             f"TINYSERVE_STEP_RECORDS=1, or give an engine log that has them)")
    return StepRecords(name, pd.DataFrame(rows["step"]), pd.DataFrame(rows["request"]), warnings)


def _text(source, name: str | None) -> tuple[str, str]:
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and len(source) < 4096):
        path = Path(source)
        try:
            return path.read_text(errors="replace"), name or str(path)
        except OSError as exc:
            raise LogFormatError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return str(source), name or "<text>"
