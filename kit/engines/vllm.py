"""vLLM (``vllm serve``): one home for what the kit knows of it.

Log lines (periodic throughput, speculative metrics, the engine config, the version banner, the attention
backend) are read by ``kit.logs._vllm``; its trace step ranges are ``execute_..._context_N(..)_generation_M(..)``
(context > 0: prefill; generation > 0 only: decode); graphs off is ``compilation_config.cudagraph_mode NONE``
from 0.10 (torch.compile kept), before that ``--enforce-eager`` (graphs *and* torch.compile off: another
program); its profiler routes exist only when ``VLLM_TORCH_PROFILER_DIR`` is set at start and take no step count.
"""
from __future__ import annotations

import re

from kit.engines._engine import Engine, GraphOff, StepMarker

__all__ = ["ENGINE"]


def _phase(m: re.Match) -> str:
    ctx, gen = int(m.group(1)), int(m.group(2))
    if ctx and gen:
        return "mixed"
    return "prefill" if ctx else "decode"


ENGINE = Engine(
    "vllm", "vLLM", commands=("vllm",),
    log_formats=("kit.logs._vllm:FORMAT",), spec="vllm",
    step_markers=(StepMarker(r"^execute_(?:\d+_)?context_(\d+)\(.*?\)_generation_(\d+)", _phase),),
    records=(("request", "kit.logs._engine_records:request_spans",
              "an OTLP JSON export of its request spans (--otlp-traces-endpoint, with --collect-detailed-traces)"),
             ("interval", "kit.logs._engine_records:decode_intervals", "its log's throughput lines (per interval)")),
    launch="vllm serve",
    phases=(("loading weights", r"Starting to load model|Loading weights took|Loading safetensors checkpoint shards"),
            ("KV cache", r"# GPU blocks|GPU KV cache size|KV cache"),
            ("graph capture", r"Capturing CUDA graph|Capturing cudagraphs|Graph capturing"),
            ("HTTP server", r"Starting vLLM API server|Uvicorn running on"),
            ("ready", r"Application startup complete")),
    port=8000, profile_dir_env="VLLM_TORCH_PROFILER_DIR", profile_steps=False,
    graph_off=(GraphOff(r"--enforce-eager|--compilation-config(?:=\S+|\s+\S+)|-O\d|-O(?:=\S+|\s+\S+)",
                        ("--compilation-config", '{"cudagraph_mode": "NONE"}'), True,
                        "graphs off (compilation_config.cudagraph_mode NONE), torch.compile kept", since=(0, 10)),
               GraphOff(r"--enforce-eager", ("--enforce-eager",), False,
                        "--enforce-eager: graphs AND torch.compile off, a different program (no Inductor fusions, "
                        "no custom passes); kernels fused by compilation in the profiled run have no counterpart "
                        "and stay unplaced")),
    distributions=("vllm",),
    settings={"enforce_eager": ("cuda_graph", "not"),
              "attention_backend": ("attention_backend", "backend"),
              "async_scheduling": ("overlap_schedule", "bool"),
              "tokenizer_mode": ("tokenizer_mode", "text"),
              "tensor_parallel_size": ("tp_size", "int")},
    priority=20)
