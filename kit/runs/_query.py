"""Reading the catalogue: SQL through DuckDB over the stores' Parquet files, a run, its tables.

A query opens an in-memory DuckDB connection, defines the views of ``_schema.VIEWS`` over the run files
of every store read (one's own and ``$KIT_RUNS_SHARED``'s, or the ``stores`` given) and runs the SQL:
nothing is written, so a store copied from someone else is read as it is. A compaction removing loose
files while a query lists them makes DuckDB miss one: the query is tried once more.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kit.errors import UsageError
from kit.runs import _store
from kit.runs._schema import RUN_SCHEMA, VIEWS


def _stores(stores) -> list[Path]:
    if stores is not None:
        return [Path(s).expanduser() for s in ([stores] if isinstance(stores, (str, os.PathLike)) else stores)]
    own = _store.store_dir()
    return ([own] if own is not None else []) + _store.shared_dirs()


def _store_rows(store: Path):
    """The runs of one store as Arrow (read by pyarrow, never through a glob of the store's path):
    its packs, and its loose files whose run is not in a pack yet (a compaction between writing its
    pack and deleting the loose files, or one killed there, leaves both); bad files skipped, said."""
    t = _store.read_runs(store)
    if t is None:
        return None
    is_pack = pc.match_substring(t.column("filename"), "/pack-")
    packed = set(t.filter(is_pack).column("run_id").to_pylist())
    if not packed:
        return t
    loose_unpacked = pc.invert(pc.is_in(t.column("run_id"), value_set=pa.array(sorted(packed), pa.string())))
    return t.filter(pc.or_(is_pack, loose_unpacked))


def connect(stores=None):
    """A DuckDB connection with the views ``runs``, ``figures``, ``facts``, ``inputs``, ``run_tables``
    over ``stores`` (default: one's own store and ``$KIT_RUNS_SHARED``). Every view keeps one row per
    run id (a run in two packs, or in a copy of a copy, counts once)."""
    import duckdb  # deferred: kit bench parse loads this module (bench_rows) and needs no SQL

    try:
        parts = [t for s in _stores(stores) if (t := _store_rows(s)) is not None]
    except FileNotFoundError:   # a compaction removed a loose file while it was listed: list again
        parts = [t for s in _stores(stores) if (t := _store_rows(s)) is not None]
    if parts:
        table = pa.concat_tables(parts, promote_options="permissive")
    else:   # an empty catalogue still answers, with no rows
        table = pa.Table.from_pylist([], schema=RUN_SCHEMA).append_column("filename", pa.array([], pa.string()))
    con = duckdb.connect()
    con.register("_all_runs", table)
    con.execute(f"CREATE VIEW runs AS {VIEWS['runs'].format(runs='SELECT * FROM _all_runs')}")
    for name, sql in VIEWS.items():
        if name != "runs":
            con.execute(f"CREATE VIEW {name} AS {sql}")
    return con


def _arrow(result):
    """A DuckDB relation as an Arrow table (``to_arrow_table`` in DuckDB 1.4+, ``arrow`` before)."""
    fetch = getattr(result, "to_arrow_table", None) or result.arrow
    return fetch()


def query(sql: str, *, stores=None):
    """Run ``sql`` over the catalogue (views ``runs``, ``figures``, ``facts``, ``inputs``, ``run_tables``)
    and return a DataFrame. Example: runs of last week with p99 ITL above 20 ms::
        kit.runs.query("SELECT run_id, created, value FROM figures WHERE name = 'p99_itl_ms' AND value > 20 "
                       "AND created > now() - INTERVAL 7 DAY")"""
    return _fetch(sql, stores, lambda cur: cur.df())


def rows(sql: str, *, stores=None) -> tuple[list[str], list[tuple]]:
    """``sql``'s column names and rows as Python values (what ``kit runs query`` prints)."""
    return _fetch(sql, stores, lambda cur: ([d[0] for d in cur.description], cur.fetchall()))


def _fetch(sql: str, stores, fetch):
    """``fetch(cursor)`` of ``sql`` run over the catalogue; DuckDB's error as a one-line UsageError."""
    import duckdb  # deferred: kit bench parse loads this module (bench_rows) and needs no SQL

    try:
        return fetch(connect(stores).execute(sql))
    except duckdb.Error as exc:
        raise UsageError(f"kit.runs.query: {str(exc).splitlines()[0]}") from None


def runs(kind: str | None = None, *, limit: int | None = 50, stores=None):
    """The latest runs (newest first), one row each: id, kind, when, who, host, label, command, figures count."""
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise UsageError(f"kit.runs.runs: limit {limit!r}: give a positive number of runs")
    where = "WHERE kind = $kind" if kind else ""
    lim = f"LIMIT {int(limit)}" if limit else ""
    sql = (f"SELECT run_id, kind, created, user, machine, host, label, len(figures) AS figures, tables, command "
           f"FROM runs {where} ORDER BY created DESC, run_id DESC {lim}")
    return connect(stores).execute(sql, {"kind": kind} if kind else {}).df()


def get(run_id: str, *, stores=None) -> dict:
    """One run as a dict (every column; ``figures``/``inputs``/``facts`` as lists of dicts); a unique
    prefix of its id is enough."""
    con = connect(stores)
    rows = _arrow(con.sql("SELECT * FROM runs WHERE starts_with(run_id, $id) ORDER BY run_id", params={"id": run_id}))
    ids = sorted(set(rows.column("run_id").to_pylist()))
    if not ids:
        raise UsageError(f"kit.runs: no run {run_id!r} in the catalogue ({', '.join(map(str, _stores(stores)))})")
    if len(ids) > 1:
        raise UsageError(f"kit.runs: {run_id!r} names {len(ids)} runs ({', '.join(ids[:4])}...): give more of the id")
    return rows.to_pylist()[0]


def table(run_id: str, name: str, *, stores=None):
    """A table a run recorded (``name`` as listed in its ``tables``), as a DataFrame."""
    run = get(run_id, stores=stores)
    if name not in (run["tables"] or []):
        have = ", ".join(run["tables"] or []) or "none"
        raise UsageError(f"kit.runs: run {run['run_id']} has no table {name!r} (it has: {have})")
    path = table_path(run, name)
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"kit.runs: table {name} of run {run['run_id']} ({path}) is not readable "
                         f"({type(exc).__name__})") from None


def table_path(run: dict, name: str) -> Path:
    """Where a run's table lies: ``tables/<run_id>/<name>.parquet`` of the store holding the run; a name
    that is not a plain table name is refused (it would read another file)."""
    if not _store.TABLE_NAME.fullmatch(str(name)) or ".." in str(name):
        raise UsageError(f"kit.runs: table name {name!r} of run {run['run_id']}: not a table name; refused")
    if not _store.RUN_ID.fullmatch(str(run["run_id"])):
        raise UsageError(f"kit.runs: run id {run['run_id']!r}: not one the kit makes; refused")
    return Path(run["filename"]).parent.parent / "tables" / run["run_id"] / f"{name}.parquet"
