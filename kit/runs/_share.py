"""Named baselines and copies of a store for someone else.

A baseline is a name pointing at a run (``baselines/<name>.json``: the run id, who named it, when, a
note); naming it again moves it and keeps nothing of the old pointer but the history line in the file.
:func:`export` copies the runs a SQL condition selects, with their tables, into a new directory that is
itself a store: hand it over (or point ``$KIT_RUNS_SHARED`` at it) and it is read as it is.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path

import pandas as pd

from kit.errors import UsageError
from kit.runs import _query, _store
from kit.runs._record import _who
from kit.util import write_atomic

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


def _root(root) -> Path:
    r = Path(root) if root is not None else _store.store_dir()
    if r is None:
        raise UsageError("kit.runs: recording is off (KIT_RUNS=off): set KIT_RUNS_DIR to a directory to name baselines")
    return r


def set_baseline(name: str, run_id: str, *, note: str | None = None, root=None) -> dict:
    """Name run ``run_id`` (a unique prefix is enough) baseline ``name``; returns the pointer."""
    if not _NAME.match(name or ""):
        raise UsageError(f"kit.runs: baseline name {name!r}: letters, digits, '.', '_', '-' only (at most 100)")
    r = _root(root)
    run = _query.get(run_id, stores=[r, *_store.shared_dirs()])
    path = r / "baselines" / f"{name}.json"
    old = json.loads(path.read_text()) if path.is_file() else None
    ptr = {"name": name, "run_id": run["run_id"], "kind": run["kind"], "by": _who(), "note": note,
           "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "history": ([*old.get("history", []), {"run_id": old["run_id"], "at": old["at"]}] if old else [])}

    write_atomic(path, json.dumps(ptr, indent=1))
    return ptr


def baseline(name: str, *, stores=None) -> dict:
    """The run baseline ``name`` points at (from one's own store first, then the shared ones)."""
    dirs = _query._stores(stores)
    for d in dirs:
        p = d / "baselines" / f"{name}.json"
        if p.is_file():
            ptr = json.loads(p.read_text())
            run = _query.get(ptr["run_id"], stores=dirs)
            return {**run, "baseline": ptr}
    known = sorted({p.stem for d in dirs for p in (d / "baselines").glob("*.json")})
    raise UsageError(f"kit.runs: no baseline named {name!r} (known: {', '.join(known) or 'none'}); "
                     "name one with 'kit runs baseline NAME RUN_ID'")


def baselines(*, stores=None):
    """Every named baseline: name, run id, kind, who named it, when, note."""
    rows = []
    for d in _query._stores(stores):
        for p in sorted((d / "baselines").glob("*.json")):
            ptr = json.loads(p.read_text())
            rows.append({k: ptr.get(k) for k in ("name", "run_id", "kind", "by", "at", "note")} | {"store": str(d)})
    return pd.DataFrame(rows, columns=["name", "run_id", "kind", "by", "at", "note", "store"])


def export(dest, where: str | None = None, *, stores=None) -> int:
    """Copy the runs matching the SQL condition ``where`` (all when None) with their tables and baselines
    into ``dest`` (a new or empty directory), as one pack; returns how many runs were copied."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise UsageError(f"kit.runs.export: {dest} is not empty")
    con = _query.connect(stores)
    t = _query._arrow(con.sql(f"SELECT * FROM runs {'WHERE ' + where if where else ''} ORDER BY run_id"))
    if t.num_rows == 0:
        return 0
    ids = t.column("run_id").to_pylist()
    _store.private_dirs(dest / "runs", dest)
    for fname, rid in zip(t.column("filename").to_pylist(), ids):
        if not _store.RUN_ID.fullmatch(str(rid)):   # read_runs drops these; a table name never escapes dest
            raise UsageError(f"kit.runs.export: run id {rid!r} is not one the kit makes; refused")
        src = Path(fname).parent.parent / "tables" / rid
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, dest / "tables" / rid, symlinks=True)
    _store._write_atomic(t.drop_columns(["filename"]), dest / "runs" / "pack-export.parquet", dest)
    for d in _query._stores(stores):
        for p in (d / "baselines").glob("*.json"):
            if json.loads(p.read_text()).get("run_id") in ids:
                _store.private_dirs(dest / "baselines", dest)
                shutil.copy2(p, dest / "baselines" / p.name)
    return len(ids)
