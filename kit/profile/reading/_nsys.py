"""Nsight Systems readers: ``nsys stats --format csv`` output and the ``nsys export --type sqlite`` database.

CSV forms handled (see traces.md §4): the multi-report stdout (``Processing [...] with [...]``
lines, `` ** ... (report):`` banners, ``SKIPPED:`` lines, blank separators), per-report files
(``prefix_cuda_gpu_kern_sum.csv``), the old ``gpukernsum`` names and whitespace-aligned text of
nsys <= 2021, and the per-kernel ``cuda_gpu_trace`` / ``gputrace`` report (which has a timeline).
Summary reports have no timeline: the kernel table gets one row per kernel name with its total
time and instance count, and the profile says that wall time, idle time and steps are unknown.

SQLite: ``CUPTI_ACTIVITY_KIND_KERNEL`` / ``_MEMCPY`` / ``_MEMSET`` (ns timestamps, names through
``StringIds``), ``CUPTI_ACTIVITY_KIND_RUNTIME`` (launch times for step assignment) and
``NVTX_EVENTS`` (ranges as annotations), via the standard-library ``sqlite3``.
"""
from __future__ import annotations

import csv
import io
import os
import re
import sqlite3
from pathlib import Path

from kit.errors import TraceError
from kit.profile.reading._io import read_bytes, sniff
from kit.profile.reading._validate import Numbers
from kit.stats import is_nan

_REPORT_RE = re.compile(r"\[[^\]]*?/?([A-Za-z_:]+?)(?:\.py)?\]\.\.\.\s*$")
_BANNER_RE = re.compile(r"^\s*\*\*\s.*\(([a-z_:]+)\):\s*$")
_KERN_SUM = {"cuda_gpu_kern_sum", "gpukernsum", "cuda_gpu_kern_sum:base", "cuda_gpu_kern_sum:mangled"}


def _norm(h: str) -> str:
    return re.sub(r"[^a-z%]", "", h.lower())


def _num(s: str) -> float:
    try:
        return float(s.strip().replace(",", ""))
    except ValueError:  # "", "-", "N/A", "12.5us": NaN, dropped and counted by _validate.check_frames
        return float("nan")


_COLUMNS = {"kernels": ("device", "stream", "name", "ts", "dur", "correlation", "kind", "collective", "count"),
            "annotations": ("name", "ts", "dur", "side", "device", "stream", "tid"),
            "launches": ("name", "ts", "dur", "correlation", "tid")}


def _empty_cols() -> dict:
    return {t: {c: [] for c in cols} for t, cols in _COLUMNS.items()}


def _add(table: dict, **row) -> None:
    for c, v in row.items():
        table[c].append(v)


def _add_kernel(k: dict, name: str, ts: float, dur: float, count: int = 1, device: int = -1, stream: int = -1,
                corr: int = -1, kind: str = "kernel") -> None:
    _add(k, device=device, stream=stream, name=name, ts=ts, dur=dur, correlation=corr, kind=kind, collective=None,
         count=count)


def read_nsys_csv(path: Path) -> dict:
    """Parse nsys stats CSV/text output (see module doc). Raises TraceError when no kernel table is found."""
    kind = sniff(path)
    if kind == "sqlite":
        return read_nsys_sqlite(path)
    data, warnings = read_bytes(path, kind)
    text = data.decode("utf-8", errors="replace")
    base = os.path.basename(path)
    out = _empty_cols()
    sections = _split_sections(text, base)
    found = False
    timeline = False
    skipped = []
    for report, lines in sections:
        if report == "SKIPPED":
            skipped.append(lines[0].strip())
            continue
        rows = _table(lines)
        if rows is None:
            continue
        header, body = rows
        cols = {_norm(h): i for i, h in enumerate(header)}
        if "start(ns)" in cols or "startns" in cols or ("start" in cols and "duration" in cols):
            timeline = True
            found = True
            _gpu_trace_rows(out["kernels"], header, body)
        elif report in _KERN_SUM or report is None and _is_kern_sum(cols):
            found = True
            _kern_sum_rows(out["kernels"], header, body, base)
        # other reports (api sum, nvtx sum, mem sums) are not kernel tables: ignored
    if not found:
        if skipped:
            raise TraceError(f"{path}: nsys stats has no GPU kernel table ({skipped[0]}); with CUDA graphs, "
                             f"record with --cuda-graph-trace=node", path=str(path))
        raise TraceError(f"{path}: not a Kineto JSON trace, and no nsys kernel table in it (expected "
                         f"cuda_gpu_kern_sum / gpukernsum / cuda_gpu_trace output)", path=str(path))
    for s in skipped:
        warnings.append(f"{base}: {s}")
    if not timeline:
        warnings.append(f"{base}: nsys kernel summary has no timeline: wall time, GPU idle, steps and exposed "
                        f"communication are unavailable (use the cuda_gpu_trace report or the sqlite export)")
    return {**out, "meta": {"source": "nsys-stats", "timeline": timeline}, "warnings": warnings,
            "events": len(out["kernels"]["name"]), "bytes": len(data), "truncated": False}


def _is_kern_sum(cols: dict) -> bool:
    return any(c.startswith("totaltime") for c in cols) and ("instances" in cols or "calls" in cols) and "name" in cols


def _split_sections(text: str, base: str) -> list[tuple[str | None, list[str]]]:
    sections: list[tuple[str | None, list[str]]] = []
    report: str | None = None
    cur: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Processing [") or s.startswith("Generating SQLite") or s.startswith("Generating "):
            if cur:
                sections.append((report, cur))
            cur = []
            m = _REPORT_RE.search(s)
            report = m.group(1).split("/")[-1] if (m and s.startswith("Processing [")) else report
            continue
        if s.startswith("SKIPPED:"):
            sections.append(("SKIPPED", [s]))
            continue
        m = _BANNER_RE.match(line)
        if m:
            if cur:
                sections.append((report, cur))
            cur = []
            report = m.group(1)
            continue
        if not s:
            if cur:
                sections.append((report, cur))
                cur = []
            continue
        cur.append(line)
    if cur:
        sections.append((report, cur))
    return sections


def _table(lines: list[str]) -> tuple[list[str], list[list[str]]] | None:
    # skip banner text lines until a header with a Name/Range/Operation column
    for i, line in enumerate(lines):
        low = line.lower()
        if "name" in low or "operation" in low or "range" in low:
            if "," in line:
                rows = list(csv.reader(io.StringIO("\n".join(lines[i:]))))
                header = [h.strip() for h in rows[0]]
                return header, [r for r in rows[1:] if r and any(x.strip() for x in r)]
            if "time" in low:
                return _aligned(lines[i:])
    return None


def _aligned(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    """Old whitespace-aligned text (``Time(%)  Total Time  Instances  Average  Minimum  Maximum  Name``)."""
    header_line = lines[0]
    header = [h for h in re.split(r"\s{2,}", header_line.strip()) if h]
    body = []
    for line in lines[1:]:
        if set(line.strip()) <= set("-  "):
            continue
        parts = line.split(None, len(header) - 1)
        if len(parts) == len(header):
            body.append(parts)
    return header, body


def _kern_sum_rows(k: dict, header: list[str], body: list[list[str]], base: str) -> None:
    cols = {_norm(h): i for i, h in enumerate(header)}
    total = next((i for c, i in cols.items() if c.startswith("totaltime")), None)
    inst = cols.get("instances", cols.get("calls", cols.get("numcalls", cols.get("count"))))
    name = cols.get("name")
    if total is None or name is None:
        raise TraceError(f"{base}: kernel summary header lacks 'Total Time' or 'Name': {header}", path=base)
    # nsys stats times are ns unless --timeunit
    unit = next((u for s, u in (("(us)", 1.0), ("(ms)", 1e3), ("(s)", 1e6)) if s in header[total].lower()), 1e-3)
    for r in body:
        if len(r) <= max(total, name):
            continue
        t = _num(r[total]) * unit
        n = _num(r[inst]) if inst is not None and r[inst].strip() else 1.0
        n = int(n) if not is_nan(n) and abs(n) < 1e18 else 1
        _add_kernel(k, r[name].strip(), float("nan"), t, count=n)


def _gpu_trace_rows(k: dict, header: list[str], body: list[list[str]]) -> None:
    cols = {_norm(h): i for i, h in enumerate(header)}
    start = cols.get("start(ns)", cols.get("startns", cols.get("start")))
    dur = cols.get("duration(ns)", cols.get("durationns", cols.get("duration")))
    name = cols.get("name")
    dev = next((i for c, i in cols.items() if c.startswith("device")), None)
    strm = cols.get("strm", cols.get("stream"))
    corr = cols.get("corrid", cols.get("correlationid"))
    for r in body:
        try:
            ts = _num(r[start]) / 1000.0
            d = _num(r[dur]) / 1000.0
        except (ValueError, IndexError):
            continue
        nm = r[name].strip()
        kind = "memcpy" if nm.startswith("[CUDA memcpy") else "memset" if nm.startswith("[CUDA memset") else "kernel"
        devv = _first_int(r[dev]) if dev is not None else -1
        _add_kernel(k, nm, ts, d, device=devv, stream=_first_int(r[strm]) if strm is not None else -1,
                    corr=_first_int(r[corr]) if corr is not None else -1, kind=kind)


def _first_int(s: str) -> int:
    """``"NVIDIA H200 (0)"`` -> 0 (the id in parentheses), ``"7"`` -> 7, else the first integer."""
    m = re.search(r"\((\d+)\)\s*$", s or "") or re.search(r"-?\d+", s or "")
    return int(m.group(1) if m.re.groups else m.group()) if m else -1


def _id(v) -> int:
    """An integer id column (device, stream, correlation); anything else -> -1."""
    if type(v) is int:
        return v
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return -1


def read_nsys_sqlite(path: Path) -> dict:
    """Kernels, memcpy/memset, runtime launches and NVTX ranges from an ``nsys export --type sqlite`` file."""
    try:
        con = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True, timeout=10)
    except sqlite3.Error as exc:
        raise TraceError(f"{path}: cannot open as SQLite ({exc})", path=str(path)) from None
    out = _empty_cols()
    warnings: list[str] = []
    num = Numbers()  # text timestamps read as numbers (counted) or NaN (dropped and counted later)
    us = num.us
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
            raise TraceError(f"{path}: SQLite file without CUPTI_ACTIVITY_KIND_KERNEL: not an nsys export with "
                             f"CUDA kernel data", path=str(path))
        kcols = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
        name_col = "demangledName" if "demangledName" in kcols else "shortName"
        q = (f"SELECT k.start, k.end, k.deviceId, k.streamId, k.correlationId, s.value "
             f"FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s ON s.id = k.{name_col} ORDER BY k.start")
        kk = out["kernels"]
        for start, end, dev, strm, corr, name in con.execute(q):
            t0 = us(start)
            _add_kernel(kk, str(name or "?"), t0, us(end) - t0, device=_id(dev), stream=_id(strm), corr=_id(corr))
        for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
            if table in tables:
                for start, end, dev, strm, corr in con.execute(
                        f"SELECT start, end, deviceId, streamId, correlationId FROM {table}"):
                    t0 = us(start)
                    _add_kernel(kk, "Memcpy" if kind == "memcpy" else "Memset", t0, us(end) - t0,
                                device=_id(dev), stream=_id(strm), corr=_id(corr), kind=kind)
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
            rr = out["launches"]
            for start, end, corr, tid, name in con.execute(
                    "SELECT r.start, r.end, r.correlationId, r.globalTid, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                    "LEFT JOIN StringIds s ON s.id = r.nameId"):
                t0 = us(start)
                _add(rr, name=str(name or "?"), ts=t0, dur=us(end) - t0, correlation=_id(corr), tid=str(tid))
        if "NVTX_EVENTS" in tables:
            ncols = {r[1] for r in con.execute("PRAGMA table_info(NVTX_EVENTS)")}
            text = "COALESCE(n.text, s.value)" if "textId" in ncols else "n.text"
            join = "LEFT JOIN StringIds s ON s.id = n.textId" if "textId" in ncols else ""
            aa = out["annotations"]
            # eventType 59 = push/pop range, 60 = start/end range (nsys schema)
            for start, end, tid, name in con.execute(
                    f"SELECT n.start, n.end, n.globalTid, {text} FROM NVTX_EVENTS n {join} "
                    f"WHERE n.end IS NOT NULL AND n.eventType IN (59, 60)"):
                if name is None:
                    continue
                t0 = us(start)
                _add(aa, name=str(name), ts=t0, dur=us(end) - t0, side="cpu", device=-1, stream=-1, tid=str(tid))
    except sqlite3.DatabaseError as exc:
        raise TraceError(f"{path}: SQLite query failed ({exc}); not an nsys export?", path=str(path)) from None
    finally:
        con.close()
    warnings.extend(num.warnings(os.path.basename(path)))
    return {**out, "meta": {"source": "nsys-sqlite", "timeline": True}, "warnings": warnings,
            "events": len(out["kernels"]["name"]), "bytes": os.path.getsize(path), "truncated": False}
