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
from pathlib import Path

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
from kit.profile.reading import _validate
from kit.profile.reading._io import EVENT_BOUNDARY as _BOUNDARY
from kit.profile.reading._io import blocks, range_blocks, sniff
from kit.profile.reading._kineto_events import (
    _DROP_OP_NAMES,
    _DROP_OP_PIECE,
    _TYPED,
    _Collector,
    _TypedError,
)

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

DECODERS = ("msgspec", "orjson")


def _default_decoder() -> str:
    want = os.environ.get("KIT_TRACE_DECODER", "").strip().lower()
    if want in DECODERS and (want != "msgspec" or msgspec is not None):
        return want
    return "msgspec" if msgspec is not None else "orjson"


DECODER = _default_decoder()


def _prefiltered(chunk: bytes) -> tuple[list | None, int]:
    """Parse only the events of ``chunk`` (``{..}, {..}, .. {..}``) that may be kept; (events, pieces).

    The chunk is cut at every ``}, {``; pieces naming a dropped category are left out and the rest
    re-joined with ``},{``. Consecutive kept pieces re-join to exactly their original text, so a cut
    inside an event (a list of objects in its args) is harmless; a malformed result returns None and
    the caller parses the whole chunk instead."""
    pieces = _BOUNDARY.split(chunk[1:-1])
    # once per event of the trace: a python_function frame whose name _KEEP_PY may match (``rotar``:
    # apply_rotary_pos_emb, ``rotat``: rotate_half; tests/profile/test_prefilter.py checks the prefiltered parse
    # against the unfiltered one on real traces), a cpu_op unless dropped by name, else unless never kept
    kept = [p for p in pieces
            if ((b'nn.Module: ' in p or b'rotar' in p or b'rotat' in p or b'cache_utils' in p or b'kv_cache' in p)
                if b'"python_function"' in p else
                _keep_op(p) if b'"cpu_op"' in p else
                not (b'"ac2g"' in p or b'"cpu_instant_event"' in p or b'"fwdbwd"' in p or b'"async_gpu"' in p))]
    if not kept:
        return [], len(pieces)
    return _loads_array(b"{" + b"},{".join(kept) + b"}"), len(pieces)


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
    kind = sniff(path)
    if kind == "sqlite":
        raise TraceError(f"{path}: an SQLite database (nsys export?), not a Kineto JSON trace", path=str(path))
    if kind == "text":
        raise TraceError(f"{path}: not JSON (does not start with '{{' or '['); not a Kineto trace", path=str(path))
    warnings: list[str] = []
    out, col = _read_window(path, _Window(blocks(path, kind, warnings)), _decoder(decoder), warnings)
    out["warnings"].extend(_validate.collector_warnings(col, os.path.basename(path)))  # hook: repaired, dropped
    return out


def _decoder(asked: str | None) -> str:
    """The decoder to use: ``asked`` (default ``DECODER``), orjson where msgspec's typed decoder is missing."""
    decoder = asked or DECODER
    return "orjson" if decoder == "msgspec" and _TYPED is None else decoder


def _read_window(path: Path, w: _Window, decoder: str, warnings: list[str]) -> tuple[dict, _Collector]:
    """The events of the trace text ``w`` holds, collected: (tables, meta..., the collector)."""
    col = _Collector()
    try:
        return _read(path, w, col, decoder, warnings, os.path.basename(path)), col
    except _Overlong as exc:
        at, what = exc.args
        raise TraceError(_overlong(path, w, at, what), path=str(path)) from None


def read_part(path: str, part: tuple[int, int, int, bytes], decoder: str | None = None) -> dict:
    """One part of ``_io.split`` read like a whole file, with its repair counts (``issues``) for
    ``_read.merge``."""
    out, col = _read_window(Path(path), _Window(range_blocks(Path(path), *part)), _decoder(decoder), [])
    out["issues"] = col._kit_issues
    return out


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
