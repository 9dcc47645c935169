"""transformers' continuous batching (``transformers serve`` / ``generate_batch``): one home for what the
kit knows of it.

Its scheduler iterations are ``record_function`` ranges of its own naming (found by the generic step rule
of ``kit.profile``: the repeated top-level range that tiles the run), its CUDA graphs one per padded
batch signature; ``transformers serve`` answers the OpenAI-compatible API on port 8000 (its ``/v1/models`` lists
only the Hub cache's models: name a local model to the client; its streams end with the ``finish_reason`` chunk,
no ``[DONE]``; it refuses ``ignore_eos`` with HTTP 422: ``kit.bench`` copes with both).

Its own records: transformers 5.0 to 5.8 trace the continuous-batching loop with OpenTelemetry when the SDK is
configured (``transformers/utils/metrics.py``: ``traced`` spans, one ``generation_loop`` per iteration, and per
request ``record_ttft_metric`` / ``record_request_completion`` calls carrying its id), read per request by
``kit.logs``; 5.9 removed them. Its metrics (``ttft_milliseconds``, ``request_latency_milliseconds``) subtract the
request's ``time.perf_counter()`` creation time from ``time.time()`` (read from the 5.8.1 source): not
latencies, so the kit does not read them (``OTEL_METRICS_EXPORTER=none``).
"""
from __future__ import annotations

from kit.engines._engine import Engine

__all__ = ["ENGINE"]

ENGINE = Engine(
    "transformers", "transformers (continuous batching)", commands=("transformers serve", "transformers-cli serve"),
    launch="transformers serve",
    phases=(("loading weights", r"Loading checkpoint shards|Loading weights"),
            ("HTTP server", r"Uvicorn running on"),
            ("ready", r"Application startup complete")),
    records=(("request", "kit.logs._engine_records:cb_spans",
              "an OTLP JSON export of its continuous-batching spans (transformers 5.0 to 5.8: `transformers serve "
              "--continuous-batching` run under `opentelemetry-instrument` with OTEL_TRACES_EXPORTER=otlp and "
              "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, e.g. to kit.bench.otlp_receiver's endpoint)"),),
    port=8000, distributions=("transformers",), priority=50)
