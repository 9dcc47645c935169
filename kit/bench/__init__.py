"""Benchmarks against a live server: an OpenAI-compatible streaming client and its statistics.

``kit.bench.single_stream(url)`` measures TTFT, inter-token latency and decode tok/s per request at
batch 1 and over a small concurrency sweep, with warm-up and repeats; ``BenchResult.table`` gives
means with 95 % Student-t intervals, ``.plot()`` the figure. Definitions follow vLLM's
``vllm bench serve`` (SGLang's ``bench_serving`` uses the same): see ``DEFINITIONS``.
``kit.bench.reconcile(client_records, engine_log, trace=...)`` splits each inter-token gap the client
saw into HTTP/stream, output path, co-scheduled prefill, host work, scheduler and GPU forward (busy and
idle), on the critical path, with the clocks aligned or the figure refused (:class:`Reconciliation`).
``mean_ci`` and ``welch`` are the small-sample statistics experiments use (no scipy needed).
``kit.bench.load_test`` / ``sweep`` measure serving load as ``vllm bench serve``, SGLang's
``bench_serving``, aiperf and guidellm do: open-loop request rates (Poisson or constant) or
concurrency levels, a distinct prompt per request, mean/p50/p90/p99 of TTFT, ITL, TPOT and E2E,
goodput against SLOs, every request kept; ``LoadResult.plot()`` the throughput-latency curve.

Files:

- ``_client.py``: one streamed request, timed per chunk (stdlib http.client)
- ``_single.py``: single_stream and BenchResult: repeats, concurrency sweep, table, plot
- ``_load.py``: load_test, sweep and LoadResult: open/closed-loop levels, percentiles, goodput, prompts
- ``_reconcile.py``: reconcile and Reconciliation: a client's inter-token gaps against the engine's records
- ``_stats.py``: mean with a t interval, Welch's t-test, median, percentile
"""
from __future__ import annotations

from kit.bench._client import RequestTiming, list_models, stream_request
from kit.bench._load import LoadResult, load_test, make_prompts, sweep
from kit.bench._reconcile import PARTS, Reconciliation, reconcile
from kit.bench._single import DEFINITIONS, BenchResult, single_stream
from kit.bench._stats import mean_ci, welch
from kit.util import publish

__all__ = ["DEFINITIONS", "PARTS", "BenchResult", "LoadResult", "Reconciliation", "RequestTiming", "list_models",
           "load_test", "make_prompts", "mean_ci", "reconcile", "single_stream", "stream_request", "sweep", "welch"]

publish(globals(), __all__)
