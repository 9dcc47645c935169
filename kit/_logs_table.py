"""Column accumulation and value conversion shared by the log parsers (private to ``kit.logs``).

Parsers stream a log line by line and append one dict per record to a :class:`Columns`; columns are
plain Python lists that are turned into a DataFrame every ``CHUNK`` rows, so a multi-GB log never
holds more than one chunk of Python objects (the finished chunks are compact NumPy/Arrow columns).
Fields come and go between versions, so a column first seen late is back-filled with ``None``.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

CHUNK = 16384

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_UNITS = re.compile(r"\s*\((?:token/s|tok/s|req/s|tokens/s|ms|s|%)\)\s*$")

_KEY_CACHE: dict[str, str] = {}


def strip_ansi(line: str) -> str:
    """Remove ANSI colour/style escapes (vLLM colours its process tag and level)."""
    return _ANSI.sub("", line)


def snake(key: str) -> str:
    """Normalise a printed label to a column name: ``'#running-req'`` -> ``'running_req'``,
    ``'gen throughput (token/s)'`` -> ``'gen_throughput'``, ``'token usage'`` -> ``'token_usage'``."""
    cached = _KEY_CACHE.get(key)
    if cached is not None:
        return cached
    name = _UNITS.sub("", key.strip()).lstrip("#").lower()
    name = _NON_ALNUM.sub("_", name).strip("_")
    _KEY_CACHE[key] = name
    return name


def value(text: str) -> Any:
    """Convert a printed value: ints, floats, ``nan``, ``True``/``False``; a trailing ``%`` gives a
    fraction (``'54.2%'`` -> 0.542). Units after the number (``'66 tokens'``) are dropped.
    Raises ValueError when the text does not start with a value."""
    text = text.strip()
    if " " in text:
        text = text.split(" ", 1)[0]
    if not text:
        raise ValueError("empty value")
    last = text[-1]
    if last == "%":
        return float(text[:-1]) / 100.0
    if last == "e":
        if text == "True":
            return True
        if text == "False":
            return False
    if "." in text or "n" in text or "e" in text:
        return float(text)
    return int(text)


class Columns:
    """Append-only table built from dict rows with varying keys, flushed to DataFrames in chunks.

    ``time_format``: how the ``time`` column's strings are turned into datetimes at each flush
    (``'ISO8601'`` for SGLang, ``'%m-%d %H:%M:%S'`` for vLLM, which prints no year).
    """

    __slots__ = ("cols", "n", "frames", "time_format")

    def __init__(self, time_format: str | None = None) -> None:
        self.cols: dict[str, list] = {}
        self.n = 0
        self.frames: list[pd.DataFrame] = []
        self.time_format = time_format

    def __len__(self) -> int:
        return self.n + sum(len(f) for f in self.frames)

    def add(self, row: dict) -> None:
        cols = self.cols
        n = self.n
        for key, val in row.items():
            col = cols.get(key)
            if col is None:
                col = cols[key] = [None] * n
            col.append(val)
        n += 1
        self.n = n
        if len(row) != len(cols):
            for col in cols.values():
                if len(col) < n:
                    col.append(None)
        if n >= CHUNK:
            self.flush()

    def flush(self) -> None:
        if not self.n:
            return
        frame = pd.DataFrame(self.cols)
        if "time" in frame.columns:
            frame["time"] = to_datetime(frame["time"], self.time_format)
        self.frames.append(frame)
        self.cols = {}
        self.n = 0

    def frame(self, columns: tuple[str, ...] = ()) -> pd.DataFrame:
        """All rows as one DataFrame; ``columns`` are guaranteed to exist (first, in that order)."""
        self.flush()
        if not self.frames:
            out = pd.DataFrame({c: pd.Series(dtype="object") for c in columns})
        elif len(self.frames) == 1:
            out = self.frames[0]
        else:
            out = pd.concat(self.frames, ignore_index=True, sort=False)
        self.frames = [out] if len(out) else []
        for c in columns:
            if c not in out.columns:
                out[c] = None
        rest = [c for c in out.columns if c not in columns]
        return out[list(columns) + rest]


def to_datetime(series: pd.Series, fmt: str | None) -> pd.Series:
    """Printed timestamps -> datetime64; unparseable or missing ones become NaT."""
    if fmt is None:
        fmt = "ISO8601"
    return pd.to_datetime(series, format=fmt, errors="coerce")


class TemplateTable:
    """Fast store for lines that repeat one *template* (the line with its values cut out).

    A serving log prints the same ``Decode batch`` message shape thousands of times; only the values
    change. The scanner splits a line into template + value strings with one regex call, looks the
    template up here (its column names were worked out once, by the careful key-by-key parser) and
    appends one tuple of raw strings. Values are converted to numbers per column, vectorised, when a
    chunk is flushed. ``head`` names the fixed leading fields of each tuple (``line``, ``time`` ...).
    """

    __slots__ = ("groups", "meta", "slow", "n", "frames", "time_format", "head")

    def __init__(self, head: tuple[str, ...], time_format: str | None = None) -> None:
        self.groups: dict[str, list] = {}  # template -> rows (tuples of head fields + value strings)
        self.meta: dict[str, tuple[tuple[str, ...], dict]] = {}  # template -> (value columns, constants)
        self.slow: set[str] = set()  # templates the fast path cannot take (parsed row by row)
        self.n = 0
        self.frames: list[pd.DataFrame] = []
        self.time_format = time_format
        self.head = head

    def __len__(self) -> int:
        return self.n + sum(len(f) for f in self.frames)

    def add_group(self, key: str, columns: tuple[str, ...], consts: dict) -> list:
        rows: list = []
        self.groups[key] = rows
        self.meta[key] = (columns, consts)
        return rows

    def flush(self) -> None:
        if not self.n:
            return
        for key, rows in self.groups.items():
            if rows:
                columns, consts = self.meta[key]
                self.frames.append(self._frame(columns, consts, rows))
                rows.clear()
        self.n = 0

    def _frame(self, columns: tuple[str, ...], consts: dict, rows: list) -> pd.DataFrame:
        data: dict[str, Any] = {}
        cols = list(zip(*rows))
        for name, col in zip(self.head + columns, cols):
            if name == "line":
                data[name] = np.array(col, dtype=np.int64)
            elif name == "time":
                data[name] = to_datetime(pd.Series(col, dtype="object"), self.time_format)
            elif name in self.head:
                data[name] = list(col)
            else:
                data[name] = convert_column(col)
        n = len(rows)
        for k, v in consts.items():
            data[k] = [v] * n
        return pd.DataFrame(data)

    def frame(self) -> pd.DataFrame | None:
        self.flush()
        if not self.frames:
            return None
        out = self.frames[0] if len(self.frames) == 1 else pd.concat(self.frames, ignore_index=True, sort=False)
        self.frames = [out]
        return out


def convert_column(col: tuple[str, ...]) -> np.ndarray:
    """Raw value strings of one column -> numbers (int64 / float64 / bool; ``%`` -> fraction)."""
    first = col[0]
    n = len(col)
    if first == "True" or first == "False":
        return np.fromiter(map("True".__eq__, col), bool, n)
    try:
        if first.endswith("%"):
            return np.fromiter(map(float, (s[:-1] for s in col)), np.float64, n) / 100.0
        if "." not in first and "n" not in first:
            try:
                return np.fromiter(map(int, col), np.int64, n)
            except (ValueError, OverflowError):
                pass
        return np.fromiter(map(float, col), np.float64, n)
    except ValueError:
        vals = pd.to_numeric(pd.Series([s.rstrip("%") for s in col]), errors="coerce").to_numpy()
        return vals / 100.0 if first.endswith("%") else vals


def merge_frames(fast: pd.DataFrame | None, slow: pd.DataFrame | None, columns: tuple[str, ...]) -> pd.DataFrame:
    """The fast (template) and slow (dict-row) parts of one kind -> one table in line order,
    ``columns`` first (created empty when absent)."""
    parts = [f for f in (fast, slow) if f is not None and len(f)]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})
    out = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True, sort=False)
    if "line" in out.columns and not out["line"].is_monotonic_increasing:
        out = out.sort_values("line", kind="stable", ignore_index=True)
    for c in columns:
        if c not in out.columns:
            out[c] = None
    rest = [c for c in out.columns if c not in columns]
    return out[list(columns) + rest]
