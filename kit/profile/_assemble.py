"""Assembly: the parsed files of one profile -> its tables (ranks, clocks, steps, attribution, categories).

Called directly with each file's checked frames: by the loader (``_load.load``) for local files,
and by ``_profile.load`` for the tables ``_remote.read_remote`` brought back from a host. Returns
plain tables (``TABLES``), meta and warnings, which the loader caches and ``_profile.load`` wraps in a
:class:`~kit.profile.Profile`. Besides kernels, annotations, steps and collective calls it keeps
``runtime``: every CUDA/HIP runtime and driver call the trace recorded (``cudaLaunchKernel``,
``cudaGraphLaunch``, ``cudaMemcpyAsync``, ``cudaDeviceSynchronize`` ...) and the CPU ops that wait
for the GPU (``SYNC_OPS``), with start, duration, thread and correlation id.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from kit.profile.attribution._attribution import EVIDENCE, decide, link
from kit.profile.attribution._categories import Rule, categorise, category_order
from kit.profile.attribution._names import SYNC_OPS
from kit.profile.reading import _cache
from kit.profile.reading._columns import among, categorical, strings
from kit.profile.reading._read import FRAME_COLUMNS
from kit.profile.reading._validate import check_frames
from kit.profile.steps._windows import assign_steps

_RANK_RE = (re.compile(r"rank[-_]?(\d+)", re.I), re.compile(r"worker[-_]?(\d+)", re.I), re.compile(r"TP-(\d+)"),
            re.compile(r"tp[-_]?rank[-_]?(\d+)", re.I))
TABLES = ("kernels", "annotations", "steps", "comms", "runtime")
KERNEL_COLUMNS = ["rank", "device", "stream", "name", "category", "decided_by", "evidence", "start_us", "dur_us",
                  "correlation", "step", "phase", "kind", "count", "collective", "module", "block", "layer",
                  "layer_kind", "launch", "graph", "op", "op_top", "op_call", "input_dims", "input_types", "file"]
RUNTIME_COLUMNS = ["rank", "name", "start_us", "dur_us", "tid", "correlation", "kind"]
# runtime/driver calls that put work on the GPU (kernels, graphs, copies, fills)
_LAUNCH_CALL = r"(?i)launch|memcpy|memset"
_STEP_COLUMNS = ["rank", "step", "name", "phase", "start_us", "end_us", "wall_us", "gap_before_us", "kernels",
                 "source"]
# epoch microseconds are ~1.7e15; anything below 1e14 (3 years after 1970) is relative
_ABSOLUTE_US = 1e14
_COMM_COLUMNS = ["rank", "name", "start_us", "tid", "collective", "group_size", "in_nelems", "out_nelems", "dtype",
                 "pg"]


def frames(raw: dict) -> dict:
    """Raw column lists of one file -> DataFrames (``FRAME_COLUMNS``), with the file's meta and counts."""
    make = {"i": lambda v: np.asarray(v, dtype=np.int64), "f": lambda v: np.asarray(v, dtype=np.float64),
            "o": lambda v: pd.Series(v, dtype=object), "s": lambda v: pd.Series([str(t) for t in v], dtype=object),
            "c": categorical}
    out = {}
    for table, spec in FRAME_COLUMNS.items():
        cols = raw.get(table) or {}
        n = len(cols.get("ts", ()))   # every table has ts (a text column may come coded: _read.coded)
        got = {c: cols.get(c) if cols.get(c) is not None else [1 if c == "count" else None] * n for c in spec}
        out[table] = pd.DataFrame({c: categorical(got[c], how) if isinstance(how, list)
                                   else make[how](got[c]) for c, how in spec.items()})
    return {**out, **{key: raw[key] for key in ("meta", "warnings", "events", "bytes", "truncated")}}


def checked_frames(raw: dict, name: str) -> dict:
    """:func:`frames`, then unusable rows dropped and counted (``_validate.check_frames``, every format)."""
    return check_frames(frames(raw), name)


def assemble(paths: list[Path], parsed: list[dict], rules: list[Rule], cache: bool = False,
             step_marker: str | None = None) -> dict:
    """The parsed files of one profile (in rank-file order) -> ``{**TABLES, "meta", "warnings"}``: ranks
    named, clocks aligned, then each rank's tables (steps, attribution), then categories decided once.
    ``step_marker``: the name of the step range (``_windows.assign_steps``)."""
    warnings: list[str] = []
    ranks, rank_src = _rank_numbers(paths, parsed, warnings)
    offsets, spans = _clock_offsets(paths, parsed, warnings)
    origin = min((s for s, _ in spans), default=0.0)
    parts: dict[str, list] = {t: [] for t in TABLES}
    meta_ranks = {}
    for p, d, r, src, off in zip(paths, parsed, ranks, rank_src, offsets):
        one = _rank_tables(p, d, r, off - origin, rules, warnings, step_marker)
        for t in TABLES:
            if one.get(t) is not None:
                parts[t].append(one[t])
        meta_ranks[r] = _rank_meta(p, d, src, off)
    kernels = _decided(pd.concat(parts["kernels"], ignore_index=True), rules, cache) if parts["kernels"] \
        else pd.DataFrame()
    warnings += _clock_warning(spans)
    runtime = pd.concat(parts["runtime"], ignore_index=True) if parts["runtime"] else _runtime(None, None, 0, 0.0)
    for c in ("name", "tid", "kind"):   # ranks' categoricals concatenated as object: categorical again
        if not isinstance(runtime[c].dtype, pd.CategoricalDtype):
            runtime[c] = runtime[c].astype(object).astype("category")

    def joined(t: str, columns: list[str] | None) -> pd.DataFrame:
        return pd.concat(parts[t], ignore_index=True) if parts[t] else pd.DataFrame(columns=columns)

    return {"kernels": kernels, "annotations": joined("annotations", None), "steps": joined("steps", _STEP_COLUMNS),
            "comms": joined("comms", _COMM_COLUMNS), "runtime": runtime,
            "meta": {"ranks": meta_ranks, "origin_us": origin, "rules": len(rules)}, "warnings": warnings}


def _rank_numbers(paths, parsed, warnings: list[str]) -> tuple[list[int], list[str]]:
    """Each file's rank and where it was read from; renumbered by file order when two files claim one."""
    ranks, rank_src = [], []
    for i, (p, d) in enumerate(zip(paths, parsed)):
        r, src = rank_of(p, d["meta"], i)
        ranks.append(r)
        rank_src.append(src)
    if len(set(ranks)) != len(ranks):
        dup = sorted({r for r in ranks if ranks.count(r) > 1})
        warnings.append(f"rank(s) {dup} appear in several files; ranks renumbered by file order 0..{len(ranks) - 1}")
        return list(range(len(paths))), ["file order"] * len(paths)
    return ranks, rank_src


def _clock_offsets(paths, parsed, warnings: list[str]) -> tuple[list[float], list[tuple[float, float]]]:
    """Each file's offset of its ts to absolute microseconds, and the absolute span of its kernels."""
    offsets, spans = [], []
    for p, d in zip(paths, parsed):
        k = d["kernels"]
        first = float(k["ts"].min()) if len(k) and k["ts"].notna().any() else None
        off, w = _absolute_offset_us(d["meta"], first)
        if w:
            warnings.append(f"{p.name}: {w}")
        offsets.append(off)
        if first is not None:
            spans.append((off + first, off + float((k["ts"] + k["dur"]).max())))
    return offsets, spans


def _absolute_offset_us(meta: dict, first_ts: float | None) -> tuple[float, str | None]:
    """Microseconds to add to this file's ``ts`` to get epoch time, and a warning if unknown."""
    base_ns = meta.get("baseTimeNanoseconds")
    if first_ts is None or first_ts >= _ABSOLUTE_US:
        return 0.0, None
    if isinstance(base_ns, (int, float)) and base_ns > 0:
        return base_ns / 1000.0, None
    return 0.0, "timestamps are relative and no baseTimeNanoseconds was found: cross-rank alignment unknown"


def _clock_warning(spans) -> list[str]:
    """Ranks whose time ranges do not overlap were not recorded on one clock (or not together)."""
    if len(spans) < 2:
        return []
    latest_start, earliest_end = max(s for s, _ in spans), min(e for _, e in spans)
    if latest_start <= earliest_end:
        return []
    return [f"ranks' time ranges do not overlap (gap {latest_start - earliest_end:,.0f} us): different "
            f"clock bases or different runs; cross-rank comparison is by step index only"]


def _rank_tables(p: Path, d: dict, r: int, shift: float, rules: list[Rule], warnings: list[str],
                 step_marker: str | None = None) -> dict:
    """One rank's tables on the profile's clock: kernels with steps and attribution (categories not yet
    decided), annotations, steps, CPU-side collectives and runtime calls."""
    warnings.extend(d.get("warnings", []))
    k, a, la, fr, cm = d["kernels"].copy(), d["annotations"].copy(), d["launches"], d.get("frames"), d.get("comms")
    if not len(k):
        warnings.append(_no_kernel_warning(p.name, la, cm, a))
    step, phase, steps = assign_steps(k, a, la, fr, step_marker)
    found = str(steps["source"].iloc[0]) if len(steps) else ""
    if step_marker and len(k) and not found.startswith("annotation:marker"):
        warnings.append(f"{p.name}: no range named {step_marker!r} (--step-marker): no steps found")
    linked = link(k, la, fr if fr is not None else pd.DataFrame(), a, rules)
    for c, v in linked.items():
        k[c] = pd.Series(v, index=k.index, dtype=object) if v.dtype == object else v
    k["step"], k["phase"], k["rank"], k["file"], k["start_us"] = step, phase, r, p.name, k["ts"] + shift
    k = k.rename(columns={"dur": "dur_us"}).drop(columns=["ts"])
    out = {"kernels": k, "runtime": _runtime(la, fr, r, shift)}
    if cm is not None and len(cm):
        out["comms"] = cm.assign(rank=r, start_us=cm["ts"] + shift).drop(columns=["ts"])
    out["annotations"] = a.assign(rank=r, start_us=a["ts"] + shift).rename(columns={"dur": "dur_us"}).drop(
        columns=["ts"])
    if len(steps):
        steps = steps.copy()
        for c in ("start_us", "end_us", "marker_start_us", "marker_end_us"):
            steps[c] = steps[c] + shift
        steps.insert(0, "rank", r)
        out["steps"] = steps
    warnings += _zero_duration_warning(p, r, k)
    return out


def _zero_duration_warning(p: Path, r: int, k: pd.DataFrame) -> list[str]:
    zero = int((k["dur_us"] == 0).sum()) if len(k) else 0
    if not zero:
        return []
    frac = zero / len(k)
    msg = (f"{p.name} (rank {r}): {zero:,} of {len(k):,} kernels ({100 * frac:.1f}%) have zero duration "
           f"(CUDA-graph replay recorded without per-kernel timing by this PyTorch/CUPTI?)")
    if frac >= 0.5:
        msg += "; the per-kernel breakdown is unavailable, use the graph-level step times (Profile.steps)"
    return [msg]


def _rank_meta(p: Path, d: dict, src: str, off: float) -> dict:
    """What ``Profile.meta["ranks"]`` says of one rank's file."""
    meta, la, fr = d["meta"] or {}, d["launches"], d.get("frames")
    return {
        "file": p.name, "rank_from": src, "format": meta.get("source", "kineto"),
        "device_properties": meta.get("deviceProperties", []), "distributed": meta.get("distributedInfo", {}),
        "versions": {key: meta[key] for key in sorted(meta) if key.endswith("_version") or key == "schemaVersion"},
        "events": d.get("events"), "bytes": d.get("bytes"), "cached": d.get("cached", False),
        "truncated": d.get("truncated", False), "clock_offset_us": off,
        "runtime_calls": int(len(la)), "module_frames": int((fr["kind"] == "module").sum()) if fr is not None
        and len(fr) else 0, "cpu_frames": int(len(fr)) if fr is not None else 0,
    }


def _decided(kernels: pd.DataFrame, rules: list[Rule], cache: bool) -> pd.DataFrame:
    """All ranks' kernels with their category decided (``_attribution.decide``) and columns typed."""
    if not len(kernels):
        return kernels
    names = kernels["name"].astype("category")
    kernels["name"] = names
    # kernel name -> category by the kernel-name rules, memoised on disk per rule table when ``cache``
    cmap = (_cache.category_map(names.cat.categories, rules, lambda ns: categorise(ns, rules)) if cache
            else categorise(list(names.cat.categories), rules))
    linked = kernels[["frame_category", "frame_kind", "frame_name", "launch"]]
    cat, by, ev = decide(names, kernels["collective"], linked, rules, cmap)
    kernels["category"] = pd.Categorical(np.asarray(cat, dtype=object), categories=category_order(rules))
    kernels["decided_by"] = pd.Categorical(by, categories=list(EVIDENCE))
    kernels["evidence"] = categorical(ev)
    for c in ("module", "block", "layer_kind", "launch", "op", "op_top", "input_dims", "input_types"):
        kernels[c] = categorical(kernels[c].to_numpy())
    for c in ("layer", "op_call"):
        kernels[c] = kernels[c].astype(np.int64)
    return kernels[KERNEL_COLUMNS]


def _runtime(launches: pd.DataFrame | None, frames: pd.DataFrame | None, rank: int, shift: float) -> pd.DataFrame:
    """One rank's runtime/driver calls and GPU-waiting CPU ops (``SYNC_OPS``) on the profile's clock,
    in time order. Built from numpy columns: a 229 MB trace has ~120k runtime calls, and a DataFrame of
    their names as text would copy every name into arrow strings before categorising them again."""
    cols: dict[str, list] = {c: [] for c in ("name", "ts", "dur", "tid", "correlation", "kind")}

    def add(t: pd.DataFrame, correlation, kind: str) -> None:
        for c, v in (("name", strings(t["name"])), ("ts", t["ts"].to_numpy(float)), ("dur", t["dur"].to_numpy(float)),
                     ("tid", strings(t["tid"])), ("correlation", correlation), ("kind", np.full(len(t), kind, object))):
            cols[c].append(v)

    if launches is not None and len(launches):
        add(launches, launches["correlation"].to_numpy(np.int64), "runtime")
    if frames is not None and len(frames):
        ops = frames[among(frames["name"], SYNC_OPS)]
        if len(ops):
            add(ops, np.full(len(ops), -1, np.int64), "op")
    if not cols["ts"]:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(
            RUNTIME_COLUMNS, (np.int64, object, np.float64, np.float64, object, np.int64, object))})
    col = {c: np.concatenate(v) for c, v in cols.items()}
    order = np.argsort(col["ts"], kind="stable")
    return pd.DataFrame({"rank": np.full(len(order), rank, np.int64), "name": categorical(col["name"][order]),
                         "start_us": col["ts"][order] + shift, "dur_us": col["dur"][order],
                         "tid": categorical(col["tid"][order]), "correlation": col["correlation"][order],
                         "kind": categorical(col["kind"][order])})


def _no_kernel_warning(name: str, launches: pd.DataFrame, comms, ann: pd.DataFrame) -> str:
    """Why a trace has no GPU kernel, as precisely as the trace tells.

    Collective calls are counted once each (``record_param_comms``, else the ``c10d::`` ops: a call
    records both), as the summary's collective table counts them; CUPTI is blamed only when the trace
    holds kernel launches (``cudaLaunchKernel``, graph launches, memcpy/memset calls), not when its
    runtime calls are queries and events that launch nothing (``cudaStreamIsCapturing``, ``cudaEventRecord``)."""
    n_launch = int(launches["name"].astype(str).str.contains(_LAUNCH_CALL).sum()) if len(launches) else 0
    coll = ""
    if comms is not None and len(comms):
        rp = comms[comms["name"] == "record_param_comms"]
        use = rp if len(rp) else comms
        gs = sorted({int(g) for g in use["group_size"] if g >= 0})
        coll = (f"; its {len(use):,} collective call(s) ({'record_param_comms' if len(rp) else 'c10d ops'}, "
                f"group size {', '.join(map(str, gs)) or 'unknown'}) launched no kernel")
        if gs == [1]:
            coll += " because a process group of size 1 communicates nothing"
    if n_launch:
        return (f"{name}: no GPU kernels although {n_launch:,} kernel launch call(s) with correlation ids were "
                f"recorded: the GPU activity (CUPTI) was not collected or not flushed for this window{coll}")
    if len(launches):
        return (f"{name}: no GPU kernels, and none was launched: the trace's {len(launches):,} CUDA runtime call(s) "
                f"launch no work (queries, events){coll}")
    return f"{name}: no GPU kernels in this trace (CPU-only profile, or CUDA activity not recorded){coll}"


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

