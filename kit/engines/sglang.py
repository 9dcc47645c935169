"""SGLang (``python -m sglang.launch_server``): one home for what the kit knows of it.

Log lines (``Decode batch`` / ``Prefill batch``, the ``server_args`` dump, captured graph sizes, the
attention backend) are read by ``kit.logs._sglang``; its trace step ranges are ``step[DECODE bs=..]`` /
``step[EXTEND ..]``; graphs off is ``--disable-cuda-graph`` (compilation as configured); its torch
profiler is driven by ``/start_profile`` with a body (``output_dir``, ``num_steps``).
"""
from __future__ import annotations

import re

from kit.engines._engine import Engine, GraphOff, StepMarker

__all__ = ["ENGINE"]


def _phase(m: re.Match) -> str:
    k = m.group(1).upper()
    return "decode" if k == "DECODE" else "prefill" if k in ("EXTEND", "PREFILL") else k.lower()


ENGINE = Engine(
    "sglang", "SGLang", commands=("sglang",),
    log_formats=("kit.logs._sglang:FORMAT", "kit.logs._engine_records:SGLANG_REQUESTS"), spec="sglang",
    step_markers=(StepMarker(r"^step\[(\w+)", _phase),),
    records=(("request", "kit.logs._engine_records:request_stats",
              "its log with --enable-request-time-stats-logging (Req Time Stats lines, per request)"),
             ("interval", "kit.logs._engine_records:decode_intervals", "its log's Decode batch lines (per interval)")),
    launch="python3 -m sglang.launch_server",
    phases=(("loading weights", r"Load weight begin|Loading safetensors checkpoint shards|Loading weights"),
            ("KV cache", r"KV Cache is allocated|Memory pool end"),
            ("graph capture", r"Capture (?:cuda|cpu|npu) graph begin|Capture cuda graph bs"),
            ("HTTP server", r"Uvicorn running on|Application startup complete"),
            ("ready", r"fired up and ready to roll")),
    port=30000, profile_steps=True,
    graph_off=(GraphOff(r"--disable-cuda-graph|--cuda-graph-max-bs(?:=\S+|\s+\S+)", ("--disable-cuda-graph",), True,
                        "graphs off (--disable-cuda-graph), compilation as configured"),),
    distributions=("sglang",),
    settings={"disable_custom_all_reduce": ("custom_all_reduce", "not"),
              "disable_cuda_graph": ("cuda_graph", "not"),
              "attention_backend": ("attention_backend", "backend"),
              "disable_overlap_schedule": ("overlap_schedule", "not"),
              "tokenizer_mode": ("tokenizer_mode", "text"),
              "speculative_algorithm": ("speculative", "text"),
              "enable_torch_compile": ("torch_compile", "bool"),
              "tp_size": ("tp_size", "int"),
              "cuda_graph_max_bs": ("cuda_graph_max_bs", "int")},
    priority=10)
