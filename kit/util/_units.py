"""The unit of every figure the kit records, declared once: a table of figure names (and of declared name
families, for the columns a benchmark tool or a load level names by metric and statistic), never guessed
from a suffix (``decode_tok_s`` is tok/s, not s; ``request_throughput`` is requests/s, not tok/s;
``batch_size`` is a count).

A figure whose name is in neither table has no unit (``""``) and ``tests/runs/test_units.py`` fails on it:
a new figure is declared here with its unit.
"""
from __future__ import annotations

from fnmatch import fnmatchcase

_UNITS_BY_QUANTITY = {
    "us": ("kernel_time_us", "wall_time_us", "step_us", "delta_us", "noise_us", "spread_us", "threshold_us",
           "excess_us", "allreduce_us", "busy_us", "comm_us", "compute_us", "exposed_comm_us", "idle_us",
           "kernel_us", "wall_us", "time_us", "gap_us", "launch_us", "cpu_us", "residual_us"),
    "ms": ("mean_itl_ms", "mean_tpot_ms", "mean_ttft_ms", "mean_e2e_latency_ms", "median_itl_ms", "median_tpot_ms",
           "median_ttft_ms", "median_e2e_latency_ms", "p99_itl_ms", "p99_tpot_ms", "p99_ttft_ms",
           "p99_e2e_latency_ms", "std_itl_ms", "std_tpot_ms", "std_ttft_ms", "std_e2e_latency_ms", "ttft_ms",
           "itl_ms", "tpot_ms", "e2e_ms", "latency_ms", "mean_latency_ms", "offset_ms", "offset_bound_ms",
           "hidden_host_ms"),
    "s": ("elapsed_s", "duration_s", "latency_s", "last_ttft_s", "warmup_s", "ready_s", "wall_s"),
    "tok/s": ("decode_tok_s", "output_tok_s", "user_tok_s", "tok_s", "input_throughput", "output_throughput",
              "total_throughput", "overall_throughput", "last_gen_throughput", "peak_output_throughput",
              "gen_throughput", "token_throughput"),
    "req/s": ("request_throughput", "goodput", "request_rate"),
    "fraction": ("allreduce_share_of_kernel", "cache_hit_rate", "spec_acceptance_rate", "cache_hit_share",
                 "slo_met_share", "share", "agreement", "structural_share", "score", "placed_share",
                 "unplaced_share", "busy_share"),
    "ratio": ("speedup", "speedup_lo", "speedup_hi", "burstiness"),
    "tokens": ("accept_length", "spec_acceptance_length", "input_len", "output_len", "total_input_tokens",
               "total_output_tokens", "output_tokens", "reasoning_tokens", "answer_tokens", "cached_tokens",
               "input_tokens", "prompt_tokens"),
    "count": ("steps", "allreduce_calls", "lines", "unknown_lines", "completed", "failed", "num_prompts",
              "max_concurrency", "peak_concurrent_requests", "batch_size", "concurrency", "repeats",
              "requests_ok", "requests_failed", "distinct_prompts", "cache_reported_requests", "n", "calls",
              "launches", "syncs", "rank", "target", "level"),
    "line": ("line",),
    "p": ("p_value",),
}

UNITS: dict[str, str] = {name: unit for unit, names in _UNITS_BY_QUANTITY.items() for name in names}
"""Figure name -> unit (``us``, ``ms``, ``s``, ``tok/s``, ``req/s``, ``fraction``, ``ratio``, ``tokens``,
``count``, ``line``, ``p``)."""

FAMILIES: tuple[tuple[str, str], ...] = (
    # a category's share of kernel / wall time; a part of a comparison's difference; a gate's relative change
    ("share_of_kernel.*", "fraction"), ("share_of_wall.*", "fraction"), ("delta_us.*", "us"),
    ("change.*", "fraction"),
    ("unplaced_share.*", "fraction"), ("part_ms.*", "ms"), ("cause_share.*", "fraction"),
    # rows of a parsed log's tables; findings of an audit by severity
    ("rows.*", "count"), ("findings.*", "count"),
    # a load level's latency distributions (kit.bench: metric_stat) and their intervals over repeats
    ("ttft_ms_*", "ms"), ("itl_ms_*", "ms"), ("tpot_ms_*", "ms"), ("e2e_ms_*", "ms"), ("http_*_ms_mean", "ms"),
    # a single-stream result's intervals over repeats (metric_lo, metric_hi)
    ("decode_tok_s_*", "tok/s"), ("output_tok_s_*", "tok/s"), ("tok_s_*", "tok/s"),
    ("request_throughput_*", "req/s"), ("goodput_*", "req/s"),
)
"""Declared name families: (pattern, unit), matched whole (``fnmatch``), in order."""


def unit_of(name: str) -> str:
    """The declared unit of figure ``name`` (``""`` when it is declared nowhere)."""
    unit = UNITS.get(name)
    if unit is not None:
        return unit
    for pattern, u in FAMILIES:
        if fnmatchcase(name, pattern):
            return u
    return ""
