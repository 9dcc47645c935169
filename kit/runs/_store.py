"""Where the catalogue lives and how its files are written: one Parquet file per run, packs, tables.

A store is a plain directory::

    runs/<run_id>.parquet          one row: a run recorded by one process (written once, atomically)
    runs/pack-<digest>.parquet     many rows: loose files merged by :func:`compact`
    tables/<run_id>/<name>.parquet the run's tables
    baselines/<name>.json          a named baseline: the run it points at, who named it and when

Every file is written once, through a temporary file and a rename, and never changed afterwards, so
concurrent writers never collide, a reader never sees half a file, and copying the directory (cp, rsync,
a tarball) is how a store is shared: a copy is read-only to its reader by construction, nothing in it
needs a server or a lock to be read. The one rewrite, :func:`compact`, writes the pack before deleting
the loose files it holds; a reader between the two sees a run twice, and the query layer keeps one.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

SCHEMA_VERSION = 1
COMPACT_AT = 64           # loose files that make record() merge them into a pack (bounded query time)
_OFF = {"0", "off", "no", "false", "none", ""}


def store_dir() -> Path | None:
    """The catalogue directory (``$KIT_RUNS_DIR``, else ``$XDG_DATA_HOME/decode-kit/runs``, else
    ``~/.local/share/decode-kit/runs``); None when recording is turned off (``KIT_RUNS=off``)."""
    if os.environ.get("KIT_RUNS", "on").strip().lower() in _OFF:
        return None
    root = os.environ.get("KIT_RUNS_DIR")
    if root:
        return Path(root).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "decode-kit" / "runs"


def shared_dirs() -> list[Path]:
    """Other people's stores read alongside one's own: ``$KIT_RUNS_SHARED`` (paths joined by ``os.pathsep``)."""
    return [Path(p).expanduser() for p in os.environ.get("KIT_RUNS_SHARED", "").split(os.pathsep) if p.strip()]


def _write_atomic(table, path: Path) -> None:
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_run(root: Path, row, tables: dict) -> Path:
    """Write one run (a one-row Arrow table) and its tables (name -> Arrow table); tables first, so a
    run listed in the catalogue always has its tables."""
    run_id = row.column("run_id")[0].as_py()
    for name, t in tables.items():
        _write_atomic(t, root / "tables" / run_id / f"{name}.parquet")
    path = root / "runs" / f"{run_id}.parquet"
    _write_atomic(row, path)
    return path


def run_files(root: Path) -> list[Path]:
    d = root / "runs"
    return sorted(d.glob("*.parquet")) if d.is_dir() else []


def loose_count(root: Path) -> int:
    d = root / "runs"
    if not d.is_dir():
        return 0
    return sum(1 for e in os.scandir(d) if e.name.endswith(".parquet") and not e.name.startswith("pack-"))


@contextlib.contextmanager
def _lock(root: Path):
    """An exclusive, non-blocking lock on the store (``runs/.lock``): yields False when another process holds it."""
    import fcntl

    root.joinpath("runs").mkdir(parents=True, exist_ok=True)
    with open(root / "runs" / ".lock", "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def compact(root: "str | os.PathLike | None" = None) -> int:
    """Merge the loose run files of the store (default one's own) into one pack, so queries open fewer
    files; returns how many runs were merged (0 when another process is compacting). Packs are left as
    they are: each holds at most a few thousand rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(root) if root is not None else store_dir()
    if root is None:
        return 0

    with _lock(root) as held:
        if not held:
            return 0
        loose = [p for p in run_files(root) if not p.name.startswith("pack-")]
        if len(loose) < 2:
            return 0
        merged = pa.concat_tables([pq.read_table(p) for p in loose], promote_options="permissive")
        digest = hashlib.sha256("\n".join(p.name for p in loose).encode()).hexdigest()[:16]
        _write_atomic(merged, root / "runs" / f"pack-{digest}.parquet")
        for p in loose:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        return len(loose)
