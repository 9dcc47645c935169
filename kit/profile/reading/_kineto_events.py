"""Kineto events -> the kept columns: which events a decode profile keeps (``KERNEL_CATS``, ``ANNOT_CATS``,
``RUNTIME_CATS``, CPU ops except ``_DROP_OPS``, python frames ``_KEEP_PY``) and the collector that reduces
each decoded piece of a trace to typed columns (``_Collector``), fed by ``_kineto.py``'s streaming reader
with typed ``msgspec`` records or, on the orjson/json path, with dicts (``_DictEvent``).

Standard library only (msgspec when installed): it runs on remote hosts in the reader's zipapp too.
"""
from __future__ import annotations

import re
from array import array
from typing import Any

try:  # orjson is ~2x faster than json; the stdlib json is the fallback (remote hosts)
    import orjson as _json
except ImportError:  # pragma: no cover - exercised by the zipapp tests of the remote side
    import json as _json
try:  # typed decoding of only the fields used (see _kineto's docstring)
    import msgspec
except ImportError:  # pragma: no cover - hosts without msgspec use the orjson/json path
    msgspec = None

from kit.profile.reading import _validate

KERNEL_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
               "gpu_memset": "memset", "Memset": "memset"}
ANNOT_CATS = {"user_annotation": "cpu", "gpu_user_annotation": "gpu"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "hip_runtime", "Driver"}
_KEPT = frozenset(KERNEL_CATS) | frozenset(ANNOT_CATS) | frozenset(RUNTIME_CATS)
_CLEANED = _KEPT | {"cpu_op", "python_function"}

# CPU ops that only make views or query metadata: they never launch GPU work, and are most of the
# cpu_op events of a trace. Ops that may copy (reshape, contiguous, flatten, dropout) are kept: they
# can be the outermost op of a kernel's launch (``op_top``).
_DROP_OPS = (r"aten::(?:empty|empty_strided|empty_like|view|_unsafe_view|as_strided|slice|select|t|transpose|"
             r"_reshape_alias|unsqueeze|squeeze|permute|expand|expand_as|detach|alias|narrow|split|"
             r"split_with_sizes|chunk|unbind|resolve_conj|resolve_neg|lift_fresh|view_as|numpy_T|size|stride|"
             r"is_nonzero|result_type|_has_compatible_shallow_copy_type)")
_DROP_OP_STR = frozenset("aten::" + n for n in _DROP_OPS[len("aten::(?:"):-1].split("|"))
_DROP_OP_NAMES = frozenset(b"aten::" + n.encode() for n in _DROP_OPS[len("aten::(?:"):-1].split("|"))
# python_function frames kept: nn.Module calls, and the few functions whose name says what they
# compute (rotary embedding, KV-cache updates). The byte test is a handful of substring checks (a
# regex per python frame would cost more than parsing the whole trace); the exact test is _KEEP_PY.
_KEEP_PY = r"^nn\.Module: |rotary|rotate_half|cache_utils\.py\(\d+\): update$|kv_cache"
_KEEP_PY_RX = re.compile(_KEEP_PY)
_DROP_OP_PIECE = re.compile(rb'"name": ?"' + _DROP_OPS.encode() + rb'"')

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
                                                 or "kv_cache" in name):   # _kineto._prefiltered's byte test, as text
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

