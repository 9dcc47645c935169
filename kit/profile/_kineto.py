"""Kineto (PyTorch profiler) chrome-trace reader that keeps only the events a decode profile needs.

Why chunked: ``orjson.loads`` of a whole 62 MB trace peaks at ~480 MiB (more than HTA) because every
one of 240k events becomes a dict at once. Here the ``traceEvents`` array is cut at event
boundaries (``}, {``) into ~4 MB pieces, each parsed with orjson, filtered to the few categories
kept (GPU kernels, memcpy/memset, user annotations, runtime launches) and dropped. A piece that
does not parse (a boundary inside a string) is merged with the next one, so the result is exact.
Before parsing, each piece is cut at ``}, {`` and the events of the big never-kept categories
(``python_function``, ``cpu_op``, ``ac2g`` flows...) are dropped as bytes (``_prefiltered``), which
makes the parse ~3x faster than ``orjson.loads`` of the whole file on with_stack traces.
The same machinery salvages a truncated file: everything up to the last complete event is kept
and the loss is reported.

CPU frames for kernel attribution (``frames`` table): the CPU ops that may enclose a kernel launch
(every ``cpu_op`` except view/metadata ops that never launch work, ``_DROP_OPS``), the
``python_function`` frames of ``nn.Module`` calls and of functions whose names say what they do
(rotary embedding, KV-cache updates: ``_KEEP_PY``), and the collective ops with their arguments
(``record_param_comms``: collective name, group size, element counts, dtype). Everything else of
``python_function`` (most of a with_stack trace) is still dropped as bytes.

Standard library only (orjson when installed, else ``json``): this file, ``_io.py``, ``_nsys.py``
and ``_read.py`` also run on remote hosts as a stdlib-only zipapp.

Handles: object or bare-array traces, ``traceEvents`` anywhere among the top-level keys,
integer or float timestamps, timestamps relative to ``baseTimeNanoseconds`` (newer Kineto) or
absolute epoch microseconds (older), string pids/tids, missing metadata, old capitalised
categories (``Kernel``, ``Runtime``, ``Memcpy``).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

try:  # orjson is ~2x faster; the stdlib json is the fallback (remote hosts)
    import orjson as _json

    _JSONError: tuple = (_json.JSONDecodeError,)
except ImportError:  # pragma: no cover - exercised by the zipapp tests of the remote side
    import json as _json

    _JSONError = (ValueError, UnicodeDecodeError)

from kit.errors import TraceError
from kit.profile import _validate
from kit.profile._io import read_bytes, sniff

_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_ARRAY_END = re.compile(rb"\}\s*\]")
CHUNK = 4 << 20

KERNEL_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
               "gpu_memset": "memset", "Memset": "memset"}
ANNOT_CATS = {"user_annotation": "cpu", "gpu_user_annotation": "gpu"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "hip_runtime", "Driver"}
_KEPT = frozenset(KERNEL_CATS) | frozenset(ANNOT_CATS) | frozenset(RUNTIME_CATS)
# epoch microseconds are ~1.7e15; anything below 1e14 (3 years after 1970) is relative
_ABSOLUTE_US = 1e14


class _Collector:
    """Columns of the kept events, filled chunk by chunk (lists of scalars: compact and fast)."""

    def __init__(self) -> None:
        self.k = {c: [] for c in ("device", "stream", "name", "ts", "dur", "correlation", "kind", "collective")}
        self.a = {c: [] for c in ("name", "ts", "dur", "side", "device", "stream", "tid")}
        self.r = {c: [] for c in ("name", "ts", "dur", "correlation", "tid")}
        self.f = {c: [] for c in ("name", "ts", "dur", "tid", "kind")}
        self.comm = {c: [] for c in ("name", "ts", "tid", "collective", "group_size", "in_nelems", "out_nelems",
                                     "dtype", "pg")}
        self.events = 0
        self.names: dict[str, str] = {}

    def _intern(self, s: Any) -> str:
        s = str(s)
        return self.names.setdefault(s, s)

    def add(self, evs: list, count: int | None = None) -> None:
        self.events += len(evs) if count is None else count
        evs = _validate.clean_events(evs, self, _KEPT)  # hook: text numbers, missing ts, odd types (counted)
        k, a, r = self.k, self.a, self.r
        intern = self._intern
        for e in evs:
            if type(e) is not dict:
                continue
            cat = e.get("cat")
            if cat is None:
                continue
            kind = KERNEL_CATS.get(cat)
            if kind is not None:
                if e.get("ph", "X") != "X" or "ts" not in e:
                    continue
                args = e.get("args") or {}
                k["device"].append(_int(args.get("device", e.get("pid"))))
                k["stream"].append(_int(args.get("stream", e.get("tid"))))
                k["name"].append(intern(e.get("name", "")))
                k["ts"].append(float(e["ts"]))
                k["dur"].append(float(e.get("dur") or 0.0))
                k["correlation"].append(_int(args.get("correlation")))
                k["kind"].append(kind)
                coll = args.get("Collective name")
                k["collective"].append(intern(coll) if coll else None)
                continue
            side = ANNOT_CATS.get(cat)
            if side is not None:
                if e.get("ph", "X") != "X" or "ts" not in e:
                    continue
                a["name"].append(intern(e.get("name", "")))
                a["ts"].append(float(e["ts"]))
                a["dur"].append(float(e.get("dur") or 0.0))
                a["side"].append(side)
                args = e.get("args") or {}
                a["device"].append(_int(args.get("device", e.get("pid"))) if side == "gpu" else -1)
                a["stream"].append(_int(args.get("stream", e.get("tid"))) if side == "gpu" else -1)
                a["tid"].append(intern(e.get("tid", "")))
                continue
            if cat == "cpu_op" or cat == "python_function":
                name = e.get("name", "")
                if "ts" not in e or e.get("ph", "X") != "X" or type(name) is not str:
                    continue
                if cat == "cpu_op":
                    if _DROP_OPS_RX.match(name):
                        continue
                    kind_f = "op"
                    if name == "record_param_comms" or name.startswith("c10d::"):
                        args = e.get("args") or {}
                        c = self.comm
                        c["name"].append(intern(name))
                        c["ts"].append(float(e["ts"]))
                        c["tid"].append(intern(e.get("tid", "")))
                        c["collective"].append(intern(args.get("Collective name") or name.split("::")[-1].strip("_")))
                        c["group_size"].append(_int(args.get("Group size")))
                        c["in_nelems"].append(_int(args.get("In msg nelems")))
                        c["out_nelems"].append(_int(args.get("Out msg nelems")))
                        c["dtype"].append(intern(args.get("dtype") or ""))
                        c["pg"].append(intern(args.get("Process Group Name") or ""))
                        continue
                else:
                    if not _KEEP_PY_RX.search(name):
                        continue
                    kind_f = "module" if name.startswith("nn.Module: ") else "function"
                f = self.f
                f["name"].append(intern(name))
                f["ts"].append(float(e["ts"]))
                f["dur"].append(float(e.get("dur") or 0.0))
                f["tid"].append(intern(e.get("tid", "")))
                f["kind"].append(kind_f)
                continue
            if cat in RUNTIME_CATS:
                args = e.get("args") or {}
                corr = args.get("correlation")
                if corr is None or "ts" not in e:
                    continue
                r["name"].append(intern(e.get("name", "")))
                r["ts"].append(float(e["ts"]))
                r["dur"].append(float(e.get("dur") or 0.0))
                r["correlation"].append(_int(corr))
                r["tid"].append(intern(e.get("tid", "")))


def _int(v: Any) -> int:
    if v is None:
        return -1
    if isinstance(v, int):
        return v
    try:
        return int(v)
    except (TypeError, ValueError):
        try:
            return int(str(v).split()[-1])   # "stream 7 " style labels
        except (ValueError, IndexError):
            return -1


# CPU ops that only make views or query metadata: they never launch GPU work, and are most of the
# cpu_op events of a trace
_DROP_OPS = (r"aten::(?:empty|empty_strided|empty_like|view|_unsafe_view|as_strided|slice|select|t|transpose|"
             r"reshape|_reshape_alias|unsqueeze|squeeze|permute|expand|expand_as|detach|alias|narrow|split|"
             r"split_with_sizes|chunk|unbind|resolve_conj|resolve_neg|lift_fresh|view_as|numpy_T|size|stride|"
             r"is_nonzero|result_type|contiguous|dropout|flatten|unflatten|_has_compatible_shallow_copy_type)")
_DROP_OPS_RX = re.compile(_DROP_OPS + '$')
_DROP_OP_NAMES = frozenset(b"aten::" + n.encode() for n in _DROP_OPS[len("aten::(?:"):-1].split("|"))
# python_function frames kept: nn.Module calls, and the few functions whose name says what they
# compute (rotary embedding, KV-cache updates). The byte test is a handful of substring checks (a
# regex per python frame would cost more than parsing the whole trace); the exact test is _KEEP_PY.
_KEEP_PY = r"^nn\.Module: |rotary|rotate_half|cache_utils\.py\(\d+\): update$|kv_cache"
_KEEP_PY_RX = re.compile(_KEEP_PY)
# the byte test: every name _KEEP_PY can match contains one of these (``rotar``: apply_rotary_pos_emb,
# ``rotat``: rotate_half); tests/profile/test_prefilter.py checks the prefiltered parse against the
# unfiltered one on real traces
_KEEP_PY_BYTES = (b'nn.Module: ', b'rotar', b'rotat', b'cache_utils', b'kv_cache')
_DROP_OP_PIECE = re.compile(rb'"name": ?"' + _DROP_OPS.encode() + rb'"')


def _prefiltered(chunk: bytes) -> tuple[list | None, int]:
    """Parse only the events of ``chunk`` (``{..}, {..}, .. {..}``) that may be kept; (events, pieces).

    The chunk is cut at every ``}, {``; pieces naming a dropped category are left out and the rest
    re-joined with ``},{``. Consecutive kept pieces re-join to exactly their original text, so a cut
    inside an event (a list of objects in its args) is harmless; a malformed result returns None and
    the caller parses the whole chunk instead."""
    pieces = _BOUNDARY.split(chunk[1:-1])
    # _keep_piece inlined (this runs once per event of the trace)
    kept = [p for p in pieces
            if ((b'nn.Module: ' in p or b'rotar' in p or b'rotat' in p or b'cache_utils' in p or b'kv_cache' in p)
                if b'"python_function"' in p else
                _keep_op(p) if b'"cpu_op"' in p else
                not (b'"ac2g"' in p or b'"cpu_instant_event"' in p or b'"fwdbwd"' in p or b'"async_gpu"' in p))]
    if not kept:
        return [], len(pieces)
    return _loads_array(b"{" + b"},{".join(kept) + b"}"), len(pieces)


def _keep_piece(p: bytes) -> bool:
    """Whether one event's text may hold a kept event (the test ``_prefiltered`` applies inline)."""
    if b'"python_function"' in p:
        return any(b in p for b in _KEEP_PY_BYTES)
    if b'"cpu_op"' in p:
        return _keep_op(p)
    return not (b'"ac2g"' in p or b'"cpu_instant_event"' in p or b'"fwdbwd"' in p or b'"async_gpu"' in p)


def _keep_op(p: bytes) -> bool:
    i = p.find(b'"name": "')
    if i < 0:
        return _DROP_OP_PIECE.search(p) is None
    j = p.find(b'"', i + 9)
    return p[i + 9:j] not in _DROP_OP_NAMES


def _loads_array(buf: bytes) -> list | None:
    try:
        out = _json.loads(b"[" + buf + b"]")
    except _JSONError:
        return _validate.loads_lenient(buf)  # hook: NaN/Infinity literals, events nested too deep
    return out


def read_kineto(path: Path) -> dict:
    """Parse one Kineto trace file into column dicts + meta + warnings (see module doc)."""
    kind = sniff(path)
    if kind == "sqlite":
        raise TraceError(f"{path}: an SQLite database (nsys export?), not a Kineto JSON trace", path=str(path))
    if kind == "text":
        raise TraceError(f"{path}: not JSON (does not start with '{{' or '['); not a Kineto trace", path=str(path))
    data, warnings = read_bytes(path, kind)
    base = os.path.basename(path)
    col = _Collector()
    n = len(data)
    i = 0
    while i < n and data[i] in b" \t\r\n\xef\xbb\xbf":
        i += 1
    if i >= n:
        raise TraceError(f"{path}: empty trace (only whitespace)", path=str(path))
    header_prefix = b""
    if data[i:i + 1] == b"[":
        arr_open = i
    else:
        idx = data.find(b'"traceEvents"')
        if idx < 0:
            # small object without traceEvents: say what it is
            try:
                obj = _json.loads(data)
            except _JSONError as exc:
                raise TraceError(f"{path}: not valid JSON ({exc})", path=str(path)) from None
            keys = ", ".join(list(obj)[:5]) if isinstance(obj, dict) else type(obj).__name__
            raise TraceError(f"{path}: JSON without 'traceEvents' (keys: {keys}); not a Kineto/chrome trace",
                             path=str(path))
        j = idx + len(b'"traceEvents"')
        while j < n and data[j] in b" \t\r\n:":
            j += 1
        if j >= n or data[j:j + 1] != b"[":
            raise TraceError(f"{path}: 'traceEvents' is not an array", path=str(path))
        arr_open = j
        header_prefix = data[:arr_open]
    pos = arr_open + 1
    trailer = b"}" if header_prefix else b""
    truncated = None
    while True:
        target = pos + CHUNK
        m = _BOUNDARY.search(data, target) if target < n else None
        count = None
        while m is not None:
            chunk = data[pos:m.start() + 1]
            evs, count = _prefiltered(chunk)
            if evs is None:
                evs, count = _loads_array(chunk), None
            if evs is not None:
                break
            m = _BOUNDARY.search(data, m.end() + CHUNK) if m.end() + CHUNK < n else None
        if m is not None:
            col.add(evs, count)
            pos = m.end() - 1
            continue
        # last piece: find where the events array closes
        region_start = pos
        rest = data[pos:]
        if rest.lstrip()[:1] == b"]":          # empty array or ended right at a boundary
            end = rest.index(b"]")
            trailer = rest[end + 1:]
            break
        done = False
        # the array's end is the last "}]" after which only the trailer (or nothing) follows; try
        # candidates from the end (a "}]" inside trailing metadata fails the events parse)
        for m2 in reversed(list(_ARRAY_END.finditer(rest))):
            tail = rest[m2.end():]
            if (header_prefix and not _valid_trailer(tail)) or (not header_prefix and tail.strip()):
                continue
            body = rest[:m2.start() + 1]
            evs, count = _prefiltered(body)
            if evs is None:
                evs, count = _loads_array(body), None
            if evs is None:
                continue
            col.add(evs, count)
            trailer = tail
            done = True
            break
        if not done:
            truncated = _salvage(col, rest)
            lost = n - (region_start + truncated)
            warnings.append(f"{base}: truncated trace (process killed mid-write?): kept {col.events:,} complete "
                            f"events, lost the last {lost:,} bytes ({100.0 * lost / max(n, 1):.1f}% of the file) "
                            f"and any metadata written after the events")
            trailer = b"}" if header_prefix else b""
        break
    meta: dict = {}
    if header_prefix:
        head_doc = header_prefix + b"[]" + (trailer if truncated is None else b"}")
        try:
            meta = _json.loads(head_doc)
        except _JSONError:
            # header of a truncated file, or odd layout: keep what parses
            try:
                meta = _json.loads(header_prefix + b"[]}")
            except _JSONError:
                meta = {}
                warnings.append(f"{base}: trace header unreadable; device/distributed metadata unavailable")
        meta.pop("traceEvents", None)
    if not isinstance(meta, dict):
        meta = {}
    warnings.extend(_validate.collector_warnings(col, base))  # hook: what clean_events repaired or dropped
    return {"kernels": col.k, "annotations": col.a, "launches": col.r, "frames": col.f, "comms": col.comm,
            "meta": meta, "warnings": warnings,
            "events": col.events, "bytes": n, "truncated": truncated is not None}


def _valid_trailer(tail: bytes) -> bool:
    t = tail.strip()
    if t == b"}":
        return True
    if not t.startswith(b","):
        return False
    try:
        _json.loads(b'{"_":0' + t)
        return True
    except _JSONError:
        return False


def _salvage(col: _Collector, rest: bytes) -> int:
    """Keep every complete event of the cut last piece; return how many bytes of it were used."""
    cuts = [m.start() + 1 for m in _BOUNDARY.finditer(rest)]
    for cut in reversed(cuts[-200:]):
        evs = _loads_array(rest[:cut])
        if evs is not None:
            col.add(evs)
            return cut
    return 0


def absolute_offset_us(meta: dict, first_ts: float | None) -> tuple[float, str | None]:
    """Microseconds to add to this file's ``ts`` to get epoch time, and a warning if unknown."""
    base_ns = meta.get("baseTimeNanoseconds")
    if first_ts is None:
        return 0.0, None
    if first_ts >= _ABSOLUTE_US:
        return 0.0, None
    if isinstance(base_ns, (int, float)) and base_ns > 0:
        return base_ns / 1000.0, None
    return 0.0, "timestamps are relative and no baseTimeNanoseconds was found: cross-rank alignment unknown"
