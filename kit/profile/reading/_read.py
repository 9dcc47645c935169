"""Reading one trace file into raw column tables, with the reader its format calls for.

Standard library only (no pandas/numpy; orjson when installed): worker processes import only this
and the readers, so they start in ~0.1 s, and the same files run on remote hosts as a stdlib-only
zipapp. The format is decided by ``kit.profile.reading._io.detect``; the loader passes it in.
"""
from __future__ import annotations

from pathlib import Path

from kit.profile.reading._io import detect


def read_raw(path: str, fmt: str | None = None, part: tuple | None = None) -> dict:
    """Parse one file (``fmt`` from :func:`kit.profile.reading._io.detect`, detected here when None) into
    ``{"kernels", "annotations", "launches", ["frames", "comms"], "meta", "warnings", "events",
    "bytes", "truncated"}`` of plain lists and dicts. ``part``: one byte range of a Kineto file from
    ``_kineto.split``, read for ``_kineto.merge``."""
    p = Path(path)
    if part is not None:
        from kit.profile.reading._kineto import read_part
        return read_part(path, part)
    fmt = fmt or detect(p)
    if fmt == "nsys-sqlite":
        from kit.profile.reading._nsys import read_nsys_sqlite
        return read_nsys_sqlite(p)
    if fmt == "nsys-csv":
        from kit.profile.reading._nsys import read_nsys_csv
        return read_nsys_csv(p)
    from kit.profile.reading._kineto import read_kineto
    return read_kineto(p)
