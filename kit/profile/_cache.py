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
a half entry; an unreadable entry is ignored and rebuilt. Kernel-name categories are memoised per rule
table (``category_map``), so changing rules never needs a cache flush.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

PARSER_VERSION = "7"  # 2: rows checked by _validate.check_frames; 3: frames and comms tables; 4: rotary frames kept;
# 5: op shapes, runtime calls kept, out-of-range values dropped; 6: Arrow IPC files instead of parquet;
# 7: steps from CPU ranges where their GPU copies miss kernels (_windows)
_TABLES = ("kernels", "annotations", "launches", "frames", "comms")


def write_table(df, path: Path) -> None:
    """One DataFrame as an uncompressed Arrow IPC file (its index is not kept)."""
    import pyarrow as pa
    from pyarrow import feather

    feather.write_feather(pa.Table.from_pandas(df, preserve_index=False), str(path), compression="uncompressed")


def read_table(path: Path):
    """A table :func:`write_table` wrote, as a DataFrame."""
    from pyarrow import feather

    return feather.read_table(str(path), memory_map=False).to_pandas()


def cache_dir() -> Path:
    """Where cached tables live (``$KIT_CACHE_DIR`` or ``~/.cache/decode-kit``)."""
    root = os.environ.get("KIT_CACHE_DIR")
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "decode-kit"
    return base / "profile"


def file_key(path: Path) -> str:
    st = path.stat()
    ident = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{PARSER_VERSION}"
    return hashlib.sha256(ident.encode()).hexdigest()[:32]


def has(path: Path) -> bool:
    """Whether a cache entry for ``path`` exists (cheap: no pandas)."""
    try:
        return (cache_dir() / file_key(path) / "meta.json").is_file()
    except OSError:
        return False


def load(path: Path) -> dict | None:
    """The cached parse of ``path``, or None."""
    try:

        d = cache_dir() / file_key(path)
        if not (d / "meta.json").is_file():
            return None
        info = json.loads((d / "meta.json").read_text())
        out = {name: read_table(d / f"{name}.arrow") for name in _TABLES}
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
            write_table(parsed[name], tmp / f"{name}.arrow")
        info = {k: v for k, v in parsed.items() if k not in _TABLES}
        (tmp / "meta.json").write_text(json.dumps(info, default=str))
        try:
            os.replace(tmp, final)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    except Exception:  # noqa: BLE001 - caching is an optimisation
        return


def category_map(names, rules, compute) -> dict:
    """``compute(names) -> {name: category}`` memoised on disk per rule table (kernel names recur across
    traces and reopenings; matching ~15 regexes against 5,000-character template names is the
    slowest part of a cached reopen)."""
    names = list(names)
    ident = "\n".join(f"{r.category}\t{r.pattern}" for r in rules if "kernel" in r.on) + PARSER_VERSION
    f = cache_dir() / f"categories-{hashlib.sha256(ident.encode()).hexdigest()[:24]}.json"
    try:
        known = json.loads(f.read_text()) if f.is_file() else {}
    except Exception:  # noqa: BLE001 - rebuilt below
        known = {}
    missing = [n for n in names if n not in known]
    if missing:
        if len(known) > 50_000:  # start the memo afresh: every name asked for is then computed
            known, missing = {}, names
        known.update(compute(missing))
        try:
            f.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=f.parent)
            with os.fdopen(fd, "w") as fh:
                json.dump(known, fh)
            os.replace(tmp, f)
        except OSError:
            pass
    return {n: known[n] for n in names}


def profile_key(paths, rules) -> str:
    """Key of an assembled profile: the identities of all its files, in order, and the rule table."""
    from kit.profile._categories import rules_ident

    ident = "|".join(file_key(Path(p)) for p in paths) + "\n" + rules_ident(rules)
    return "set-" + hashlib.sha256(ident.encode()).hexdigest()[:32]


def has_profile(key: str) -> bool:
    """Whether an assembled-profile entry exists (cheap: no pandas)."""
    try:
        return (cache_dir() / key / "info.json").is_file()
    except OSError:
        return False


def load_profile(key: str, tables: tuple[str, ...]) -> dict | None:
    """The cached assembled tables + info of a profile, or None (one entry for a whole set of ranks,
    so reopening 8 ranks reads one file per table, not one per table and rank)."""
    try:
        import pandas as pd

        d = cache_dir() / key
        if not (d / "info.json").is_file():
            return None
        info = json.loads((d / "info.json").read_text())
        out = {name: read_table(d / f"{name}.arrow") for name in tables}
        # an all-missing categorical column can come back as object: restore the dtype
        for name, cols in info.pop("categorical", {}).items():
            t = out[name]
            for c in cols:
                if c in t and not isinstance(t[c].dtype, pd.CategoricalDtype):
                    t[c] = t[c].astype(object).astype("category")
    except Exception:  # noqa: BLE001 - a broken entry is rebuilt
        return None
    out.update(info)
    return out


def store_profile(key: str, tables: dict, info: dict) -> None:
    """Write an assembled profile's tables (DataFrames) and JSON-able info; failures only skip caching."""
    try:
        root = cache_dir()
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
        for name, table in tables.items():
            write_table(table, tmp / f"{name}.arrow")
        cats = {name: [c for c in t.columns if str(t[c].dtype) == "category"] for name, t in tables.items()}
        (tmp / "info.json").write_text(json.dumps({**info, "categorical": cats}, default=str))
        try:
            os.replace(tmp, root / key)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    except Exception:  # noqa: BLE001
        return
