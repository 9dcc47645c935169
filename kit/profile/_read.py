"""Format dispatch for one trace file, and the parse prefetch that overlaps parsing with imports.

Kept free of pandas/numpy imports on purpose: worker processes import only this, orjson and the
readers, so they start in ~0.1 s; and the CLI starts the parse of big files in worker processes
*before* importing pandas (which costs ~0.5 s), so the two overlap on a multi-core machine.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from kit.profile._io import sniff

# below this much uncached input a process pool costs more than it saves
PREFETCH_MIN_BYTES = 8 << 20


def read_raw(path: str) -> dict:
    """Parse one file with the reader its first bytes call for (runs in worker processes)."""
    p = Path(path)
    kind = sniff(p)
    if kind == "sqlite":
        from kit.profile._nsys import read_nsys_sqlite
        return read_nsys_sqlite(p)
    if kind == "text":
        from kit.profile._nsys import read_nsys_csv
        return read_nsys_csv(p)
    if kind == "gzip":
        # gzip may hold JSON or nsys CSV text: peek at the inflated start
        import zlib
        with open(p, "rb") as f:
            try:
                head = zlib.decompressobj(wbits=31).decompress(f.read(4096))
            except zlib.error as exc:
                from kit.errors import TraceError
                raise TraceError(f"{p}: corrupt gzip data ({exc})", path=str(p)) from None
        if head.lstrip()[:1] not in (b"{", b"["):
            from kit.profile._nsys import read_nsys_csv
            return read_nsys_csv(p)
    from kit.profile._kineto import read_kineto
    return read_kineto(p)


def prefetch(paths: list[str], cache: bool = True, rules=None) -> tuple[dict[str, Future], ProcessPoolExecutor | None]:
    """Start parsing the uncached files in worker processes when they are big enough to be worth it.

    Returns ``({path: Future}, executor)``; hand the dict to ``kit.profile.load(..., _prefetched=)``
    and shut the executor down afterwards. Any problem (bad path, no cache dir) just means no
    prefetch: ``load`` then parses and reports errors itself."""
    try:
        if cache and len(paths) > 1:
            from kit.profile._cache import cache_dir, profile_key
            from kit.profile._categories import build_rules

            if (cache_dir() / profile_key(paths, build_rules(rules)) / "info.json").is_file():
                return {}, None
        todo = []
        for p in paths:
            pp = Path(p)
            if not pp.is_file():
                return {}, None
            if cache:
                from kit.profile._cache import has
                if has(pp):
                    continue
            todo.append(p)
        if not todo or sum(Path(p).stat().st_size for p in todo) < PREFETCH_MIN_BYTES:
            return {}, None
        ex = ProcessPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 1), mp_context=mp.get_context("spawn"))
        return {p: ex.submit(read_raw, p) for p in todo}, ex
    except Exception:  # noqa: BLE001 - no prefetch; load() reports any problem itself
        return {}, None
