"""An engine's own records of its steps and requests: the engine's clock of a token (private to ``kit.logs``).

A latency reconciliation (``kit.bench.reconcile``) needs what the engine itself measured, published at different
levels (:data:`LEVELS`, finest first: per decode step, request, scheduler iteration, logging interval); each
engine names its readers (``kit.engines``: ``Engine.records``; the coarser ones in ``_engine_records.py``) and
:func:`step_records` takes the finest level a file holds, as one type, :class:`StepRecords`. tinyserve's
``Step record: {json}`` / ``Request record: {json}`` lines (``TINYSERVE_STEP_RECORDS=1``) are a row of the one
log scan, :data:`TINYSERVE`: a line whose payload is not JSON, or lacks a field its kind needs, is dropped and
counted in ``warnings`` with its first line number.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

import kit.engines
from kit.errors import LogFormatError
from kit.logs._api import read_lines
from kit.logs._formats import resolve
from kit.logs._records import TAKEN, LogFormat, columns

LEVELS = ("step", "request", "iteration", "interval")   # finest first

# marker on a log line -> (record kind, its table, fields the kind needs)
RECORD_LINES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "Step record: ": ("step", "engine_steps", ("step", "fwd0", "fwd1", "rids")),
    "Request record: ": ("request", "engine_requests", ("rid", "id", "emit", "sent")),
}


@dataclass
class StepRecords:
    """The engine's own records of one run, at one ``level`` (:data:`LEVELS`).

    ``steps``: one row per decode step (level ``step``: step, pf0, pf1 (a co-scheduled prefill), host,
    host_exposed, fwd0, fwd1, batch, rids). ``requests``: one row per request (level ``step``: rid, id,
    arrival, and emit, got, sent: lists of engine-clock seconds, one per token; level ``request``: id,
    arrival, output_tokens and the engine's durations in seconds: queue, ttft, e2e, prefill, decode,
    forward, execute, scheduler, whichever it gives). ``intervals``: one row per iteration or interval
    (levels ``iteration`` / ``interval``: time (engine wall clock, or NaT), period (seconds per token of one
    running request in it), running, and what else the engine printed). ``engine``: whose records;
    ``source``: what they were read from, in words."""

    name: str
    steps: pd.DataFrame
    requests: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    level: str = "step"
    engine: str = ""
    intervals: pd.DataFrame = field(default_factory=pd.DataFrame)
    source: str = ""

    def __len__(self) -> int:
        return len(self.steps) + len(self.requests) + len(self.intervals)

    def __repr__(self) -> str:
        what = {"step": f"{len(self.steps)} steps, {len(self.requests)} requests",
                "request": f"{len(self.requests)} requests",
                "iteration": f"{len(self.intervals)} iterations",
                "interval": f"{len(self.intervals)} intervals"}[self.level]
        return (f"StepRecords({self.name!r}: {self.engine or 'engine'} per {self.level}, {what}"
                + (f"; {len(self.warnings)} warnings)" if self.warnings else ")"))


class RecordSource:
    """One file (or text) offered to the engines' record readers, read at most once each way: ``json``
    (the parsed document, or None when it is not JSON) and ``log`` (``kit.logs.read_lines`` of it, or None
    when it is not a serving log)."""

    def __init__(self, text: str, name: str) -> None:
        self.text, self.name = text, name

    @cached_property
    def json(self):
        head = self.text.lstrip()[:1]
        if head not in ("{", "["):
            return None
        try:
            return json.loads(self.text)
        except ValueError:
            try:   # JSON lines: one object per line (an OTLP file exporter, a /metrics poll per line)
                return [json.loads(line) for line in self.text.splitlines() if line.strip()]
            except ValueError:
                return None

    @cached_property
    def log(self):
        if self.json is not None:
            return None
        try:
            return read_lines(self.text.splitlines(), name=self.name)
        except LogFormatError:
            return None


def step_records(source, *, name: str | None = None, engine: str | None = None) -> StepRecords:
    """Read an engine's own records from a file (a path, or the text itself): the finest level any engine's
    reader finds in it (``engine``: only that engine's readers). LogFormatError naming what each engine needs
    when there is none."""
    text, name = _text(source, name)
    src = RecordSource(text, name)
    rows = [kit.engines.engine(engine)] if engine else kit.engines.engines()
    found: list[StepRecords] = []
    for e in rows:
        for _kind, reader, _how in e.records:
            recs = resolve(reader)(src)
            if recs is not None and len(recs):
                recs.engine = recs.engine or e.name
                found.append(recs)
    if not found:
        needs = "; ".join(f"{e.title or e.name}: {how}" for e in rows for _k, _r, how in e.records)
        raise LogFormatError(f"{name}: no engine step, request, iteration or interval records ({needs})")
    found.sort(key=lambda r: LEVELS.index(r.level))
    best = found[0]
    others = sorted({f"{r.engine} per {r.level}" for r in found[1:]} - {f"{best.engine} per {best.level}"})
    if others:
        best.source += f"; the file also holds coarser records ({', '.join(others)}), not used"
    return best


def tinyserve_records(src: RecordSource) -> StepRecords | None:
    """tinyserve's step and request record lines, from the one scan's tables (level ``step``)."""
    log = src.log
    if log is None or not (len(log.tables.get("engine_steps", ())) or len(log.tables.get("engine_requests", ()))):
        return None
    warnings = [w for w in log.warnings if "record line" in w]
    steps = log.tables["engine_steps"].drop(columns=["line"], errors="ignore")
    reqs = log.tables["engine_requests"].drop(columns=["line"], errors="ignore")
    return StepRecords(src.name, steps.reset_index(drop=True), reqs.reset_index(drop=True), warnings, "step",
                       "tinyserve", source="tinyserve's Step record / Request record lines")


def _record_line(marker: str):
    kind, table, need = RECORD_LINES[marker]

    def parse(line: str, lineno: int, st) -> int:
        at = line.find(marker)
        try:
            rec = json.loads(line[at + len(marker):])
            if not isinstance(rec, dict) or any(k not in rec for k in need):
                raise ValueError
        except ValueError:
            st.record_errors.add({"line": lineno, "kind": kind})
            return TAKEN
        rec["line"] = lineno
        getattr(st, table).add(rec)
        return TAKEN
    return parse


def _build(st, warnings: list[str]) -> dict:
    bad = st.record_errors.frame(("line", "kind"))
    for kind, rows in bad.groupby("kind", sort=False) if len(bad) else ():
        n = len(rows)
        warnings.append(f"{n} {kind} record line{'s' if n > 1 else ''} unreadable (first at line "
                        f"{int(rows['line'].min())}), dropped")
    return {"engine_steps": st.engine_steps.frame(("line",)), "engine_requests": st.engine_requests.frame(("line",))}


TINYSERVE = LogFormat(
    "tinyserve-records", take=tuple((m, _record_line(m)) for m in RECORD_LINES),
    tables={"engine_steps": columns(), "engine_requests": columns(), "record_errors": columns()}, build=_build)


def _text(source, name: str | None) -> tuple[str, str]:
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and len(source) < 4096):
        path = Path(source)
        try:
            return path.read_text(errors="replace"), name or str(path)
        except OSError as exc:
            raise LogFormatError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return str(source), name or "<text>"
