"""Parallel scan of a large log file over byte ranges (private to ``kit.logs``).

A big log is cut into pieces of about ``PIECE`` bytes at *clean* line boundaries, and worker
processes (one per core, at most ``max_workers``) scan the pieces with the same code as the serial
path (:func:`kit._logs_scan.scan_file`); the main process receives each piece's flushed column
chunks in file order and merges them into one :class:`~kit._logs_scan.State`, on which
``kit.logs`` builds the tables exactly as for a serial scan. Each worker holds one piece at a time,
so the working memory is flat in file size; the main process holds the table chunks.

What one line of a log can carry over to the next, and how it stays exact across a cut:

* an open benchmark block, and the vLLM throughput line that the next ``SpecDecoding`` line takes
  its throughput from: a cut is only made after a line starting with ``[`` or ``(`` (an SGLang or
  vLLM logger header), which closes any block, and never after a throughput line;
* line numbers: each piece counts from 1; the main process adds the lines of the pieces before;
* the ``Warmup ...``/``Benchmark ...`` phase of ``bench_one_batch`` output: a piece starts with a
  placeholder phase, replaced at merge time by the phase the pieces before it ended with;
* engine evidence from unknown lines (only the first ``_EVIDENCE_LIMIT`` unknown lines of the file
  are inspected): recorded with each hit's ordinal and counted at merge time;
* the "first window after idle" flag, the speculative normalisation and everything else that
  looks at the whole run are computed once on the merged tables, as in the serial path.

A piece whose cut cannot be made clean (no header line within ``SEARCH`` bytes) is merged with the
next one; when fewer than two pieces remain, or a worker fails, the caller scans serially.
"""
from __future__ import annotations

import io
import os

from kit import _logs_scan as _scan

PARALLEL_MIN = 64 << 20   # files smaller than this are scanned in the calling process
PIECE = 24 << 20          # bytes per piece (a worker's working set is one piece's records)
SEARCH = 1 << 20          # how far past a nominal cut to look for a clean line boundary
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
            f.seek(max(nominal - 1, cuts[-1]))
            window = f.read(SEARCH)
            base = max(nominal - 1, cuts[-1])
            pos = window.find(b"\n")  # end of the (partial) line the nominal cut falls in
            cut = None
            while pos >= 0:
                nxt = window.find(b"\n", pos + 1)
                if nxt < 0:
                    break
                if _clean_after(window[pos + 1:nxt + 1]):
                    cut = base + nxt + 1
                    break
                pos = nxt
            if cut is not None and cut < size:
                cuts.append(cut)
                nominal = cut + PIECE
            else:
                nominal += PIECE
    cuts.append(size)
    return list(zip(cuts[:-1], cuts[1:]))


class _Range(io.RawIOBase):
    """Raw reader of bytes ``[start, end)`` of a file."""

    def __init__(self, path: str, start: int, end: int) -> None:
        self._f = open(path, "rb", buffering=0)
        self._f.seek(start)
        self._left = end - start

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(b)[:self._left]
        n = self._f.readinto(view)
        self._left -= n
        return n

    def close(self) -> None:
        self._f.close()
        super().close()


def _scan_piece(task: tuple[str, int, int, bool]) -> dict:
    """Worker: scan one byte range with a fresh State; returns what the merge needs (picklable)."""
    path, start, end, last = task
    import gc

    gc.disable()  # as in the calling process (kit._logs_scan.no_gc); the worker exits afterwards
    st = _scan.State()
    st.unknown_hits = []
    st.bench_phase = _PHASE_UNSET
    raw = _Range(path, start, end)
    with io.TextIOWrapper(io.BufferedReader(raw, 1 << 20), encoding="utf-8", errors="replace",
                          newline=None) as f:
        _scan.scan_file(f, st)
    if st.block is not None and not last:
        return {"ok": False}
    _scan.finish(st)
    for t in (st.decode_fast, st.prefill_fast, st.decode, st.prefill, st.throughput, st.vllm_spec, st.bench,
              st.nccl):
        t.flush()
    return {
        "ok": True,
        "fast": [(t.frames, t.flushed, t.bad_lines) for t in (st.decode_fast, st.prefill_fast)],
        "cols": [t.frames for t in (st.decode, st.prefill, st.throughput, st.vllm_spec, st.bench, st.nccl)],
        "evidence": st.evidence, "hits": st.unknown_hits, "server_args": st.server_args,
        "server_args_line": st.server_args_line, "versions": st.versions, "lines": st.lines,
        "unknown": st.unknown, "torn": st.torn, "torn_examples": st.torn_examples,
        "phase": st.bench_phase,
    }


def scan_parallel(path: str, size: int, n_workers: int) -> _scan.State | None:
    """Scan ``path`` in worker processes; the merged State, or None when the caller should scan
    serially (too few pieces, no fork start method, a cut that turned out not to be clean)."""
    import multiprocessing as mp

    pieces = plan(path, size)
    if len(pieces) < 2 or n_workers < 2 or "fork" not in mp.get_all_start_methods():
        return None
    tasks = [(path, a, b, i == len(pieces) - 1) for i, (a, b) in enumerate(pieces)]
    st = _scan.State()
    phase = None
    ctx = mp.get_context("fork")
    with ctx.Pool(min(n_workers, len(pieces))) as pool:
        for part in pool.imap(_scan_piece, tasks):
            if not part["ok"]:
                pool.terminate()
                return None
            phase = _merge(st, part, phase)
            del part
    return st


def _merge(st: _scan.State, part: dict, phase: str | None) -> str | None:
    """Append one piece's results to ``st`` (line numbers shifted by the lines before it);
    returns the bench phase in force after the piece."""
    off = st.lines
    for table, (frames, flushed, bad) in zip((st.decode_fast, st.prefill_fast), part["fast"]):
        for ch in frames:
            ch["line"] = ch["line"] + off
        table.frames.extend(frames)
        table.flushed += flushed
        table.bad_lines.extend(x + off for x in bad)
    for table, frames in zip((st.decode, st.prefill, st.throughput, st.vllm_spec, st.bench, st.nccl),
                             part["cols"]):
        for fr in frames:
            fr["line"] = fr["line"] + off
            if table is st.bench and "phase" in fr.columns:
                unset = (fr["phase"] == _PHASE_UNSET).to_numpy()
                if unset.any():
                    fr.loc[unset, "phase"] = phase
        table.frames.extend(frames)
    for k, v in part["evidence"].items():
        st.evidence[k] += v
    for ordinal, engine in part["hits"]:
        if st.unknown + ordinal < _scan._EVIDENCE_LIMIT:
            st.evidence[engine] += 1
    if st.server_args is None and part["server_args"] is not None:
        st.server_args = part["server_args"]
        st.server_args_line = part["server_args_line"] + off
    st.versions.extend((e, v, ln + off) for e, v, ln in part["versions"])
    st.torn_examples = sorted(st.torn_examples + [x + off for x in part["torn_examples"]])[:5]
    st.torn += part["torn"]
    st.unknown += part["unknown"]
    st.lines += part["lines"]
    return phase if part["phase"] == _PHASE_UNSET else part["phase"]
