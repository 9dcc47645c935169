"""Reading the catalogue: SQL through DuckDB over the stores' Parquet files, a run, its tables.

A query opens an in-memory DuckDB connection, defines the views of ``_schema.VIEWS`` over the run files
of every store read (one's own and ``$KIT_RUNS_SHARED``'s, or the ``stores`` given) and runs the SQL:
nothing is written, so a store copied from someone else is read as it is. A compaction removing loose
files while a query lists them makes DuckDB miss one: the query is tried once more.
"""
from __future__ import annotations

import os
from pathlib import Path

from kit.errors import UsageError
from kit.runs import _store


def _stores(stores) -> list[Path]:
    if stores is not None:
        return [Path(s).expanduser() for s in ([stores] if isinstance(stores, (str, os.PathLike)) else stores)]
    own = _store.store_dir()
    return ([own] if own is not None else []) + _store.shared_dirs()


def _lit(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _store_sql(store: Path) -> str | None:
    """The runs of one store: its packs, and its loose files whose run is not in a pack yet (a compaction
    between writing its pack and deleting the loose files leaves both for a moment)."""
    files = _store.run_files(store)
    packs = [p for p in files if p.name.startswith("pack-")]
    loose = len(files) - len(packs)
    if not files:
        return None
    pack_src = f"read_parquet({_lit(store / 'runs' / 'pack-*.parquet')}, filename = true)"
    loose_src = f"read_parquet({_lit(store / 'runs' / '2*.parquet')}, filename = true)"
    if not loose:
        return f"SELECT * FROM {pack_src}"
    if not packs:
        return f"SELECT * FROM {loose_src}"
    return (f"SELECT * FROM {pack_src} UNION ALL BY NAME SELECT * FROM {loose_src} WHERE run_id NOT IN "
            f"(SELECT run_id FROM read_parquet({_lit(store / 'runs' / 'pack-*.parquet')}))")


def connect(stores=None):
    """A DuckDB connection with the views ``runs``, ``figures``, ``facts``, ``inputs``, ``run_tables``
    over ``stores`` (default: one's own store and ``$KIT_RUNS_SHARED``)."""
    import duckdb

    from kit.runs._schema import VIEWS

    parts = [sql for s in _stores(stores) if (sql := _store_sql(s))]
    con = duckdb.connect()
    if not parts:   # an empty catalogue still answers, with no rows
        import pyarrow as pa

        from kit.runs._schema import RUN_SCHEMA

        empty = pa.Table.from_pylist([], schema=RUN_SCHEMA).append_column("filename", pa.array([], pa.string()))
        con.register("_empty", empty)
        con.execute("CREATE VIEW runs AS SELECT * FROM _empty")
    else:
        src = " UNION ALL BY NAME ".join(parts)
        con.execute(f"CREATE VIEW runs AS {VIEWS['runs'].format(runs=src) if len(parts) > 1 else src}")
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
    import duckdb

    for attempt in (0, 1):
        try:
            return connect(stores).execute(sql).df()
        except duckdb.IOException:
            if attempt:
                raise
        except duckdb.Error as exc:
            raise UsageError(f"kit.runs.query: {str(exc).splitlines()[0]}") from None
    raise AssertionError("unreachable")


def rows(sql: str, *, stores=None) -> tuple[list[str], list[tuple]]:
    """``sql``'s column names and rows as Python values, without pandas (what ``kit runs query`` prints)."""
    import duckdb

    for attempt in (0, 1):
        try:
            cur = connect(stores).execute(sql)
            return [d[0] for d in cur.description], cur.fetchall()
        except duckdb.IOException:
            if attempt:
                raise
        except duckdb.Error as exc:
            raise UsageError(f"kit.runs.query: {str(exc).splitlines()[0]}") from None
    raise AssertionError("unreachable")


def runs(kind: str | None = None, *, limit: int | None = 50, stores=None):
    """The latest runs (newest first), one row each: id, kind, when, who, host, label, command, figures count."""
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
    import pandas as pd

    run = get(run_id, stores=stores)
    if name not in (run["tables"] or []):
        have = ", ".join(run["tables"] or []) or "none"
        raise UsageError(f"kit.runs: run {run['run_id']} has no table {name!r} (it has: {have})")
    path = Path(run["filename"]).parent.parent / "tables" / run["run_id"] / f"{name}.parquet"
    return pd.read_parquet(path)
