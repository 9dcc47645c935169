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
goodput against SLOs, every request kept; ``LoadResult.plot()`` the throughput-latency curve, one
line per load kind. Beyond one prompt per request: multi-turn and agentic sessions (``users=``),
trace replay (``trace=``, Mooncake and WEKA files), length distributions; per level the steady state,
the client's own stalls, HTTP phases, prefix-cache hits, the server's ``/metrics`` and GPU clocks and
power. ``saturation`` finds the rate where goodput stops rising; ``pareto_sweep`` the front over
lengths x concurrency.

Files:

- ``_client.py``: one streamed request, timed per chunk (stdlib http.client)
- ``_single.py``: single_stream and BenchResult: repeats, concurrency sweep, table, plot
- ``_prompts.py``: make_prompts, datasets read by format, the prompt hash, length distributions
- ``_workloads.py``: multi-turn and agentic sessions, trace replay (Mooncake, WEKA)
- ``_run.py``: one level's run: open/closed loop, sessions, watched and re-run when the client stalled
- ``_watch.py``: the client's own lag, the server's ``/metrics``, GPU clocks and power per level
- ``_search.py``: steady state (warm-up excluded), the saturation knee, Pareto fronts
- ``_sweep.py``: load_test and sweep: the levels of each load kind and what is recorded
- ``_explore.py``: saturation (the knee of goodput over rates) and pareto_sweep (lengths x concurrency)
- ``_reconcile.py``: reconcile and Reconciliation: a client's inter-token gaps against the engine's records
- ``_reconcile_coarse.py``: the reconciliation per request, per interval or as distributions, where the engine
  records less than each token
- ``_otlp.py``: otlp_receiver: the kit's own OTLP/HTTP trace receiver, an engine's request spans (vLLM) kept
  as JSON lines while the kit benchmarks it
- ``_load.py``: LoadResult and the figures of a level: percentiles, goodput, cache hits, HTTP phases
- ``_stats.py``: mean with a t interval, Welch's t-test, median, percentile
"""
from __future__ import annotations

from kit.bench._client import RequestTiming, list_models, stream_request
from kit.bench._explore import pareto_sweep, saturation
from kit.bench._load import LoadResult
from kit.bench._otlp import OTLPReceiver, otlp_receiver
from kit.bench._prompts import make_prompts
from kit.bench._reconcile import PARTS, Reconciliation, reconcile
from kit.bench._single import DEFINITIONS, BenchResult, single_stream
from kit.bench._stats import mean_ci, welch
from kit.bench._sweep import load_test, sweep
from kit.util import publish

__all__ = ["DEFINITIONS", "PARTS", "BenchResult", "LoadResult", "Reconciliation", "RequestTiming", "list_models",
           "load_test", "make_prompts", "mean_ci", "pareto_sweep", "reconcile", "saturation", "single_stream",
           "stream_request", "sweep", "welch", "OTLPReceiver", "otlp_receiver"]

publish(globals(), __all__)
