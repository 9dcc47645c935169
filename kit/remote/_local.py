"""LocalHost: the Host API on this machine, through subprocess (the embedded default, ``kit.connect("local")``).

Commands run as ``bash --norc --noprofile -c CMD`` in their own session, so a timeout (or Ctrl-C /
kernel interrupt) can kill the whole process group, not just the shell.
"""
from __future__ import annotations

import errno
import os
import selectors
import signal
import stat as stat_mod
import subprocess
import threading
import time

from kit.errors import CommandTimeout, RemoteError
from kit.remote._base import FileStat, Host, Result, env_exports
from kit.remote._output import OutputSink, open_sinks
from kit.util import clip
from kit.util import quote as _q

KILL_GRACE_S = 1.0


def kill_process_group(pgid: int, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the group, then SIGKILL whatever is left after ``grace`` seconds."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    end = time.monotonic() + grace
    while time.monotonic() < end:
        if not _group_alive(pgid):
            return
        time.sleep(0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    """True while a non-zombie process of the group exists (zombies answer kill(0) too)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


class LocalHost(Host):
    """This machine. ``target`` and ``name`` are ``"local"``."""

    def __init__(self) -> None:
        self.target = "local"
        self.name = "local"

    def run(self, cmd: str, *, timeout: float | None = None, env: dict | None = None, cwd: str | None = None,
            check: bool = False, stream: bool = False, input: str | bytes | None = None,
            stdout_file: str | None = None, stderr_file: str | None = None) -> Result:
        """Run ``cmd`` with bash; see :meth:`kit.remote.Host.run`."""
        env_exports(env, self.name)  # validates names
        full_env = dict(os.environ)
        if env:
            full_env.update({str(k): str(v) for k, v in env.items()})
        script = cmd if cwd is None else f"cd -- {_q(cwd)} || exit 1\n{cmd}"
        out, err = open_sinks(stdout_file, stderr_file, stream)
        t0 = time.perf_counter()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            proc = subprocess.Popen(["bash", "--norc", "--noprofile", "-c", script],
                                    stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=full_env, start_new_session=True)
        except OSError as exc:
            out.close(); err.close()
            raise RemoteError(f"local: cannot start {cmd!r}: {exc}", host=self.name) from exc
        if input is not None:
            data = input.encode() if isinstance(input, str) else input
            threading.Thread(target=_feed_stdin, args=(proc.stdin, data), daemon=True).start()
        try:
            timed_out = not _drain(proc, out, err, deadline)
            if not timed_out:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    proc.wait(remaining)
                except subprocess.TimeoutExpired:
                    timed_out = True
        except BaseException:
            kill_process_group(proc.pid)
            proc.wait()
            _close_pipes(proc)
            out.close(); err.close()
            raise
        if timed_out:
            kill_process_group(proc.pid)
            _drain(proc, out, err, time.monotonic() + 0.5)
            proc.wait()
            _close_pipes(proc)  # a process that left the group may still hold them open
            out.close(); err.close()
            raise CommandTimeout(f"local: command {clip(cmd)!r} timed out after {timeout:g} s; "
                                 f"its process group was killed", host=self.name, cmd=cmd,
                                 stdout=out.text(), stderr=err.text(), timeout=timeout)
        out.close(); err.close()
        code = proc.returncode
        if code < 0:  # killed by a signal: shell convention
            code = 128 - code
        res = Result(cmd=cmd, host=self.name, stdout=out.text(), stderr=err.text(), exit_code=code,
                     duration_s=time.perf_counter() - t0)
        return self._check(res, check)

    # --- files ------------------------------------------------------------------------------
    def stat(self, path: str) -> FileStat:
        """Size, mtime, directory flag and mode of ``path`` (follows symlinks)."""
        try:
            st = os.stat(path)
        except OSError as exc:
            raise self._file_error(path, _os_reason(exc)) from exc
        return FileStat(path=path, size=st.st_size, mtime=st.st_mtime, is_dir=stat_mod.S_ISDIR(st.st_mode),
                        mode=st.st_mode)

    def read_bytes(self, path: str) -> bytes:
        """The whole file. RemoteFileError if it is missing, a directory or unreadable."""
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except OSError as exc:
            raise self._file_error(path, _os_reason(exc)) from exc


def _close_pipes(proc: subprocess.Popen) -> None:
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None and not pipe.closed:
            pipe.close()


def _feed_stdin(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
    except (BrokenPipeError, OSError):
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _drain(proc: subprocess.Popen, out: OutputSink, err: OutputSink, deadline: float | None) -> bool:
    """Read stdout and stderr concurrently until both close. False if the deadline passed first."""
    sel = selectors.DefaultSelector()
    for pipe, sink in ((proc.stdout, out), (proc.stderr, err)):
        if pipe is not None and not pipe.closed:
            sel.register(pipe, selectors.EVENT_READ, sink)
    try:
        while sel.get_map():
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                return False
            for key, _ in sel.select(wait if wait is None else min(wait, 1.0)):
                try:
                    data = os.read(key.fd, 1 << 16)
                except OSError as exc:
                    if exc.errno == errno.EINTR:
                        continue
                    data = b""
                if data:
                    key.data.feed(data)
                else:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
        return True
    finally:
        sel.close()


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file or directory"
    if isinstance(exc, IsADirectoryError):
        return "is a directory"
    if isinstance(exc, NotADirectoryError):
        return "a path component is not a directory"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return exc.strerror or str(exc)




