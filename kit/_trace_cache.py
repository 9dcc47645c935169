"""Parquet cache of parsed trace files, keyed by file identity, so reopening a trace is instant.

Key: absolute path, size, mtime (ns), inode and the parser version — any change to the file (or to
the parser) misses the cache. Location: ``$KIT_CACHE_DIR`` or ``~/.cache/decode-kit`` (``profile/``
below it). Entries are written to a temporary folder and renamed into place, so a crash never leaves
a half entry; an unreadable entry is ignored and rebuilt. Categories are not cached (they are
recomputed from the rule table in milliseconds), so changing rules never needs a cache flush.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

PARSER_VERSION = "1"
_TABLES = ("kernels", "annotations", "launches")


def cache_dir() -> Path:
    """Where cached tables live (``$KIT_CACHE_DIR`` or ``~/.cache/decode-kit``)."""
    root = os.environ.get("KIT_CACHE_DIR")
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "decode-kit"
    return base / "profile"


def file_key(path: Path) -> str:
    st = path.stat()
    ident = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{PARSER_VERSION}"
    return hashlib.sha256(ident.encode()).hexdigest()[:32]


def load(path: Path) -> dict | None:
    """The cached parse of ``path``, or None."""
    try:
        d = cache_dir() / file_key(path)
        if not (d / "meta.json").is_file():
            return None
        info = json.loads((d / "meta.json").read_text())
        out = {name: pd.read_parquet(d / f"{name}.parquet") for name in _TABLES}
    except Exception:  # noqa: BLE001 - a broken cache entry is rebuilt, never fatal
        return None
    out.update(info)
    return out


def store(path: Path, parsed: dict) -> None:
    """Write ``parsed`` (DataFrames + JSON-able info) for ``path``; failures only skip caching."""
    try:
        root = cache_dir()
        root.mkdir(parents=True, exist_ok=True)
        final = root / file_key(path)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
        for name in _TABLES:
            parsed[name].to_parquet(tmp / f"{name}.parquet", index=False)
        info = {k: v for k, v in parsed.items() if k not in _TABLES}
        (tmp / "meta.json").write_text(json.dumps(info, default=str))
        try:
            os.replace(tmp, final)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    except Exception:  # noqa: BLE001 - caching is an optimisation
        return
