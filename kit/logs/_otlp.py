"""OTLP trace export requests in protobuf -> their OTLP/JSON form (private to ``kit.logs``).

vLLM exports its request spans over gRPC or OTLP/HTTP in protobuf (``vllm/tracing.py``: protocol ``grpc`` or
``http/protobuf``, never JSON), so the kit's own receiver (``kit.bench.otlp_receiver``) gets protobuf bodies
and stores them as the JSON the span reader (``_engine_records.request_spans``) reads. The wire format is
decoded here by hand, only the messages spans need (the field numbers of ``opentelemetry/proto`` in the tables
below): no protobuf library. A body that is not such a message raises ``LogFormatError``.
"""
from __future__ import annotations

import struct

from kit.errors import LogFormatError


def _varint(b: bytes, i: int) -> tuple[int, int]:
    shift = out = 0
    while True:
        if i >= len(b) or shift > 63:
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        out |= (c & 0x7F) << shift
        if not c & 0x80:
            return out, i
        shift += 7


def _fields(b: bytes):
    """(field number, wire type, value) of one message: ints for varints and fixed, bytes for length-delimited."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            if i + 8 > len(b):
                raise ValueError("truncated fixed64")
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(b, i)
            if i + n > len(b):
                raise ValueError("truncated field")
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, v


def _any(b: bytes) -> dict:
    """An ``AnyValue`` (a oneof: the first of string 1, bool 2, int 3, double 4)."""
    for num, wt, v in _fields(b):
        if num == 1 and wt == 2:
            return {"stringValue": v.decode("utf-8", "replace")}
        if num == 2 and wt == 0:
            return {"boolValue": bool(v)}
        if num == 3 and wt == 0:
            return {"intValue": str(v - (1 << 64) if v >= 1 << 63 else v)}
        if num == 4 and wt == 1:
            return {"doubleValue": struct.unpack("<d", v)[0]}
    return {}


def _message(schema: dict, start):
    """A reader of one message kind: ``schema`` maps (field number, wire type) to (JSON key, reader of the
    value); ``start()`` the JSON object before any field, whose lists gather the repeated fields."""
    def read(b: bytes) -> dict:
        out = start()
        for num, wt, v in _fields(b):
            if (num, wt) in schema:
                key, value = schema[num, wt]
                if isinstance(out.get(key), list):
                    out[key].append(value(v))
                else:
                    out[key] = value(v)
        return out
    return read


def _text(v: bytes) -> str:
    return v.decode("utf-8", "replace")


def _nanos(v: bytes) -> str:
    return str(struct.unpack("<Q", v)[0])


_kv = _message({(1, 2): ("key", _text), (2, 2): ("value", _any)}, lambda: {"key": "", "value": {}})
_span = _message({(1, 2): ("traceId", bytes.hex), (2, 2): ("spanId", bytes.hex), (4, 2): ("parentSpanId", bytes.hex),
                  (5, 2): ("name", _text), (6, 0): ("kind", int), (7, 1): ("startTimeUnixNano", _nanos),
                  (8, 1): ("endTimeUnixNano", _nanos), (9, 2): ("attributes", _kv)}, lambda: {"attributes": []})
_scope = _message({(1, 2): ("name", _text), (2, 2): ("version", _text)}, dict)
_scope_spans = _message({(1, 2): ("scope", _scope), (2, 2): ("spans", _span)}, lambda: {"scope": {}, "spans": []})
_resource = _message({(1, 2): ("attributes", _kv)}, lambda: {"attributes": []})
_resource_spans = _message({(1, 2): ("resource", _resource), (2, 2): ("scopeSpans", _scope_spans)},
                           lambda: {"resource": {"attributes": []}, "scopeSpans": []})
_request = _message({(1, 2): ("resourceSpans", _resource_spans)}, lambda: {"resourceSpans": []})


def otlp_json(body: bytes, *, name: str = "<otlp>") -> dict:
    """An OTLP ``ExportTraceServiceRequest`` in protobuf -> its OTLP/JSON form (``resourceSpans`` ...)."""
    try:
        return _request(bytes(body))
    except (ValueError, struct.error) as exc:
        raise LogFormatError(f"{name}: not an OTLP trace export request in protobuf ({exc})") from None
