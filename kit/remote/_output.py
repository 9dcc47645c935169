"""Collecting a command's output: incremental UTF-8 decoding (invalid bytes replaced), bounded tails,
file sinks, live streaming; the same for every host kind, fed by the runner."""
from __future__ import annotations

import codecs
import os
import sys
from collections import deque
from typing import IO, Callable

from kit.errors import RemoteFileError

TAIL_BYTES = 64 * 1024  # what the Result keeps of output written to a file (the tail)
STREAM_TAIL_BYTES = 1024 * 1024  # what it keeps of output streamed (shown live) and not written to a file


class OutputSink:
    """Receives the byte chunks of one stream (stdout or stderr) of one command: kept whole (``keep=None``)
    or only their last ``keep`` bytes (memory bounded however long the stream), written to the local file
    ``path`` as they arrive, echoed decoded to ``echo`` (the ``sys.stdout`` of a terminal or a notebook
    kernel, flushed each time), or handed to ``fn`` with nothing kept (a file transfer's payload: a
    failure of ``fn`` fails the command)."""

    def __init__(self, path: str | os.PathLike | None = None, echo: IO[str] | None = None,
                 keep: int | None = None, fn: Callable[[bytes], None] | None = None) -> None:
        self._keep = keep
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        self._path = path
        try:
            self._file = open(path, "wb") if path is not None else None  # noqa: SIM115 - closed in close()
        except OSError as exc:
            raise self._write_error(exc) from exc
        self._echo = echo
        self._fn = fn
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.nbytes = 0

    @property
    def truncated(self) -> bool:
        """True when :meth:`text` is only the tail of what was fed."""
        return self._keep is not None and self.nbytes > self._keep

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.nbytes += len(data)
        if self._fn is not None:
            self._fn(data)
            return
        if self._file is not None:
            try:
                self._file.write(data)
            except OSError as exc:
                raise self._write_error(exc) from exc
        self._tail.append(data)
        self._tail_len += len(data)
        while self._keep is not None and self._tail_len - len(self._tail[0]) >= self._keep:
            self._tail_len -= len(self._tail.popleft())
        if self._echo is not None:
            text = self._decoder.decode(data)
            if text:
                self._write_echo(text)

    def _write_echo(self, text: str) -> None:
        try:
            self._echo.write(text)
            self._echo.flush()
        except (OSError, ValueError):  # a closed terminal must not break the command
            self._echo = None

    def close(self) -> None:
        if self._echo is not None:
            rest = self._decoder.decode(b"", final=True)
            if rest:
                self._write_echo(rest)
        if self._file is not None:
            f, self._file = self._file, None
            try:
                f.close()
            except OSError as exc:
                raise self._write_error(exc) from exc

    def _write_error(self, exc: OSError) -> RemoteFileError:
        return RemoteFileError(f"local: {self._path}: cannot write command output ({exc.strerror or exc})",
                               host="local", path=str(self._path))

    def text(self) -> str:
        """All output, or the decoded tail (``keep``), invalid UTF-8 replaced."""
        data = b"".join(self._tail)
        if self._keep:
            data = data[-self._keep:]
        if self.nbytes > len(data):  # the tail may start inside a multi-byte character: drop continuation bytes
            i = 0
            while i < len(data) and i < 4 and (data[i] & 0xC0) == 0x80:
                i += 1
            data = data[i:]
        return data.decode("utf-8", "replace")


def open_sinks(stdout_file: str | None, stderr_file: str | None, stream: bool) -> tuple[OutputSink, OutputSink]:
    """The stdout and stderr sinks of one command, opened before it starts (a bad local path is a RemoteFileError
    naming it). Everything is kept unless the stream goes to a file (the last ``TAIL_BYTES``) or is shown live
    (the last ``STREAM_TAIL_BYTES``)."""
    sinks: list[OutputSink] = []
    try:
        for path, echo in ((stdout_file, sys.stdout), (stderr_file, sys.stderr)):
            keep = TAIL_BYTES if path is not None else STREAM_TAIL_BYTES if stream else None
            sinks.append(OutputSink(path, echo if stream else None, keep=keep))
    except BaseException:
        for sink in sinks:
            sink.close()
        raise
    return sinks[0], sinks[1]


def tail_lines(text: str, n: int = 5, width: int = 300) -> str:
    """The last ``n`` non-empty lines of ``text`` joined by `` | ``, for one-line error messages."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    out = " | ".join(lines[-n:])
    return out if len(out) <= width else "..." + out[-width:]
