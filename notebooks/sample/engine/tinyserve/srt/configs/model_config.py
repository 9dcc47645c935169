"""Read just enough of a checkpoint's ``config.json`` to choose defaults (stand-in)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

# Architectures whose attention is multi-head latent attention (MLA).
MLA_ARCHITECTURES = frozenset({"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "KimiK2ForCausalLM"})
# Hybrid attention + state-space (mamba) architectures.
HYBRID_MAMBA_ARCHITECTURES = frozenset({"NemotronHForCausalLM", "FalconH1ForCausalLM", "Qwen3NextForCausalLM"})


@dataclass
class ModelInfo:
    """Architecture facts the argument handling looks at."""

    architectures: List[str] = field(default_factory=list)
    num_attention_heads: int = 0
    num_key_value_heads: int = 0
    quant_method: Optional[str] = None
    quant_algo: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def arch(self) -> str:
        return self.architectures[0] if self.architectures else "unknown"

    @property
    def use_mla(self) -> bool:
        return self.arch in MLA_ARCHITECTURES

    @property
    def is_hybrid_mamba(self) -> bool:
        return self.arch in HYBRID_MAMBA_ARCHITECTURES


def read_model_info(model_path: Optional[str]) -> ModelInfo:
    """Parse ``<model_path>/config.json``; a missing file gives an empty :class:`ModelInfo`."""
    if not model_path:
        return ModelInfo()
    config_file = os.path.join(model_path, "config.json")
    if not os.path.isfile(config_file):
        return ModelInfo()
    with open(config_file, encoding="utf-8") as fh:
        raw = json.load(fh)
    quant = raw.get("quantization_config") or {}
    return ModelInfo(
        architectures=list(raw.get("architectures") or []),
        num_attention_heads=int(raw.get("num_attention_heads") or 0),
        num_key_value_heads=int(raw.get("num_key_value_heads") or raw.get("num_attention_heads") or 0),
        quant_method=quant.get("quant_method"),
        quant_algo=quant.get("quant_algo"),
        raw=raw,
    )
