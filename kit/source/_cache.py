"""The file cache behind kit.source: one ``host.stat`` per call, one transfer per (host, path, size,
mtime); decoded lines and the parsed AST hang off the entry (twenty slices of one file: one
transfer, twenty stats, one ``ast.parse``), counted by :func:`cache_info`."""
from __future__ import annotations

import ast
import re
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from kit.errors import RemoteFileError, SourceError
from kit.util import no_gc

MAX_CACHE_CHARS = 256 * 1024 * 1024  # decoded text kept before the least recently used files are dropped
_BINARY_PROBE = 8192
_LINE_SPLIT = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class CacheInfo:
    """Counters since the last :func:`cache_clear`: host round trips and local cache hits."""

    stats: int
    transfers: int
    bytes_transferred: int
    hits: int
    parses: int
    parse_hits: int
    files: int


def host_key(host: Any) -> str:
    """Cache identity of a host: its kind and target (two LocalHosts share one cache)."""
    return f"{type(host).__name__}:{getattr(host, 'target', '') or getattr(host, 'name', '') or id(host)}"


def host_name(host: Any) -> str:
    return str(getattr(host, "name", "") or getattr(host, "target", "") or "host")


@dataclass
class SourceFile:
    """One fetched, decoded file. ``lines[0]`` is line 1. The AST is parsed on first use."""

    host: str
    path: str
    size: int
    mtime: float
    text: str
    lines: list[str]
    _tree: ast.Module | None = field(default=None, repr=False)
    _syntax_error: SyntaxError | None = field(default=None, repr=False)
    _parsed: bool = field(default=False, repr=False)
    _index: Any = field(default=None, repr=False)

    @property
    def where(self) -> str:
        return f"{self.host}:{self.path}"


class _Cache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: OrderedDict[tuple[str, str], SourceFile] = OrderedDict()
        self.clear()

    def clear(self) -> None:
        with self._lock:
            self._files.clear()
            self._chars = 0
            self.stats = self.transfers = self.bytes = self.hits = self.parses = self.parse_hits = 0

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self.stats, self.transfers, self.bytes, self.hits, self.parses,
                             self.parse_hits, len(self._files))

    def get(self, host: Any, path: str) -> SourceFile:
        """The file's decoded text: one stat, and one transfer only when the file changed."""
        name = host_name(host)
        if not isinstance(path, str) or not path:
            raise SourceError(f"{name}: empty or non-text path {path!r}")
        st = host.stat(path)
        key = (host_key(host), path)
        with self._lock:
            self.stats += 1
            if st.is_dir:
                raise RemoteFileError(f"{name}:{path}: is a directory, not a file (grep searches directories)",
                                      host=name, path=path)
            cached = self._files.get(key)
            if cached is not None and cached.size == st.size and cached.mtime == st.mtime:
                self._files.move_to_end(key)
                self.hits += 1
                return cached
        data = host.read_bytes(path)
        with self._lock:
            self.transfers += 1
            self.bytes += len(data)
        source = _decode(name, path, data, st.size, st.mtime)
        with self._lock:
            old = self._files.pop(key, None)
            if old is not None:
                self._chars -= len(old.text)
            self._files[key] = source
            self._chars += len(source.text)
            while self._chars > MAX_CACHE_CHARS and len(self._files) > 1:
                _, dropped = self._files.popitem(last=False)
                self._chars -= len(dropped.text)
        return source

    def tree(self, source: SourceFile) -> ast.Module | None:
        """The parsed module, or None when the file has a syntax error (kept in ``_syntax_error``)."""
        with self._lock:
            if source._parsed:
                self.parse_hits += 1
                return source._tree
        try:
            with warnings.catch_warnings(), no_gc():
                warnings.simplefilter("ignore")  # e.g. SyntaxWarning for invalid escapes in old code
                tree = ast.parse(source.text, filename=source.path)
            error = None
        except (SyntaxError, ValueError) as exc:  # ValueError: source with NUL bytes
            tree, error = None, exc if isinstance(exc, SyntaxError) else SyntaxError(str(exc))
        with self._lock:
            self.parses += 1
            source._tree, source._syntax_error, source._parsed = tree, error, True
        return tree


def _decode(host: str, path: str, data: bytes, size: int, mtime: float) -> SourceFile:
    if b"\x00" in data[:_BINARY_PROBE]:
        raise SourceError(f"{host}:{path}: binary file ({len(data)} bytes), not source text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SourceError(f"{host}:{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                          f"{exc.start}, line {line})") from None
    text = text.removeprefix("\ufeff")
    lines = _LINE_SPLIT.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return SourceFile(host=host, path=path, size=size, mtime=mtime, text=text, lines=lines)


CACHE = _Cache()


def cache_info() -> CacheInfo:
    """Counters since the last :func:`cache_clear`: stats, transfers, bytes, hits, AST parses."""
    return CACHE.info()


def cache_clear() -> None:
    """Forget every cached file and reset the counters."""
    CACHE.clear()
