"""The kit's own OTLP/HTTP trace receiver: an engine's request spans collected while the kit benchmarks it.

vLLM (``--otlp-traces-endpoint URL``, ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf``, and
``--collect-detailed-traces`` for the forward and execute times) posts its ``llm_request`` spans to
``URL`` (``/v1/traces``) in protobuf; the receiver answers as an OTLP collector does (HTTP 200, an empty
``ExportTraceServiceResponse``) and appends each request, in its OTLP/JSON form (``kit.logs.otlp_json``; a
JSON body as it came), as one line of ``path``: the file ``kit.logs.step_records`` and ``kit.bench.reconcile``
read. transformers' continuous batching (5.0 to 5.8, run under ``opentelemetry-instrument`` with
``OTEL_TRACES_EXPORTER=otlp``, ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf``, ``OTEL_METRICS_EXPORTER=none``
and ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` = ``endpoint``) posts its loop's spans the same way
(``tools/record_transformers_run.py``). It listens on ``127.0.0.1`` by default (the engine on this machine,
or reached through a forward); bodies over ``MAX_BODY`` bytes or not OTLP are refused with HTTP 400 and
counted in ``refused``.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kit import logs
from kit.errors import BenchError, LogFormatError

MAX_BODY = 64 << 20


class OTLPReceiver:
    """A running receiver: ``endpoint`` (the URL to give the engine), ``path`` (the JSON lines file),
    ``exports`` (requests stored) and ``refused``; a context manager that stops it on exit."""

    def __init__(self, path, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.path = Path(path)
        self.exports = 0
        self.refused = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
                kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                try:
                    n = int(self.headers.get("Content-Length") or -1)
                    if self.path.rstrip("/") != "/v1/traces" or not 0 <= n <= MAX_BODY:
                        raise ValueError("not a trace export")
                    body = self.rfile.read(n)
                    doc = json.loads(body) if kind == "application/json" else logs.otlp_json(body, name="receiver")
                    if not isinstance(doc, dict):
                        raise ValueError("not an export request")
                except (ValueError, LogFormatError):
                    owner.refused += 1
                    self.send_response(400)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                owner._store(doc)
                reply = b"{}" if kind == "application/json" else b""
                self.send_response(200)
                self.send_header("Content-Type", kind or "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args) -> None:   # quiet: a benchmark's output is its own
                pass

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise BenchError(f"otlp_receiver: cannot listen on {host}:{port} ({exc.strerror or exc})") from None
        self._server.daemon_threads = True
        self.endpoint = f"http://{host}:{self._server.server_address[1]}/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _store(self, doc: dict) -> None:
        line = json.dumps(doc, separators=(",", ":")) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            self.exports += 1

    def stop(self) -> None:
        """Stop listening (idempotent); what was received stays in ``path``."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(10)
        self._server.server_close()

    def __enter__(self) -> "OTLPReceiver":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"OTLPReceiver({self.endpoint} -> {self.path}: {self.exports} exports, {self.refused} refused)"


def otlp_receiver(path, *, host: str = "127.0.0.1", port: int = 0) -> OTLPReceiver:
    """Start the kit's OTLP/HTTP trace receiver (see the module docstring), appending each export to ``path``;
    give its ``endpoint`` to the engine and ``path`` to ``kit.bench.reconcile``."""
    return OTLPReceiver(path, host=host, port=port)
