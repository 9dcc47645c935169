"""Transfer mechanics shared by the policy (``_transfer.py``) and the transports: the :class:`Sink`
a download's bytes go to (decompressed on the way, zstd or gzip, bounded per chunk so a zip bomb
cannot blow memory, counted on a bar), :func:`stream` (a host command whose stdout is the payload,
run by the host's one runner; this only names its failures after the file), the names of partial
files, and the errors that name a file."""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import threading
import zlib
from typing import IO, Any

from kit.errors import CommandTimeout, ConnectError, RemoteFileError
from kit.util import clip
from kit.util import progress as progress_bar

CHUNK = 1 << 20
PROGRESS_DELAY_S = 1.0


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


def part_prefix(base: str) -> str:
    """``.kit-<hash>-``: how the partial files of every version of the file ``base`` begin."""
    return f".kit-{hashlib.sha1(base.encode('utf-8', 'surrogateescape')).hexdigest()[:12]}-"


def part_name(base: str, size: int, mtime: float) -> str:
    """The partial file beside ``base`` while one version of it moves: ``.kit-<hash>-<size>-<mtime>.part``."""
    return f"{part_prefix(base)}{size}-{int(mtime)}.part"


def unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def bar(desc: str, total: int, progress: bool | None):
    """The bar of a transfer (:func:`kit.util.progress`), a context manager: drawn once the transfer has
    run a second in a terminal or notebook (``progress=True``: at once; ``False``: never)."""
    return progress_bar(desc, total, show=progress, delay=PROGRESS_DELAY_S if progress is None else 0)


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
