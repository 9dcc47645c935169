"""Defaults for hybrid attention/mamba models (stand-in for a model-override hook module)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..utils import is_blackwell_supported, is_sm100_supported
from ..utils.common import is_sm90_supported

if TYPE_CHECKING:  # pragma: no cover - import only for type checkers
    from ..server_args import ServerArgs

logger = logging.getLogger(__name__)

FP4_QUANT_ALGOS = ("NVFP4", "FP4")


def pick_hybrid_moe_runner(args: "ServerArgs", quant_algo: str | None) -> str:
    """MoE runner for a hybrid model's experts, by architecture and checkpoint quantisation."""
    if quant_algo in FP4_QUANT_ALGOS and is_sm90_supported():
        return "marlin"
    if is_sm100_supported() and args.moe_a2a_backend == "none":
        return "flashinfer_trtllm"
    return "flashinfer_cutlass"


def apply_hybrid_mamba_defaults(args: "ServerArgs", model_arch: str, quant_algo: str | None = None) -> None:
    """Fill unset attention/MoE defaults for a hybrid model; explicit user choices are kept."""
    if args.moe_runner_backend == "auto":
        args.moe_runner_backend = pick_hybrid_moe_runner(args, quant_algo)
    if not is_blackwell_supported() or args.attention_backend is not None:
        return
    if args.speculative_algorithm is None and is_sm100_supported():
        args.attention_backend = "trtllm_mha"
        args.page_size = 64
    elif args.speculative_algorithm is not None:
        args.attention_backend = "triton"
    if args.attention_backend is not None:
        logger.info("Use %s as attention backend on Blackwell for %s", args.attention_backend, model_arch)
