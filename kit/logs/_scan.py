"""The one streaming scan behind ``kit.logs.read`` and ``kit.logs.settings`` (private).

Each line is offered to the engine table's parsers in order (``_formats.formats()``), each behind a cheap
substring check, so an uninteresting line costs a handful of C-level scans; records go into the formats'
tables, raw lines are never kept. A line no parser took is counted as unknown, inspected for an engine's
logger prefix (engine evidence) and read by the rows' ``notes`` (settings evidence, recorded with its line).
"""
from __future__ import annotations

import io
from typing import Iterable

import numpy as np

from kit.logs import _formats
from kit.logs._records import EVIDENCE_LIMIT, TAKEN, TAKEN_SEE_NOTES, TORN, LogFormat, State
from kit.util import strip_ansi

__all__ = ["EVIDENCE_LIMIT", "Plan", "State", "finish", "new_state", "plan", "scan", "scan_file"]


class Plan:
    """The engine table flattened for the scan: parser pairs, note pairs, logger headers, tables."""

    def __init__(self, formats: tuple[LogFormat, ...]) -> None:
        self.formats = formats
        take = []
        for f in formats:
            take += f.take
            if f.banner is not None:
                take += [(m, _banner(f.name, f.banner[1])) for m in f.banner[0]]
        self.take = tuple(take)
        self.notes = tuple(n for f in formats for n in f.notes)
        self.headers = tuple((f.header, f.name) for f in formats if f.header is not None)
        self.tables = {k: v for f in formats for k, v in f.tables.items()}
        self.names = tuple(f.name for f in formats)
        self.engines = tuple(f.name for f in formats if f.engine)
        self.bulk = tuple(f.bulk for f in formats if f.bulk is not None)


def _banner(name: str, regex):
    def parse(line: str, lineno: int, st: State) -> int:
        m = regex.search(line)
        if m is None:
            return 0
        st.versions.append((name, m.group(1), lineno))
        st.hits[name] += 1
        return TAKEN
    return parse


_PLANS: dict[tuple[int, ...], Plan] = {}


def plan() -> Plan:
    """The current engine table, flattened (once per table)."""
    formats = _formats.formats()
    key = tuple(map(id, formats))
    p = _PLANS.get(key)
    if p is None or p.formats != formats:
        p = _PLANS[key] = Plan(formats)
    return p


def new_state() -> State:
    """An empty scan state with the tables of the current engine table."""
    p = plan()
    st = State(p.tables, p.names)
    st.plan = p
    return st


def scan(lines: Iterable[str], st: State) -> State:
    """Feed every line of ``lines`` through the engine table, updating ``st``."""
    st.lines = _scan_numbered(enumerate(lines, st.lines + 1), st, st.lines)
    return st


def _scan_numbered(numbered: Iterable[tuple[int, str]], st: State, lineno: int) -> int:
    """The scan's loop over (line number, line) pairs; the last line number (``lineno`` when none)."""
    take, notes = st.plan.take, st.plan.notes
    for lineno, line in numbered:  # noqa: B007 (the last one is returned)
        line = strip_ansi(line) if "\x1b" in line else line
        if st.block is not None and st.block.take(st, line):
            continue
        if line.startswith("#"):
            st.unknown += 1  # comment/header lines (nccl-tests tables, annotated excerpts): never a record
            _notes(notes, line, lineno, st)
            continue
        r = 0
        for marker, parse in take:
            if marker in line:
                r = parse(line, lineno, st)
                if r:
                    break
        if r == TAKEN:
            continue
        if r == TORN:
            st.torn_line(lineno)
            continue
        if r == TAKEN_SEE_NOTES:
            _notes(notes, line, lineno, st)
            continue
        st.unknown += 1
        if st.unknown < st.evidence_limit:
            _unknown_evidence(line, st)
        _notes(notes, line, lineno, st)
    return lineno


def _notes(notes: tuple, line: str, lineno: int, st: State) -> None:
    """Settings evidence of a line no parser took: the first note that reads it."""
    for marker, note in notes:
        if marker in line and note(line, lineno, st):
            return


def _unknown_evidence(line: str, st: State) -> None:
    """An unparsed line whose prefix still says which engine wrote it counts as evidence of that engine."""
    for header, name in st.plan.headers:
        if header.match(line):
            if st.unknown_hits is None:
                st.hits[name] += 1
            else:
                st.unknown_hits.append((st.unknown, name))
            return


BLOCK_CHARS = 1 << 20
FIRST_BLOCK_CHARS = 1 << 15


def scan_file(f, st: State) -> State:
    """``scan(f, st)`` in blocks of whole lines: the engine table's ``bulk`` hooks take their lines out of each
    block first (SGLang's batch lines of templates already seen, one regex pass each); the rest go line by line."""
    bulk = st.plan.bulk
    while True:
        # until the first SGLang templates are known, read small blocks: their lines go line by line
        block = f.read(BLOCK_CHARS if st.bulk_templates else min(BLOCK_CHARS, FIRST_BLOCK_CHARS))
        if not block:
            break
        if block[-1] != "\n":
            block += f.readline()
        if st.bulk_templates and st.block is None and block.isascii():
            _scan_block(block, st, bulk)
        else:
            scan(io.StringIO(block), st)
    return st


def _scan_block(block: str, st: State, bulk: tuple) -> None:
    """One ASCII block of whole lines: the bulk extractors take their lines first, the scan's loop reads
    the others only (the taken ones are never split out one by one)."""
    first = st.lines + 1
    taken = [np.asarray(extract(block, first, st), dtype=np.int64) for extract in bulk]
    parts = block.split("\n")   # the lines as io.StringIO yields them, without their "\n"
    last = len(parts) - 1
    n = last if parts[last] == "" else last + 1
    keep = np.ones(n, dtype=bool)
    for lines in taken:
        keep[lines - first] = False
    rest = ((i + first, parts[i] + "\n" if i < last else parts[i]) for i in np.flatnonzero(keep).tolist())
    _scan_numbered(rest, st, st.lines)
    st.lines = first + n - 1


def finish(st: State) -> None:
    """Close a block still open at the end of the input (a truncated paste)."""
    if st.block is not None:
        st.block.close(st)
