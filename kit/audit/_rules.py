"""The audit rules over one run's :class:`kit.logs.Settings` and over a comparison of runs."""
from __future__ import annotations

from typing import Iterator

from kit.audit._findings import Finding

# Environment variables that slow a serving engine down when left on: name -> (values that are "on"
# (None = any non-empty value but "0"/"false"), severity, what it costs).
DEBUG_VARIABLES: dict[str, tuple[tuple[str, ...] | None, str, str]] = {
    "VLLM_TRACE_FUNCTION": (None, "high", "traces every Python call (sub-1 tok/s decode reported)"),
    "CUDA_LAUNCH_BLOCKING": (None, "high", "every kernel launch waits for the GPU: no CPU/GPU overlap"),
    "PYTORCH_NO_CUDA_MEMORY_CACHING": (None, "high", "every allocation goes to cudaMalloc"),
    "TORCH_COMPILE_DEBUG": (None, "medium", "torch.compile writes debug artefacts for every graph"),
    "TORCH_USE_CUDA_DSA": (None, "medium", "device-side assertions in every kernel"),
    "TORCH_NCCL_BLOCKING_WAIT": (None, "medium", "collectives block the CPU until done"),
    "NCCL_LAUNCH_MODE": (("GROUP",), "low", "NCCL group launch mode"),
    "VLLM_LOGGING_LEVEL": (("DEBUG",), "low", "debug logging on every step"),
    "SGLANG_LOG_LEVEL": (("debug",), "low", "debug logging on every step"),
    "NCCL_DEBUG": (("TRACE",), "medium", "NCCL traces every operation"),
    "NCCL_P2P_DISABLE": (None, "medium", "NCCL may not use peer-to-peer copies between GPUs"),
    "NCCL_SHM_DISABLE": (None, "low", "NCCL may not use shared memory between GPUs of one host"),
}
SLOW_BACKENDS = {"torch_native": "PyTorch reference attention", "sdpa_math": "math SDPA", "math": "math SDPA",
                 "xformers": "xFormers (legacy)"}
# a setting that costs speed when off -> (finding code, what it costs, what to do); severity medium
OFF = {
    "cuda_graph": ("eager-decode", "CUDA graphs are off: every decode step is launched kernel by kernel",
                   "remove --disable-cuda-graph / enforce_eager unless the comparison is about them"),
    "p2p": ("p2p-off", "GPU peer-to-peer is off: NCCL copies between GPUs through host memory or the network",
            "check NCCL_P2P_DISABLE, ACS/IOMMU settings and nvidia-smi topo -p2p r"),
    "overlap_schedule": ("overlap-off", "the overlap (async) scheduler is off: CPU scheduling is not hidden behind "
                         "GPU work", "find which argument or model adjustment turned it off (server_args)"),
}
# settings compared between the sides of an A/B or a comparison of engines
COMPARED = ("cuda_graph", "torch_compile", "custom_all_reduce", "overlap_schedule", "tokenizer_mode",
            "speculative", "tp_size", "p2p", "nccl_proto", "nccl_algo")


def _ev(*evs) -> tuple[str, ...]:
    return tuple(str(e) for e in evs if e is not None)


def _on(value: str, values) -> bool:
    if values is None:
        return str(value).strip().lower() not in ("", "0", "false", "no", "off")
    return str(value).strip().upper() in {v.upper() for v in values}


def run_findings(run: str, s) -> Iterator[Finding]:
    """Every rule that one run's settings trigger."""
    eff = s.effective
    # graph coverage against the batches actually run
    top, bmax = eff.get("cuda_graph_max_bs"), eff.get("decode_batch_max")
    if top is not None and bmax is not None and eff.get("cuda_graph") is not False and bmax > top:
        yield Finding("graph-coverage", "high",
                      f"decode ran batches of up to {bmax} but the largest captured CUDA graph is {top}: "
                      f"those steps run eager (several times the per-token latency)", run,
                      _ev(s.get("decode_batch_max"), s.get("cuda_graph_max_bs")),
                      f"raise cuda_graph_max_bs (SGLang --cuda-graph-max-bs / vLLM max_cudagraph_capture_size) "
                      f"to at least {bmax}, or cap max_running_requests")
    n_eager = eff.get("eager_decode_lines") or 0
    if n_eager and eff.get("cuda_graph") is not False:
        yield Finding("eager-decode", "high",
                      f"{n_eager} decode line(s) say the step ran without a CUDA graph although graphs are on",
                      run, _ev(s.get("eager_decode_lines"), s.get("cuda_graph_max_bs")),
                      "find why those batches fell back to eager (batch above the largest graph, "
                      "speculative or LoRA paths)")
    for key, (code, verdict, fix) in OFF.items():
        if eff.get(key) is False:
            yield Finding(code, "medium", verdict, run, _ev(s.reported(key)), fix)
    # custom all-reduce and P2P
    tp = eff.get("tp_size")
    if eff.get("custom_all_reduce") is False and (tp is None or tp > 1):
        itself = "disabled" in s.reported("custom_all_reduce").text.lower()
        yield Finding("custom-all-reduce-off", "medium",
                      "custom all-reduce is off: every tensor-parallel all-reduce goes through NCCL"
                      + (" (the engine disabled it itself)" if itself else ""),
                      run, _ev(s.reported("custom_all_reduce")),
                      "expected on more than two PCIe-only GPUs; on NVLink check P2P and the engine's flags")
    elif (eff.get("topology") == "PCIe-only" and tp is not None and tp > 2
          and eff.get("custom_all_reduce") is not False):
        yield Finding("custom-all-reduce-off", "medium",
                      f"tp_size {tp} on PCIe-only GPUs: the engine disables custom all-reduce on more than two "
                      f"PCIe-only GPUs, so --disable-custom-all-reduce changes nothing here", run,
                      _ev(s.get("topology"), s.get("tp_size")),
                      "look for 'Custom allreduce is disabled' in the engine log; tune NCCL instead")
    backend = eff.get("attention_backend")
    if backend in SLOW_BACKENDS:
        yield Finding("attention-backend", "medium",
                      f"attention runs on {backend} ({SLOW_BACKENDS[backend]}), a fallback, not a fast kernel",
                      run, _ev(s.reported("attention_backend")),
                      "set the engine's fast backend for this GPU (flashinfer, fa3, trtllm ...)")
    for name, value in sorted(s.env.items()):
        rule = DEBUG_VARIABLES.get(name)
        if rule and _on(value, rule[0]):
            yield Finding("debug-variable", rule[1], f"{name}={value} is set in the engine's environment: "
                          f"{rule[2]}", run, _ev(s.get(f"env:{name}")), f"unset {name} for measurements")
    if eff.get("tokenizer_mode") == "slow":
        yield Finding("slow-tokenizer", "medium", "the slow (Python) tokenizer is used", run,
                      _ev(s.get("tokenizer_mode")), "use the fast tokenizer (tokenizer_mode='auto')")
    spec = eff.get("speculative")
    if spec:
        yield Finding("speculative", "info", f"speculative decoding is on ({spec}): per-token figures depend "
                      "on acceptance", run, _ev(s.get("speculative")),
                      "compare with acceptance (kit.logs.spec_summary)")


def comparison_findings(runs: dict) -> Iterator[Finding]:
    """Settings that differ between runs that are meant to be compared (the first is the reference)."""
    ref, *others = list(runs) or [None]
    for other in others:
        a, b = runs[ref].effective, runs[other].effective
        for key in COMPARED:
            if key in a and key in b and a[key] != b[key]:
                yield Finding("mismatch", "high",
                              f"{key} differs between the sides: {a[key]!r} in {ref}, {b[key]!r} in {other}",
                              f"{ref} vs {other}", _ev(runs[ref].get(key), runs[other].get(key)),
                              "make the two sides equal in everything but the change under test")
