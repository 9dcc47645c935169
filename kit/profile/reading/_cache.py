"""Cache of assembled profiles (and of parsed files), so reopening a trace reads tables only.

Tables are stored as uncompressed Arrow IPC files (``*.arrow``, Feather v2; categoricals kept as
dictionaries) rather than parquet, as this cache was before: on the tables of a 229 MB trace, writing
takes about a fifth of the time without raising the peak memory (parquet's encoders buffer every
column), reading about a third, for about 3x the bytes on disk (``bench/reader_choices.py``).

``load`` keeps one entry per profile, whatever its number of ranks (``profile_key``: every file's
identity and the rule table; reopening reads the tables, no parse or assembly);
``_load.load_files(cache=True)`` (``check_attribution``) keeps one entry per parsed file. File
identity: absolute path, size, mtime (ns), inode and the parser version — any change to the file (or
to the parser) misses the cache. Location: ``$KIT_CACHE_DIR`` or ``~/.cache/decode-kit`` (``profile/``
below it). Entries are written to a temporary folder and renamed into place, so a crash never leaves
a half entry, and a failed write (a full disk) removes its temporary folder; an unreadable entry is
ignored and rebuilt. Kernel-name categories are memoised per rule table (``category_map``), so changing
rules never needs a cache flush.

**Owner and trust.** A cache entry is a claim about a trace; whoever can write the cache can make
``kit profile summary`` print any figure. So the cache directory must be this user's own: it is made
with mode 0700; one of this user's that is more open is tightened to 0700 (and its key renewed, so
nothing written while it was open is trusted); one owned by another user, a symlink another user
planted, or not a directory is refused (:class:`~kit.errors.CacheError`, one line; ``cache=False``
reads without it). Every entry and category memo carries a keyed BLAKE2b digest of its bytes, the
key a random 32 bytes in ``<cache>/.key`` (0600, this user's): an entry planted or edited by anyone
without the key fails the check, is reported in the log and rebuilt. Memo values must also be
categories of the rule table. A cache shared by several users is not supported: point each user's
``KIT_CACHE_DIR`` at a directory of their own (another user's entries cannot be imported as trusted,
since their digests use a key this user does not hold).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import stat
import tempfile
import time
from pathlib import Path

from kit.errors import CacheError
from kit.util import cache_home


def _warn(msg: str, *args) -> None:
    """A warning on the ``kit.profile`` logger (imported here, not at module import: ``logging``'s
    at-fork hooks must not be in place before the loader forks its parser, see ``_load.prefetch``)."""
    import logging  # deferred: logging's at-fork hooks must not precede the parse's fork

    logging.getLogger("kit.profile").warning(msg, *args)

STEP_RULES = "2"  # 2: any loop's repeated range, forwards from module frames, --step-marker (_windows)
PARSER_VERSION = "7"  # 2: rows checked by _validate.check_frames; 3: frames and comms tables; 4: rotary frames kept;
# 5: op shapes, runtime calls kept, out-of-range values dropped; 6: Arrow IPC files instead of parquet;
# 7: steps from CPU ranges where their GPU copies miss kernels (_windows)
_TABLES = ("kernels", "annotations", "launches", "frames", "comms")


def _arrow():
    """pyarrow and its Feather module, loaded after the parse worker's fork (``_load.prefetch``)."""
    import pyarrow as pa  # deferred: pyarrow loads after the parse worker's fork (_load.prefetch)
    from pyarrow import feather  # deferred: as pyarrow

    return pa, feather


def write_table(df, path: Path) -> None:
    """One DataFrame as an uncompressed Arrow IPC file (its index is not kept)."""
    pa, feather = _arrow()
    feather.write_feather(pa.Table.from_pandas(df, preserve_index=False), str(path), compression="uncompressed")


def read_table(path: Path, digest=None):
    """A table :func:`write_table` wrote, as a DataFrame (its bytes fed to ``digest`` on the way)."""
    pa, feather = _arrow()
    data = path.read_bytes()
    if digest is not None:
        _seal(digest, path.name, data)
    return feather.read_table(pa.BufferReader(data), memory_map=False).to_pandas()


def cache_dir() -> Path:
    """Where cached tables live (``profile/`` in :func:`kit.util.cache_home`)."""
    return cache_home() / "profile"


def _own_dir(path: Path) -> bool:
    """Make ``path`` (0700) or check it is this user's directory; True when it had to be tightened.
    CacheError naming the path when it is another user's, another user's symlink, or not a directory."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    uid = os.getuid()
    lst = os.lstat(path)
    what = "KIT_CACHE_DIR " if os.environ.get("KIT_CACHE_DIR") else ""
    if stat.S_ISLNK(lst.st_mode) and lst.st_uid != uid:
        raise CacheError(f"profile cache {what}{path}: a symlink of uid {lst.st_uid}, not yours: refused (its "
                         f"entries could be forged); use a directory of your own, or cache=False / --no-cache")
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"profile cache {what}{path}: not a directory")
    if st.st_uid != uid:
        raise CacheError(f"profile cache {what}{path}: owned by uid {st.st_uid}, not you (uid {uid}): refused, a "
                         f"shared cache's entries could be forged; use a directory of your own, or --no-cache")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
        return True
    return False


_checked: dict[str, tuple[Path, bytes]] = {}


def _root() -> tuple[Path, bytes]:
    """The checked cache directory (``profile/``, this user's, 0700) and its digest key."""
    d = cache_dir()
    hit = _checked.get(str(d))
    if hit is not None and hit[0].is_dir():
        return hit
    d.parent.parent.mkdir(parents=True, exist_ok=True)
    try:
        opened = _own_dir(d.parent) | _own_dir(d)
    except OSError as exc:
        raise CacheError(f"profile cache {d}: cannot be made or checked ({exc.strerror or exc})") from None
    key = _key(d.parent / ".key", renew=opened)
    _checked[str(d)] = (d, key)
    return d, key


def _key(f: Path, renew: bool) -> bytes:
    """This user's digest key (made when missing, or renewed when the directory had been open to others)."""
    if not renew:
        try:
            fd = os.open(f, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                key = fh.read(64)
            if st.st_uid == os.getuid() and not st.st_mode & 0o077 and len(key) == 32:
                return key
        except OSError:
            pass
    key = secrets.token_bytes(32)
    tmp = f.with_name(f".key-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
    os.replace(tmp, f)
    if renew:
        _warn("profile cache %s had been open to other users: tightened to 0700, its entries no longer "
                    "trusted (rebuilt on use)", f.parent)
    return key


def _digest(key: bytes, name: str):
    return hashlib.blake2b(name.encode(), key=key, digest_size=32)


def _seal(h, name: str, data: bytes) -> None:
    """One file of an entry into its digest: name, length, bytes."""
    h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little"))
    h.update(data)


def _reject(d: Path, why: str) -> None:
    _warn("profile cache entry %s %s: ignored, rebuilt", d, why)
    shutil.rmtree(d, ignore_errors=True)


def _write_entry(root: Path, key: bytes, final: Path, tables: dict, info_name: str, info: dict) -> None:
    """Tables + info into a temporary folder, sealed with the keyed digest, renamed into place; the
    temporary folder never outlives a failure (a full disk)."""
    _sweep(root)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    try:
        for name, table in tables.items():
            write_table(table, tmp / f"{name}.arrow")
        (tmp / info_name).write_text(json.dumps(info, default=str))
        names = [info_name] + [f"{n}.arrow" for n in tables]
        h = _digest(key, final.name)
        for n in names:
            _seal(h, n, (tmp / n).read_bytes())
        (tmp / "digest").write_text(json.dumps({"files": names, "blake2b": h.hexdigest()}))
        try:
            os.replace(tmp, final)
        except OSError:  # another process won the race
            pass
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _sweep(root: Path, age_s: float = 3600.0) -> None:
    """Remove temporary folders an earlier process left (killed mid-write) after ``age_s``."""
    now = time.time()
    with contextlib.suppress(OSError):
        for e in os.scandir(root):
            if e.name.startswith(".tmp-") and now - e.stat(follow_symlinks=False).st_mtime > age_s:
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(e.path)


def _read_entry(d: Path, key: bytes, info_name: str, tables) -> dict | None:
    """The tables and info of entry ``d`` when its keyed digest checks, else None (reported, removed)."""
    if not (d / info_name).is_file():
        return None
    try:
        seal = json.loads((d / "digest").read_text())
    except (OSError, ValueError):
        _reject(d, "has no digest (written by an older kit, or planted)")
        return None
    h = _digest(key, d.name)
    raw = (d / info_name).read_bytes()
    _seal(h, info_name, raw)
    names = [f"{n}.arrow" for n in tables]
    if seal.get("files") != [info_name] + names:
        _reject(d, "lists other files than it should (edited or planted)")
        return None
    out = {name: read_table(d / f"{name}.arrow", h) for name in tables}
    if not secrets.compare_digest(h.hexdigest(), str(seal.get("blake2b", ""))):
        _reject(d, "fails its keyed digest (edited, planted, or written under another key)")
        return None
    out.update(json.loads(raw))
    return out


def file_key(path: Path) -> str:
    st = path.stat()
    ident = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{PARSER_VERSION}"
    return hashlib.sha256(ident.encode()).hexdigest()[:32]


def load(path: Path) -> dict | None:
    """The cached parse of ``path``, or None (none, unreadable, or failing its digest)."""
    root, key = _root()
    try:
        return _read_entry(root / file_key(path), key, "meta.json", _TABLES)
    except Exception:  # noqa: BLE001 - a broken cache entry is rebuilt, never fatal
        return None


def store(path: Path, parsed: dict) -> None:
    """Write ``parsed`` (DataFrames + JSON-able info) for ``path``; failures only skip caching."""
    root, key = _root()
    try:
        info = {k: v for k, v in parsed.items() if k not in _TABLES}
        _write_entry(root, key, root / file_key(path), {n: parsed[n] for n in _TABLES}, "meta.json", info)
    except Exception:  # noqa: BLE001 - caching is an optimisation
        return


def category_map(names, rules, compute) -> dict:
    """``compute(names) -> {name: category}`` memoised on disk per rule table (kernel names recur across
    traces and reopenings; matching ~15 regexes against 5,000-character template names is the
    slowest part of a cached reopen). The memo is sealed with the keyed digest and its values must be
    categories of the rule table; one that is not is ignored (and said in the log)."""
    from kit.profile.attribution._categories import OTHER  # deferred: reading does not load the later attribution stage

    names = list(names)
    ident = "\n".join(f"{r.category}\t{r.pattern}" for r in rules if "kernel" in r.on) + PARSER_VERSION
    root, key = _root()
    f = root / f"categories-{hashlib.sha256(ident.encode()).hexdigest()[:24]}.json"
    allowed = {r.category for r in rules} | {OTHER}
    known = _read_memo(f, key, allowed)
    missing = [n for n in names if n not in known]
    if missing:
        if len(known) > 50_000:  # start the memo afresh: every name asked for is then computed
            known, missing = {}, names
        known.update(compute(missing))
        _write_memo(f, key, known)
    return {n: known[n] for n in names}


def _read_memo(f: Path, key: bytes, allowed: set) -> dict:
    try:
        if not f.is_file():
            return {}
        doc = json.loads(f.read_bytes())
        body = json.dumps(doc["map"], sort_keys=True, ensure_ascii=False).encode()
        h = _digest(key, f.name)
        h.update(body)
        ok = secrets.compare_digest(h.hexdigest(), str(doc.get("blake2b", "")))
        bad = [v for v in doc["map"].values() if v not in allowed] if ok else []
        if ok and not bad and all(isinstance(k, str) for k in doc["map"]):
            return doc["map"]
        why = f"holds categories the rules do not have ({sorted(set(map(str, bad)))[:3]})" if ok else \
            "fails its keyed digest (edited or planted)"
    except Exception:  # noqa: BLE001 - rebuilt
        why = "is unreadable"
    _warn("profile cache category memo %s %s: ignored, rebuilt", f, why)
    return {}


def _write_memo(f: Path, key: bytes, known: dict) -> None:
    body = json.dumps(known, sort_keys=True, ensure_ascii=False)
    h = _digest(key, f.name)
    h.update(body.encode())
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=f.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write('{"blake2b": "' + h.hexdigest() + '", "map": ' + body + "}")
        os.replace(tmp, f)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def profile_key(paths, rules, step_marker: str | None = None) -> str:
    """Key of an assembled profile: the identities of all its files, in order, the rule table, the step
    rule's version and the step marker asked for."""
    from kit.profile.attribution._categories import rules_ident  # deferred: attribution, a later stage

    ident = "|".join(file_key(Path(p)) for p in paths) + "\n" + rules_ident(rules)
    ident += f"\nsteps {STEP_RULES}:{step_marker or ''}"
    return "set-" + hashlib.sha256(ident.encode()).hexdigest()[:32]


def has_profile(key: str) -> bool:
    """Whether an assembled-profile entry exists (cheap: no pandas; checked when read)."""
    root, _ = _root()
    try:
        return (root / key / "info.json").is_file()
    except OSError:
        return False


def load_profile(key: str, tables: tuple[str, ...]) -> dict | None:
    """The cached assembled tables + info of a profile, or None (one entry for a whole set of ranks,
    so reopening 8 ranks reads one file per table, not one per table and rank)."""
    root, dkey = _root()
    try:
        import pandas as pd  # deferred: pandas loads after the parse worker's fork

        out = _read_entry(root / key, dkey, "info.json", tables)
        if out is None:
            return None
        # an all-missing categorical column can come back as object: restore the dtype
        for name, cols in out.pop("categorical", {}).items():
            t = out[name]
            for c in cols:
                if c in t and not isinstance(t[c].dtype, pd.CategoricalDtype):
                    t[c] = t[c].astype(object).astype("category")
    except Exception:  # noqa: BLE001 - a broken entry is rebuilt
        return None
    return out


def store_profile(key: str, tables: dict, info: dict) -> None:
    """Write an assembled profile's tables (DataFrames) and JSON-able info; failures only skip caching."""
    root, dkey = _root()
    try:
        cats = {name: [c for c in t.columns if str(t[c].dtype) == "category"] for name, t in tables.items()}
        _write_entry(root, dkey, root / key, tables, "info.json", {**info, "categorical": cats})
    except Exception:  # noqa: BLE001
        return
