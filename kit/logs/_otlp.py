"""OTLP trace export requests in protobuf -> their OTLP/JSON form (private to ``kit.logs``).

vLLM exports its request spans over gRPC or OTLP/HTTP in protobuf (``vllm/tracing.py``: protocol ``grpc`` or
``http/protobuf``, never JSON), so the kit's own receiver (``kit.bench.otlp_receiver``) gets protobuf bodies
and stores them as the JSON the span reader (``_engine_records.request_spans``) reads. The wire format is
decoded here by hand, only the messages spans need (field numbers of ``opentelemetry/proto``:
``ExportTraceServiceRequest`` 1 resource_spans; ``ResourceSpans`` 1 resource, 2 scope_spans;
``ScopeSpans`` 1 scope, 2 spans; ``Span`` 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind,
7/8 start/end time (fixed64 ns), 9 attributes; ``KeyValue`` 1 key, 2 value; ``AnyValue`` 1 string, 2 bool,
3 int, 4 double; ``InstrumentationScope`` 1 name, 2 version; ``Resource`` 1 attributes): no protobuf
library. A body that is not such a message raises ``LogFormatError``.
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


def _kv(b: bytes) -> dict:
    out: dict = {"key": "", "value": {}}
    for num, wt, v in _fields(b):
        if num == 1 and wt == 2:
            out["key"] = v.decode("utf-8", "replace")
        elif num == 2 and wt == 2:
            out["value"] = _any(v)
    return out


def _span(b: bytes) -> dict:
    s: dict = {"attributes": []}
    for num, wt, v in _fields(b):
        if wt == 2 and num in (1, 2, 4):
            s[{1: "traceId", 2: "spanId", 4: "parentSpanId"}[num]] = v.hex()
        elif num == 5 and wt == 2:
            s["name"] = v.decode("utf-8", "replace")
        elif num == 6 and wt == 0:
            s["kind"] = v
        elif num in (7, 8) and wt == 1:
            s["startTimeUnixNano" if num == 7 else "endTimeUnixNano"] = str(struct.unpack("<Q", v)[0])
        elif num == 9 and wt == 2:
            s["attributes"].append(_kv(v))
    return s


def _scope_spans(b: bytes) -> dict:
    out: dict = {"scope": {}, "spans": []}
    for num, wt, v in _fields(b):
        if num == 1 and wt == 2:
            out["scope"] = {("name" if n == 1 else "version"): x.decode("utf-8", "replace")
                            for n, w, x in _fields(v) if n in (1, 2) and w == 2}
        elif num == 2 and wt == 2:
            out["spans"].append(_span(v))
    return out


def _resource_spans(b: bytes) -> dict:
    out: dict = {"resource": {"attributes": []}, "scopeSpans": []}
    for num, wt, v in _fields(b):
        if num == 1 and wt == 2:
            out["resource"]["attributes"] = [_kv(x) for n, w, x in _fields(v) if n == 1 and w == 2]
        elif num == 2 and wt == 2:
            out["scopeSpans"].append(_scope_spans(v))
    return out


def otlp_json(body: bytes, *, name: str = "<otlp>") -> dict:
    """An OTLP ``ExportTraceServiceRequest`` in protobuf -> its OTLP/JSON form (``resourceSpans`` ...)."""
    try:
        return {"resourceSpans": [_resource_spans(v) for num, wt, v in _fields(bytes(body)) if num == 1 and wt == 2]}
    except (ValueError, struct.error) as exc:
        raise LogFormatError(f"{name}: not an OTLP trace export request in protobuf ({exc})") from None
