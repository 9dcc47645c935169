"""Server arguments of tinyserve, a project-written stand-in for a serving engine (not a real engine).

decode-kit reads this file the way an engineer reads an installed engine's ``server_args.py``: to
learn which attention backend, MoE runner and scheduler options a given GPU actually gets. The
structure imitates the usual shape of that code (original code written for decode-kit):

* :class:`ServerArgs` is a dataclass; most fields default to ``None`` or ``"auto"`` meaning
  "let the engine decide".
* ``__post_init__`` decides, in a fixed order: model-specific adjustments first
  (:meth:`ServerArgs._handle_model_specific_adjustments`), then the generic attention backend
  (:meth:`ServerArgs._handle_attention_backend_compatibility`) only if the field is still unset.
* The decisions go through architecture predicates in :mod:`tinyserve.srt.utils.common`:
  ``is_sm100_supported()`` is true only on compute capability 10.x (datacenter Blackwell), so a
  default passed as ``sm100_default_attention_backend=...`` never applies on an sm120 card.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import random
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from tinyserve.srt.utils import (
    get_device_capability,
    is_hip,
    is_hopper_with_cuda_12_3,
    is_package_available,
    is_sm90_supported,
    is_sm100_supported,
    is_sm120_supported,
)

from .configs.model_config import ModelInfo, read_model_info
from .layers.attention import MLA_CAPABLE_BACKENDS, check_attention_backend
from .model_hooks import apply_hybrid_mamba_defaults

logger = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------------
# Choices accepted on the command line.
# ----------------------------------------------------------------------------------------------
ATTENTION_BACKEND_CHOICES = [
    "triton",
    "torch_native",
    "flashinfer",
    "fa3",
    "fa4",
    "trtllm_mha",
    "trtllm_mla",
    "cutlass_mla",
    "aiter",
    "nsa",
]

MOE_RUNNER_BACKEND_CHOICES = [
    "auto",
    "triton",
    "deep_gemm",
    "flashinfer_cutlass",
    "flashinfer_trtllm",
    "marlin",
]

MOE_A2A_BACKEND_CHOICES = ["none", "deepep", "mooncake"]

SPECULATIVE_ALGORITHM_CHOICES = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]

SAMPLING_BACKEND_CHOICES = ["flashinfer", "pytorch"]

GRAMMAR_BACKEND_CHOICES = ["xgrammar", "outlines", "llguidance", "none"]

QUANTIZATION_CHOICES = [
    "fp8",
    "awq",
    "gptq",
    "modelopt",
    "modelopt_fp8",
    "modelopt_fp4",
    "w8a8_int8",
    "mxfp4",
]

KV_CACHE_DTYPE_CHOICES = ["auto", "fp8_e5m2", "fp8_e4m3", "bf16"]

# Speculative algorithms that draft a tree; only ``topk == 1`` chains work with some backends.
TREE_SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")

# Memory fraction reserved for the KV cache when the user does not say, by total GPU memory (GiB).
_DEFAULT_MEM_FRACTION = ((20, 0.79), (35, 0.81), (60, 0.85), (90, 0.87), (160, 0.88))


def _default_mem_fraction(gpu_mem_gib: Optional[float], tp_size: int) -> float:
    """KV-cache memory fraction: bigger GPUs and larger TP groups can give more to the cache."""
    if gpu_mem_gib is None:
        return 0.80
    fraction = 0.90
    for limit, value in _DEFAULT_MEM_FRACTION:
        if gpu_mem_gib < limit:
            fraction = value
            break
    if tp_size >= 4:
        fraction = min(fraction + 0.01, 0.92)
    return round(fraction, 3)


def _env_flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


@dataclass
class ServerArgs:
    """Every knob of the stand-in server. ``None``/``"auto"`` means "decided in __post_init__"."""

    # Model and tokenizer
    model_path: str = ""
    tokenizer_path: Optional[str] = None
    trust_remote_code: bool = False
    context_length: Optional[int] = None
    dtype: str = "auto"
    quantization: Optional[str] = None
    kv_cache_dtype: str = "auto"
    served_model_name: Optional[str] = None

    # HTTP server
    host: str = "127.0.0.1"
    port: int = 30000
    api_key: Optional[str] = None

    # Memory and scheduling
    mem_fraction_static: Optional[float] = None
    max_running_requests: Optional[int] = None
    max_total_tokens: Optional[int] = None
    chunked_prefill_size: Optional[int] = None
    max_prefill_tokens: int = 16384
    schedule_policy: str = "fcfs"
    schedule_conservativeness: float = 1.0
    page_size: Optional[int] = None
    num_continuous_decode_steps: int = 1
    disable_overlap_schedule: bool = False
    disable_radix_cache: bool = False

    # Parallelism
    tp_size: int = 1
    pp_size: int = 1
    dp_size: int = 1
    ep_size: int = 1
    nnodes: int = 1
    node_rank: int = 0
    dist_init_addr: Optional[str] = None
    enable_dp_attention: bool = False

    # Kernel backends
    attention_backend: Optional[str] = None
    decode_attention_backend: Optional[str] = None
    prefill_attention_backend: Optional[str] = None
    sampling_backend: Optional[str] = None
    grammar_backend: Optional[str] = None
    moe_runner_backend: str = "auto"
    moe_a2a_backend: str = "none"

    # Speculative decoding
    speculative_algorithm: Optional[str] = None
    speculative_draft_model_path: Optional[str] = None
    speculative_num_steps: Optional[int] = None
    speculative_eagle_topk: Optional[int] = None
    speculative_num_draft_tokens: Optional[int] = None
    speculative_attention_backend: Optional[str] = None

    # Hybrid (mamba) models
    mamba_ssm_dtype: str = "float32"
    mamba_cache_extra_buffer: Optional[bool] = None

    # Communication and graphs
    disable_custom_all_reduce: bool = False
    enable_symm_mem: bool = False
    disable_cuda_graph: bool = False
    cuda_graph_max_bs: Optional[int] = None
    cuda_graph_bs: Optional[List[int]] = None
    torch_compile_max_bs: int = 32
    enable_torch_compile: bool = False

    # Logging and metrics
    log_level: str = "info"
    log_requests: bool = False
    enable_metrics: bool = False
    decode_log_interval: int = 40
    random_seed: Optional[int] = None

    # Filled in by __post_init__, not by the user.
    model_info: ModelInfo = field(default_factory=ModelInfo, repr=False, compare=False)
    gpu_memory_gib: Optional[float] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The order matters: model-specific defaults win over the generic ones, because the
        # generic handlers only fill fields that are still unset.
        self._handle_deprecated_args()
        self._handle_missing_default_values()
        self.model_info = read_model_info(self.model_path)
        self._handle_gpu_memory_settings()
        self._handle_model_specific_adjustments()
        self._handle_sampling_backend()
        self._handle_attention_backend_compatibility()
        self._handle_speculative_decoding()
        self._handle_moe_defaults()
        self._handle_parallelism()
        self._handle_cuda_graph()
        self._check_args()

    # ------------------------------------------------------------------------------------------
    # Small defaults
    # ------------------------------------------------------------------------------------------
    def _handle_deprecated_args(self) -> None:
        if os.environ.get("TINYSERVE_ENABLE_FLASHINFER_MLA"):
            logger.warning("TINYSERVE_ENABLE_FLASHINFER_MLA is deprecated; use --attention-backend flashinfer")
            if self.attention_backend is None:
                self.attention_backend = "flashinfer"

    def _handle_missing_default_values(self) -> None:
        if self.tokenizer_path is None:
            self.tokenizer_path = self.model_path
        if self.served_model_name is None:
            self.served_model_name = self.model_path
        if self.random_seed is None:
            self.random_seed = random.randint(0, 1 << 30)

    def _handle_gpu_memory_settings(self) -> None:
        gib = os.environ.get("TINYSERVE_GPU_MEMORY_GIB")
        self.gpu_memory_gib = float(gib) if gib else None
        if self.mem_fraction_static is None:
            self.mem_fraction_static = _default_mem_fraction(self.gpu_memory_gib, self.tp_size)
        if self.chunked_prefill_size is None:
            big = self.gpu_memory_gib is not None and self.gpu_memory_gib >= 80
            self.chunked_prefill_size = 16384 if big else 8192
        if self.cuda_graph_max_bs is None:
            self.cuda_graph_max_bs = 256 if self.tp_size >= 4 else 160

    def _handle_sampling_backend(self) -> None:
        if self.sampling_backend is None:
            self.sampling_backend = "flashinfer" if is_package_available("flashinfer") else "pytorch"
        if self.grammar_backend is None:
            self.grammar_backend = "xgrammar"

    # ------------------------------------------------------------------------------------------
    # Model-specific adjustments (run before the generic attention default)
    # ------------------------------------------------------------------------------------------
    def _handle_model_specific_adjustments(self) -> None:
        info = self.model_info
        model_arch = info.arch
        if model_arch == "unknown":
            return

        if info.use_mla:
            if is_sm100_supported() and self.attention_backend is None:
                self.attention_backend = "trtllm_mla"
                logger.info("Use trtllm_mla as attention backend on sm100 for %s", model_arch)
            if self.kv_cache_dtype == "auto" and is_sm100_supported():
                self.kv_cache_dtype = "fp8_e4m3"
            if self.page_size is None:
                self.page_size = 64 if self.attention_backend == "trtllm_mla" else 1
            return

        if model_arch == "GptOssForCausalLM":
            if self.attention_backend is None:
                if is_sm100_supported():
                    self.attention_backend = "trtllm_mha"
                elif is_sm90_supported():
                    self.attention_backend = "fa3"
                else:
                    self.attention_backend = "triton"
                logger.info("Use %s as attention backend for %s", self.attention_backend, model_arch)
            if self.moe_runner_backend == "auto" and self.quantization == "mxfp4":
                self.moe_runner_backend = "flashinfer_trtllm" if is_sm100_supported() else "triton"
            return

        if model_arch == "Llama4ForConditionalGeneration":
            if self.attention_backend is None:
                if is_sm100_supported():
                    self.attention_backend = "trtllm_mha"
                elif is_sm90_supported():
                    self.attention_backend = "fa3"
                elif is_hip():
                    self.attention_backend = "aiter"
                else:
                    self.attention_backend = "triton"
            return

        if model_arch == "NemotronHForCausalLM":
            self._adjust_nemotron_h(info)
            return

        if model_arch in ("Qwen3NextForCausalLM", "FalconH1ForCausalLM"):
            self._handle_mamba_radix_cache(
                model_arch=model_arch,
                support_mamba_cache_extra_buffer=True,
                sm100_default_attention_backend="triton",
            )
            return

        if model_arch == "Lfm2ForCausalLM":
            apply_hybrid_mamba_defaults(self, model_arch, info.quant_algo)
            return

    def _adjust_nemotron_h(self, info: ModelInfo) -> None:
        """NemotronH: modelopt checkpoints pick their quantisation; MoE runner forced for every GPU."""
        model_arch = info.arch
        if info.quant_method in ("modelopt", "modelopt_fp8", "modelopt_fp4"):
            algo = (info.quant_algo or "").upper()
            self.quantization = "modelopt_fp4" if "FP4" in algo else "modelopt_fp8"
            # Not conditional on the architecture: every GPU gets the CUTLASS MoE runner here.
            self.moe_runner_backend = "flashinfer_cutlass"
            logger.info("Use flashinfer_cutlass as MoE runner for %s (%s)", model_arch, self.quantization)
        self._handle_mamba_radix_cache(
            model_arch=model_arch,
            support_mamba_cache_extra_buffer=False,
            sm100_default_attention_backend="flashinfer",
        )
        assert self.attention_backend != "triton", f"{model_arch} does not support the triton attention backend"

    def _handle_mamba_radix_cache(
        self,
        model_arch: str,
        support_mamba_cache_extra_buffer: bool = True,
        sm100_default_attention_backend: Optional[str] = None,
    ) -> None:
        """Hybrid mamba models: pick the sm100 attention default and reconcile cache vs. overlap.

        The ``sm100_default_attention_backend`` only applies on compute capability 10.x
        (``is_sm100_supported()``) and only when the user did not choose a backend.
        """
        if is_sm100_supported() and self.attention_backend is None and sm100_default_attention_backend:
            self.attention_backend = sm100_default_attention_backend
            logger.info("Use %s as attention backend on sm100 for %s", self.attention_backend, model_arch)

        if self.mamba_cache_extra_buffer is None:
            self.mamba_cache_extra_buffer = support_mamba_cache_extra_buffer
        if self.mamba_cache_extra_buffer and not support_mamba_cache_extra_buffer:
            raise ValueError(f"{model_arch} does not support --mamba-cache-extra-buffer")

        if self.disable_radix_cache:
            return
        if self.speculative_algorithm is not None and not self.mamba_cache_extra_buffer:
            logger.warning("Disabling radix cache: speculative decoding on %s needs the mamba extra buffer", model_arch)
            self.disable_radix_cache = True
        elif not self.mamba_cache_extra_buffer and not self.disable_overlap_schedule:
            logger.warning(
                "Disabling overlap schedule since the mamba cache without extra buffer cannot overlap (%s)",
                model_arch,
            )
            self.disable_overlap_schedule = True

    # ------------------------------------------------------------------------------------------
    # Generic attention default (only when nothing above chose one)
    # ------------------------------------------------------------------------------------------
    def _spec_allows_trtllm(self) -> bool:
        return self.speculative_algorithm is None or self.speculative_eagle_topk in (None, 1)

    def _handle_attention_backend_compatibility(self) -> None:
        if self.attention_backend is None:
            use_mla = self.model_info.use_mla
            self.attention_backend = (
                self._default_mla_backend() if use_mla else self._default_mha_backend()
            )
            logger.info("Attention backend not specified. Use %s backend by default.", self.attention_backend)

        problem = check_attention_backend(
            self.attention_backend,
            use_mla=self.model_info.use_mla,
            topk=self.speculative_eagle_topk,
        )
        if problem is not None:
            raise ValueError(problem)

        if self.attention_backend == "torch_native" and not self.disable_cuda_graph:
            logger.warning("Cuda graph is disabled because of using the torch native attention backend")
            self.disable_cuda_graph = True
        if self.attention_backend in ("trtllm_mha", "trtllm_mla", "fa4") and self.page_size in (None, 1):
            self.page_size = 64 if self.attention_backend != "fa4" else 128
        if self.page_size is None:
            self.page_size = 1

    def _default_mha_backend(self) -> str:
        """Multi-head attention default by architecture: Hopper, then sm100, then the fallbacks."""
        if is_hopper_with_cuda_12_3() and self._spec_allows_trtllm():
            return "fa3"
        if is_sm100_supported() and self._spec_allows_trtllm():
            return "trtllm_mha"
        if is_hip():
            return "aiter"
        if is_sm120_supported():
            return self._sm120_fallback_backend()
        return "flashinfer" if is_package_available("flashinfer") else "triton"

    def _sm120_fallback_backend(self) -> str:
        """sm120 (RTX PRO 6000 / RTX 50xx) has no fa3 or trtllm kernels: flashinfer, else triton."""
        if is_package_available("flashinfer"):
            return "flashinfer"
        logger.warning("flashinfer is not installed; sm120 falls back to the triton attention backend")
        return "triton"

    def _default_mla_backend(self) -> str:
        if is_sm90_supported():
            return "fa3"
        if is_sm100_supported():
            return "flashinfer"
        if is_hip():
            heads = self.model_info.num_attention_heads // max(self.tp_size, 1)
            return "aiter" if heads in (16, 128) else "triton"
        return "triton"

    # ------------------------------------------------------------------------------------------
    # Speculative decoding, MoE, parallelism, graphs
    # ------------------------------------------------------------------------------------------
    def _handle_speculative_decoding(self) -> None:
        algo = self.speculative_algorithm
        if algo is None:
            return
        if algo == "NEXTN":
            self.speculative_algorithm = algo = "EAGLE"
        if algo in TREE_SPECULATIVE_ALGORITHMS:
            if self.speculative_num_steps is None:
                self.speculative_num_steps = 3
            if self.speculative_eagle_topk is None:
                self.speculative_eagle_topk = 1
            if self.speculative_num_draft_tokens is None:
                self.speculative_num_draft_tokens = self.speculative_num_steps + 1
            if self.speculative_eagle_topk > 1 and self.page_size and self.page_size > 1:
                raise ValueError("speculative topk > 1 needs --page-size 1")
        elif algo == "NGRAM":
            self.speculative_num_draft_tokens = self.speculative_num_draft_tokens or 8
            self.disable_overlap_schedule = True
        if self.speculative_attention_backend is None:
            self.speculative_attention_backend = self.attention_backend
        # The drafter runs one token per step: the overlap scheduler cannot hide its latency.
        if not _env_flag("TINYSERVE_SPEC_OVERLAP"):
            self.disable_overlap_schedule = True

    def _handle_moe_defaults(self) -> None:
        if self.moe_runner_backend != "auto":
            return
        if self.quantization in ("modelopt_fp4", "mxfp4") and is_sm100_supported():
            self.moe_runner_backend = "flashinfer_trtllm"
        elif self.quantization in ("modelopt_fp4", "modelopt_fp8"):
            self.moe_runner_backend = "flashinfer_cutlass"
        elif self.ep_size > 1 and self.moe_a2a_backend == "deepep":
            self.moe_runner_backend = "deep_gemm"
        else:
            self.moe_runner_backend = "triton"

    def _handle_parallelism(self) -> None:
        if self.enable_dp_attention:
            if self.dp_size <= 1:
                raise ValueError("--enable-dp-attention needs --dp-size > 1")
            self.chunked_prefill_size = max(self.chunked_prefill_size // self.dp_size, 1024)
        if self.ep_size > 1 and self.ep_size != self.tp_size:
            logger.warning("ep_size %d differs from tp_size %d; experts are resharded", self.ep_size, self.tp_size)
        if self.tp_size > 2 and not self.disable_custom_all_reduce and _env_flag("TINYSERVE_PCIE_ONLY"):
            # Custom all-reduce needs NVLink or P2P beyond two GPUs; NCCL takes over instead.
            logger.warning("Custom all-reduce is disabled on PCIe-only GPUs with tp_size > 2")
            self.disable_custom_all_reduce = True

    def _handle_cuda_graph(self) -> None:
        if self.disable_cuda_graph:
            self.cuda_graph_bs = []
            return
        if self.cuda_graph_bs is None:
            sizes = [1, 2, 4, 8, 12, 16, 24, 32]
            sizes += list(range(40, 161, 8))
            sizes += list(range(176, self.cuda_graph_max_bs + 1, 16))
            self.cuda_graph_bs = [bs for bs in sizes if bs <= self.cuda_graph_max_bs]
        if self.speculative_algorithm is not None and self.speculative_eagle_topk:
            self.cuda_graph_bs = [bs for bs in self.cuda_graph_bs if bs * self.speculative_eagle_topk <= 512]

    def _check_args(self) -> None:
        if self.tp_size < 1 or self.pp_size < 1 or self.dp_size < 1:
            raise ValueError("tp_size, pp_size and dp_size must be >= 1")
        if self.attention_backend not in ATTENTION_BACKEND_CHOICES:
            raise ValueError(f"unknown attention backend {self.attention_backend!r}")
        if self.moe_runner_backend not in MOE_RUNNER_BACKEND_CHOICES:
            raise ValueError(f"unknown MoE runner backend {self.moe_runner_backend!r}")
        if self.model_info.use_mla and self.attention_backend not in MLA_CAPABLE_BACKENDS:
            raise ValueError(f"{self.attention_backend} cannot run MLA models")
        if self.num_continuous_decode_steps < 1:
            raise ValueError("--num-continuous-decode-steps must be >= 1")

    # ------------------------------------------------------------------------------------------
    # Command line
    # ------------------------------------------------------------------------------------------
    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        """Register every field as ``--field-name`` (booleans as flags)."""
        group = parser.add_argument_group("model")
        group.add_argument("--model-path", "--model", dest="model_path", required=True)
        group.add_argument("--tokenizer-path", default=ServerArgs.tokenizer_path)
        group.add_argument("--trust-remote-code", action="store_true")
        group.add_argument("--context-length", type=int, default=ServerArgs.context_length)
        group.add_argument("--dtype", default=ServerArgs.dtype)
        group.add_argument("--quantization", choices=QUANTIZATION_CHOICES, default=None)
        group.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPE_CHOICES, default=ServerArgs.kv_cache_dtype)

        group = parser.add_argument_group("server")
        group.add_argument("--host", default=ServerArgs.host)
        group.add_argument("--port", type=int, default=ServerArgs.port)
        group.add_argument("--api-key", default=None)

        group = parser.add_argument_group("memory and scheduling")
        group.add_argument("--mem-fraction-static", type=float, default=None)
        group.add_argument("--max-running-requests", type=int, default=None)
        group.add_argument("--chunked-prefill-size", type=int, default=None)
        group.add_argument("--page-size", type=int, default=None)
        group.add_argument("--num-continuous-decode-steps", type=int, default=ServerArgs.num_continuous_decode_steps)
        group.add_argument("--disable-overlap-schedule", action="store_true")
        group.add_argument("--disable-radix-cache", action="store_true")

        group = parser.add_argument_group("parallelism")
        group.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=ServerArgs.tp_size)
        group.add_argument("--pp-size", type=int, default=ServerArgs.pp_size)
        group.add_argument("--dp-size", type=int, default=ServerArgs.dp_size)
        group.add_argument("--ep-size", type=int, default=ServerArgs.ep_size)
        group.add_argument("--enable-dp-attention", action="store_true")

        group = parser.add_argument_group("kernel backends")
        group.add_argument("--attention-backend", choices=ATTENTION_BACKEND_CHOICES, default=None)
        group.add_argument("--sampling-backend", choices=SAMPLING_BACKEND_CHOICES, default=None)
        group.add_argument("--grammar-backend", choices=GRAMMAR_BACKEND_CHOICES, default=None)
        group.add_argument("--moe-runner-backend", choices=MOE_RUNNER_BACKEND_CHOICES, default="auto")
        group.add_argument("--moe-a2a-backend", choices=MOE_A2A_BACKEND_CHOICES, default="none")

        group = parser.add_argument_group("speculative decoding")
        group.add_argument("--speculative-algorithm", choices=SPECULATIVE_ALGORITHM_CHOICES, default=None)
        group.add_argument("--speculative-draft-model-path", default=None)
        group.add_argument("--speculative-num-steps", type=int, default=None)
        group.add_argument("--speculative-eagle-topk", type=int, default=None)
        group.add_argument("--speculative-num-draft-tokens", type=int, default=None)

        group = parser.add_argument_group("communication and graphs")
        group.add_argument("--disable-custom-all-reduce", action="store_true")
        group.add_argument("--disable-cuda-graph", action="store_true")
        group.add_argument("--cuda-graph-max-bs", type=int, default=None)
        group.add_argument("--enable-torch-compile", action="store_true")

        group = parser.add_argument_group("logging")
        group.add_argument("--log-level", default=ServerArgs.log_level)
        group.add_argument("--enable-metrics", action="store_true")
        group.add_argument("--decode-log-interval", type=int, default=ServerArgs.decode_log_interval)

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> "ServerArgs":
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        return cls(**{k: v for k, v in vars(args).items() if k in names})

    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def to_dict(self) -> Dict[str, Any]:
        """The user-visible arguments (what the server logs at start-up), secrets masked."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.repr}
        if out.get("api_key"):
            out["api_key"] = "***"
        return out

    def summary(self) -> str:
        cap = get_device_capability()
        cap_text = f"{cap[0]}.{cap[1]}" if cap else "unknown"
        return (
            f"compute capability {cap_text}: attention={self.attention_backend} "
            f"moe_runner={self.moe_runner_backend} page_size={self.page_size} "
            f"overlap={'off' if self.disable_overlap_schedule else 'on'}"
        )


def prepare_server_args(argv: List[str]) -> ServerArgs:
    """Parse a command line into :class:`ServerArgs` (runs every default handler)."""
    parser = argparse.ArgumentParser(prog="tinyserve")
    ServerArgs.add_cli_args(parser)
    return ServerArgs.from_cli_args(parser.parse_args(argv))


def resolved_defaults(model_path: str = "", **overrides: Any) -> Dict[str, Any]:
    """The decisions __post_init__ makes on this machine, as JSON-friendly values."""
    args = ServerArgs(model_path=model_path, **overrides)
    keys = ("attention_backend", "moe_runner_backend", "page_size", "disable_overlap_schedule",
            "disable_radix_cache", "sampling_backend", "speculative_algorithm", "tp_size")
    return json.loads(json.dumps({k: getattr(args, k) for k in keys}))
