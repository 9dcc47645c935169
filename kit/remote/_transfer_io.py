"""Transfer mechanics: how bytes move, with no decision about which file, whether, or from where.

- :class:`Sink`: where a download's bytes go (a file or memory), decompressed on the way (zstd,
  gzip; bounded output per input chunk, so a zip bomb cannot blow memory) and counted on a bar.
- :func:`stream`: a host command whose stdout is the payload, run by the host's one runner
  (``Host.run`` with ``on_stdout``): its process group, exit status, idle timeout, kill on
  Ctrl-C or ``cancel`` are the runner's; this only names the failures after the file.
- SFTP (for hosts without a POSIX shell, uploads and listings), through the host's public
  ``sftp_call``: a windowed reader (:func:`sftp_read`), a pipelined writer (:func:`sftp_write`).
- the local file system, for ``LocalHost``.

Policy (resume, codec choice, skip, many files) is ``_transfer.py``'s.
"""
from __future__ import annotations

import contextlib
import io
import os
import stat as stat_mod
import threading
import zlib
from typing import IO, Any

from kit.errors import CommandTimeout, ConnectError, RemoteFileError
from kit.util import clip

CHUNK = 1 << 20
PROGRESS_DELAY_S = 1.0
SFTP_REQUEST = 255 * 1024


def zstandard_module():
    """The ``zstandard`` package, or None when it is not installed here."""
    try:
        import zstandard  # optional: the codec where it is installed
    except ImportError:
        return None
    return zstandard


def file_error(host: Any, path: str, what: str) -> RemoteFileError:
    """The one-line error for a file on ``host``: ``host: path: what``."""
    return RemoteFileError(f"{host.name}: {path}: {what}", host=host.name, path=path)


# what an OSError means for a file, by its class
_OS_REASONS = ((FileNotFoundError, "no such file or directory"), (IsADirectoryError, "is a directory"),
               (NotADirectoryError, "a path component is not a directory"), (PermissionError, "permission denied"))


def os_reason(exc: OSError) -> str:
    """The reason an OSError gives for a file, in the words of :func:`file_error`'s messages."""
    return next((why for cls, why in _OS_REASONS if isinstance(exc, cls)), exc.strerror or str(exc)
                or type(exc).__name__)


def local_error(path: str, exc: OSError) -> RemoteFileError:
    return RemoteFileError(f"local: {path}: {exc.strerror or exc}", host="local", path=path)


def unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def bar(desc: str, total: int, initial: int, progress: bool | None):
    """A tqdm bar shown for transfers still running after a second (``progress=True``: at once)."""
    if progress is False:
        return None
    from tqdm.auto import tqdm  # deferred: a drawn bar only (kit --help loads kit.remote)

    return tqdm(total=total, initial=initial, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, leave=False,
                delay=0 if progress else PROGRESS_DELAY_S)


class Sink:
    """Where the bytes go: a file or memory, with optional streaming decompression and a progress bar."""

    def __init__(self, fh: IO[bytes], codec: str | None, bar) -> None:
        self.fh = fh
        self.bar = bar
        self.written = 0
        self.wire = 0
        self._z = None
        self._zw = None
        if codec == "gzip":
            self._z = zlib.decompressobj(wbits=31)
        elif codec == "zstd":
            self._zw = zstandard_module().ZstdDecompressor().stream_writer(_Counter(self), write_size=CHUNK,
                                                                           closefd=False)

    def feed(self, data: bytes) -> None:
        self.wire += len(data)
        if self._zw is not None:
            self._zw.write(data)
        elif self._z is not None:
            buf = data
            while buf:
                out = self._z.decompress(buf, 16 * CHUNK)  # bounded even for a zip bomb
                self._out(out)
                buf = self._z.unconsumed_tail
        else:
            self._out(data)

    def _out(self, data: bytes) -> None:
        if data:
            self.fh.write(data)
            self.written += len(data)
            if self.bar is not None:
                self.bar.update(len(data))

    def finish(self) -> None:
        if self._zw is not None:
            self._zw.flush()
        elif self._z is not None:
            self._out(self._z.flush())
            if not self._z.eof:
                raise ValueError("compressed stream ended early")


class _Counter(io.RawIOBase):
    """File-like target for zstandard's stream_writer that lands in a Sink."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self._sink._out(bytes(b))
        return len(b)


def stream(host: Any, cmd: str, path: str, sink: Sink, *, idle: float, env: dict,
           cancel: threading.Event | None = None) -> None:
    """Run ``cmd`` on ``host`` (under ``set -o pipefail``) with its stdout fed to ``sink`` as it arrives.
    The runner kills the command's process group when no byte came for ``idle`` s, on Ctrl-C and when
    ``cancel`` is set; here the outcomes become errors naming ``host: path``."""
    try:
        res = host.run("set -o pipefail\n" + cmd, env=env or None, on_stdout=sink.feed, idle_timeout=idle,
                       cancel=cancel)
    except CommandTimeout:
        raise file_error(host, path, f"no data from the host within {idle:g} s (host or file system not "
                                     f"responding); its reader process group was killed there") from None
    except ConnectError as exc:
        raise ConnectError(f"{host.name}: connection lost while reading {path}; get() again continues from "
                           f"what arrived ({clip(str(exc), 200)})", host=host.name) from exc
    if res.exit_code == -1:  # closed without an exit status: the connection went away mid-transfer
        raise ConnectError(f"{host.name}: connection lost while reading {path}; get() again continues from "
                           f"what arrived", host=host.name)
    if res.exit_code != 0:
        why = res.stderr.strip().splitlines()
        reason = why[-1] if why else f"exit code {res.exit_code}"
        low = reason.lower()
        if "no such file" in low:
            reason = "no such file or directory"
        elif "permission denied" in low:
            reason = "permission denied"
        raise file_error(host, path, f"transfer failed: {clip(reason, 200)} ({cmd.split()[0]} exited "
                                     f"{res.exit_code})")


def read_local(host: Any, path: str, sink: Sink, offset: int) -> None:
    """Bytes of a file on this machine from ``offset`` into ``sink``."""
    try:
        with open(path, "rb") as src:
            src.seek(offset)
            for data in iter(lambda: src.read(CHUNK), b""):
                sink.feed(data)
    except OSError as exc:
        raise file_error(host, path, exc.strerror or str(exc)) from exc


class _Collect:
    """paramiko SFTP response target for the windowed reader."""

    def __init__(self) -> None:
        self.got: dict = {}

    def _async_response(self, t, msg, num) -> None:
        self.got[num] = (t, msg)


def sftp_read(host: Any, path: str, sink: Sink, offset: int, request: int = SFTP_REQUEST, window: int = 32) -> None:
    """SFTP download with a bounded window of concurrent reads (for hosts without a shell)."""
    from paramiko.sftp import CMD_DATA, CMD_READ, CMD_STATUS, int64  # deferred: paramiko, SSH hosts only

    def read(sftp):
        with sftp.open(path, "rb") as fh:
            col = _Collect()
            pending: list = []
            off, eof = offset, False
            while pending or not eof:
                while not eof and len(pending) < window:
                    pending.append((sftp._async_request(col, CMD_READ, fh.handle, int64(off), int(request)), off))
                    off += request
                num, _ = pending.pop(0)
                while num not in col.got:
                    sftp._read_response()
                t, msg = col.got.pop(num)
                if t == CMD_STATUS:
                    try:
                        sftp._convert_status(msg)
                    except EOFError:
                        eof = True
                        continue
                if t != CMD_DATA:
                    raise OSError(f"unexpected SFTP reply {t}")
                data = msg.get_string()
                sink.feed(data)
                if len(data) < request:  # short read: the end of the file; drop the rest
                    eof = True
                    for n, _ in pending:
                        while n not in col.got:
                            sftp._read_response()
                        col.got.pop(n)
                    pending = []
    host.sftp_call(path, read)


def sftp_size(host: Any, path: str) -> int | None:
    """Size of a regular file over SFTP, or None when there is none at ``path``."""
    try:
        st = host.sftp_call(path, lambda s: s.stat(path))
    except RemoteFileError:
        return None
    return int(st.st_size or 0) if stat_mod.S_ISREG(st.st_mode or 0) else None


def sftp_write(host: Any, local_path: str, remote_tmp: str, offset: int, bar) -> None:
    """Pipelined SFTP upload of ``local_path`` from ``offset`` into ``remote_tmp`` (255 KiB writes,
    bounded by the channel window)."""
    def upload(sftp):
        with open(local_path, "rb") as src, sftp.open(remote_tmp, "r+b" if offset else "wb") as dst:
            dst.MAX_REQUEST_SIZE = SFTP_REQUEST
            dst.set_pipelined(True)
            if offset:
                dst.seek(offset)
                src.seek(offset)
            for data in iter(lambda: src.read(CHUNK), b""):
                dst.write(data)
                if bar is not None:
                    bar.update(len(data))
    host.sftp_call(remote_tmp, upload)


def sftp_finish(host: Any, remote_tmp: str, remote_path: str, size: int, mode: int, times: tuple) -> None:
    """Check the uploaded size, copy mode and times, rename into place."""
    def finish(sftp):
        if sftp.stat(remote_tmp).st_size != size:
            raise OSError(f"size mismatch after upload (local {size:,} bytes)")
        sftp.chmod(remote_tmp, mode & 0o777)
        sftp.utime(remote_tmp, times)
        sftp.posix_rename(remote_tmp, remote_path)
    host.sftp_call(remote_path, finish)


def sftp_listdir(host: Any, path: str) -> list[str]:
    return host.sftp_call(path, lambda s: s.listdir(path))
