"""Recording a run: who, when, where, inputs by content hash, settings, figures, tables, all redacted.

:func:`record` is the explicit call (it raises on a bad argument or an unwritable store). The decorator
``kit.util.recorded`` the kit's entry points wear hands the outermost decorated call's result to
:func:`record_call` (installed by ``kit.runs`` when it loads, so no low package imports the catalogue), which
records what the result's ``to_record`` says (``_extract.py``) and never fails the call (a recording error
becomes one warning line on stderr and one line in the store's ``failures.jsonl``).

Secrets: the command line, the settings, every path and text fact, warning and string cell of a table
go through ``kit.redact`` (the same rules as the HTML report) before they are written.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import getpass
import hashlib
import json
import math
import os
import socket
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from kit.errors import UsageError
from kit.runs import _store
from kit.util import cache_home, command_line, kit_version, set_command_line, unit_of

_HASH_CHUNK = 1 << 22
_MAX_DIR_FILES = 4096


@dataclass
class Recorded:
    """What a call recorded: ``run_id`` and the file it wrote (``path``), or ``None`` values when off."""

    run_id: str
    kind: str
    path: Path | None
    figures: int = 0
    tables: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Recorded({self.kind} {self.run_id}: {self.figures} figures, tables {self.tables})"


set_command = set_command_line
"""Remember the ``kit`` command line of this process (``kit.util.set_command_line``, its name in the catalogue):
runs recorded under it carry it, redacted."""


def new_run_id(now: float | None = None) -> str:
    """``20261204T203000-1a2b3c4d``: sorts by time, unique across processes and machines."""
    t = time.gmtime(now if now is not None else time.time())
    return time.strftime("%Y%m%dT%H%M%S", t) + "-" + uuid.uuid4().hex[:8]


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def _hash_dir() -> Path:
    return cache_home() / "hashes"


def _memo_dir() -> Path | None:
    """The input-hash memo directory when it is this user's own (the cache directory and ``hashes`` under
    it owned by this user, ``hashes`` a real 0700 directory, not a symlink); None otherwise: a memo
    another user could plant or read is not used."""
    d = _hash_dir()
    try:
        d.parent.mkdir(parents=True, exist_ok=True)
        if d.parent.stat().st_uid != os.geteuid():
            return None
        _store.private_dirs(d, d.parent)
        return d
    except OSError:
        return None


def _memo_read(memo: Path) -> str | None:
    try:
        fd = os.open(memo, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd) as fh:
        st = os.fstat(fh.fileno())
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return None
        got = fh.read(100).strip()
    return got if len(got) == 64 else None


_PENDING: dict[str, object] = {}


def prehash(paths) -> None:
    """Start hashing the local files among ``paths`` in a background thread (hashlib releases the GIL), so a
    call that records them later (after a long parse) finds the digests ready. Does nothing when recording is off."""
    if _store.store_dir() is None:
        return
    todo = []
    for p in paths:
        p = Path(p)
        if p.is_file() and str(p.resolve()) not in _PENDING:
            fut: Future = Future()
            _PENDING[str(p.resolve())] = fut
            todo.append((p, fut))

    def work():
        for p, fut in todo:
            try:
                fut.set_result(_file_hash(p))
            except Exception as exc:   # noqa: BLE001 - the recording step reports it
                fut.set_exception(exc)
    threading.Thread(target=work, daemon=True, name="kit-prehash").start()


def file_hash(path: Path) -> str:
    """sha256 of a file's bytes, remembered per (path, size, mtime, inode) so a trace is read once."""
    fut = _PENDING.pop(str(Path(path).resolve()), None)
    if fut is not None:
        return fut.result()
    return _file_hash(Path(path))


def _file_hash(path: Path) -> str:
    st = path.stat()
    ident = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"
    memos = _memo_dir()
    memo = memos / hashlib.sha256(ident.encode()).hexdigest()[:32] if memos is not None else None
    got = _memo_read(memo) if memo is not None else None
    if got is not None:
        return got
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            h.update(chunk)
    digest = h.hexdigest()
    if memo is not None:
        with contextlib.suppress(OSError):
            fd, tmp = tempfile.mkstemp(dir=memo.parent, prefix=".memo.", suffix=".tmp")   # 0600
            with os.fdopen(fd, "w") as fh:
                fh.write(digest)
            os.replace(tmp, memo)
    return digest


def _dir_hash(path: Path) -> tuple[str | None, int]:
    files = sorted(p for p in path.rglob("*") if p.is_file())
    if len(files) > _MAX_DIR_FILES:
        return None, sum(p.stat().st_size for p in files[:_MAX_DIR_FILES])
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(path)}\0{file_hash(p)}\n".encode())
    return h.hexdigest(), sum(p.stat().st_size for p in files)


def describe_input(item, role: str = "") -> dict:
    """One input: a local file or folder (hashed), ``host:/path`` (not hashed: it lies on the host), a URL."""
    s = str(item)
    host, path = "local", s
    if "://" in s:
        host, path = s.split("://", 1)[0], s
    elif ":" in s and not Path(s).exists() and not s[1:3] == ":\\":
        host, path = s.split(":", 1)
    out = {"path": path, "host": host, "sha256": None, "bytes": None, "role": role}
    if host == "local":
        p = Path(path)
        if p.is_file():
            out.update(path=str(p.resolve()), sha256=file_hash(p), bytes=p.stat().st_size)
        elif p.is_dir():
            digest, size = _dir_hash(p)
            out.update(path=str(p.resolve()), sha256=digest, bytes=size)
    return out


def _redactor():
    from kit.redact import redact_json_text, redact_text  # deferred: start-up (detect-secrets loads on first use)

    def text(s):
        return None if s is None else redact_text(str(s), markup=False)[0]

    def js(obj):
        return redact_json_text(json.dumps(obj, default=str, sort_keys=True))[0]
    return text, js


def _cell(v):
    """A cell Parquet and the redaction take: containers (lists, dicts, arrays) as JSON text."""
    if isinstance(v, (list, tuple, dict, set)) or getattr(v, "ndim", 0) > 0:
        return json.dumps(v.tolist() if hasattr(v, "tolist") else list(v) if isinstance(v, set) else v, default=str)
    return v


def _redacted_table(df, text):
    """``df`` as an Arrow table with string cells and column names redacted (once per distinct value);
    container cells become JSON text, and a column of mixed types becomes text."""
    import pandas as pd  # deferred: start-up (kit.runs loads before a command's answer; these after it)
    import pyarrow as pa  # deferred: as pandas

    df = df.reset_index(drop=True).copy()
    df.attrs = {}   # pandas would write them into the Parquet metadata, unredacted
    df.columns = [text(c) for c in df.columns]
    for c in df.columns:
        if isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(object)
        if df[c].dtype == object or pd.api.types.is_string_dtype(df[c].dtype):
            col = df[c].map(_cell)
            mapping = {v: text(v) for v in set(col.dropna()) if isinstance(v, str)}
            df[c] = col.map(lambda v, m=mapping: m.get(v, v) if isinstance(v, str) else v)
            try:
                pa.array(df[c])
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
                df[c] = df[c].map(lambda v: v if v is None or isinstance(v, str) else str(v))
    return pa.Table.from_pandas(df, preserve_index=False)


def record(kind: str, *, inputs=(), settings: dict | None = None, figures=None, facts: dict | None = None,
           tables: dict | None = None, label: str | None = None, warnings=(), command: str | None = None,
           provenance: str | None = None, root: str | os.PathLike | None = None) -> Recorded:
    """Record one run in the catalogue and return its id.

    ``inputs``: paths (local files/folders are hashed; ``host:/path`` and URLs are named, not hashed) or
    ``(role, path)`` pairs. ``figures``: ``{name: value}`` or ``[(name, value, unit, item)]``.
    ``facts``: ``{name: text}`` (a verdict, an engine). ``tables``: ``{name: DataFrame}`` written as
    Parquet. ``root``: the store (default :func:`kit.runs.store_dir`); with recording off and no
    ``root`` nothing is written and the run id comes back with ``path=None``."""
    store = Path(root) if root is not None else _store.store_dir()
    run_id = new_run_id()
    if store is None:
        return Recorded(run_id, kind, None)
    if not kind or not isinstance(kind, str):
        raise UsageError(f"kit.runs.record: kind must be a non-empty string, not {kind!r}")
    import pyarrow as pa  # deferred: start-up, as in _redacted_table

    from kit.runs._schema import RUN_SCHEMA  # deferred: it imports pyarrow

    text, js = _redactor()
    ins = [describe_input(x[1], x[0]) if isinstance(x, tuple) else describe_input(x) for x in inputs]
    for i in ins:
        i["path"] = text(i["path"])
    digests = sorted(f"{i['role']}:{i['sha256'] or i['host'] + ':' + i['path']}" for i in ins)
    said: dict = {}   # figure names and items redacted too (a label may hold a key), once per distinct text
    figs = [{**f, "name": said.get(f["name"]) or said.setdefault(f["name"], text(f["name"])),
             "item": None if f["item"] is None else said.get(f["item"]) or said.setdefault(f["item"], text(f["item"]))}
            for f in _figure_rows(figures)]
    tabs = {name: _redacted_table(df, text) for name, df in (tables or {}).items()
            if df is not None and len(df.columns) and len(df)}
    row = pa.Table.from_pylist([{
        "run_id": run_id, "kind": kind, "created": _now(), "user": text(_who()), "machine": text(socket.gethostname()),
        "host": ",".join(sorted({i["host"] for i in ins})) or "local",
        "command": text(command or command_line() or _python_caller()), "label": text(label),
        "kit_version": kit_version(),
        "input_hash": hashlib.sha256("\n".join(digests).encode()).hexdigest() if ins else None,
        "inputs": ins, "settings": js(settings or {}), "figures": figs,
        "facts": [{"name": k, "value": text(v)} for k, v in (facts or {}).items() if v is not None],
        "tables": sorted(tabs), "warnings": [text(w) for w in warnings], "provenance": text(provenance),
        "schema": _store.SCHEMA_VERSION}], schema=RUN_SCHEMA)
    path = _store.write_run(store, row, tabs)
    if _store.loose_count(store) >= _store.COMPACT_AT:
        try:   # the run is recorded; a compaction that fails (a full disk) only leaves files loose
            _store.compact(store)
        except OSError as exc:
            _store.warn(f"catalogue {store}: compaction failed ({type(exc).__name__}: {str(exc)[:120]}); "
                        "runs stay in loose files")
    return Recorded(run_id, kind, path, len(figs), sorted(tabs))


def _now():
    return dt.datetime.now(dt.timezone.utc)


def _python_caller() -> str:
    return "python " + " ".join(sys.argv[:1]) if sys.argv and sys.argv[0] else "python"


def _figure_rows(figures) -> list[dict]:
    rows = figures.items() if isinstance(figures, dict) else (figures or [])
    out = []
    for r in rows:
        r = tuple(r)
        # (name, value), (name, value, item) from a result's to_record; (name, value, unit, item) from record()
        name, value, unit, item = r[:4] if len(r) >= 4 else (r[0], r[1], None, r[2] if len(r) == 3 else None)
        try:
            v = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(v):
            out.append({"name": str(name), "value": v, "unit": unit_of(str(name)) or unit or "",
                        "item": None if item is None else str(item)})
    return out


def record_call(kind: str, result, args: dict, elapsed: float, command: str | None = None) -> None:
    """The writer ``kit.util.recorded`` hands an outermost decorated call's result to (installed when this
    package loads): the result recorded as a run of ``kind``, as its ``to_record(args)`` describes it;
    never raises: a failure is one line on stderr and one line in the store's ``failures.jsonl``."""
    if _store.store_dir() is None:
        return
    try:
        from kit.runs._extract import extract  # deferred: provenance and the result types load only to write

        what = extract(result, args)
        what["figures"] = [*what.get("figures", []), ("elapsed_s", elapsed)]
        record(kind, command=command, **what)
    except Exception as exc:   # noqa: BLE001 - recording must never fail the analysis
        _count_failure(kind, exc)
        print(f"kit: warning: run not recorded in the catalogue ({type(exc).__name__}: {str(exc)[:200]}); "
              "KIT_RUNS=off turns recording off", file=sys.stderr)


def hold_store() -> int | None:
    """The store's writers' lock, taken for a run written by a child that outlives the ``kit`` command
    (``kit.util.flush_detached``): its descriptor, or None when recording is off."""
    store = _store.store_dir()
    return None if store is None else _store.hold_writing(store)


FAILURES = "failures.jsonl"


def _count_failure(kind: str, exc: BaseException) -> None:
    """One line in the store's ``failures.jsonl`` (when, kind, error), where ``kit runs list`` counts them."""
    store = _store.store_dir()
    try:
        store.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"when": _now().isoformat(timespec="seconds"), "kind": kind,
                           "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
        with open(store / FAILURES, "a", encoding="utf-8") as fh:
            fh.write(_redactor()[0](line) + "\n")
    except Exception:   # noqa: BLE001 - the store itself may be what fails; stderr said it
        pass


def failures(root: str | os.PathLike | None = None) -> list[dict]:
    """The recording failures counted in a store (default :func:`kit.runs.store_dir`), oldest first."""
    store = Path(root) if root is not None else _store.store_dir()
    if store is not None:
        _store.wait_writers(store)
    try:
        lines = (store / FAILURES).read_text(encoding="utf-8").splitlines() if store else []
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
