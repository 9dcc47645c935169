"""Runner: the one command loop for every host kind.

A transport (``_local.py``, ``_ssh.py``) only starts the script ``Host.run`` built with :func:`shell_script`
and hands back a :class:`Process` that reads its output, takes its stdin and delivers a signal snippet.
Everything else is decided here: the process-group marker (:data:`MARK_LINE`, for a transport that cannot
learn the group itself), timeout and interrupt (the whole group and session killed by
:func:`kill_group_script`; CommandTimeout carries the partial output), output drained together into the
sinks of ``_output.py``, stdin fed from a thread in bounded chunks, the exit status (128+N for signal N,
-1 when an SSH server reported none), a dropped connection as a ConnectError, and for streams an
``on_stdout`` callable, an idle timeout and a ``cancel`` event (how ``get_many`` relays Ctrl-C)."""
from __future__ import annotations

import contextlib
import logging
import re
import shlex
import threading
import time
from dataclasses import KW_ONLY, dataclass, field
from typing import Callable

from kit.errors import CommandFailed, CommandTimeout, ConnectError, RemoteError
from kit.remote._output import TAIL_BYTES, OutputSink, open_sinks, tail_lines
from kit.remote._result import Result
from kit.util import clip

log = logging.getLogger("kit.remote")

STDIN_CHUNK = 64 * 1024  # bytes of stdin per write: a large input costs memory only once (the caller's)
KILL_GRACE_S = 1.0  # seconds between SIGTERM and SIGKILL when a command is killed on timeout or interrupt
PG_WAIT_S = 5.0  # longest wait for the command to report its process group after a timeout (SSH only)
CANCEL_POLL_S = 0.1  # longest wait between two looks at a ``cancel`` event


# The marker protocol: the first stdout line of a ``marked`` process reports its process group.
MARK_LINE = "printf '\\036KITPG %s\\n' \"$$\"\n"
MARK = re.compile(rb"\x1eKITPG (\d+)\n")
MARK_SEARCH_BYTES = 65536   # stdout searched for the marker; past that (a non-POSIX shell) it is output


class Interrupted(KeyboardInterrupt):
    """The caller was interrupted (Ctrl-C) while this command ran in a worker thread: it was killed."""


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def shell_script(cmd: str, env: dict | None, cwd: str | None, host: str) -> str:
    """What a transport runs with bash: ``env`` exported (names validated, values quoted), ``cd`` to
    ``cwd`` (exit 1 when that fails), then ``cmd``."""
    lines = []
    for key, value in (env or {}).items():
        if not _ENV_NAME.match(str(key)):
            raise RemoteError(f"{host}: invalid environment variable name {key!r}", host=host)
        lines.append(f"export {key}={shlex.quote(str(value))}\n")
    return "".join(lines) + (f"cd -- {shlex.quote(cwd)} || exit 1\n" if cwd else "") + cmd


def alive_test(pg: int) -> str:
    """A POSIX shell condition, true while a non-zombie process of session/group ``pg`` is running.
    (A session with only zombies left is dead; without ``ps``, ``kill -0`` on the group decides.)"""
    pg = int(pg)
    return (f"{{ if command -v ps >/dev/null 2>&1; then ps -o stat= -s {pg} | grep -qv '^Z'; "
            f"else kill -0 -- -{pg} 2>/dev/null; fi; }}")


def kill_group_script(pg: int, grace: float = KILL_GRACE_S) -> str:
    """The one process-group killer, a POSIX shell snippet run on the host: SIGTERM group and session
    ``pg``, wait up to ``grace`` s, SIGKILL what is left; prints ``not running``, ``terminated`` or
    ``killed``. Commands and Jobs lead their own session, so groups made inside it are reached too."""
    pg = int(pg)
    alive = alive_test(pg)
    steps = max(1, int(round(grace / 0.1)))
    return (
        f"if ! {alive}; then echo 'not running'; exit 0; fi\n"
        f"kill -TERM -- -{pg} 2>/dev/null; command -v pkill >/dev/null 2>&1 && pkill -TERM -s {pg}\n"
        f"i=0; while {alive} && [ $i -lt {steps} ]; do sleep 0.1; i=$((i+1)); done\n"
        f"if {alive}; then kill -KILL -- -{pg} 2>/dev/null; command -v pkill >/dev/null 2>&1 && pkill -KILL -s {pg};"
        f" echo killed; else echo terminated; fi\n"
    )


class Process:
    """One command started by a transport, as the runner drives it (transports subclass it). ``errors``:
    the transport's own failures, which the runner turns into a ConnectError naming host and command;
    ``pg``: the command's process group (== session) on the host, None until the host reported it."""

    errors: tuple[type[BaseException], ...] = ()
    pg: int | None = None
    marked = False   # the script began with MARK_LINE: the runner reads ``pg`` from the first stdout line

    @property
    def eof(self) -> bool:
        """Both output streams are closed and fully read."""
        raise NotImplementedError

    def read(self, wait: float) -> list[tuple[int, bytes]]:
        """Output that arrived within ``wait`` seconds: ``(1, bytes)`` for stdout, ``(2, bytes)`` for stderr."""
        raise NotImplementedError

    def write(self, data: bytes) -> None:
        """Send one chunk of stdin (blocking); fails when the command no longer takes input."""
        raise NotImplementedError

    def close_stdin(self) -> None:
        """Send EOF on stdin."""
        raise NotImplementedError

    def exit_status(self, wait: float) -> int | None:
        """The exit status once the command ended (within ``wait`` s), else None."""
        raise NotImplementedError

    def signal(self, script: str) -> None:
        """Run ``script`` (a kill snippet) on the host beside the command; best effort, bounded in time."""
        raise NotImplementedError

    def close(self) -> None:
        """Release pipes or the channel."""


@dataclass
class Runner:
    """Runs one command through a transport's ``start`` callable; see :meth:`kit.remote.Host.run`."""

    host: str
    cmd: str
    _: KW_ONLY
    timeout: float | None = None
    check: bool = False
    stream: bool = False
    input: str | bytes | None = None
    stdout_file: str | None = None
    stderr_file: str | None = None
    on_stdout: Callable[[bytes], None] | None = None
    idle_timeout: float | None = None
    cancel: threading.Event | None = None
    _idle: bool = field(default=False, init=False)

    def run(self, start: Callable[[], Process]) -> Result:
        if self.on_stdout is not None:
            out, err = OutputSink(keep=0, fn=self.on_stdout), OutputSink(keep=TAIL_BYTES)
        else:
            out, err = open_sinks(self.stdout_file, self.stderr_file, self.stream)
        t0 = time.perf_counter()
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        try:
            proc = start()
        except BaseException:
            out.close()
            err.close()
            raise
        feeder: threading.Thread | None = None
        self._killed = False
        self._head = b"" if proc.marked else None   # stdout held back until the marker line was seen
        try:
            try:
                if self.input is None:
                    proc.close_stdin()
                else:
                    feeder = threading.Thread(target=_feed, args=(proc, self.input), daemon=True,
                                              name=f"kit-stdin-{self.host}")
                    feeder.start()
                code = self._exit_code(proc, deadline) if self._drain(proc, out, err, deadline) else None
            except proc.errors as exc:
                self._kill(proc)
                raise ConnectError(f"{self.host}: connection failed while running {clip(self.cmd)!r}: "
                                   f"{exc or type(exc).__name__}", host=self.host) from exc
            if code is None:
                self._timed_out(proc, out, err)
        except BaseException:
            # Interrupted (KeyboardInterrupt: Ctrl-C, a notebook's "interrupt kernel") or failed here
            # (e.g. the local output file could not be written): the command must not live on.
            if not self._killed:
                try:
                    self._await_pg(proc, None, None, limit=2.0)  # output now is dropped: we are failing
                finally:
                    self._kill(proc)
            raise
        finally:
            with contextlib.suppress(*proc.errors):
                proc.close()
            if feeder is not None:
                feeder.join(5)  # the closed pipe or channel wakes a blocked write
            try:
                out.close()  # a local output file that cannot be flushed: RemoteFileError naming it
            finally:
                err.close()
        res = Result(cmd=self.cmd, host=self.host, stdout=out.text(), stderr=err.text(), exit_code=code,
                     duration_s=time.perf_counter() - t0, stdout_bytes=out.nbytes, stderr_bytes=err.nbytes,
                     truncated=out.truncated or err.truncated)
        if self.check and not res.ok:
            raise CommandFailed(f"{self.host}: command {clip(res.cmd)!r} exited {res.exit_code}: "
                                f"{tail_lines(res.stderr) or '(no stderr)'}", host=self.host, result=res)
        return res

    # --- the loop -----------------------------------------------------------------------------
    def _drain(self, proc: Process, out: OutputSink, err: OutputSink, deadline: float | None) -> bool:
        """Read stdout and stderr together until both close. False if the deadline passed first, or no
        output came for ``idle_timeout`` s. Each wait is short and the transport reads with timeouts, so
        nothing here starves it (SSH keeps re-keying and answering while a stream of any length runs)."""
        idle, cancel = self.idle_timeout, self.cancel
        longest = 1.0 if cancel is None else CANCEL_POLL_S
        last = time.monotonic()
        while not proc.eof:
            now = time.monotonic()
            wait = longest if deadline is None else deadline - now
            if idle is not None:
                if now - last >= idle:
                    self._idle = True
                    return False
                wait = min(wait, idle - (now - last))
            if wait <= 0:
                return False
            if cancel is not None and cancel.is_set():
                raise Interrupted(f"{self.host}: {clip(self.cmd)!r} interrupted")
            chunks = proc.read(min(wait, longest))
            if chunks:
                last = time.monotonic()
            self._feed_sinks(proc, chunks, out, err)
        self._feed_sinks(proc, [], out, err)
        return True

    def _feed_sinks(self, proc: Process, chunks: list, out: OutputSink | None, err: OutputSink | None) -> None:
        """Hand output to the sinks (None: dropped), the marker line taken out of a marked process's
        stdout; at EOF what was held back waiting for a marker that never came is output after all."""
        for fd, data in chunks:
            if fd == 1 and self._head is not None:
                data = self._unmark(proc, data)
            sink = out if fd == 1 else err
            if data and sink is not None:
                sink.feed(data)
        if proc.eof and self._head:
            if out is not None:
                out.feed(self._head)
            self._head = None

    def _unmark(self, proc: Process, data: bytes) -> bytes:
        head = self._head + data
        m = MARK.search(head)
        if m:
            proc.pg = int(m.group(1))
            self._head = None
            return head[: m.start()] + head[m.end():]
        if len(head) > MARK_SEARCH_BYTES:  # no marker: a non-POSIX login shell; keep the output anyway
            self._head = None
            return head
        self._head = head
        return b""

    @staticmethod
    def _exit_code(proc: Process, deadline: float | None) -> int | None:
        """Wait for the exit status after the output closed; None if the deadline passed first."""
        while True:
            wait = 1.0 if deadline is None else deadline - time.monotonic()
            if wait <= 0:
                return None
            code = proc.exit_status(min(wait, 1.0))
            if code is not None:
                return code

    def _await_pg(self, proc: Process, out: OutputSink | None, err: OutputSink | None,
                  limit: float = PG_WAIT_S) -> None:
        """Read until the command reported its process group (a timeout or interrupt can come before that
        first line; without it the command cannot be killed); output goes to the sinks, or nowhere (None)."""
        end = time.monotonic() + limit
        with contextlib.suppress(*proc.errors):
            while proc.pg is None and not proc.eof and time.monotonic() < end:
                self._feed_sinks(proc, proc.read(0.05), out, err)

    def _kill(self, proc: Process) -> None:
        """Best effort (the command may be beyond reach): a failure is logged, never raised over the
        error that led here."""
        self._killed = True
        if proc.pg is None:
            return
        try:
            proc.signal(kill_group_script(proc.pg))
        except Exception as exc:  # noqa: BLE001 - KitError, transport errors, a hung kill snippet
            log.warning("%s: could not kill process group %s: %s", self.host, proc.pg, exc)

    def _timed_out(self, proc: Process, out: OutputSink, err: OutputSink) -> None:
        try:
            self._await_pg(proc, out, err)
        finally:
            self._kill(proc)
        with contextlib.suppress(*proc.errors):  # what the command wrote while dying
            self._drain(proc, out, err, time.monotonic() + 0.5)
        killed = (f"its process group {proc.pg} was killed on the host" if proc.pg else
                  "the host never reported its process group, so it may still be running there")
        out.close()
        err.close()
        why = (f"sent no output for {self.idle_timeout:g} s" if self._idle
               else f"timed out after {self.timeout:g} s")
        raise CommandTimeout(f"{self.host}: command {clip(self.cmd)!r} {why}; {killed}",
                             host=self.host, cmd=self.cmd, stdout=out.text(), stderr=err.text(),
                             timeout=self.idle_timeout if self._idle else self.timeout)


def _feed(proc: Process, data: str | bytes) -> None:
    """Send a command's stdin in bounded chunks, then EOF. A command that exits (or is killed) without
    reading it all is not an error, like a broken pipe in a shell."""
    buf = memoryview(data.encode() if isinstance(data, str) else data)
    try:
        for i in range(0, len(buf), STDIN_CHUNK):
            proc.write(bytes(buf[i:i + STDIN_CHUNK]))
    except Exception as exc:  # noqa: BLE001 - the command ended (a broken pipe) or the reading side reports it
        log.debug("stdin feed stopped: %s", exc)
    finally:
        with contextlib.suppress(Exception):  # best effort on a finished command
            proc.close_stdin()
