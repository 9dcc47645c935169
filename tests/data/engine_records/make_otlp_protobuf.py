"""Records ``vllm_otlp_spans.pb``: the protobuf body the real OpenTelemetry OTLP/HTTP exporter posts for vLLM's
request spans, the bytes ``kit.bench.otlp_receiver`` receives from a vLLM started with
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf`` (``vllm/tracing.py`` builds its exporter the same way:
``TracerProvider`` + ``BatchSpanProcessor`` + ``OTLPSpanExporter(endpoint=...)``).

The spans are ``make_records.py``'s (the same planted times and ``SpanAttributes`` names, with detailed traces).
Needs ``opentelemetry-sdk`` and ``opentelemetry-exporter-otlp-proto-http`` (not kit dependencies): run once,
from the repository root, with a Python that has them: ``python tests/data/engine_records/make_otlp_protobuf.py``.
"""
from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import make_records as M  # noqa: E402 - the planted spans, one source

BODIES: list[bytes] = []


class _Capture(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        BODIES.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
        endpoint=f"http://127.0.0.1:{server.server_address[1]}/v1/traces")))
    tracer = provider.get_tracer("vllm.llm_engine")
    for r in M._client():
        span = M._span(r, True)
        attrs = {a["key"]: (int(v["intValue"]) if "intValue" in (v := a["value"]) else
                            v.get("doubleValue", v.get("stringValue"))) for a in span["attributes"]}
        s = tracer.start_span("llm_request", kind=SpanKind.SERVER, attributes=attrs,
                              start_time=int(span["startTimeUnixNano"]))
        s.end(end_time=int(span["endTimeUnixNano"]))
    provider.force_flush()
    provider.shutdown()
    server.shutdown()
    assert len(BODIES) == 1, f"{len(BODIES)} export requests"
    (HERE / "vllm_otlp_spans.pb").write_bytes(BODIES[0])


if __name__ == "__main__":
    main()
