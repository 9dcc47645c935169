"""Benchmarks against a live server: an OpenAI-compatible streaming client and its statistics.

``kit.bench.single_stream(url)`` measures TTFT, inter-token latency and decode tok/s per request at
batch 1 and over a small concurrency sweep, with warm-up and repeats (a preset of ``sweep``);
``.table`` gives the figures with 95 % Student-t intervals over the repeats. Definitions follow vLLM's
``vllm bench serve`` (SGLang's ``bench_serving`` uses the same): see ``DEFINITIONS``.
``kit.bench.reconcile(client_records, engine_log, trace=...)`` splits each inter-token gap the client
saw into HTTP/stream, output path, co-scheduled prefill, host work, scheduler and GPU forward (busy and
idle), on the critical path, with the clocks aligned or the figure refused (:class:`Reconciliation`).
``mean_ci`` and ``welch`` are the small-sample statistics experiments use (no scipy needed).
``kit.bench.load_test`` / ``sweep`` measure serving load as ``vllm bench serve``, SGLang's
``bench_serving``, aiperf and guidellm do: open-loop request rates (Poisson or constant) or
concurrency levels, a distinct prompt per request, mean/p50/p90/p99 of TTFT, ITL, TPOT and E2E,
goodput against SLOs, every request kept; ``LoadResult`` (``BenchResult`` is the same class, its older
name) is the one result type; ``read_result(path)`` the one reader of the kit's saved results
(older single-stream files included). ``.plot()`` the throughput-latency curve, one line per load
kind. Beyond one prompt per request: multi-turn and agentic sessions (``users=``), trace replay
(``trace=``, Mooncake and WEKA files), length distributions; per level the steady state, the client's
own stalls, HTTP phases, prefix-cache hits, the server's ``/metrics`` and GPU clocks and power.
``saturation`` finds the rate where goodput stops rising; ``pareto_sweep`` the front over
lengths x concurrency.

Files:

- ``_client.py``: one streamed request, timed per chunk (stdlib http.client)
- ``_prompts.py``: make_prompts, datasets read by format, the prompt hash, length distributions
- ``_workloads.py``: multi-turn and agentic sessions, trace replay (Mooncake, WEKA)
- ``_run.py``: one level's run: open/closed loop, sessions, watched and re-run when the client stalled
- ``_watch.py``: the client's own lag, the server's ``/metrics``, GPU clocks and power per level
- ``_steady.py``: the steady state of a level (time slices, warm-up excluded and said)
- ``_sweep.py``: sweep, and its presets load_test and single_stream: the levels of each load kind
- ``_searches.py``: saturation (the knee of goodput over rates) and pareto_sweep (lengths x concurrency)
- ``_reconcile.py``: reconcile and Reconciliation: a client's inter-token gaps against the engine's records
- ``_reconcile_input.py``: the reconciliation's input step: unusable engine records dropped and counted, or refused
- ``_reconcile_coarse.py``: the reconciliation per request, per interval or as distributions, where the engine
  records less than each token
- ``_otlp.py``: otlp_receiver: the kit's own OTLP/HTTP trace receiver, an engine's request spans (vLLM) kept
  as JSON lines while the kit benchmarks it
- ``_result.py``: LoadResult, the one result type, and read_result, the one reader of saved results;
  the figures of a level: percentiles, goodput, cache hits, HTTP phases
- ``_stats.py``: mean with a t interval, Welch's t-test, median, percentile
"""
from __future__ import annotations

from kit.bench._client import RequestTiming, list_models, stream_request
from kit.bench._otlp import OTLPReceiver, otlp_receiver
from kit.bench._prompts import make_prompts
from kit.bench._reconcile import PARTS, Reconciliation, reconcile
from kit.bench._result import DEFINITIONS, LoadResult, read_result
from kit.bench._searches import pareto_sweep, saturation
from kit.bench._stats import mean_ci, welch
from kit.bench._sweep import load_test, single_stream, sweep
from kit.util import publish

BenchResult = LoadResult  # the older name of the one result type (notebooks, saved sessions' code)

__all__ = ["DEFINITIONS", "PARTS", "BenchResult", "LoadResult", "Reconciliation", "RequestTiming", "list_models",
           "load_test", "make_prompts", "mean_ci", "pareto_sweep", "read_result", "reconcile", "saturation",
           "single_stream", "stream_request", "sweep", "welch", "OTLPReceiver", "otlp_receiver"]

publish(globals(), __all__)
