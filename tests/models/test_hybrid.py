"""Hybrid (Mamba / gated-DeltaNet + attention + MoE) shapes and their decode floor.

Truth: the weights of real ``transformers`` models built from the same configs, counted by
``tools/count_hf_params.py`` into ``tests/data/models/hf_param_counts.json`` (every parameter of two or
more dimensions: the kit's formulas leave out biases, norms and per-head scalars)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import kit.models as M
from kit.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]
COUNTS = json.loads((ROOT / "tests/data/models/hf_param_counts.json").read_text())["counts"]
SAMPLE = ROOT / "notebooks/sample/model/config.json"


def _qwen3_next_80b() -> dict:
    src = (ROOT / "tools/count_hf_params.py").read_text()
    node = next(n for n in ast.parse(src).body if isinstance(n, ast.Assign) and n.targets[0].id == "QWEN3_NEXT_80B")
    return ast.literal_eval(node.value)


def _config(name: str) -> dict:
    if name.startswith("hf_"):
        return json.loads((ROOT / "tests/data/traces" / name / "measured.json").read_text())["config"]
    return json.loads(SAMPLE.read_text()) if name == "sample_nemotronh" else _qwen3_next_80b()


@pytest.mark.parametrize("name", sorted(k for k, v in COUNTS.items() if "params_2d" in v and k != "hf_zamba2_stack"))
def test_total_params_match_the_real_transformers_model(name):
    shape = M.model_shape(_config(name))
    truth = COUNTS[name]["params_2d"]
    assert abs(shape.total_params() - truth) / truth < 1e-3, (name, shape.total_params(), truth)


def test_unsupported_hybrid_names_its_architecture():
    with pytest.raises(ModelError) as e:
        M.model_shape(_config("hf_zamba2_stack"), source="zamba2 config")
    msg = str(e.value)
    assert "zamba2" in msg and "does not model" in msg and "nemotron_h" in msg
    with pytest.raises(ModelError, match="Lfm2ForCausalLM"):
        M.model_shape({"architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "hidden_size": 64,
                       "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 8,
                       "layer_types": ["conv", "full_attention"]})


def test_sample_nemotronh_layers_and_floor_term_by_term():
    s = M.model_shape(SAMPLE)
    kinds = s.layers_table()["mixer"].value_counts().to_dict()
    assert kinds == {"mamba2": 23, "none": 23, "attention": 6}
    assert (s.attention_layers, s.ssm_layers, s.moe_layers, s.dense_layers) == (6, 23, 23, 0)
    f = M.decode_floor(s, "H200", batch=1, context=4096)
    parts = f.parts.set_index("part")
    assert {"SSM mixer weights", "SSM state (read+write)", "KV cache"} <= set(parts.index)
    assert parts["bytes"].sum() == pytest.approx(f.bytes_per_step)
    # the state is read and written once per step: 23 layers x (SSM 128x64x128 + conv (8192+2x8x128)x3), fp32
    state = 23 * (128 * 64 * 128 + (8192 + 2 * 8 * 128) * 3)
    assert parts.loc["SSM state (read+write)", "bytes"] == pytest.approx(2 * state * 4.0)
    assert "fp32" in f.inputs["SSM state dtype"]
    # KV only on the 6 attention layers: 2 x 8 KV heads x 128 x 6 layers x 4096 tokens x 2 bytes
    assert parts.loc["KV cache", "bytes"] == pytest.approx(2 * 8 * 128 * 6 * 4096 * 2)
    longer = M.decode_floor(s, "H200", batch=1, context=65536).parts.set_index("part")
    assert longer.loc["SSM state (read+write)", "bytes"] == parts.loc["SSM state (read+write)", "bytes"]
    assert longer.loc["KV cache", "bytes"] == pytest.approx(16 * parts.loc["KV cache", "bytes"])
    assert "SSM mixer weights" in repr(f) and f.floor_us > 0


def test_gated_deltanet_floor_and_allreduces():
    s = M.model_shape(_qwen3_next_80b(), name="Qwen3-Next-80B-A3B")
    assert (s.attention_layers, s.ssm_layers, s.moe_layers) == (12, 36, 48)
    assert s.mixer.kind == "gdn"
    # recurrent state 32 value heads x 128 x 128 and conv (q, k: 16x128 each, v: 32x128) x (4-1) per layer
    assert s.state_elements_per_sequence() == 36 * (32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 3)
    f = M.decode_floor(s, "H200", tp=4, context=8192)
    assert f.allreduce.calls_per_step == 96 and "96 per step" in f.inputs["all-reduces"]
    assert M.decode_floor(s, "H200", tp=4, allreduces_per_layer=1).allreduce.calls_per_step == 48
    dense = M.model_shape(_config("hf_llama_stack"))
    assert M.decode_floor(dense, "H200", tp=2, link="nvlink_h200").allreduce.calls_per_step == 2 * dense.layers


def test_defaults_assumed_are_listed():
    cfg = {k: v for k, v in json.loads(SAMPLE.read_text()).items()
           if k not in ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel")}
    s = M.model_shape(cfg)
    assumed = dict(s.assumed)
    assert assumed["mamba_num_heads"] == "128" and assumed["ssm_state_size"] == "128"
    f = M.decode_floor(s, "H200")
    assert "mamba_num_heads=128" in f.inputs["defaults assumed"]


def test_pattern_and_layer_count_disagree():
    cfg = json.loads(SAMPLE.read_text())
    cfg["num_hidden_layers"] = 60
    with pytest.raises(ModelError, match="52 layers, num_hidden_layers says 60"):
        M.model_shape(cfg)
    cfg["hybrid_override_pattern"] = "MX" * 30
    with pytest.raises(ModelError, match="unknown layer letters"):
        M.model_shape(cfg)
