"""Column accumulation and value conversion shared by the log parsers (private to ``kit.logs``): rows are
turned into arrays every ``CHUNK`` rows, so a multi-GB log never holds more than one chunk of Python objects.
"""
from __future__ import annotations

import ctypes
import functools
import re
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

CHUNK = 16384

_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_UNITS = re.compile(r"\s*\((?:token/s|tok/s|req/s|tokens/s|ms|s|%)\)\s*$")



@functools.cache
def snake(key: str) -> str:
    """Normalise a printed label to a column name: ``'#running-req'`` -> ``'running_req'``,
    ``'gen throughput (token/s)'`` -> ``'gen_throughput'``, ``'token usage'`` -> ``'token_usage'``."""
    return _NON_ALNUM.sub("_", _UNITS.sub("", key.strip()).lstrip("#").lower()).strip("_")


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


def pairs(body: str, row: dict, *, strict: bool) -> bool:
    """``Key: value unit, Key: value`` -> ``row[snake(key)] = value``; False on a value that is none. ``strict``
    (SGLang's batch lines): a piece that is no pair is False too, and ``X graph: v`` gives ``graph_kind`` X and
    ``graph``; else such a piece is skipped (vLLM's "KV fetch: 0 waiting, 1 in progress")."""
    for piece in body.split(", "):
        key, sep, text = piece.partition(": ")
        if not sep:
            if strict:
                return False
            continue
        if strict and key.endswith(" graph"):
            row["graph_kind"] = key[:-6]
            key = "graph"
        else:
            key = snake(key)
        try:
            row[key] = value(text)
        except ValueError:
            return False
    return True


class Columns:
    """Append-only table of dict rows with varying keys (a column first seen late is back-filled with None),
    flushed to DataFrames in chunks; ``time_format``: how the ``time`` strings are read at each flush."""

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

    def extend_uniform(self, keys: tuple[str, ...], columns: dict[str, list]) -> None:
        """Add rows that all have exactly ``keys`` (in that order), given column-wise: the same
        result as :meth:`add` row by row (new columns created in ``keys`` order and back-filled,
        absent ones filled with None, flushed at the same row counts), without a loop per row."""
        total = len(columns[keys[0]]) if keys else 0
        start = 0
        while start < total:
            stop = min(total, start + max(CHUNK - self.n, 1))
            cols = self.cols
            n = self.n
            for key in keys:
                col = cols.get(key)
                if col is None:
                    col = cols[key] = [None] * n
                col.extend(columns[key][start:stop])
            k = stop - start
            if len(cols) != len(keys):
                for col in cols.values():
                    if len(col) < n + k:
                        col.extend([None] * k)
            self.n = n + k
            start = stop
            if self.n >= CHUNK:
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
        return columns_first(out, columns)


def to_datetime(series: pd.Series, fmt: str | None) -> pd.Series:
    """Printed timestamps -> datetime64; unparseable or missing ones become NaT."""
    return pd.to_datetime(series, format=fmt or "ISO8601", errors="coerce")


class TemplateTable:
    """Fast store for lines that repeat one *template* (the line with its values cut out): a serving log
    prints the same ``Decode batch`` shape thousands of times. Each template's column names are worked out once
    (by the careful key-by-key parser); its rows come as raw value strings, line by line (``groups``) or a text
    block at a time (``bulk``, ``kit.logs._sglang.extract_block``), converted per column, vectorised, at each
    flush. ``head``: the fixed leading fields of each row (``line``, ``time``, ``ranks``, ``iter``).
    """

    __slots__ = ("groups", "bulk", "meta", "slow", "n", "flushed", "frames", "time_format", "head", "bad_lines",
                 "time_cache")

    def __init__(self, head: tuple[str, ...], time_format: str | None = None) -> None:
        self.groups: dict[str, list] = {}  # template -> flat list: head fields + value strings, row after row
        self.meta: dict[str, tuple] = {}  # template -> (value columns, constants, bracket variant)
        # template -> chunks taken in bulk from text blocks: (line numbers, times, ranks, value tuples)
        self.bulk: dict[str, list] = {}
        self.slow: set[str] = set()  # templates the fast path cannot take (parsed row by row)
        self.bad_lines: list[int] = []  # rows dropped at conversion: a value was not a value (torn)
        self.n = 0
        self.frames: list[dict[str, np.ndarray]] = []
        self.flushed = 0
        self.time_format = time_format
        self.head = head
        self.time_cache: dict[str, np.datetime64] = {}

    def __len__(self) -> int:
        return self.n + self.flushed

    def add_group(self, key: str, columns: tuple[str, ...], consts: dict, bracket: bool = False) -> list:
        rows: list = []
        self.groups[key] = rows
        self.bulk[key] = []
        self.meta[key] = (columns, consts, bracket)
        return rows

    def _times(self, uniq: np.ndarray) -> np.ndarray:
        """Distinct printed time stamps -> datetime64, converted once per log (a log repeats a time
        stamp on many lines, and chunk after chunk)."""
        cache = self.time_cache
        missing = [u for u in uniq if u not in cache]
        if missing:
            if len(cache) > 200_000:
                cache.clear()
            conv = to_datetime(pd.Series(missing, dtype="object"), self.time_format).to_numpy()
            cache.update(zip(missing, conv))
        return np.array([cache[u] for u in uniq])

    def flush(self) -> None:
        if not self.n:
            return
        self.flushed += self.n
        for key, rows in self.groups.items():
            bulk = self.bulk[key]
            if rows or bulk:
                columns, consts, bracket = self.meta[key]
                self.frames.append(self._frame(columns, consts, rows, bulk, bracket))
                rows.clear()
                bulk.clear()
        self.n = 0
        release_freed_memory()

    def _frame(self, columns: tuple[str, ...], consts: dict, rows: list, bulk: list,
               bracket: bool) -> dict[str, np.ndarray]:
        """One template's rows -> {column: array} (a chunk; kept as arrays so the final table can be
        assembled column by column without holding two copies of everything). ``rows`` is the flat
        list of the line-by-line path, ``bulk`` the chunks taken from text blocks."""
        nh, nv = len(self.head), len(columns)
        heads: list[list] = [[] for _ in range(nh)]
        grids = []
        if rows:
            grid = np.array(rows, dtype=object).reshape(-1, nh + nv)
            for j in range(nh):
                heads[j].append(grid[:, j])
            grids.append(grid[:, nh:])
        for lines, ts, ranks, groups in bulk:
            g = np.array(groups, dtype=object).reshape(len(groups), -1)
            it = g[:, 0].astype(np.int64) if bracket else np.full(len(groups), None, dtype=object)
            for j, part in enumerate((lines, ts, ranks, it)):
                heads[j].append(np.asarray(part, dtype=object) if j else np.asarray(part))
            grids.append(g[:, 1:] if bracket else g)
        values = grids[0] if len(grids) == 1 else np.concatenate(grids)
        del grids
        n = len(values)
        data: dict[str, Any] = {}
        bad = None
        for name, parts in zip(self.head, heads):
            col = self._head_column(name, parts[0] if len(parts) == 1 else np.concatenate(parts), n)
            if col is not None:
                data[name] = col
        for j, name in enumerate(columns):
            data[name], b = convert_column(values[:, j])
            if b is not None:
                bad = b if bad is None else bad | b
        del values
        for k, v in consts.items():
            data[k] = _const_column(k, v, n)
        if bad is not None and bad.any():
            self.bad_lines.extend(int(x) for x in data["line"][bad])
            keep = ~bad
            data = {k: v[keep] for k, v in data.items()}
        return data

    def _head_column(self, name: str, col: np.ndarray, n: int):
        """A header column (line, time, rank tags, iteration) typed; None for an iteration column
        that no line has."""
        if name == "line":
            return col.astype(np.int64)
        if name == "time":
            codes, uniq = pd.factorize(col)  # a missing time (line without header) -> code -1
            if len(uniq):
                times = self._times(uniq)
                # -1 takes the NaT appended at the end (not the last time stamp)
                return np.append(times, times.dtype.type("NaT")).take(codes)
            return np.full(n, np.datetime64("NaT", "us"))
        if name == "iter":
            if any(v is not None for v in col):
                return np.array(col, dtype=np.float64)  # None -> NaN
            return None
        if name in _CATEGORICAL:  # rank tags: a handful of values, kept as codes
            return to_categorical(col)
        return col.astype(object)

    def frame(self, columns: tuple[str, ...] = ()) -> pd.DataFrame | None:
        """All rows (every template) as one DataFrame in line order, ``columns`` first; None when empty."""
        self.flush()
        if not self.frames:
            return None
        out = assemble(self.frames, columns)
        self.frames = []
        return out


def _const_column(k: str, v, n: int):
    """A column of ``n`` copies of one template constant (a categorical for rank-like strings)."""
    if k in _CATEGORICAL and isinstance(v, str):
        return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), dtype=_categories((v,)))
    a = np.empty(n, dtype=object)
    a.fill(v)  # one shared string object (np.full would convert a copy per row)
    return a


def assemble(chunks: list[dict[str, np.ndarray]], first: tuple[str, ...] = ()) -> pd.DataFrame:
    """Chunks of {column: array} -> one DataFrame, column by column, freeing each chunk's array as
    soon as it is copied (peak extra memory: one column, not a second copy of the table)."""
    return pd.DataFrame(assemble_columns(chunks, first), copy=False)


def assemble_columns(chunks: list[dict[str, np.ndarray]], first: tuple[str, ...] = ()) -> dict[str, Any]:
    """:func:`assemble` without the DataFrame: {column: array} in line order. Assembling the chunks
    of a part of a file this way and then the parts gives the same table as assembling all chunks
    at once (the parallel reader sorts each piece in its worker; the main process only joins)."""
    names: dict[str, None] = {}
    for ch in chunks:
        names.update(dict.fromkeys(ch))
    lengths = [len(next(iter(ch.values()))) if ch else 0 for ch in chunks]
    out: dict[str, Any] = {}
    order = None
    if "line" in names:  # put "line" first: its sort order is applied to every other column
        names = {"line": None, **names}
    for name in names:
        present = [ch[name] for ch in chunks if name in ch]
        if name in _CATEGORICAL and any(isinstance(a, pd.Categorical) for a in present):
            col = _union_categorical(chunks, lengths, name)
            if col is not None:
                out[name] = col if order is None else col[order]
                continue
            present = [ch[name] for ch in chunks if name in ch]
        kind = present[0].dtype.kind
        pieces = []
        for ch, n in zip(chunks, lengths):
            a = ch.pop(name, None)
            if a is None:
                if kind == "M":
                    a = np.full(n, np.datetime64("NaT", "us"))
                elif kind in "if":
                    a = np.full(n, np.nan)
                else:
                    a = np.full(n, None, dtype=object)
            pieces.append(a)
        kinds = {p.dtype.kind for p in pieces}
        if len(kinds) > 1 and ("b" in kinds or "O" in kinds or "M" in kinds):
            pieces = [p.astype(object) for p in pieces]
        col = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        del pieces, present
        release_freed_memory()
        if name == "line" and len(col) > 1 and not bool(np.all(col[1:] >= col[:-1])):
            order = np.argsort(col, kind="stable")
        if order is not None:
            col = col[order]
        if col.dtype == object and name in _CATEGORICAL:
            col = pd.Categorical(col)
        out[name] = col
    chunks.clear()
    n = len(next(iter(out.values()))) if out else 0
    ordered = {c: out.pop(c) if c in out else np.full(n, None, dtype=object) for c in first}
    ordered.update(out)
    return ordered


_CATEGORICAL = {"ranks", "format", "graph_kind", "engine", "version", "definition"}


@functools.lru_cache(maxsize=256)
def _categories(values: tuple[str, ...]) -> pd.CategoricalDtype:
    """The (cached) CategoricalDtype with these sorted string categories."""
    return pd.CategoricalDtype(pd.Index(list(values)))


def to_categorical(col: np.ndarray) -> pd.Categorical:
    """An object array of a few distinct strings (None = missing) -> the same Categorical as
    ``pd.Categorical(col)`` (sorted categories), by hashing once instead of pandas' inference."""
    codes, uniq = pd.factorize(col)
    if not len(uniq) or not all(isinstance(u, str) for u in uniq):
        return pd.Categorical(col)
    order = np.argsort(np.asarray(uniq, dtype=object))
    cats = tuple(uniq[i] for i in order)
    remap = np.empty(len(uniq) + 1, dtype=np.int64)
    remap[order] = np.arange(len(uniq))
    remap[-1] = -1  # factorize's missing code
    return pd.Categorical.from_codes(remap[codes], dtype=_categories(cats))


def _union_categorical(chunks: list[dict], lengths: list[int], name: str) -> pd.Categorical | None:
    """``pd.Categorical(np.concatenate(...))`` of one column's chunks, joined by codes; None (the chunks left
    untouched) when their categories cannot be joined."""
    pieces = []
    empty = next(a for a in (ch.get(name) for ch in chunks) if isinstance(a, pd.Categorical)).categories[:0]
    for ch, n in zip(chunks, lengths):
        a = ch.get(name)
        if a is None:  # a chunk without the column: all missing, with categories of the same dtype
            a = pd.Categorical.from_codes(np.full(n, -1, dtype=np.int8), dtype=pd.CategoricalDtype(empty))
        pieces.append(a if isinstance(a, pd.Categorical) else pd.Categorical(a))
    try:
        col = union_categoricals(pieces, sort_categories=True)
    except TypeError:
        for ch in chunks:
            if isinstance(ch.get(name), pd.Categorical):
                ch[name] = np.asarray(ch[name], dtype=object)
        return None
    for ch in chunks:
        ch.pop(name, None)
    return col
_TRIM = None


def release_freed_memory() -> None:
    """Give pages freed by the chunk arrays back to the OS (glibc ``malloc_trim``), so assembling
    the final columns does not hold the chunks and the result at the same time. No-op elsewhere."""
    global _TRIM
    if _TRIM is None:
        try:
            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)
_BOOLS = {"True": True, "False": False}


def convert_column(col: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Raw value strings of one column -> (int64 / float64 / bool, ``%`` as a fraction; a mask of the rows whose
    value does not convert, junk of another writer, which the caller drops, or None)."""
    first = col[0].rstrip()
    n = len(col)
    try:
        if first in _BOOLS:
            return np.fromiter(map(_BOOLS.__getitem__, map(str.rstrip, col)), bool, n), None
        if first.endswith("%"):
            return np.fromiter(map(float, (s.rstrip()[:-1] for s in col)), np.float64, n) / 100.0, None
        if "." not in first and "n" not in first:
            try:
                return col.astype(np.int64), None
            except (ValueError, OverflowError, TypeError):
                pass
        return col.astype(np.float64), None
    except (ValueError, KeyError, TypeError):
        pass
    out = np.empty(n, dtype=np.float64 if first not in _BOOLS else bool)
    bad = np.zeros(n, dtype=bool)
    for i, s in enumerate(col):
        s = s.rstrip()
        try:
            if first in _BOOLS:
                out[i] = _BOOLS[s]
            elif s.endswith("%"):
                out[i] = float(s[:-1]) / 100.0
            else:
                out[i] = float(s)
        except (ValueError, KeyError):
            bad[i] = True
    return out, bad


def merge_frames(fast: pd.DataFrame | None, slow: pd.DataFrame | None, columns: tuple[str, ...]) -> pd.DataFrame:
    """The fast (template) and slow (dict-row) parts of one kind -> one table in line order,
    ``columns`` first (created empty when absent)."""
    parts = [f for f in (fast, slow) if f is not None and len(f)]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})
    if len(parts) == 1 and parts[0] is fast:
        return fast  # assembled in line order with ``columns`` first already
    out = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True, sort=False)
    if "line" in out.columns and not out["line"].is_monotonic_increasing:
        out = out.sort_values("line", kind="stable", ignore_index=True)
    return columns_first(out, columns)


def columns_first(out: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """``out`` with ``columns`` first, in that order (those it lacks added, empty), then its others."""
    for c in columns:
        if c not in out.columns:
            out[c] = None
    return out[list(columns) + [c for c in out.columns if c not in columns]]
