"""Benchmarks against a live OpenAI-compatible server, and what the client saw set against the engine.

One runner, one result type: ``sweep(url, rates=|concurrencies=|users=|trace=)`` runs load levels as
``vllm bench serve``, SGLang's ``bench_serving``, aiperf and guidellm do (open-loop rates, concurrency,
multi-turn and agentic users, trace replay; a distinct prompt per request; every request kept);
``load_test`` (one level) and ``single_stream`` (batch-1 decode speed and a small concurrency sweep, with
repeats and 95 % Student-t intervals) are its presets; ``saturation`` and ``pareto_sweep`` search over
levels. Each returns a ``LoadResult`` (``BenchResult``, its older name); ``read_result(path)`` reads the
kit's saved results. Definitions of TTFT, ITL, TPOT: ``DEFINITIONS``. ``reconcile(client, engine,
trace=)`` splits each inter-token gap along the token's path, on the critical path, with the clocks
aligned or the figure refused (``Reconciliation``); ``otlp_receiver`` collects an engine's spans for it.
``mean_ci`` and ``welch`` are the small-sample statistics experiments use (no scipy needed).

Files:

- ``_client.py``: one streamed request, timed per chunk (stdlib http.client)
- ``_prompts.py``: the prompt pool, datasets read by format, the prompt hash, length distributions
- ``_workloads.py``: what sessions and a replayed trace (Mooncake, WEKA) send
- ``_run.py``: one level's run: open loop, closed loop, sessions, watched and re-run when the client stalled
- ``_watch.py``: the client's own lag, the server's ``/metrics``, GPU clocks and power per level
- ``_steady.py``: the steady state of a level (time slices, warm-up excluded and said)
- ``_sweep.py``: sweep and its presets; ``_searches.py``: saturation and pareto_sweep
- ``_result.py``: LoadResult and read_result; the figures of a level
- ``_reconcile.py``, ``_reconcile_input.py`` (records checked), ``_reconcile_coarse.py`` (engines that
  record less than each token); ``_otlp.py``: the OTLP/HTTP receiver
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
