"""TensorRT-LLM (``trtllm-serve``): one home for what the kit knows of it.

Its CUDA graphs are set in the extra LLM API options file (``--extra_llm_api_options``): the reference run
writes ``cuda_graph_config: null`` there. Its ``/metrics`` endpoint returns iteration statistics (a JSON list,
one object per scheduler iteration: ``iter``, ``iterLatencyMS``, ``numActiveRequests``, the in-flight batching
stats), read by ``kit.logs`` as per-iteration records for the reconciliation. Its profiler traces are torch
profiler traces (``TLLM_TORCH_PROFILE_TRACE``), read by ``kit.profile`` like any Kineto trace.
"""
from __future__ import annotations

from kit.engines._engine import Engine, GraphOff

__all__ = ["ENGINE"]

ENGINE = Engine(
    "trtllm", "TensorRT-LLM", commands=("trtllm-serve", "trtllm_serve", "tensorrt_llm"),
    records=(("iteration", "kit.logs._engine_records:iteration_stats",
              "its /metrics iteration statistics as JSON (enable_iter_perf_stats in the options file)"),),
    launch="trtllm-serve",
    phases=(("loading weights", r"Loading model|Loading weights|load_weights"),
            ("KV cache", r"KV cache|kv_cache"),
            ("graph capture", r"[Cc]apturing CUDA graph|cuda graph warmup|CUDA graph"),
            ("HTTP server", r"Uvicorn running on"),
            ("ready", r"Application startup complete")),
    port=8000, profile_steps=False,
    graph_off=(GraphOff(options={"cuda_graph_config": None},
                        mode="graphs off (cuda_graph_config: null in the extra LLM API options file)"),),
    distributions=("tensorrt_llm", "tensorrt-llm"),
    priority=40)
