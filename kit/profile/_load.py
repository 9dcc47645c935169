"""The trace loader: format detection, every cache decision, and parsing one file per rank in parallel.

From paths to tables, in one place:

1. ``kit.profile.reading._io.detect`` decides each file's format (bad input fails here, before any work);
2. one cache entry holds the whole assembled profile (keyed by every file's identity and the rule
   table) — a hit returns it (reopening costs reading the cached tables, no assembly);
3. otherwise each file is parsed — by the worker processes ``prefetch`` started before
   pandas was imported, by a process pool when the files are big, or in this process;
4. ``_assemble.assemble`` puts the parsed files together into a profile, and it is stored.

pandas and numpy come with ``_assemble``, imported inside the functions that build frames, so ``prefetch``
(the CLI calls it first) starts the workers before the ~0.5 s pandas import, and the two overlap.
"""
from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from kit.profile.attribution._categories import build_rules
from kit.profile.reading import _cache
from kit.profile.reading._io import detect, split
from kit.profile.reading._read import coded, merge, read_raw

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

# files bigger than this together are worth a process pool (spawn costs ~0.2 s)
PARALLEL_MIN_BYTES = 16 << 20
# below this much uncached input, prefetch workers cost more than they save
PREFETCH_MIN_BYTES = 8 << 20


@contextmanager
def system_arrow_pool():
    """Build the tables with pyarrow's system allocator (pandas 3 keeps strings in arrow arrays).

    Why: arrow's default pool (mimalloc/jemalloc) keeps freed memory for reuse, so the short-lived
    string columns of parsing and attribution pile up in the peak RSS (+40 MiB on a 229 MB trace);
    the system allocator returns them. Only the pool for new buffers changes, and only while
    loading: the previous pool is restored and buffers already made keep theirs."""
    import pyarrow as pa  # deferred: after prefetch's workers have started (module docstring)

    old = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(old)


class ForkedParse:
    """One file parsed by a child forked from this process; its result comes back pickled through a pipe.

    Why not the process pool: a spawned worker starts a new interpreter and imports the reader, then
    competes with the pandas import for the CPUs; a forked child starts parsing at once (a cold
    ``kit profile summary`` of 57 MB: 0.88x the spawned worker's time, ``bench/reader_choices.py``).
    Only used while forking is safe: Linux, one thread, no numpy/pandas/pyarrow loaded (their thread
    pools) — what ``kit profile summary`` is when it calls :func:`prefetch`."""

    def __init__(self, path: str, fmt: str, part: tuple | None = None) -> None:
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child: parse, send (ok, result or exception), and leave without any cleanup
            code = 0
            try:
                os.close(rfd)
                signal.signal(signal.SIGINT, signal.SIG_DFL)   # Ctrl-C ends it with the parent's group
                try:
                    raw = read_raw(path, fmt, part)   # a whole file's text columns coded here (a part's after merge)
                    out = pickle.dumps((True, raw if part else coded(raw)), protocol=pickle.HIGHEST_PROTOCOL)
                except Exception as exc:  # noqa: BLE001 - handed to the parent, which raises it
                    out = _pickled_error(exc)
                with os.fdopen(wfd, "wb") as f:
                    f.write(out)
            except BaseException:  # noqa: BLE001 - the parent sees an empty pipe and parses itself
                code = 1
            finally:
                os._exit(code)
        os.close(wfd)
        self.path, self.fmt, self.part, self._pid, self._fd = path, fmt, part, pid, rfd

    def result(self) -> dict:
        """The parsed file (what ``read_raw`` returns), handed over once: this object keeps no reference,
        so its lists are freed as soon as the caller has built its tables. The child's error is raised
        here. A child that died without answering (killed, out of memory) costs a parse in this
        process, not the answer; an interrupt while waiting (Ctrl-C) stops the child before it rises."""
        if self._fd < 0:
            raise RuntimeError(f"the parse of {self.path} was already taken or cancelled")
        fd, self._fd = self._fd, -1   # the file object below owns (and closes) it
        chunks = []
        try:
            with os.fdopen(fd, "rb") as f:
                while chunk := f.read(1 << 20):
                    chunks.append(chunk)
        except BaseException:
            self._stop(kill=True)
            raise
        self._stop(kill=False)
        data = b"".join(chunks)
        del chunks
        ok, value = pickle.loads(data) if data else (True, read_raw(self.path, self.fmt, self.part))
        del data
        if not ok:
            raise value
        return value

    def cancel(self) -> None:
        """Stop the child if its result was not taken."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._stop(kill=True)

    def _stop(self, kill: bool) -> None:
        """Kill (when asked) and reap the child, once."""
        if self._pid <= 0:
            return
        if kill:
            with suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
        with suppress(ChildProcessError):
            os.waitpid(self._pid, 0)
        self._pid = 0


class SplitParse:
    """One big plain-JSON Kineto file read by one forked child per part (``reading._kineto.split``: byte
    ranges cut at event boundaries), merged into the whole file's tables (the same rows, in order). A part
    that fails (a cut inside a value, an error) costs a parse of the whole file here, which then reports
    what is wrong with it."""

    def __init__(self, path: str, fmt: str, parts: list) -> None:
        self.path, self.fmt = path, fmt
        self._parts = [ForkedParse(path, fmt, part) for part in parts]

    def result(self) -> dict:
        try:
            merged = merge(self.path, [p.result() for p in self._parts])
        except Exception:  # noqa: BLE001 - the whole file is read below and says what is wrong
            merged = None
        finally:
            self.cancel()
        return merged if merged is not None else read_raw(self.path, self.fmt)

    def cancel(self) -> None:
        for p in self._parts:
            p.cancel()


def _forked(path: str, fmt: str, cores: int) -> "ForkedParse | SplitParse":
    """A forked parse of ``path``: in parts, one per core it may use, where the file is big and plain JSON."""
    parts = split(path, cores) if fmt == "kineto" else None
    return SplitParse(path, fmt, parts) if parts else ForkedParse(path, fmt)


def _pickled_error(exc: Exception) -> bytes:
    try:
        return pickle.dumps((False, exc))
    except Exception:  # noqa: BLE001 - an exception that does not pickle goes back as its text
        return pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))


def _fork_is_safe() -> bool:
    """Linux, this thread alone, and no library loaded that runs its own threads (a fork copies only
    the calling thread: a lock held by another would stay locked in the child)."""
    return (sys.platform == "linux" and threading.active_count() == 1
            and not any(m in sys.modules for m in ("numpy", "pandas", "pyarrow", "torch")))


class Prefetch:
    """Parses started in worker processes before pandas is imported (see :func:`prefetch`); hand it
    to ``kit.profile.load(paths, prefetched=...)``, then ``close()`` it (or use ``with``).

    ``futures``: path -> its parse under way (an object with ``result()``: a :class:`ForkedParse` or a
    process pool's ``Future``)."""

    def __init__(self, futures: dict | None = None, executor: "ProcessPoolExecutor | None" = None) -> None:
        self.futures = futures or {}
        self._executor = executor
        self._taken: list[ForkedParse] = []

    def take(self, path: str) -> "ForkedParse | SplitParse | Future | None":
        """The parse under way for ``path`` (handed over: this object no longer holds it), or None."""
        fut = self.futures.pop(path, None)
        if isinstance(fut, (ForkedParse, SplitParse)):
            self._taken.append(fut)   # still stopped by close() if its result is never read
        return fut

    def close(self) -> None:
        """Stop the workers (parses not yet collected are cancelled)."""
        for fut in [*self.futures.values(), *self._taken]:
            if isinstance(fut, (ForkedParse, SplitParse)):
                fut.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> "Prefetch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Prefetch(files={len(self.futures)})"


def prefetch(paths: list[str], cache: bool = True, rules=None) -> Prefetch:
    """Start parsing the uncached trace files in worker processes, when they are big enough to be
    worth it, so parsing overlaps the ~0.5 s pandas import (what ``kit profile summary`` does first).

    Returns a :class:`Prefetch` (empty when nothing is worth starting); pass it to
    ``kit.profile.load(paths, prefetched=...)`` with the same arguments. Any problem (bad path, no
    cache dir) just means no prefetch: ``load`` then parses and reports errors itself."""
    try:
        if cache and _cache.has_profile(_cache.profile_key(paths, build_rules(rules))):
            return Prefetch()
        todo = [str(p) for p in paths]
        if not all(Path(p).is_file() for p in todo):
            return Prefetch()
        if not todo or sum(_work_bytes(Path(p)) for p in todo) < PREFETCH_MIN_BYTES:
            return Prefetch()
        cores = os.cpu_count() or 1
        if len(todo) <= cores and _fork_is_safe():
            return Prefetch({p: _forked(p, detect(Path(p)), cores // len(todo)) for p in todo})
        ex = _pool(min(len(todo), os.cpu_count() or 1))
        return Prefetch({p: ex.submit(read_raw, p, detect(Path(p))) for p in todo}, ex)
    except Exception:  # noqa: BLE001 - no prefetch; load() reports any problem itself
        return Prefetch()


def _pool(workers: int) -> "ProcessPoolExecutor":
    """A pool of spawned workers (safe whatever threads this process runs)."""
    import multiprocessing as mp  # deferred: only for a pool (kit profile summary must not load it)
    from concurrent.futures import ProcessPoolExecutor  # deferred: as multiprocessing

    return ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))


def _work_bytes(path: Path) -> int:
    """About how many bytes parsing ``path`` reads: a gzip trace inflates ~10x (JSON compresses well)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        return size * 10 if f.read(2) == b"\x1f\x8b" else size


def load(paths: list[Path], rules: list, cache: bool, prefetched: Prefetch | None = None,
         step_marker: str | None = None) -> dict:
    """The assembled profile of ``paths`` as ``{**tables, "meta", "warnings"}``: from the cache when it
    holds it, else parsed (``prefetched`` parses used where given), assembled (``_assemble``) and cached."""
    from kit.profile._assemble import TABLES, assemble  # deferred: pandas, after prefetch (module docstring)

    fmts = [detect(p) for p in paths]   # bad input says so even when a cache entry exists
    key = _cache.profile_key(paths, rules, step_marker) if cache else None
    if key is not None:
        hit = _cache.load_profile(key, TABLES)
        if hit is not None:
            hit["meta"]["ranks"] = {int(r): {**m, "cached": True} for r, m in hit["meta"]["ranks"].items()}
            return hit
    # one cache entry per profile (below), whatever the number of ranks: reopening reads its tables only
    with system_arrow_pool():
        parsed = load_files(paths, fmts, cache=False, prefetched=prefetched)
        prof = assemble(paths, parsed, rules, cache, step_marker)
        if key is not None:
            _cache.store_profile(key, {t: prof[t] for t in TABLES}, {"meta": prof["meta"],
                                                                     "warnings": prof["warnings"]})
    return prof


def load_files(paths: list[Path], fmts: list[str] | None = None, cache: bool = True, parallel: bool | None = None,
               prefetched: Prefetch | None = None) -> list[dict]:
    """Per-file parsed tables (read from and written to the cache when ``cache``), in the order of
    ``paths``. ``prefetched``: the parses :func:`prefetch` started."""
    fmts = fmts or [detect(p) for p in paths]
    results: list[dict | None] = [None] * len(paths)
    prefetched = prefetched or Prefetch()
    todo = []
    for i, p in enumerate(paths):
        hit = _cache.load(p) if cache else None
        if hit is not None:
            results[i] = {**hit, "cached": True}
        elif str(p) in prefetched.futures:   # each parse taken once: the lists are freed once its tables are built
            results[i] = _done(p, prefetched.take(str(p)).result(), cache)
        else:
            todo.append(i)
    total = sum(paths[i].stat().st_size for i in todo)
    if len(todo) > 1 and (parallel if parallel is not None else total >= PARALLEL_MIN_BYTES):
        with _pool(min(len(todo), os.cpu_count() or 1)) as ex:
            raws = list(ex.map(read_raw, [str(paths[i]) for i in todo], [fmts[i] for i in todo]))
    else:
        raws = [read_raw(str(paths[i]), fmts[i]) for i in todo]
    for i, raw in zip(todo, raws):
        results[i] = _done(paths[i], raw, cache)
    return results  # type: ignore[return-value]


def _done(path: Path, raw: dict, store: bool) -> dict:
    from kit.profile._assemble import checked_frames  # deferred: pandas, after prefetch (module docstring)

    fr = checked_frames(raw, path.name)
    if store:
        _cache.store(path, fr)
    fr["cached"] = False
    return fr
