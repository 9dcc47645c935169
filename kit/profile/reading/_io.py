"""Trace format detection and reading files into bytes: gzip by magic bytes, truncated-gzip salvage.

Why: traces come as ``.json``, ``.json.gz`` or renamed files; HTA decides gzip by suffix only and
dies with an opaque error on anything else. Here the first bytes decide, and every failure is one
line naming the file and what is wrong. ``detect`` is THE format decision (the loader calls it once
per file and hands the result to the reader); it is standard-library only, so the remote zipapp
decides formats with the same code.
"""
from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

from kit.errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
"""Where one event of a chrome trace's array ends and the next begins (also text inside a value, rarely)."""


def sniff(path: Path) -> str:
    """Return 'gzip', 'sqlite', 'json' or 'text' from the first bytes; raise TraceError on bad input."""
    if not path.exists():
        raise TraceError(f"{path}: no such file", path=str(path))
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace file (pass the files inside it)", path=str(path))
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})", path=str(path)) from None
    if not head:
        raise TraceError(f"{path}: empty file", path=str(path))
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped[:1] == b"{":
        return "json"
    if stripped[:1] == b"[" and stripped[1:].lstrip()[:1] in (b"{", b"]", b""):
        return "json"   # a bare array of events (chrome trace array form)
    if b"\x00" in head or sum(c < 9 or 13 < c < 32 for c in head) > 4:
        raise TraceError(f"{path}: binary data, not a Kineto JSON trace, nsys CSV or nsys SQLite export",
                         path=str(path))
    return "text"


def read_bytes(path: Path, kind: str) -> tuple[bytes, list[str]]:
    """The (decompressed) bytes of ``path`` and warnings, read as :func:`blocks` reads them."""
    warnings: list[str] = []
    return b"".join(blocks(path, kind, warnings)), warnings


BLOCK = 4 << 20
MAX_RATIO = 200
"""Profiler traces compress 5-30x (repetitive JSON); a stream expanding more than this is a
decompression bomb, not a trace, once past ``RATIO_FROM`` bytes (small files may expand more)."""
RATIO_FROM = 256 << 20
MAX_BYTES = 64 << 30
"""The most decompressed bytes one trace file may hold (several times the largest real traces)."""


def _bomb(path: Path, got: int, raw_len: int) -> None:
    if got > MAX_BYTES:
        raise TraceError(f"{path}: more than {MAX_BYTES >> 30} GiB once decompressed: not read (the most one trace "
                         f"file may hold)", path=str(path))
    if got > RATIO_FROM and got > MAX_RATIO * max(raw_len, 1):
        raise TraceError(f"{path}: gzip data expands more than {MAX_RATIO}x ({got:,} bytes from the first "
                         f"{raw_len:,}): a decompression bomb, not a profiler trace (traces compress 5-30x); "
                         f"stopped", path=str(path))


def blocks(path: Path, kind: str, warnings: list[str], size: int = BLOCK):
    """The (decompressed) bytes of ``path`` in blocks of about ``size``, so a reader holds a few MB of
    the file at a time, not all of it; a cut or corrupt gzip stream yields what inflated and says so
    in ``warnings``. The decompressed size is watched: more than ``MAX_RATIO`` times the compressed
    bytes read (past ``RATIO_FROM``) or more than ``MAX_BYTES`` is a TraceError, at once."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})", path=str(path)) from None
    with f:
        if kind != "gzip":
            while True:
                b = f.read(size)
                if not b:
                    return
                yield b
        d = zlib.decompressobj(wbits=31)
        got = 0
        raw_len = 0
        while not d.eof:
            raw = d.unconsumed_tail or f.read(1 << 20)
            if not raw:
                warnings.append(f"{os.path.basename(path)}: gzip stream ends early (file cut at {raw_len:,} bytes); "
                                f"reading the {got:,} bytes that inflated")
                return
            if not d.unconsumed_tail:
                raw_len += len(raw)
            try:
                out = d.decompress(raw, size)
            except zlib.error as exc:
                if not got:
                    raise TraceError(f"{path}: corrupt gzip data ({exc})", path=str(path)) from None
                warnings.append(f"{os.path.basename(path)}: gzip stream corrupt after {got:,} decompressed bytes "
                                f"({exc}); reading what came before")
                return
            if out:
                got += len(out)
                _bomb(path, got, raw_len)
                yield out


def detect(path: Path) -> str:
    """The trace format of ``path``: 'kineto' (chrome-trace JSON, plain or gzip), 'nsys-csv' (``nsys
    stats`` text, plain or gzip) or 'nsys-sqlite'; raises TraceError on unreadable or binary input."""
    kind = sniff(path)
    if kind == "sqlite":
        return "nsys-sqlite"
    if kind == "text":
        return "nsys-csv"
    if kind == "gzip":
        # gzip may hold JSON or nsys CSV text: peek at the inflated start
        with open(path, "rb") as f:
            try:
                head = zlib.decompressobj(wbits=31).decompress(f.read(4096))
            except zlib.error as exc:
                raise TraceError(f"{path}: corrupt gzip data ({exc})", path=str(path)) from None
        if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] not in (b"{", b"["):
            return "nsys-csv"
    return "kineto"


SPLIT_MIN_BYTES = 96 << 20
"""A plain JSON trace this big is read in parts, one process per core (``split``): below it, the second
process costs about what it saves on this machine's two cores (``bench/startup.py``)."""


def split(path: Path, parts: int) -> list[tuple[int, int, int, bytes]] | None:
    """Byte ranges of a plain JSON trace to read in parallel (``_kineto.read_part``), cut at event
    boundaries (``}, {``) near equal shares: ``[(header_end, start, stop, close)]``, the last ``stop``
    the file's end. None where the file is not cut: gzip (a stream has no random access), smaller than
    ``SPLIT_MIN_BYTES``, one part wanted, no ``traceEvents`` array in its first MB, no boundary found.
    A boundary inside a string value cuts an event in two: ``_read.merge`` then reports the parts
    unusable and the file is read whole."""
    size = os.path.getsize(path)
    if parts < 2 or size < SPLIT_MIN_BYTES or sniff(Path(path)) != "json":
        return None
    with open(path, "rb") as f:
        head = f.read(1 << 20)
        first = head.lstrip(b" \t\r\n\xef\xbb\xbf")[:1]
        if first == b"[":
            header_end, close = head.index(b"[") + 1, b"]"
        else:
            m = re.search(rb'"traceEvents"\s*:\s*\[', head)
            if first != b"{" or m is None:
                return None
            header_end, close = m.end(), b"]}"
        cuts = []
        for i in range(1, parts):
            f.seek(size * i // parts)
            m = EVENT_BOUNDARY.search(f.read(1 << 20))
            if m is None:
                return None
            at = size * i // parts
            cuts.append((at + m.start() + 1, at + m.end() - 1))   # this part ends after "}", the next starts at "{"
    if cuts[0][0] <= header_end:
        return None
    starts = [header_end] + [b for _, b in cuts]
    stops = [a for a, _ in cuts] + [size]
    return [(header_end, a, b, close if b < size else b"") for a, b in zip(starts, stops)]


def range_blocks(path: Path, header_end: int, start: int, stop: int, close: bytes):
    """The text of one part: the file's header (up to the events array), the part's events, and the
    array's end (``close``; the last part ends with the file's own)."""
    with open(path, "rb") as f:
        yield f.read(header_end)
        f.seek(start)
        left = stop - start
        while left > 0:
            b = f.read(min(BLOCK, left))
            if not b:
                break
            left -= len(b)
            yield b
    if close:
        yield close
