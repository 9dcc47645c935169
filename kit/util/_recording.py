"""The run catalogue's hook: the ``@recorded(kind)`` decorator the kit's public entry points wear, the writer
the catalogue installs, and the ``kit`` command line this process runs.

A result records itself: its type defines ``to_record(args) -> dict`` beside ``to_dict()`` (the keyword
arguments of ``kit.runs.record``: inputs, settings, figures, facts, tables, warnings, label), in its own
package (a type the kit does not own, a DataFrame, gets the catalogue's default). Nothing here imports the
catalogue: ``kit.runs`` installs its writer when it is loaded (:func:`set_writer`), so a program records once
it has loaded the catalogue (``import kit.runs``; the ``kit`` command and the MCP server do), and the packages
low in the house never import it.

The ``kit`` command defers its runs (:func:`deferred`): a recorded call queues its result and the command
writes the queue after it has printed its answer, in a child that outlives it (:func:`flush_detached`), so
the catalogue's imports, redaction and Parquet writing are off the path to the answer.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import time
from typing import Callable, Iterator

_OFF = ("off", "0", "no", "false", "none", "")
_WRITER: list = []   # [the writer, its hold()], or empty
_RECORDING: contextvars.ContextVar[bool] = contextvars.ContextVar("kit_recording", default=False)
_QUEUE: list[tuple] = []
_DEFERRED: list[bool] = []
_COMMAND_LINE: list[str] = []


def recording_on() -> bool:
    """Is recording wanted (``KIT_RUNS`` not ``off``, ``0``, ``no``, ``false``, ``none`` or empty)?"""
    return os.environ.get("KIT_RUNS", "on").strip().lower() not in _OFF


def set_writer(fn: Callable[..., None] | None, hold: Callable[[], int] | None = None) -> None:
    """Install ``fn(kind, result, args, elapsed_s, command)``: what writes a recorded call's result (the run
    catalogue installs its own when loaded; ``None`` removes it). ``hold()``: a lock held (the descriptor
    returned) while a detached child writes (:func:`flush_detached`)."""
    _WRITER[:] = [fn, hold] if fn is not None else []


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Inside the block, queue the results of recorded calls instead of writing them at once, for
    :func:`flush` (the ``kit`` command: its answer first, the catalogue after); what is still queued when
    the block ends is dropped (the command wrote it, or failed before it could)."""
    _DEFERRED.append(True)
    try:
        yield
    finally:
        _DEFERRED.pop()
        if not _DEFERRED:
            _QUEUE.clear()


def pending() -> int:
    """How many recorded results wait in the queue."""
    return len(_QUEUE)


def flush() -> None:
    """Write the queued results through the installed writer (nothing without one)."""
    while _QUEUE and _WRITER:
        _WRITER[0](*_QUEUE.pop(0))


def flush_detached() -> bool:
    """Write the queued results in a child process that outlives this one, so that the ``kit`` command ends
    with its answer: the catalogue's imports, input hashes, redaction and Parquet writing (0.2 s and more
    after a trace summary) no longer count in the command's time. The lock the writer installed with
    :func:`set_writer` (``hold``) is taken here, before the fork, and kept by the child: a ``kit runs``
    started after this command waits for the run. The child starts a session of its own with its standard
    streams on ``/dev/null`` (a caller reading this command's output sees it end now; a failure to record
    is counted in the store's ``failures.jsonl``). Returns False, writing nothing, where no child can be
    made: the caller then writes in this process."""
    if not _QUEUE or not _WRITER or not hasattr(os, "fork"):
        return False
    try:
        held = _WRITER[1]() if _WRITER[1] is not None else None
    except Exception:  # noqa: BLE001 - an unwritable store: the writer counts the failure when it writes
        held = None
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid:
        if held is not None:
            os.close(held)   # the child's copy keeps the lock
        _QUEUE.clear()
        return True
    try:   # the child: nothing may climb back into the command's own code
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        flush()
    finally:
        os._exit(0)


def recorded(kind: str):
    """Decorator for a public entry point: hand what the outermost decorated call returned, with the call's
    bound arguments, to the writer (or the queue, see :func:`deferred`). With ``KIT_RUNS=off``, no writer and no
    queue, or inside another decorated call, the plain call; recording never changes the result or raises."""
    def wrap(fn):
        sig: list = []   # the signature, read on the first recorded call (inspect is slow to import)

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            if _RECORDING.get() or not (_WRITER or _DEFERRED) or not recording_on():
                return fn(*args, **kwargs)
            token = _RECORDING.set(True)
            t0 = time.perf_counter()
            try:
                result = fn(*args, **kwargs)
            finally:
                _RECORDING.reset(token)
            if not sig:
                import inspect  # deferred: start-up (only a recorded call needs it)

                sig.append(inspect.signature(fn))
            try:
                bound = dict(sig[0].bind_partial(*args, **kwargs).arguments)
            except TypeError:
                bound = {}
            call = (kind, result, bound, time.perf_counter() - t0, command_line())
            if _DEFERRED:
                _QUEUE.append(call)
            else:
                _WRITER[0](*call)
            return result
        return inner
    return wrap


def set_command_line(argv: list[str] | None) -> None:
    """The ``kit`` command line this process runs (set by ``kit.cli``; runs recorded under it carry it)."""
    _COMMAND_LINE[:] = list(argv or [])


def command_line() -> str | None:
    """``kit profile summary x.json.gz`` when this process is a ``kit`` command, else None."""
    return "kit " + " ".join(_COMMAND_LINE) if _COMMAND_LINE else None

