"""LocalHost: the Host API on this machine, through subprocess (``kit.connect("local")``): it only
starts ``bash -c`` in its own session, reads and signals it; the loop is ``_runner.py``'s."""
from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import stat as stat_mod
import subprocess

from kit.errors import RemoteError
from kit.remote import _transfer_io as io_
from kit.remote._base import Host
from kit.remote._result import FileStat
from kit.remote._runner import Process

READ_BYTES = 256 * 1024


class _LocalProcess(Process):
    """A subprocess in its own session (pid == pgid == sid), read through a selector on its pipes."""

    def __init__(self, popen: subprocess.Popen) -> None:
        self._popen = popen
        self.pg = popen.pid
        self._sel = selectors.DefaultSelector()
        for fd, pipe in ((1, popen.stdout), (2, popen.stderr)):
            self._sel.register(pipe, selectors.EVENT_READ, fd)

    @property
    def eof(self) -> bool:
        return not self._sel.get_map()

    def read(self, wait: float) -> list[tuple[int, bytes]]:
        chunks = []
        for key, _ in self._sel.select(wait):
            try:
                data = os.read(key.fd, READ_BYTES)  # retried on EINTR by Python itself (PEP 475)
            except OSError:
                data = b""
            if data:
                chunks.append((key.data, data))
            else:
                self._sel.unregister(key.fileobj)
                key.fileobj.close()
        return chunks

    def write(self, data: bytes) -> None:
        fd = self._popen.stdin.fileno()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    def close_stdin(self) -> None:
        if self._popen.stdin is not None and not self._popen.stdin.closed:
            with contextlib.suppress(OSError):
                self._popen.stdin.close()

    def exit_status(self, wait: float) -> int | None:
        try:
            code = self._popen.wait(wait)
        except subprocess.TimeoutExpired:
            return None
        return 128 - code if code < 0 else code  # killed by a signal: shell convention

    def signal(self, script: str) -> None:
        subprocess.run(["bash", "--norc", "--noprofile", "-c", script], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)

    def close(self) -> None:
        # A process that left the group may still hold the pipes open: close our ends, never leave
        # them to the garbage collector; reap the shell (it was killed if it had not ended).
        for key in list(self._sel.get_map().values()):
            self._sel.unregister(key.fileobj)
            key.fileobj.close()
        self._sel.close()
        if self._popen.poll() is None:
            try:
                self._popen.wait(2)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()


class LocalHost(Host):
    """This machine."""

    target = name = "local"
    is_local = True

    def start_process(self, script: str, *, cmd: str, stdin: bool) -> _LocalProcess:
        """``bash -c script`` in its own session (its pid is the process group the runner kills); see
        :meth:`kit.remote.Host.start_process`."""
        try:
            popen = subprocess.Popen(["bash", "--norc", "--noprofile", "-c", script],
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise RemoteError(f"local: cannot start {cmd!r}: {exc}", host=self.name) from exc
        return _LocalProcess(popen)

    # --- files ------------------------------------------------------------------------------
    def read_file(self, path: str, sink, offset: int) -> str:
        """The file itself; see :meth:`kit.remote.Host.read_file`."""
        try:
            with open(path, "rb") as src:
                src.seek(offset)
                for data in iter(lambda: src.read(io_.CHUNK), b""):
                    sink.feed(data)
        except OSError as exc:
            raise io_.file_error(self, path, exc.strerror or str(exc)) from exc
        return "copy"

    def write_file(self, local_path: str, remote_path: str, *, resume: bool = True,
                   progress: bool | None = None) -> None:
        """A copy through a temporary name beside ``remote_path``, renamed into place (mode kept)."""
        part = f"{remote_path}.kit-{os.getpid()}.part"
        try:
            shutil.copyfile(local_path, part)
            os.chmod(part, os.stat(local_path).st_mode & 0o777)
            os.replace(part, remote_path)
        except BaseException as exc:
            io_.unlink(part)
            if isinstance(exc, OSError):
                raise io_.local_error(remote_path, exc) from exc
            raise

    def listdir(self, path: str) -> list[str]:
        try:
            return os.listdir(path)
        except OSError as exc:
            raise io_.file_error(self, path, io_.os_reason(exc)) from exc

    def stat(self, path: str) -> FileStat:
        """Size, mtime, directory flag and mode of ``path`` (follows symlinks)."""
        try:
            st = os.stat(path)
        except OSError as exc:
            raise io_.file_error(self, path, io_.os_reason(exc)) from exc
        return FileStat(path=path, size=st.st_size, mtime=st.st_mtime, is_dir=stat_mod.S_ISDIR(st.st_mode),
                        mode=st.st_mode)

    def read_bytes(self, path: str) -> bytes:
        """The whole file. RemoteFileError if it is missing, a directory or unreadable."""
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except OSError as exc:
            raise io_.file_error(self, path, io_.os_reason(exc)) from exc
