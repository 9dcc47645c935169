"""Collecting a command's output: incremental UTF-8 decoding, bounded tails, file sinks, live streaming.

Both host kinds feed raw byte chunks here as they arrive from the process (pipes or SSH channel),
so the decoding rules (invalid bytes replaced, never a crash) and the memory bound when output goes
to a file are the same everywhere.
"""
from __future__ import annotations

import codecs
import os
from collections import deque
from typing import IO

# When output is written to a file, the Result keeps only this many trailing bytes in memory.
TAIL_BYTES = 64 * 1024


class OutputSink:
    """Receives the byte chunks of one stream (stdout or stderr) of one command.

    - no ``path``: everything is kept and returned decoded by :meth:`text`.
    - ``path``: bytes go to that local file as they arrive; only the last ``TAIL_BYTES`` stay in memory.
    - ``echo``: a text stream (``sys.stdout`` of a terminal or a notebook kernel) that gets the decoded
      text live, chunk by chunk, flushed each time.
    """

    def __init__(self, path: str | os.PathLike | None = None, echo: IO[str] | None = None,
                 prefix: str = "") -> None:
        self._keep_all = path is None
        self._chunks: list[bytes] = []
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        self._file = open(path, "wb") if path is not None else None  # noqa: SIM115 - closed in close()
        self._echo = echo
        self._prefix = prefix
        self._at_line_start = True
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.nbytes = 0

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.nbytes += len(data)
        if self._keep_all:
            self._chunks.append(data)
        else:
            self._file.write(data)
            self._tail.append(data)
            self._tail_len += len(data)
            while self._tail_len - len(self._tail[0]) >= TAIL_BYTES:
                self._tail_len -= len(self._tail.popleft())
        if self._echo is not None:
            text = self._decoder.decode(data)
            if text:
                self._write_echo(text)

    def _write_echo(self, text: str) -> None:
        if self._prefix:
            lines = text.splitlines(keepends=True)
            out = []
            for line in lines:
                if self._at_line_start:
                    out.append(self._prefix)
                out.append(line)
                self._at_line_start = line.endswith("\n")
            text = "".join(out)
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
            self._file.close()
            self._file = None

    def text(self) -> str:
        """All output (no file) or the decoded tail (file), invalid UTF-8 replaced."""
        data = b"".join(self._chunks if self._keep_all else self._tail)
        if not self._keep_all and self.nbytes > len(data):
            # The tail may start inside a multi-byte character: drop continuation bytes at the front.
            i = 0
            while i < len(data) and i < 4 and (data[i] & 0xC0) == 0x80:
                i += 1
            data = data[i:]
        return data.decode("utf-8", "replace")


def open_sinks(stdout_file: str | None, stderr_file: str | None, stream: bool) -> tuple[OutputSink, OutputSink]:
    """The stdout and stderr sinks of one command, opened before it starts: a bad local output path
    is a RemoteFileError naming it, and the command is then never run."""
    import sys

    from kit.errors import RemoteFileError

    sinks: list[OutputSink] = []
    try:
        for path, echo in ((stdout_file, sys.stdout), (stderr_file, sys.stderr)):
            try:
                sinks.append(OutputSink(path, echo if stream else None))
            except OSError as exc:
                raise RemoteFileError(f"local: {path}: cannot write command output ({exc.strerror or exc})",
                                      host="local", path=str(path)) from exc
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
