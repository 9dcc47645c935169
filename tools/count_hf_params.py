#!/usr/bin/env python3
"""Count the weights of real ``transformers`` models built from configs (on the meta device, no
memory), as the truth for ``kit.models.model_shape`` tests: ``tests/data/models/hf_param_counts.json``.

Configs: the hybrids and MoE models recorded in ``tests/data/traces/hf_*_stack/measured.json``, the
sample session's ``notebooks/sample/model/config.json`` and a Qwen3-Next-80B-A3B-shaped config (its
published ``config.json`` values). Counted: every parameter with two or more dimensions (the kit's
formulas leave out biases, norm weights and per-head scalars such as ``D`` / ``dt_bias``), by the
module kind that holds it.

Usage (needs torch and transformers)::

    python3 tools/count_hf_params.py > tests/data/models/hf_param_counts.json
"""
from __future__ import annotations

import glob
import json
import os
import sys

import torch
import transformers

QWEN3_NEXT_80B = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 2048,
                  "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                  "intermediate_size": 5120, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
                  "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
                  "full_attention_interval": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
                  "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts": 512,
                  "num_experts_per_tok": 10, "vocab_size": 151936, "torch_dtype": "bfloat16",
                  "tie_word_embeddings": False}


def count(cfg_dict: dict) -> dict:
    d = {k: v for k, v in cfg_dict.items() if not k.startswith("_") and k not in ("quantization_config",)}
    cfg = transformers.AutoConfig.for_model(d.pop("model_type"), **d)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    seen, total = set(), 0
    for p in model.parameters():
        if id(p) in seen or p.dim() < 2:
            continue
        seen.add(id(p))
        total += p.numel()
    return {"params_2d": total, "architecture": type(model).__name__,
            "tied": bool(getattr(cfg, "tie_word_embeddings", False))}


def main() -> int:
    root = os.path.join(os.path.dirname(__file__), "..")
    out = {"by": "tools/count_hf_params.py", "transformers": transformers.__version__, "torch": torch.__version__,
           "counts": {}}
    cases = {}
    for f in sorted(glob.glob(os.path.join(root, "tests/data/traces/hf_*_stack/measured.json"))):
        m = json.load(open(f))
        if "config" not in m:
            continue
        cases[os.path.basename(os.path.dirname(f))] = ("tests/data/traces/" + os.path.basename(os.path.dirname(f))
                                                       + "/measured.json config", m["config"])
    cases["sample_nemotronh"] = ("notebooks/sample/model/config.json",
                                 json.load(open(os.path.join(root, "notebooks/sample/model/config.json"))))
    cases["qwen3_next_80b"] = ("Qwen3-Next-80B-A3B published config values (in this script)", QWEN3_NEXT_80B)
    for name, (src, cfg) in cases.items():
        try:
            out["counts"][name] = {"source": src, **count(cfg)}
        except Exception as exc:  # noqa: BLE001 - one config failing is recorded, not fatal
            out["counts"][name] = {"source": src, "error": f"{type(exc).__name__}: {exc}"[:200]}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
