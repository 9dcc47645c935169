"""Read / parse_* / spec_summary and LogData: the public façade (documented in the package docstring)."""
from __future__ import annotations

import contextlib
import html
import io
import os
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

import kit.engines
from kit.errors import LogFormatError
from kit.logs import _bench, _scan, _spec
from kit.logs import _parallel as _par
from kit.logs._caches import cache_usage
from kit.logs._nccl import nccl_summary
from kit.logs._sglang import DECODE_COLUMNS, parse_server_args
from kit.logs._spec import SpecSummary
from kit.logs._table import assemble, release_freed_memory, to_datetime
from kit.provenance import provenance_of
from kit.redact import mask_secrets
from kit.util import call_settings, frame_records, jsonable, no_gc, recorded

__all__ = ["LogData", "SpecSummary", "read", "parse_sglang", "parse_vllm", "parse_bench", "parse_nccl",
           "parse_server_args", "nccl_summary", "spec_summary"]

KINDS = ("decode", "prefill", "throughput", "spec", "bench", "nccl")
_SNIFF = 8192


@dataclass(eq=False, repr=False)
class LogData:
    """One parsed log: a DataFrame per record kind plus what was learnt about the engine.

    ``name`` (file or ``host:path``), ``engine``, ``version``, ``tables`` (``decode``, ``prefill``, ``throughput``,
    ``spec``, ``bench``, ``nccl``, also as attributes: empty with the core columns when absent), ``server_args``
    (dict), ``lines``, ``unknown_lines``, ``torn_lines``, ``warnings``, ``k`` (draft tokens per step used for
    normalisation, or None), ``sglang_formats`` (Decode-line format variants seen: ``dot`` <= 0.5.3, ``bracket``
    0.5.4, ``trailing`` 0.5.6-0.5.8, ``comma`` >= 0.5.9, with counts; they date the engine when the version is
    unknown).
    """

    name: str
    engine: str
    version: str
    tables: dict[str, pd.DataFrame]
    server_args: dict
    lines: int
    unknown_lines: int
    torn_lines: int
    warnings: list[str]
    k: int | None
    sglang_formats: dict[str, int]
    engine_inferred: bool = False  # True when the engine was guessed from line formats alone (see warnings)
    # what the scan read for kit.logs.settings: evidence (line, what, payload, found) in line order,
    # NCCL transports, the engine table's rows (whose ``batches`` read the tables)
    said: list[tuple] = field(default_factory=list)
    transports: dict[str, tuple[int, str]] = field(default_factory=dict)
    formats: tuple = ()

    def __post_init__(self) -> None:
        self.server_args = mask_secrets(self.server_args) if self.server_args else self.server_args  # api_key: masked

    decode = property(lambda self: self.tables["decode"], doc="SGLang Decode batch lines, one row each.")
    prefill = property(lambda self: self.tables["prefill"], doc="SGLang Prefill batch lines, one row each.")
    throughput = property(lambda self: self.tables["throughput"], doc="vLLM periodic throughput lines.")
    spec = property(lambda self: self.tables["spec"], doc="Normalised speculative acceptance records.")
    bench = property(lambda self: self.tables["bench"], doc="Benchmark result blocks, one row per run.")
    nccl = property(lambda self: self.tables["nccl"], doc="NCCL_DEBUG=INFO lines of interest.")

    @property
    def nccl_info(self) -> dict[str, Any]:
        """NCCL version, env echoes, channel count, ring orders, transports, network (see nccl_summary)."""
        return nccl_summary(self.nccl)

    @property
    def counts(self) -> dict[str, int]:
        """Rows per record kind (only kinds that have rows)."""
        return {k: len(v) for k, v in self.tables.items() if len(v)}

    def decode_tok_s(self, *, running: int | None = 1, include_after_idle: bool = False) -> float:
        """Median decode throughput (tok/s) of the log's windows (SGLang's Decode lines, else vLLM's throughput
        lines) with ``running`` requests (``None``: any), never a first window after idle; NaN when none."""
        if len(self.decode):
            t, col, run = self.decode, "gen_throughput", "running_req"
        else:
            t, col, run = self.throughput, "generation_throughput", "running"
        if col not in t or not len(t):
            return float("nan")
        keep = pd.Series(True, index=t.index)
        if not include_after_idle and "after_idle" in t:
            keep &= ~t["after_idle"].astype(bool)
        if running is not None and run in t:
            keep &= t[run] == running
        return float(t.loc[keep, col].median()) if keep.any() else float("nan")

    @cached_property
    def provenance(self):
        """Where the parsed file came from (``kit.provenance.Provenance``: measured, third-party, sample
        ...), from the nearest session manifest or the marks in the file; ``unknown`` for text, lines
        or a file fetched from a host. Set it explicitly when known (``log.provenance = ...``)."""
        return provenance_of(self.name)

    @property
    def caches(self) -> pd.DataFrame:
        """Cache usage the engine printed, one row per cache: KV and, for hybrids, SWA and the Mamba
        state cache next to it (usage mean / max / last as fractions; see ``_caches.py``)."""
        return cache_usage(self.tables)

    def spec_summary(self, include_after_idle: bool = False) -> SpecSummary:
        """Pooled acceptance over this log (see :func:`spec_summary`)."""
        return spec_summary(self, include_after_idle=include_after_idle)

    def to_dict(self, tables: bool = True) -> dict[str, Any]:
        """JSON-ready: engine, version, counts, unknown/torn lines, warnings, server_args, tables."""
        out: dict[str, Any] = {"path": self.name, "provenance": self.provenance.to_dict(),
                               "engine": self.engine, "version": self.version,
                               "lines": self.lines, "counts": self.counts, "unknown_lines": self.unknown_lines,
                               "torn_lines": self.torn_lines, "warnings": list(self.warnings),
                               "server_args": jsonable(self.server_args),
                               "caches": frame_records(self.caches)}
        if tables:
            out["tables"] = {k: frame_records(v) for k, v in self.tables.items() if len(v)}
        return out

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this parse: rows per table, lines read, engine and version."""
        figs = [(f"rows.{k}", len(t)) for k, t in self.tables.items()]
        figs += [("lines", self.lines), ("unknown_lines", self.unknown_lines)]
        return {"inputs": [self.name], "settings": call_settings(args), "figures": figs,
                "facts": {"engine": self.engine, "version": self.version}, "warnings": list(self.warnings),
                "tables": {k: t for k, t in self.tables.items() if len(t)}}

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={n}" for k, n in self.counts.items()) or "no records"
        s = (f"LogData({self.name!r}, engine={self.engine!r}, version={self.version!r}, lines={self.lines}: "
             f"{counts}; unknown={self.unknown_lines}, torn={self.torn_lines}")
        if self.warnings:
            s += f"; {len(self.warnings)} warning{'s' if len(self.warnings) > 1 else ''}"
        return s + ")"

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{n}</td></tr>" for k, n in self.counts.items())
        warn = "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings)
        return (f"<div><b>{html.escape(self.name)}</b>: engine {html.escape(self.engine)}, version "
                f"{html.escape(self.version)}, {self.lines} lines ({self.unknown_lines} unknown, "
                f"{self.torn_lines} torn)<br>source: {self.provenance._repr_html_()}"
                f"<table><tr><th>kind</th><th>rows</th></tr>{rows}</table>"
                + (f"<ul>{warn}</ul>" if warn else "") + "</div>")


@recorded("logs")
def read(path: str | os.PathLike, *, host=None, engine: str | None = None, version: str | None = None,
         k: int | None = None) -> LogData:
    """Parse a serving log, NCCL debug output or benchmark result (text, JSON or JSONL): a local file, or a path
    on ``host`` (a :mod:`kit.remote` Host; copied into a temporary directory, parsed, the copy deleted).
    ``engine`` overrides detection; ``version`` applies when the log prints none (SGLang's do not); ``k``: draft
    tokens per verify step, when neither the log (server_args, per-position list) nor the numbers tell it."""
    if host is not None:
        return _read_on_host(path, host, engine=engine, version=version, k=k)
    return _read_file(path, engine=engine, version=version, k=k, parallel=True)


def _read_file(path, *, engine: str | None, version: str | None, k: int | None, parallel: bool,
               name: str | None = None) -> LogData:
    """:func:`read` of a local file; ``parallel``: files of ``_par.PARALLEL_MIN`` bytes or more are
    scanned by worker processes over byte ranges (see :mod:`kit.logs._parallel`). ``name``: what
    errors and the result call the file (``host:path`` for a copy fetched from a host)."""
    p = Path(path)
    name = name or str(path)
    if p.is_dir():
        raise LogFormatError(f"{name}: is a directory, not a log file", path=name)
    if not p.exists():
        raise LogFormatError(f"{name}: no such file", path=name)
    try:
        with open(p, "rb") as fb:
            head = fb.read(_SNIFF)
    except OSError as exc:
        raise LogFormatError(f"{name}: cannot read ({exc.strerror})", path=name) from None
    if not head.strip():
        raise LogFormatError(f"{name}: empty file, not a log", path=name)
    if b"\x00" in head:
        raise LogFormatError(f"{name}: binary file (NUL bytes), not a text log", path=name)
    if _looks_json(head):
        with open(p, encoding="utf-8", errors="replace") as f:
            return _from_bench_rows(_bench.parse_json_text(f.read(), name), name, engine, version)
    with no_gc():
        st = None
        if parallel and (size := p.stat().st_size) >= _par.PARALLEL_MIN:
            st = _par.scan_parallel(str(p), size, _par.workers())
        if st is None:
            st = _scan.new_state()
            with open(p, encoding="utf-8", errors="replace", newline=None) as f:
                _scan.scan_file(f, st)
            _scan.finish(st)
        return _build(st, name, engine, version, k)


def read_lines(lines: Iterable[str], *, name: str = "<lines>", engine: str | None = None,
               version: str | None = None, k: int | None = None) -> LogData:
    """Parse an iterable of log lines (a file object, a list) -> :class:`LogData`.
    Same rules as :func:`read`; the ``name`` appears in errors and the repr."""
    with no_gc():
        st = _scan.new_state()
        _scan.scan(lines, st)
        _scan.finish(st)
        return _build(st, name, engine, version, k)


def parse_sglang(source, *, version: str | None = None, k: int | None = None) -> LogData:
    """An SGLang server log (path, or text with newlines, or iterable of lines) -> LogData."""
    return _dispatch(source, engine="sglang", version=version, k=k)


def parse_vllm(source, *, version: str | None = None, k: int | None = None) -> LogData:
    """A vLLM server log (path, or text with newlines, or iterable of lines) -> LogData."""
    return _dispatch(source, engine="vllm", version=version, k=k)


@recorded("bench")
def parse_bench(source) -> pd.DataFrame:
    """Benchmark output (a text file of result blocks, a JSON/JSONL result file, or such text) -> one row per run
    with normalised columns (``tool``, ``engine``, ``output_throughput`` tok/s, ``mean_tpot_ms`` ...); what was
    dropped on the way (an impossible value) is said in ``.attrs["warnings"]``. LogFormatError when nothing in it
    is a benchmark result."""
    data = _dispatch(source)
    if not len(data.bench):
        raise LogFormatError(f"{data.name}: no benchmark result found", path=data.name)
    bench = data.bench
    bench.attrs["warnings"] = list(data.warnings)
    return bench


def parse_nccl(source) -> pd.DataFrame:
    """NCCL_DEBUG=INFO output (path, text, or lines) -> the ``.nccl`` table (``nccl_summary`` reads it)."""
    return _dispatch(source).nccl


def spec_summary(source, *, engine: str | None = None, version: str | None = None, k: int | None = None,
                 include_after_idle: bool = False) -> SpecSummary:
    """Pooled acceptance over a run: mean acceptance length (incl. bonus), draft acceptance rate
    (excl. bonus), per-position rates, windows used / excluded. ``source``: a LogData, a
    ``.spec`` DataFrame or anything :func:`read` takes."""
    if isinstance(source, pd.DataFrame):
        eng = engine or (str(source["engine"].iloc[0]) if len(source) else "unknown")
        ver = version or (str(source["version"].iloc[0]) if len(source) else "unknown")
        return _spec.summarize(source, engine=eng, version=ver, warnings=[],
                               include_after_idle=include_after_idle)
    data = source if isinstance(source, LogData) else _dispatch(source, engine=engine, version=version, k=k)
    spec_warn = [w for w in data.warnings if "accept" in w or "k " in w or "k=" in w or "version" in w]
    return _spec.summarize(data.spec, engine=data.engine, version=data.version, warnings=spec_warn,
                           include_after_idle=include_after_idle)


def _dispatch(source, *, engine: str | None = None, version: str | None = None, k: int | None = None) -> LogData:
    if isinstance(source, LogData):
        return source
    if isinstance(source, str) and "\n" in source:
        if _looks_json(source.lstrip()[:1].encode()):
            return _from_bench_rows(_bench.parse_json_text(source, "<text>"), "<text>", engine, version)
        return read_lines(io.StringIO(source), name="<text>", engine=engine, version=version, k=k)
    if isinstance(source, (str, os.PathLike)):
        return read(source, engine=engine, version=version, k=k)
    return read_lines(source, engine=engine, version=version, k=k)


def _looks_json(head: bytes) -> bool:
    s = head.lstrip()
    if s.startswith(b"{"):
        return True
    return s.startswith(b"[") and s[1:].lstrip()[:1] in (b"{", b"]")


@contextlib.contextmanager
def fetched(path, host):
    """A file on ``host`` copied into a temporary directory: (the copy's path, ``host:path`` for errors and
    evidence); the copy is deleted afterwards."""
    remote = str(path)
    with tempfile.TemporaryDirectory(prefix="kit-log-") as tmp:
        local = os.path.join(tmp, os.path.basename(remote.rstrip("/")) or "log")
        host.get(remote, local)
        yield local, f"{getattr(host, 'name', host)}:{remote}"


def _read_on_host(path, host, **kw) -> LogData:
    if host.stat(str(path)).is_dir:
        label = f"{getattr(host, 'name', host)}:{path}"
        raise LogFormatError(f"{label}: is a directory, not a log file", path=label)
    with fetched(path, host) as (local, label):
        data = _read_file(local, parallel=False, name=label, **kw)  # errors name host:path, not the copy
    data.warnings = [w.replace(local, label) for w in data.warnings]
    return data


def _from_bench_rows(rows: list[dict], name: str, engine: str | None, version: str | None) -> LogData:
    st = _scan.new_state()
    for r in rows:
        st.bench.add(r)
        st.hits[r.get("engine") or "bench"] = st.hits.get(r.get("engine") or "bench", 0) + 1
    st.lines = len(rows)
    return _build(st, name, engine, version, None)


def _engine_version(st: _scan.State, engine: str | None, version: str | None,
                    warnings: list[str]) -> tuple[str, str]:
    """The engine (given, else the engine table's row with the most lines in the log; ties go to the later
    row) and its version (the log's banner wins over a given one, with a warning when they differ)."""
    if engine is None:
        hits = [(st.hits.get(e, 0), i, e) for i, e in enumerate(st.plan.engines)]
        best = max(hits, default=(0, 0, "unknown"))
        engine = best[2] if best[0] else "unknown"
    logged = [v for e, v, _ in st.versions if e == engine]
    if logged:
        if version and version != logged[0]:
            warnings.append(f"version {version!r} given but the log says {logged[0]!r}: using the log's")
        version = logged[0]
    return engine, version or "unknown"


def _spec_table(st: _scan.State, frames: dict, engine: str, version: str,
                k: int | None, warnings: list[str]) -> pd.DataFrame:
    """Normalised acceptance records of every engine's speculative-decoding lines (the reader each engine
    names in ``kit.engines``: ``Engine.spec``); the log's own engine's version applies to its records only."""
    parts = []
    for e in kit.engines.engines():
        if e.spec is not None:
            part = _spec.READERS[e.spec](st, frames, version=version if engine == e.name else "unknown", k=k,
                                         mine=engine == e.name, warnings=warnings)
            if len(part):
                parts.append(part)
    if len(parts) > 1:  # several engines in one file: join column by column, freeing as we go
        chunks = []
        for part in parts:
            chunk = {c: part[c].array if isinstance(part[c].dtype, pd.CategoricalDtype) else part[c].to_numpy()
                     for c in part.columns}
            if "time" in part.columns and not pd.api.types.is_datetime64_any_dtype(part["time"]):
                chunk["time"] = to_datetime(part["time"], "%m-%d %H:%M:%S").to_numpy()   # vLLM prints no year
            chunks.append(chunk)
        del parts
        return assemble(chunks, _spec.SPEC_COLUMNS)
    return parts[0] if parts else pd.DataFrame({c: pd.Series(dtype="object") for c in _spec.SPEC_COLUMNS})


def _torn_and_truncated(st: _scan.State, warnings: list[str]) -> None:
    """Torn lines (the formats' builds counted in the rows they dropped) and a truncated server_args dump,
    said in the warnings."""
    if st.torn:
        warnings.append(f"{st.torn} torn line(s) skipped (two writers on one line), first at line "
                        f"{st.torn_examples[0]}")
    if st.server_args and st.server_args.get("__truncated__"):
        warnings.append(f"server_args dump at line {st.server_args_line} is truncated: "
                        f"{len(st.server_args) - 1} keys read")


def _build(st: _scan.State, name: str, engine: str | None, version: str | None, k: int | None) -> LogData:
    warnings = st.warnings
    n_records = sum(len(getattr(st, t)) for t in st.table_names)
    if st.lines == 0:
        raise LogFormatError(f"{name}: empty file, not a log", path=name)
    if not n_records and not any(st.hits.values()) and st.server_args is None and not st.said:
        raise LogFormatError(f"{name}: not a serving log: none of its {st.lines} lines is an SGLang, vLLM, "
                             f"NCCL or benchmark line", path=name)
    guessed = engine is None
    engine, version = _engine_version(st, engine, version, warnings)
    frames: dict[str, pd.DataFrame] = {}
    for fmt in st.plan.formats:   # each row of the engine table builds its own tables
        if fmt.build is not None:
            frames.update(fmt.build(st, warnings))
    bench = frames.get("bench", pd.DataFrame())
    stated = (any(e == engine for e, _, _ in st.versions) or st.server_args is not None
              or ("backend" in bench.columns and bench["backend"].notna().any()))
    inferred = guessed and engine != "unknown" and not stated
    if inferred:
        warnings.append(f"engine {engine!r} inferred from the line format alone (no version banner, "
                        "server_args, engine config or Backend line): pass engine= if that is wrong")
    decode = frames.get("decode", pd.DataFrame({c: [] for c in DECODE_COLUMNS}))
    spec = _spec_table(st, {**frames, "decode": decode}, engine, version, k, warnings)
    frames.pop("vllm_spec", None)
    if len(spec):
        if version == "unknown":
            warnings.insert(0, f"{engine} version unknown (not in the log, not given): acceptance "
                               f"definitions were inferred; pass version=")
        if "time" in spec.columns and not pd.api.types.is_datetime64_any_dtype(spec["time"]):
            spec["time"] = to_datetime(spec["time"], "%m-%d %H:%M:%S")
    frames["spec"] = spec
    tables = {kind: frames.pop(kind) for kind in KINDS if kind in frames}
    tables.update(frames)     # the tables of rows beyond the built-in ones, in the engine table's order
    for t in tables.values():
        if len(t) and "time" in t.columns and pd.api.types.is_datetime64_any_dtype(t["time"]):
            t["elapsed_s"] = pd.Series(_elapsed_s(t["time"]), index=t.index, copy=False)  # no second copy
    _torn_and_truncated(st, warnings)
    formats = {}
    if len(decode) and "format" in decode.columns:
        formats = {str(f): int(n) for f, n in decode["format"].value_counts(sort=False).items()}
    ks = pd.to_numeric(spec["k"], errors="coerce").dropna() if len(spec) else []
    k_used = int(ks.mode().iloc[0]) if len(ks) else k
    args = {kk: v for kk, v in (st.server_args or {}).items() if kk != "__truncated__"}
    release_freed_memory()
    return LogData(name, engine, version, tables, args, st.lines, st.unknown, st.torn, warnings, k_used, formats,
                   inferred, st.said, st.transports, st.plan.formats)


def _elapsed_s(time: pd.Series) -> np.ndarray:
    """Seconds since the first time stamp (NaT -> NaN), computed a slice at a time so that the
    temporaries stay small whatever the table's length."""
    times = time.to_numpy()
    start = time.min().to_datetime64()
    out = np.empty(len(times), dtype=np.float64)
    step = 1 << 18
    for a in range(0, len(times), step):
        np.divide(times[a:a + step] - start, np.timedelta64(1, "s"), out=out[a:a + step])
    return out
