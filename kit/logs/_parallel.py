"""Parallel scan of a large log file over byte ranges (private to ``kit.logs``).

The file is cut into pieces of about ``PIECE`` bytes at clean line boundaries; forked worker processes (one per
core, :func:`workers`) scan them with the serial code (``_scan.scan_file``), one piece in memory at a time. The
calling process adds each piece's rows, in file order, to its own tables exactly as the serial scan would (same
columns, back-fill and flush points, hence the same dtypes) and builds the tables as for a serial scan.

What one line carries over to the next stays exact across a cut: a cut is made only after an SGLang or vLLM
logger line (starting with ``[`` or ``(``, which closes any benchmark block) that is not a throughput line (the
next ``SpecDecoding`` line takes its throughput); line numbers are shifted by the lines of the pieces before; a
piece starts with a placeholder ``bench_one_batch`` phase, replaced by the phase the pieces before ended with;
engine evidence of unknown lines (only the file's first ``EVIDENCE_LIMIT`` are inspected) is recorded with its
ordinal and counted at merge time; what looks at the whole run (after-idle flags, speculative normalisation)
is computed on the merged tables. Too few pieces, or a worker that dies: the caller scans serially
(``KIT_LOG_WORKERS=1``: always).
"""
from __future__ import annotations

import gc
import io
import os
import signal
import threading
from typing import Any

from kit.logs import _scan
from kit.logs._table import Columns, TemplateTable, assemble_columns

PARALLEL_MIN = 64 << 20   # files smaller than this are scanned in the calling process
PIECE = 8 << 20           # bytes per piece: small, so that the workers finish together
SEARCH = 1 << 20          # how far past a nominal cut to look for a clean line boundary
PIECE_TIMEOUT = 300       # seconds to wait for one piece (normally well under one) before giving up
_PHASE_UNSET = "\x00phase-unset"  # placeholder bench phase at the start of a piece


def workers() -> int:
    """Worker processes to use: ``KIT_LOG_WORKERS`` if set, else the CPUs this process may run on."""
    env = os.environ.get("KIT_LOG_WORKERS", "").strip()
    if env.isdigit():
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _clean_after(line: bytes) -> bool:
    """True when the serial scan state after this line carries nothing into the next one."""
    return line[:1] in (b"[", b"(") and b"Avg prompt throughput" not in line


def plan(path: str, size: int) -> list[tuple[int, int]]:
    """Byte ranges ``[start, end)`` covering the file, cut after clean lines near multiples of PIECE."""
    cuts = [0]
    with open(path, "rb") as f:
        nominal = PIECE
        while nominal < size - PIECE // 2:
            base = max(nominal - 1, cuts[-1])
            f.seek(base)
            lines = f.read(SEARCH).split(b"\n")  # the first: the (partial) line the nominal cut falls in
            cut, end = None, base + len(lines[0]) + 1
            for line in lines[1:-1]:   # the last one has no end in the window
                end += len(line) + 1
                if _clean_after(line):
                    cut = end
                    break
            if cut is not None and cut < size:
                cuts.append(cut)
                nominal = cut + PIECE
            else:
                nominal += PIECE
    cuts.append(size)
    return list(zip(cuts[:-1], cuts[1:]))


def _row_tables(st) -> list[str]:
    """The state's tables of rows (:class:`~kit.logs._table.Columns`), in the engine table's order."""
    return [n for n in st.table_names if isinstance(getattr(st, n), (Columns, _Rows))]


def _template_tables(st) -> list[str]:
    """The state's template tables (SGLang's fast path), in the engine table's order."""
    return [n for n in st.table_names if isinstance(getattr(st, n), TemplateTable)]


class _Rows(list):
    """Stands in for a :class:`~kit.logs._table.Columns` in a worker: keeps the row dicts, which the
    main process adds to its own Columns one by one, so that column creation, back-fill and flush
    points (and hence the dtypes of the table) are exactly those of a serial scan."""

    add = list.append


_MERGED_UNKNOWN = None  # shared counter: unknown lines in the pieces merged so far (set before forking)
_ONE_AT_A_TIME = threading.Lock()


def _pack(rows: list[dict]) -> tuple[tuple | None, Any]:
    """A piece's row dicts for the main process: (keys, {key: column list}) when every row has the
    same keys in the same order (the main process then extends its columns in bulk), else
    (None, rows)."""
    if not rows:
        return None, rows
    keys = tuple(rows[0])
    if any(tuple(r) != keys for r in rows):
        return None, rows
    return keys, {k: [r[k] for r in rows] for k in keys}


def _scan_piece(task: tuple[str, int, int, bool, int]) -> dict:
    """Worker: scan one byte range with a fresh State; returns what the merge needs (picklable)."""
    path, start, end, last, index = task
    gc.disable()  # as in the calling process (kit.util.no_gc); the worker exits afterwards
    st = _scan.new_state()
    st.unknown_hits = []
    merged = _MERGED_UNKNOWN
    if merged is not None and index > 0 and merged.value >= _scan.EVIDENCE_LIMIT:
        st.evidence_limit = 0  # the pieces before this one already hold that many unknown lines
    st.bench_phase = _PHASE_UNSET
    for name in _row_tables(st):
        setattr(st, name, _Rows())
    with open(path, "rb") as raw:  # one piece (PIECE bytes and the way to a clean cut) in memory at a time
        raw.seek(start)
        piece = io.BytesIO(raw.read(end - start))
    with io.TextIOWrapper(piece, encoding="utf-8", errors="replace", newline=None) as f:
        _scan.scan_file(f, st)
    if st.block is not None and not last:
        return {"ok": False}
    _scan.finish(st)
    fast = [getattr(st, n) for n in _template_tables(st)]
    for t in fast:
        t.flush()
    return {
        "ok": True,
        # each template's chunks joined in line order here, in the worker: the main process only
        # has to put the pieces one after the other
        "fast": [([assemble_columns(t.frames)] if t.frames else [], t.flushed, t.bad_lines)
                 for t in fast],
        "rows": [_pack(getattr(st, name)) for name in _row_tables(st)],
        "evidence": st.hits, "hits": st.unknown_hits, "said": st.said, "transports": st.transports,
        "server_args": st.server_args,
        "server_args_line": st.server_args_line, "versions": st.versions, "lines": st.lines,
        "unknown": st.unknown, "torn": st.torn, "torn_examples": st.torn_examples,
        "phase": st.bench_phase,
    }


def scan_parallel(path: str, size: int, n_workers: int) -> _scan.State | None:
    """Scan ``path`` in worker processes: the merged State, or None when the caller should scan serially (too
    few pieces, no fork, a cut not clean after all, a worker dead or silent for ``PIECE_TIMEOUT`` s)."""
    import multiprocessing as mp  # deferred: start-up (a small log is read without worker processes)

    if n_workers < 2 or "fork" not in mp.get_all_start_methods():
        return None
    pieces = plan(path, size)
    if len(pieces) < 2:
        return None
    with _ONE_AT_A_TIME:  # the shared counter below is module state; big reads compete for the cores anyway
        # fork: the workers start in milliseconds with kit already imported (spawn would re-import pandas)
        return _run(path, pieces, n_workers, mp.get_context("fork"))


def _run(path: str, pieces: list[tuple[int, int]], n_workers: int, ctx) -> _scan.State | None:
    """:func:`scan_parallel` once the pieces are known: fork the pool (``ctx``), merge the pieces in order."""
    global _MERGED_UNKNOWN
    tasks = [(path, a, b, i == len(pieces) - 1, i) for i, (a, b) in enumerate(pieces)]
    st = _scan.new_state()
    phase = None
    # pieces merged in order: once they hold EVIDENCE_LIMIT unknown lines, later pieces need not
    # inspect theirs for engine evidence (the serial scan stops inspecting there too)
    _MERGED_UNKNOWN = ctx.Value("q", 0, lock=False)
    # a Ctrl-C reaches the whole process group: the workers ignore it (this process stops them), and it
    # is held while they fork, so none sees it before ignoring it (no worker traceback, issue 45)
    held, pool = _hold_interrupts(), None
    try:
        pool = ctx.Pool(min(n_workers, len(pieces)), initializer=_ignore_interrupts)
        held, noted = None, held
        _release_interrupts(noted)   # a Ctrl-C noted meanwhile lands here, and the pool is stopped
        results = pool.imap(_scan_piece, tasks)  # in file order
        for _ in tasks:
            try:
                part = results.next(timeout=PIECE_TIMEOUT)
            except ctx.TimeoutError:  # a worker died (out of memory ...) or hangs: scan in this process
                return None
            if not part["ok"]:
                return None
            phase = _merge(st, part, phase)
            _MERGED_UNKNOWN.value = st.unknown
            del part
    finally:
        _release_interrupts(held)
        if pool is not None:
            pool.terminate()
            pool.join()
        _MERGED_UNKNOWN = None
    return st


def _hold_interrupts() -> list | None:
    """While the pool forks: a SIGINT is only noted (a forked child inherits the handler and a pending
    signal; there it must not raise before the worker ignores SIGINT). The notes, or None off the main
    thread (where handlers cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    noted: list = [signal.getsignal(signal.SIGINT)]
    signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    return noted


def _release_interrupts(held: list | None) -> None:
    """The handler as it was; a SIGINT noted meanwhile is raised now (KeyboardInterrupt)."""
    if held is None:
        return
    signal.signal(signal.SIGINT, held[0])
    if len(held) > 1:
        raise KeyboardInterrupt


def _ignore_interrupts() -> None:
    """A worker's start: SIGINT ignored (the parent stops the workers on a Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _merge(st: _scan.State, part: dict, phase: str | None) -> str | None:
    """Append one piece's results to ``st`` (line numbers shifted by the lines before it);
    returns the bench phase in force after the piece."""
    off = st.lines
    for name, (frames, flushed, bad) in zip(_template_tables(st), part["fast"]):
        table = getattr(st, name)
        for ch in frames:
            ch["line"] = ch["line"] + off
        table.frames.extend(frames)
        table.flushed += flushed
        table.bad_lines.extend(x + off for x in bad)
    for name, (keys, rows) in zip(_row_tables(st), part["rows"]):
        table = getattr(st, name)
        if keys is not None:  # every row has the same keys: column by column
            rows["line"] = [x + off for x in rows["line"]]
            if "phase" in rows:
                rows["phase"] = [phase if v == _PHASE_UNSET else v for v in rows["phase"]]
            table.extend_uniform(keys, rows)
            continue
        add = table.add
        for row in rows:
            row["line"] += off
            if row.get("phase") == _PHASE_UNSET:  # bench_one_batch rows before any Warmup/Benchmark line
                row["phase"] = phase
            add(row)
    for k, v in part["evidence"].items():
        st.hits[k] = st.hits.get(k, 0) + v
    for ordinal, engine in part["hits"]:
        if st.unknown + ordinal < _scan.EVIDENCE_LIMIT:
            st.hits[engine] += 1
    st.said.extend((ln + off, *rest) for ln, *rest in part["said"])
    for fam, (ln, text) in part["transports"].items():
        st.transports.setdefault(fam, (ln + off, text))
    if st.server_args is None and part["server_args"] is not None:
        st.server_args = part["server_args"]
        st.server_args_line = part["server_args_line"] + off
    st.versions.extend((e, v, ln + off) for e, v, ln in part["versions"])
    st.torn_examples = sorted(st.torn_examples + [x + off for x in part["torn_examples"]])[:5]
    st.torn += part["torn"]
    st.unknown += part["unknown"]
    st.lines += part["lines"]
    return phase if part["phase"] == _PHASE_UNSET else part["phase"]
