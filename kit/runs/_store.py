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
A compaction killed between the two leaves loose files whose runs a pack holds: the next one deletes
them instead of packing them again, and sweeps what kills and full disks leave (``.tmp`` files, table
directories of runs never written) once they are an hour old.

A store is private to its owner (directories 0700, files 0600, whatever the umask): runs name files,
hosts and commands. A file that cannot be read as Parquet (truncated, planted) is skipped with a
warning naming it (:func:`read_runs`); a row whose ``run_id`` is not one the kit makes is skipped too,
since run ids become file names (``tables/<run_id>/``).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

from kit.util import recording_on

SCHEMA_VERSION = 1
COMPACT_AT = 64           # loose files that make record() merge them into a pack (bounded query time)
RUN_ID = re.compile(r"\d{8}T\d{6}-[0-9a-f]{8}")   # what record() makes; anything else is refused as a file name
TABLE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
SWEEP_AGE_S = 3600.0       # a temporary file or orphan table directory this old is debris of a kill
_warned: set[str] = set()


def store_dir() -> Path | None:
    """The catalogue directory (``$KIT_RUNS_DIR``, else ``$XDG_DATA_HOME/decode-kit/runs``, else
    ``~/.local/share/decode-kit/runs``); None when recording is turned off (``KIT_RUNS=off``)."""
    if not recording_on():
        return None
    root = os.environ.get("KIT_RUNS_DIR")
    if root:
        return Path(root).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "decode-kit" / "runs"


def shared_dirs() -> list[Path]:
    """Other people's stores read alongside one's own: ``$KIT_RUNS_SHARED`` (paths joined by ``os.pathsep``)."""
    return [Path(p).expanduser() for p in os.environ.get("KIT_RUNS_SHARED", "").split(os.pathsep) if p.strip()]


def warn(message: str) -> None:
    """One stderr line per distinct problem and process: a skipped file is said once, not per query."""
    if message not in _warned:
        _warned.add(message)
        print(f"kit: warning: {message}", file=sys.stderr)


def private_dirs(path: Path, top: Path) -> None:
    """Create ``top`` (the store) and ``path`` under it as 0700 directories of this user; a directory on
    the way that is a symlink or another user's is refused (OSError)."""
    top.parent.mkdir(parents=True, exist_ok=True)
    _private_dir(top)
    cur = top
    for part in Path(path).relative_to(top).parts:
        cur = cur / part
        _private_dir(cur)


def _private_dir(d: Path) -> None:
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise OSError(f"{d}: not a directory of this user (a symlink or another user's); refused")


def _write_atomic(table, path: Path, root: Path) -> None:
    import pyarrow.parquet as pq  # deferred: pyarrow loads only to read or write the store

    private_dirs(path.parent, root)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # 0600
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd")
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
        _write_atomic(t, root / "tables" / run_id / f"{name}.parquet", root)
    path = root / "runs" / f"{run_id}.parquet"
    _write_atomic(row, path, root)
    return path


def run_files(root: Path) -> list[Path]:
    """The store's run files (packs and loose), listed without globbing the store's own path (a path
    holding ``*`` or ``[`` is a name, not a pattern)."""
    d = Path(root) / "runs"
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return sorted(d / n for n in names if n.endswith(".parquet") and not n.startswith("."))


def read_runs(root: Path, files: list[Path] | None = None):
    """The run rows of a store's files as one Arrow table with a ``filename`` column; a file that is not
    readable Parquet, or a row whose run id is not the kit's, is skipped with a warning naming it."""
    import pyarrow as pa  # deferred: pyarrow loads only to read or write the store
    import pyarrow.compute as pc  # deferred: pyarrow loads only to read or write the store
    import pyarrow.parquet as pq  # deferred: pyarrow loads only to read or write the store

    wait_writers(root)
    parts = []
    for f in run_files(root) if files is None else files:
        try:
            t = pq.read_table(f)
            ids = t.column("run_id")
        except FileNotFoundError:
            raise   # compacted away while listed: the caller lists again
        except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
            warn(f"catalogue file {f} is not readable ({type(exc).__name__}: {str(exc)[:120]}); skipped")
            continue
        ok = pc.fill_null(pc.match_substring_regex(ids, "^" + RUN_ID.pattern + "$"), False)
        if not pc.all(ok).as_py():
            bad = t.num_rows - pc.sum(ok.cast(pa.int64())).as_py()
            warn(f"catalogue file {f}: {bad} row(s) with a run id the kit does not make; skipped")
            t = t.filter(ok)
        parts.append(t.append_column("filename", pa.array([str(f)] * t.num_rows, pa.string())))
    if not parts:
        return None
    return pa.concat_tables(parts, promote_options="permissive")


def loose_count(root: Path) -> int:
    return sum(1 for f in run_files(root) if not f.name.startswith("pack-"))


WRITING = ".writing"
"""``runs/.writing``: a writer that outlives the ``kit`` command which recorded its run holds it shared."""
WAIT_WRITERS_S = 60.0


def hold_writing(root: Path) -> int:
    """A shared lock on :data:`WRITING` for a run's writer that outlives the ``kit`` command (several hold it at
    once; a reader waits for them, :func:`wait_writers`): its descriptor, the lock going with it."""
    private_dirs(root / "runs", root)
    fd = os.open(root / "runs" / WRITING, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def wait_writers(root: Path, timeout_s: float = WAIT_WRITERS_S) -> None:
    """Wait until the runs being written to the store by ``kit`` commands that have already answered are
    written (their writers hold ``runs/.writing``), so that ``kit runs list`` right after a command sees
    its run. A writer that holds on longer than ``timeout_s`` is not waited for; a store that is not
    ours to lock (a colleague's copy) is read as it is."""
    try:
        fd = os.open(root / "runs" / WRITING, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        end = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > end:
                    return
                time.sleep(0.01)   # polled, not blocking: a writer stuck for ever must not hang the reader
            except OSError:
                return
    finally:
        os.close(fd)   # releases the lock at once: the reader only waited


@contextlib.contextmanager
def _lock(root: Path):
    """An exclusive, non-blocking lock on the store (``runs/.lock``): yields False when another process holds it."""
    private_dirs(root / "runs", root)
    with os.fdopen(os.open(root / "runs" / ".lock", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600),
                   "a") as fh:
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
    files; returns how many runs were merged (0 when another process is compacting). Packs are left as they
    are; loose files a pack already holds, unreadable ones and debris: as the module docstring says."""
    root = Path(root) if root is not None else store_dir()
    if root is None:
        return 0

    with _lock(root) as held:
        if not held:
            return 0
        sweep(root)
        files = run_files(root)
        packed = _packed(files)
        loose, rows = [], []
        for p in (f for f in files if not f.name.startswith("pack-")):
            t = read_runs(root, [p])
            if t is None:
                continue
            if set(t.column("run_id").to_pylist()) <= packed:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                continue
            loose.append(p)
            rows.append(t.drop_columns(["filename"]))
        if len(loose) < 2:
            return 0
        import pyarrow as pa  # deferred: pyarrow loads only to read or write the store

        merged = pa.concat_tables(rows, promote_options="permissive")
        digest = hashlib.sha256("\n".join(p.name for p in loose).encode()).hexdigest()[:16]
        _write_atomic(merged, root / "runs" / f"pack-{digest}.parquet", root)
        for p in loose:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        return len(loose)


def _packed(files: list[Path]) -> set[str]:
    """The run ids the packs among ``files`` hold (an unreadable pack holds none)."""
    import pyarrow.parquet as pq  # deferred: pyarrow loads only to read or write the store

    out: set[str] = set()
    for p in files:
        if p.name.startswith("pack-"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                out |= set(pq.read_table(p, columns=["run_id"]).column("run_id").to_pylist())
    return out


def sweep(root: Path, *, age_s: float = SWEEP_AGE_S) -> int:
    """Delete what kills and full disks leave in a store: temporary files (``.*.tmp``) and table
    directories of runs that were never written, once older than ``age_s``; returns how many."""
    now, gone = time.time(), 0
    for d in (root / "runs", *((root / "tables").iterdir() if (root / "tables").is_dir() else ())):
        for e in os.scandir(d) if d.is_dir() else ():
            old = now - e.stat(follow_symlinks=False).st_mtime > age_s
            if e.name.startswith(".") and e.name.endswith(".tmp") and old:
                with contextlib.suppress(OSError):
                    os.unlink(e.path)
                    gone += 1
    if (root / "tables").is_dir():
        files = run_files(root)
        recorded = _packed(files) | {f.stem for f in files if not f.name.startswith("pack-")}
        for e in os.scandir(root / "tables"):
            if (e.is_dir(follow_symlinks=False) and e.name not in recorded
                    and now - e.stat(follow_symlinks=False).st_mtime > age_s):
                shutil.rmtree(e.path, ignore_errors=True)
                gone += 1
    return gone
