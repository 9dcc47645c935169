"""From paths to per-file tables: format dispatch, cache, and ranks parsed in parallel processes."""
from __future__ import annotations

import multiprocessing as mp
import os
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from kit.profile import _cache as _trace_cache
from kit.profile._io import sniff
from kit.profile._read import read_raw
from kit.profile._validate import check_frames

_RANK_RE = (re.compile(r"rank[-_]?(\d+)", re.I), re.compile(r"worker[-_]?(\d+)", re.I), re.compile(r"TP-(\d+)"),
            re.compile(r"tp[-_]?rank[-_]?(\d+)", re.I))
# files bigger than this together are worth a process pool (spawn costs ~0.2 s)
PARALLEL_MIN_BYTES = 16 << 20


def _frames(raw: dict) -> dict:
    k = raw["kernels"]
    if "count" not in k:
        k["count"] = [1] * len(k["name"])
    kernels = pd.DataFrame({
        "device": np.asarray(k["device"], dtype=np.int64),
        "stream": np.asarray(k["stream"], dtype=np.int64),
        "name": pd.Categorical(k["name"]),
        "ts": np.asarray(k["ts"], dtype=np.float64),
        "dur": np.asarray(k["dur"], dtype=np.float64),
        "correlation": np.asarray(k["correlation"], dtype=np.int64),
        "kind": pd.Categorical(k["kind"], categories=["kernel", "memcpy", "memset"]),
        "collective": pd.Series(k["collective"], dtype=object),
        "count": np.asarray(k["count"], dtype=np.int64),
    })
    a = raw["annotations"]
    annotations = pd.DataFrame({
        "name": pd.Series(a["name"], dtype=object), "ts": np.asarray(a["ts"], dtype=np.float64),
        "dur": np.asarray(a["dur"], dtype=np.float64), "side": pd.Series(a["side"], dtype=object),
        "device": np.asarray(a["device"], dtype=np.int64), "stream": np.asarray(a["stream"], dtype=np.int64),
        "tid": pd.Series(a["tid"], dtype=object),
    })
    r = raw["launches"]
    launches = pd.DataFrame({
        "name": pd.Categorical(r["name"]), "ts": np.asarray(r["ts"], dtype=np.float64),
        "dur": np.asarray(r["dur"], dtype=np.float64), "correlation": np.asarray(r["correlation"], dtype=np.int64),
        "tid": pd.Series(r["tid"], dtype=object),
    })
    return {"kernels": kernels, "annotations": annotations, "launches": launches, "meta": raw["meta"],
            "warnings": raw["warnings"], "events": raw["events"], "bytes": raw["bytes"], "truncated": raw["truncated"]}


def load_files(paths: list[Path], cache: bool = True, parallel: bool | None = None,
               prefetched: dict | None = None, store: bool | None = None) -> list[dict]:
    """Per-file parsed tables (read from the cache when ``cache``; written there when ``store``,
    default ``cache``), in the order of ``paths``. ``prefetched``: ``{str(path): Future}`` from
    :func:`kit.profile._read.prefetch` (parses already under way)."""
    store = cache if store is None else store
    results: list[dict | None] = [None] * len(paths)
    prefetched = prefetched or {}
    todo = []
    for i, p in enumerate(paths):
        sniff(p)  # bad input fails fast, before any work
        if cache:
            hit = _trace_cache.load(p)
            if hit is not None:
                hit["cached"] = True
                results[i] = hit
                continue
        todo.append(i)
    early = {i: prefetched[str(paths[i])] for i in todo if str(paths[i]) in prefetched}
    for i, fut in early.items():
        fr = check_frames(_frames(fut.result()), paths[i].name)  # hook: drop and count unusable rows
        if store:
            _trace_cache.store(paths[i], fr)
        fr["cached"] = False
        results[i] = fr
    todo = [i for i in todo if i not in early]
    if todo:
        total = sum(paths[i].stat().st_size for i in todo)
        use_pool = parallel if parallel is not None else (len(todo) > 1 and total >= PARALLEL_MIN_BYTES)
        if use_pool and len(todo) > 1:
            workers = min(len(todo), os.cpu_count() or 1)
            with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
                raws = list(ex.map(read_raw, [str(paths[i]) for i in todo]))
        else:
            raws = [read_raw(str(paths[i])) for i in todo]
        for i, raw in zip(todo, raws):
            fr = check_frames(_frames(raw), paths[i].name)  # hook: drop and count unusable rows
            if store:
                _trace_cache.store(paths[i], fr)
            fr["cached"] = False
            results[i] = fr
    return results  # type: ignore[return-value]


def rank_of(path: Path, meta: dict, fallback: int) -> tuple[int, str]:
    """Rank from distributedInfo, else from the file name, else the file's position; and how it was found."""
    di = meta.get("distributedInfo") if isinstance(meta, dict) else None
    if isinstance(di, dict) and isinstance(di.get("rank"), int):
        return di["rank"], "distributedInfo"
    for rx in _RANK_RE:
        m = rx.search(path.name)
        if m:
            return int(m.group(1)), "file name"
    return fallback, "file order"
