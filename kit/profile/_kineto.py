"""Kineto (PyTorch profiler) chrome-trace reader that keeps only the events a decode profile needs.

Why streamed and chunked: ``orjson.loads`` of a whole 62 MB trace peaks at ~480 MiB (more than HTA)
because every one of 240k events becomes a dict at once. Here the file is read (and gunzipped) a few
MB at a time (``_io.blocks``), the ``traceEvents`` array is cut at event boundaries (``}, {``) into
~4 MB pieces, and each piece is decoded and reduced to the few columns kept before the next is read,
so memory follows the kept tables, not the file. A piece that does not parse (a boundary inside a
string) is merged with the next one, so the result is exact.

Two decoders, the same tables (``DECODER``, or ``$KIT_TRACE_DECODER`` = ``msgspec`` / ``orjson``):

- ``msgspec`` (when installed; the default): typed decoding into ``Struct`` records (``_Event``,
  ``_Args``) of only the fields used (``ph, cat, name, ts, dur, pid, tid`` and the args the kit reads);
  every other field is skipped without building an object, and the records are not tracked by the
  garbage collector. Measured in ``bench/profile_parse.py``: ~4x faster than ``orjson.loads`` of the
  same bytes. A piece whose values do not have the expected types (a timestamp given as text,
  ``args`` that is not an object, NaN literals) is decoded again by the other decoder, which repairs
  or drops and counts (``_validate``): the fast path never decides a malformed case.
- ``orjson`` (``json`` where orjson is missing: the remote hosts): each piece is cut at ``}, {`` and the
  events of the big never-kept categories (``python_function`` frames that are not modules,
  view ops, ``ac2g`` flows...) are dropped as bytes (``_prefiltered``) before the parse.

CPU frames for kernel attribution (``frames`` table): the CPU ops that may enclose a kernel launch
(every ``cpu_op`` except view/metadata ops that never launch work, ``_DROP_OPS``) with their
``Input Dims``/``Input type`` as JSON text, the ``python_function`` frames of ``nn.Module`` calls and
of functions whose names say what they do (rotary embedding, KV-cache updates: ``_KEEP_PY``), and the
collective ops with their arguments (``record_param_comms``: collective name, group size, element
counts, dtype). Runtime and driver calls (``cuda_runtime``, ``cuda_driver``: launches, graph
launches, memcpy, synchronisation) are kept with their correlation id.

Kernels are identified by their category and, where a trace has no ``cat``, by the fields a GPU
event carries (``ph`` X, ``args.stream`` and a ``correlation`` or ``device``): such events are kept and
counted in a warning; complete events without ``cat`` and without those fields are dropped and
counted (``_validate.collector_warnings``).

Standard library only (orjson / msgspec when installed): this file, ``_io.py``, ``_nsys.py`` and
``_read.py`` also run on remote hosts as a stdlib-only zipapp.

Handles: object or bare-array traces, ``traceEvents`` anywhere among the top-level keys,
integer or float timestamps, timestamps relative to ``baseTimeNanoseconds`` (newer Kineto) or
absolute epoch microseconds (older), string pids/tids, missing metadata, old capitalised
categories (``Kernel``, ``Runtime``, ``Memcpy``), truncated files (everything up to the last
complete event is kept and the loss is reported).
"""
from __future__ import annotations

import os
import re
from array import array
from pathlib import Path
from typing import Any

try:  # orjson is ~2x faster than json; the stdlib json is the fallback (remote hosts)
    import orjson as _json

    _JSONError: tuple = (_json.JSONDecodeError,)
except ImportError:  # pragma: no cover - exercised by the zipapp tests of the remote side
    import json as _json

    _JSONError = (ValueError, UnicodeDecodeError)
try:  # typed decoding of only the fields used (see the module docstring)
    import msgspec
except ImportError:  # pragma: no cover - hosts without msgspec use the orjson/json path
    msgspec = None

from kit.errors import TraceError
from kit.profile import _validate
from kit.profile._io import blocks, sniff

_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_ARRAY_END = re.compile(rb"\}\s*\]")
CHUNK = 1 << 20
MAX_EVENT_BYTES = 64 << 20
"""The longest one event (one string of it) may be: a kernel name is at most tens of KB, so a value
longer than this is corrupt or hostile data (a gzip bomb of one string), stopped with one line."""
MAX_DIGITS = 100
"""The longest number (in digits) a trace value may have: ids and timestamps have 20 at most."""
_LONG_NUMBER = re.compile(rb"[:,\[]\s*-?\d{%d,}" % MAX_DIGITS)
_KEY = re.compile(rb'"([^"\\]{1,80})"\s*:')
_NAME_FIELD = re.compile(rb'"name"\s*:\s*"((?:[^"\\]|\\.){0,160})"')
_REPLACEMENT = "\ufffd".encode()

KERNEL_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
               "gpu_memset": "memset", "Memset": "memset"}
ANNOT_CATS = {"user_annotation": "cpu", "gpu_user_annotation": "gpu"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "hip_runtime", "Driver"}
_KEPT = frozenset(KERNEL_CATS) | frozenset(ANNOT_CATS) | frozenset(RUNTIME_CATS)
_CLEANED = _KEPT | {"cpu_op", "python_function"}
# epoch microseconds are ~1.7e15; anything below 1e14 (3 years after 1970) is relative
_ABSOLUTE_US = 1e14
DECODERS = ("msgspec", "orjson")


def _default_decoder() -> str:
    want = os.environ.get("KIT_TRACE_DECODER", "").strip().lower()
    if want in DECODERS and (want != "msgspec" or msgspec is not None):
        return want
    return "msgspec" if msgspec is not None else "orjson"


DECODER = _default_decoder()

if msgspec is not None:
    class _Args(msgspec.Struct, gc=False):
        """The args a profile reads (names as Kineto writes them); the rest is skipped unread."""

        correlation: Any = None
        device: Any = None
        stream: Any = None
        collective: Any = msgspec.field(default=None, name="Collective name")
        # kept as their JSON text (``Raw``: no lists built); ``_Collector._shape`` memoises the text
        dims: msgspec.Raw = msgspec.field(default=None, name="Input Dims")
        types: msgspec.Raw = msgspec.field(default=None, name="Input type")
        group_size: Any = msgspec.field(default=None, name="Group size")
        in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
        out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
        dtype: Any = None
        pg: Any = msgspec.field(default=None, name="Process Group Name")

    class _Event(msgspec.Struct, gc=False):
        """One trace event, the used fields only; a value of another type fails the piece (the
        orjson path then repairs or drops and counts it)."""

        ph: str = "X"
        cat: "str | None" = None
        name: "str | None" = ""
        ts: "float | None" = None
        dur: "float | None" = None
        pid: "int | str | None" = None
        tid: "int | str | None" = ""
        args: "_Args | None" = None

    _TYPED = msgspec.json.Decoder(list[_Event])
    _TypedError: tuple = (msgspec.DecodeError, RecursionError)
    _RAW = msgspec.Raw
    _UNTYPED = msgspec.json.Decoder()
else:  # pragma: no cover
    _TYPED = None
    _RAW = _UNTYPED = None
    _TypedError = ()

_ARG_KEYS = (("correlation", "correlation"), ("device", "device"), ("stream", "stream"),
             ("collective", "Collective name"), ("dims", "Input Dims"), ("types", "Input type"),
             ("group_size", "Group size"), ("in_nelems", "In msg nelems"), ("out_nelems", "Out msg nelems"),
             ("dtype", "dtype"), ("pg", "Process Group Name"))


class _DictArgs:
    """``_Args`` for an event parsed into a dict (the orjson/json path)."""

    __slots__ = tuple(a for a, _ in _ARG_KEYS)

    def __init__(self, d: dict) -> None:
        for attr, key in _ARG_KEYS:
            setattr(self, attr, d.get(key))


class _DictEvent:
    """``_Event`` for an event parsed into a dict (the orjson/json path, after ``_validate.clean_events``)."""

    __slots__ = ("ph", "cat", "name", "ts", "dur", "pid", "tid", "args")

    def __init__(self, e: dict) -> None:
        self.ph, self.cat, self.name = e.get("ph", "X"), e.get("cat"), e.get("name", "")
        self.ts, self.dur, self.pid, self.tid = e.get("ts"), e.get("dur"), e.get("pid"), e.get("tid", "")
        a = e.get("args")
        self.args = _DictArgs(a) if type(a) is dict else None


def gpu_kind(ph: Any, name: Any, args: Any) -> str | None:
    """'kernel', 'memcpy' or 'memset' for an event without a category that carries the fields of a GPU
    activity (complete event, ``stream`` and a ``correlation`` or ``device``), else None."""
    if ph != "X" or args is None or args.stream is None or (args.correlation is None and args.device is None):
        return None
    n = name if type(name) is str else ""
    return "memcpy" if n.startswith("Memcpy") else "memset" if n.startswith("Memset") else "kernel"


def _columns(spec: str) -> dict:
    """Empty columns: ``name:d`` / ``name:q`` are typed arrays (float64 / int64: 8 bytes a value, a third
    of a list of Python numbers, and pickled to the loader as raw bytes), plain names lists of
    (interned) strings."""
    out = {}
    for c in spec.split():
        name, _, code = c.partition(":")
        out[name] = array(code) if code else []
    return out


class _Collector:
    """Columns of the kept events, filled piece by piece (typed arrays and lists of interned strings)."""

    def __init__(self) -> None:
        self.k = _columns("device:q stream:q name ts:d dur:d correlation:q kind collective")
        self.a = _columns("name ts:d dur:d side device:q stream:q tid")
        self.r = _columns("name ts:d dur:d correlation:q tid")
        self.f = _columns("name ts:d dur:d tid kind dims types")
        self.comm = _columns("name ts:d tid collective group_size:q in_nelems:q out_nelems:q dtype pg")
        self.events = 0
        self.names: dict[str, str] = {}
        self._raw_shapes: dict[bytes, str | None] = {}
        self._tids: dict[int, str] = {}   # int thread id -> its interned text (every runtime call and op has one)
        self._kit_issues: dict[str, int] = {}

    def _intern(self, s: Any) -> str:
        s = str(s)
        got = self.names.setdefault(s, s)
        if got is s and not s.isascii():  # a text seen for the first time (or its own interned copy), not ASCII
            return self._checked_text(s)
        return got

    def _checked_text(self, s: str) -> str:
        """A non-ASCII text: lone surrogates (a ``\\ud800`` escape, which JSON allows and UTF-8 cannot
        hold) replaced by U+FFFD and counted, so no later print or write fails on it."""
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            fixed = self.names[s] = s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            self._count("surrogate")
            return fixed
        return s

    def _tid(self, v: Any) -> str:
        """``_intern(v)`` of a thread id, memoised for int ids (only ints go in: 1.0 and True must not
        find the text of 1)."""
        if type(v) is not int:
            return self._intern(v)
        s = self._tids.get(v)
        if s is None:
            s = self._tids[v] = self._intern(v)
        return s

    def _count(self, why: str, n: int = 1) -> None:
        self._kit_issues[why] = self._kit_issues.get(why, 0) + n

    def add_dicts(self, evs: list, count: int | None = None) -> None:
        """Events parsed into dicts: repaired/dropped and counted by ``_validate``, then collected."""
        self.events += len(evs) if count is None else count
        evs = _validate.clean_events(evs, self, _CLEANED)  # hook: text numbers, missing ts, odd types (counted)
        self.collect([_DictEvent(e) for e in evs if type(e) is dict])

    def add_typed(self, evs: list) -> None:
        self.events += len(evs)
        self.collect(evs)

    def collect(self, evs) -> None:
        """Keep what a profile needs from parsed events (``_Event`` or ``_DictEvent``: the same fields).
        Ordered by how often each category occurs (python frames, runtime calls, ops, kernels)."""
        k, a, f = self.k, self.a, self.f
        intern = self._intern
        known = self.names.get
        tids = self._tids
        nan = float("nan")
        r_name, r_ts, r_dur = self.r["name"].append, self.r["ts"].append, self.r["dur"].append
        r_corr, r_tid = self.r["correlation"].append, self.r["tid"].append
        for e in evs:
            cat = e.cat
            if cat == "python_function":
                name = e.name
                if type(name) is not str or not ("nn.Module: " in name or "rota" in name or "cache_utils" in name
                                                 or "kv_cache" in name):   # _KEEP_PY_BYTES, as text
                    continue
                if e.ph != "X" or not _KEEP_PY_RX.search(name):
                    continue
                f["name"].append(intern(name))
                f["ts"].append(nan if e.ts is None else e.ts)
                f["dur"].append(e.dur or 0.0)
                f["tid"].append(intern(e.tid))
                f["kind"].append("module" if name.startswith("nn.Module: ") else "function")
                f["dims"].append(None)
                f["types"].append(None)
                continue
            if cat in RUNTIME_CATS:
                if e.ph != "X":
                    self._count(f"phase:runtime call:{str(e.ph)[:8]}")
                    continue
                args = e.args
                nm = e.name
                r_name((known(nm) if type(nm) is str else None) or intern("" if nm is None else nm))
                r_ts(nan if e.ts is None else e.ts)
                r_dur(e.dur or 0.0)
                r_corr(-1 if args is None else _int(args.correlation))
                tid = e.tid
                r_tid((tids.get(tid) if type(tid) is int else None) or self._tid(tid))
                continue
            if cat == "cpu_op":
                self._op(e)
                continue
            if cat is None:
                kind = gpu_kind(e.ph, e.name, e.args)
                if kind is None:
                    if e.ph == "X":
                        self._count("nocat_dropped")
                    continue
                self._count("nocat_kernel")
            else:
                kind = KERNEL_CATS.get(cat)
            if kind is not None:
                if e.ph != "X":
                    self._count(f"phase:{kind}:{str(e.ph)[:8]}")
                    continue
                args = e.args
                if args is None:
                    k["device"].append(_int(e.pid))
                    k["stream"].append(_int(e.tid))
                    k["correlation"].append(-1)
                    k["collective"].append(None)
                else:
                    k["device"].append(_int(e.pid if args.device is None else args.device))
                    k["stream"].append(_int(e.tid if args.stream is None else args.stream))
                    k["correlation"].append(_int(args.correlation))
                    coll = args.collective
                    k["collective"].append(intern(coll) if coll else None)
                k["name"].append(intern(e.name if e.name is not None else ""))
                k["ts"].append(nan if e.ts is None else e.ts)
                k["dur"].append(e.dur or 0.0)
                k["kind"].append(kind)
                continue
            side = ANNOT_CATS.get(cat)
            if side is not None:
                if e.ph != "X":
                    continue
                a["name"].append(intern(e.name if e.name is not None else ""))
                a["ts"].append(nan if e.ts is None else e.ts)
                a["dur"].append(e.dur or 0.0)
                a["side"].append(side)
                args = e.args
                gpu = side == "gpu"
                a["device"].append(_int(e.pid if args is None or args.device is None else args.device) if gpu else -1)
                a["stream"].append(_int(e.tid if args is None or args.stream is None else args.stream) if gpu else -1)
                a["tid"].append(intern(e.tid))

    def _op(self, e) -> None:
        """One ``cpu_op``: a frame (with its input shapes), or a collective call."""
        name = e.name
        if e.ph != "X" or type(name) is not str or name in _DROP_OP_STR:
            return
        ts = float("nan") if e.ts is None else float(e.ts)
        args = e.args
        intern = self._intern
        if name == "record_param_comms" or name.startswith("c10d::"):
            c = self.comm
            c["name"].append(intern(name))
            c["ts"].append(ts)
            c["tid"].append(intern(e.tid))
            coll = None if args is None else args.collective
            c["collective"].append(intern(coll or name.split("::")[-1].strip("_")))
            c["group_size"].append(_int(None if args is None else args.group_size))
            c["in_nelems"].append(_int(None if args is None else args.in_nelems))
            c["out_nelems"].append(_int(None if args is None else args.out_nelems))
            c["dtype"].append(intern((None if args is None else args.dtype) or ""))
            c["pg"].append(intern((None if args is None else args.pg) or ""))
            return
        f = self.f
        f["name"].append(intern(name))
        f["ts"].append(ts)
        f["dur"].append(float(e.dur or 0.0))
        f["tid"].append(self._tid(e.tid))
        f["kind"].append("op")
        f["dims"].append(None if args is None else self._shape(args.dims))
        f["types"].append(None if args is None else self._shape(args.types))

    def _shape(self, v: Any) -> str | None:
        """An op's ``Input Dims`` / ``Input type`` as compact JSON text (None when absent or empty): a
        string column that the cache stores as a dictionary, parsed back only by the roofline.

        The typed decoder hands the value over as its JSON text (``msgspec.Raw``): the same few
        shapes recur on every layer and step, so each distinct text is decoded and re-dumped once
        (the result depends on the text only, so it is the same as decoding every value)."""
        if type(v) is _RAW:
            b = bytes(v)
            text = self._raw_shapes.get(b, _MISSING)
            if text is _MISSING:
                text = self._raw_shapes[b] = self._shape(_UNTYPED.decode(b))
            return text
        if not v or type(v) is not list:
            return None
        text = _json.dumps(v, separators=(",", ":")) if _json.__name__ == "json" else _json.dumps(v)
        text = text.decode() if type(text) is bytes else text
        return self.names.setdefault(text, text)


_I64 = 1 << 63
_MISSING = object()


def _int(v: Any) -> int:
    """An id (device, stream, correlation, count) as an int64; -1 when absent or unreadable."""
    if v is None:
        return -1
    if type(v) is int:
        return v if -_I64 <= v < _I64 else -1
    try:
        out = int(v)
    except (TypeError, ValueError, OverflowError):
        try:
            out = int(str(v).split()[-1])   # "stream 7 " style labels
        except (ValueError, IndexError):
            return -1
    return out if -_I64 <= out < _I64 else -1


# CPU ops that only make views or query metadata: they never launch GPU work, and are most of the
# cpu_op events of a trace. Ops that may copy (reshape, contiguous, flatten, dropout) are kept: they
# can be the outermost op of a kernel's launch (``op_top``).
_DROP_OPS = (r"aten::(?:empty|empty_strided|empty_like|view|_unsafe_view|as_strided|slice|select|t|transpose|"
             r"_reshape_alias|unsqueeze|squeeze|permute|expand|expand_as|detach|alias|narrow|split|"
             r"split_with_sizes|chunk|unbind|resolve_conj|resolve_neg|lift_fresh|view_as|numpy_T|size|stride|"
             r"is_nonzero|result_type|_has_compatible_shallow_copy_type)")
_DROP_OPS_RX = re.compile(_DROP_OPS + '$')
_DROP_OP_STR = frozenset("aten::" + n for n in _DROP_OPS[len("aten::(?:"):-1].split("|"))
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


class _Overlong(Exception):
    """A value of a piece longer than any trace writes: (offset in the piece, what)."""


def _decode(piece: bytes, col: _Collector, decoder: str) -> bool:
    """Collect the events of ``piece`` (``{..}, {..}, .. {..}``); False when it does not parse (a cut
    inside a string: the caller merges it with the next piece). A piece that fails for what it holds
    is not merged on for ever (it would read as a truncated file): invalid UTF-8 is replaced by U+FFFD
    and counted, then decoded again; a number of ``MAX_DIGITS`` digits or more raises ``_Overlong``."""
    if _decode_piece(piece, col, decoder):
        return True
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError:
        fixed = piece.decode("utf-8", "replace").encode("utf-8")
        if _decode_piece(fixed, col, decoder):
            col._count("utf8", fixed.count(_REPLACEMENT) - piece.count(_REPLACEMENT))
            return True
    m = _LONG_NUMBER.search(piece)
    if m is not None:
        raise _Overlong(m.start() + 1, f"a number of {len(m.group().strip(b':,[ -'))} digits")
    return False


def _decode_piece(piece: bytes, col: _Collector, decoder: str) -> bool:
    if decoder == "msgspec":
        try:
            evs = _TYPED.decode(b"[" + piece + b"]")
        except _TypedError:
            pass   # malformed or unexpected types: the dict path below repairs or counts it
        else:
            col.add_typed(evs)
            return True
    evs, count = _prefiltered(piece)
    if evs is None:
        evs, count = _loads_array(piece), None
    if evs is None:
        return False
    col.add_dicts(evs, count)
    return True


class _Window:
    """A sliding window over the file's bytes: ``buf`` starts at absolute offset ``base``."""

    def __init__(self, chunks) -> None:
        self._it = iter(chunks)
        self.buf = b""
        self.base = 0
        self.eof = False

    def fill(self, n: int) -> None:
        """Read until ``buf`` holds at least ``n`` bytes or the file ends."""
        parts = [self.buf]
        have = len(self.buf)
        while have < n and not self.eof:
            b = next(self._it, None)
            if b is None:
                self.eof = True
                break
            parts.append(b)
            have += len(b)
        if len(parts) > 1:
            self.buf = b"".join(parts)

    def drop(self, n: int) -> None:
        self.buf = self.buf[n:]
        self.base += n


def read_kineto(path: Path, decoder: str | None = None) -> dict:
    """Parse one Kineto trace file into column dicts + meta + warnings (see module doc).
    ``decoder``: 'msgspec' or 'orjson' (default ``DECODER``); both give the same tables."""
    decoder = decoder or DECODER
    if decoder == "msgspec" and _TYPED is None:
        decoder = "orjson"
    kind = sniff(path)
    if kind == "sqlite":
        raise TraceError(f"{path}: an SQLite database (nsys export?), not a Kineto JSON trace", path=str(path))
    if kind == "text":
        raise TraceError(f"{path}: not JSON (does not start with '{{' or '['); not a Kineto trace", path=str(path))
    warnings: list[str] = []
    w = _Window(blocks(path, kind, warnings))
    base = os.path.basename(path)
    col = _Collector()
    try:
        return _read(path, w, col, decoder, warnings, base)
    except _Overlong as exc:
        at, what = exc.args
        raise TraceError(_overlong(path, w, at, what), path=str(path)) from None


def _overlong(path: Path, w: _Window, at: int, what: str) -> str:
    """One line naming the file, the event (its byte, category and name where readable) and the field."""
    buf = w.buf
    ev = max(buf.rfind(b"},{", 0, at), buf.rfind(b"}, {", 0, at))
    ev = 0 if ev < 0 else buf.index(b"{", ev + 1)
    head = buf[ev:min(at, ev + (1 << 20))]
    keys = _KEY.findall(head)
    cat = re.search(rb'"cat"\s*:\s*"([^"\\]{0,40})"', head)
    name = _NAME_FIELD.search(head)
    desc = ", ".join(f"{k} {v.group(1).decode(errors='replace')[:80]!r}" for k, v in (("cat", cat), ("name", name))
                     if v is not None)
    field = f" in field {keys[-1].decode(errors='replace')!r}" if keys else ""
    return (f"{path}: the event at byte {w.base + ev:,}" + (f" ({desc})" if desc else "") + f" has {what}{field}: "
            f"longer than any profiler writes (corrupt or hostile data); stopped reading")


def _grown(w: _Window) -> None:
    """The piece being read outgrew ``MAX_EVENT_BYTES`` without an event boundary: one value that long."""
    if len(w.buf) > MAX_EVENT_BYTES:
        raise _Overlong(len(w.buf), f"a value longer than {MAX_EVENT_BYTES >> 20} MiB")


def _read(path: Path, w: _Window, col: _Collector, decoder: str, warnings: list[str], base: str) -> dict:
    header_prefix = _header(w, path)
    trailer = b"}" if header_prefix else b""
    truncated = None
    end_search = CHUNK
    while True:
        w.fill(end_search + (1 << 16))
        m = _BOUNDARY.search(w.buf, end_search) if end_search < len(w.buf) else None
        if m is None and not w.eof:
            _grown(w)
            end_search = max(end_search, len(w.buf) - 64)
            w.fill(len(w.buf) + CHUNK)
            continue
        if m is not None:
            if _decode(w.buf[:m.start() + 1], col, decoder):
                w.drop(m.end() - 1)
                end_search = CHUNK
            else:
                _grown(w)
                end_search = m.end() + CHUNK
            continue
        # the last piece: find where the events array closes
        rest = w.buf
        if rest.lstrip()[:1] == b"]":          # empty array or ended right at a boundary
            trailer = rest[rest.index(b"]") + 1:]
            break
        done = False
        # the array's end is the last "}]" after which only the trailer (or nothing) follows; try
        # candidates from the end (a "}]" inside trailing metadata fails the events parse)
        for m2 in reversed(list(_ARRAY_END.finditer(rest))):
            tail = rest[m2.end():]
            if (header_prefix and not _valid_trailer(tail)) or (not header_prefix and tail.strip()):
                continue
            if not _decode(rest[:m2.start() + 1], col, decoder):
                continue
            trailer = tail
            done = True
            break
        if not done:
            truncated = _salvage(col, rest)
            warnings.append(_validate.truncation_statement(col, base))  # hook: events and time lost
            trailer = b"}" if header_prefix else b""
        break
    n = w.base + len(w.buf)
    meta = _meta(header_prefix, trailer, truncated is not None, warnings, base)
    warnings.extend(_validate.collector_warnings(col, base))  # hook: what was repaired, identified or dropped
    return {"kernels": col.k, "annotations": col.a, "launches": col.r, "frames": col.f, "comms": col.comm,
            "meta": meta, "warnings": warnings, "events": col.events, "bytes": n, "truncated": truncated is not None}


def _header(w: _Window, path: Path) -> bytes:
    """Advance ``w`` to the first event of the ``traceEvents`` array; return the bytes before the array
    (b"" for a bare array)."""
    w.fill(1 << 16)
    i = 0
    while i < len(w.buf) and w.buf[i] in b" \t\r\n\xef\xbb\xbf":
        i += 1
    if i >= len(w.buf):
        raise TraceError(f"{path}: empty trace (only whitespace)", path=str(path))
    if w.buf[i:i + 1] == b"[":
        w.drop(i + 1)
        _skip_space(w)
        return b""
    idx = w.buf.find(b'"traceEvents"')
    while idx < 0 and not w.eof:
        _grown(w)
        w.fill(len(w.buf) + CHUNK)
        idx = w.buf.find(b'"traceEvents"')
    if idx < 0:
        # an object without traceEvents: say what it is
        try:
            obj = _json.loads(w.buf)
        except _JSONError as exc:
            raise TraceError(f"{path}: not valid JSON ({exc})", path=str(path)) from None
        keys = ", ".join(list(obj)[:5]) if isinstance(obj, dict) else type(obj).__name__
        raise TraceError(f"{path}: JSON without 'traceEvents' (keys: {keys}); not a Kineto/chrome trace",
                         path=str(path))
    j = idx + len(b'"traceEvents"')
    w.fill(j + 4096)
    while j < len(w.buf) and w.buf[j] in b" \t\r\n:":
        j += 1
    if j >= len(w.buf) or w.buf[j:j + 1] != b"[":
        raise TraceError(f"{path}: 'traceEvents' is not an array", path=str(path))
    header = w.buf[:j]
    w.drop(j + 1)
    _skip_space(w)
    return header


def _skip_space(w: _Window) -> None:
    while True:
        w.fill(1)
        stripped = w.buf.lstrip()
        if stripped or w.eof:
            w.drop(len(w.buf) - len(stripped))
            return
        w.drop(len(w.buf))


def _meta(header_prefix: bytes, trailer: bytes, truncated: bool, warnings: list[str], base: str) -> dict:
    """The top-level keys other than ``traceEvents`` (device properties, distributed info, base time)."""
    if not header_prefix:
        return {}
    try:
        meta = _json.loads(header_prefix + b"[]" + (b"}" if truncated else trailer))
    except _JSONError:
        # header of a truncated file, or odd layout: keep what parses
        try:
            meta = _json.loads(header_prefix + b"[]}")
        except _JSONError:
            warnings.append(f"{base}: trace header unreadable; device/distributed metadata unavailable")
            return {}
    if not isinstance(meta, dict):
        return {}
    meta.pop("traceEvents", None)
    return meta


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
            col.add_dicts(evs)
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
