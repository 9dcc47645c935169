"""transformers' continuous batching (``transformers serve`` / ``generate_batch``): one home for what the
kit knows of it.

Its scheduler iterations are ``record_function`` ranges of its own naming (found by the generic step rule
of ``kit.profile``: the repeated top-level range that tiles the run), its CUDA graphs one per padded
batch signature; ``transformers serve`` answers the OpenAI-compatible API on port 8000.
"""
from __future__ import annotations

from kit.engines._engine import Engine

__all__ = ["ENGINE"]

ENGINE = Engine(
    "transformers", "transformers (continuous batching)", commands=("transformers serve", "transformers-cli serve"),
    launch="transformers serve",
    phases=(("loading weights", r"Loading checkpoint shards|loading weights"),
            ("HTTP server", r"Uvicorn running on"),
            ("ready", r"Application startup complete")),
    records=(("request", "kit.logs._engine_records:cb_spans",
              "an OTLP JSON export of its continuous-batching spans (transformers 5.0 to 5.8: `transformers serve "
              "--continuous-batching` run under `opentelemetry-instrument` with OTEL_TRACES_EXPORTER=otlp and "
              "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, e.g. to kit.bench.otlp_receiver's endpoint)"),),
    port=8000, distributions=("transformers",), priority=50)
