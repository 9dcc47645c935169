"""Reading one trace file into raw column tables, with the reader its format calls for.

Standard library only (no pandas/numpy; orjson when installed): worker processes import only this
and the readers, so they start in ~0.1 s, and the same files run on remote hosts as a stdlib-only
zipapp. The format is decided by ``kit.profile.reading._io.detect``; the loader passes it in.
"""
from __future__ import annotations

import os
from array import array
from pathlib import Path
from types import SimpleNamespace

from kit.profile.reading._io import detect
from kit.profile.reading._validate import collector_warnings

# each raw table's columns and how its frame holds them: "i" int64, "f" float64, "o" object, "s" object of str,
# "c" categorical (a list: categorical of those categories); a table or column a file lacks is empty or None
# (``count``: 1)
FRAME_COLUMNS = {
    "kernels": {"device": "i", "stream": "i", "name": "c", "ts": "f", "dur": "f", "correlation": "i",
                "kind": ["kernel", "memcpy", "memset"], "collective": "o", "count": "i"},
    "annotations": {"name": "o", "ts": "f", "dur": "f", "side": "o", "device": "i", "stream": "i", "tid": "o"},
    "launches": {"name": "c", "ts": "f", "dur": "f", "correlation": "i", "tid": "s"},
    "frames": {"name": "c", "ts": "f", "dur": "f", "tid": "s", "kind": ["op", "module", "function"], "dims": "c",
               "types": "c"},
    "comms": {"name": "o", "ts": "f", "tid": "s", "collective": "o", "group_size": "i", "in_nelems": "i",
              "out_nelems": "i", "dtype": "o", "pg": "o"},
}


def text_codes(values: list, categories: list | None = None) -> tuple[array, list] | None:
    """Text values (a missing one None) as (int64 codes, categories) for a categorical: -1 for None or a
    value of no category; the categories sorted where not given, as pandas sorts them. None where the
    values are not all text (or none is): pandas decides those."""
    if categories is None:
        uniq = set(values)
        uniq.discard(None)
        if not uniq or not all(type(u) is str for u in uniq):
            return None
        categories = sorted(uniq)
    code = _Codes((c, i) for i, c in enumerate(categories))
    return array("q", map(code.__getitem__, values)), categories


class _Codes(dict):
    """A category's code; -1 (missing) for a value of no category."""

    def __missing__(self, key) -> int:
        return -1


def coded(raw: dict) -> dict:
    """``raw`` with the text columns its frames hold as categoricals (``FRAME_COLUMNS``) replaced by their
    :func:`text_codes`, where they are all text: done by the parse process while the loader imports pandas."""
    for table, spec in FRAME_COLUMNS.items():
        cols = raw.get(table) or {}
        for c, how in spec.items():
            if (how == "c" or isinstance(how, list)) and type(cols.get(c)) is list:
                got = text_codes(cols[c], how if isinstance(how, list) else None)
                if got is not None:
                    cols[c] = got
    return raw


# Each reader is imported by read_raw only for a file of its format: a worker, and the reader's zipapp on a
# host, load the one they use.
def read_raw(path: str, fmt: str | None = None, part: tuple | None = None) -> dict:
    """Parse one file (``fmt`` from :func:`kit.profile.reading._io.detect`, detected here when None) into
    ``{"kernels", "annotations", "launches", ["frames", "comms"], "meta", "warnings", "events",
    "bytes", "truncated"}`` of plain lists and dicts. ``part``: one byte range of a Kineto file from
    ``_io.split``, read for :func:`merge`."""
    p = Path(path)
    if part is not None:
        from kit.profile.reading._kineto import read_part  # deferred: only the reader a file needs
        return read_part(path, part)
    fmt = fmt or detect(p)
    if fmt == "nsys-sqlite":
        from kit.profile.reading._nsys import read_nsys_sqlite  # deferred: only the reader a file needs
        return read_nsys_sqlite(p)
    if fmt == "nsys-csv":
        from kit.profile.reading._nsys import read_nsys_csv  # deferred: only the reader a file needs
        return read_nsys_csv(p)
    from kit.profile.reading._kineto import read_kineto  # deferred: only the reader a file needs
    return read_kineto(p)


_TABLES = ("kernels", "annotations", "launches", "frames", "comms")


def merge(path: str, parts: list) -> dict | None:
    """The parts of one file read by :func:`read_part`, in order, as ``_kineto.read_kineto`` returns the
    whole file (the same rows in the same order; meta and trailer from the last part, which holds
    both). ``parts`` is emptied as it is merged (each part freed once taken: memory is the tables' once,
    not twice); None when a part did not end where it was cut (the cut fell inside a value) or the file is
    cut short (its loss is stated over the whole file): the caller reads the file whole."""
    if any(p["truncated"] for p in parts):
        return None
    first, meta, events = parts[0], parts[-1]["meta"], sum(p["events"] for p in parts)
    issues: dict[str, int] = {}
    warnings: list[str] = []
    for i, p in enumerate(parts):   # the later parts appended to the first one's columns, each freed once taken
        parts[i] = None
        if p is not first:
            for t in _TABLES:
                for c, v in first[t].items():
                    v.extend(p[t][c])
        for k, n in p.pop("issues").items():
            issues[k] = issues.get(k, 0) + n
        warnings += [w for w in p["warnings"] if w not in warnings]
    warnings += collector_warnings(SimpleNamespace(_kit_issues=issues), os.path.basename(path))
    return {**first, "meta": meta, "warnings": warnings, "events": events, "bytes": os.path.getsize(path)}
