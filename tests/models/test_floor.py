"""kit.models.decode_floor / model_shape / gpu_spec: bytes per decode step against hand calculations.

The hand calculations are written out below from the published config.json fields of each model
(config dicts written here, shaped like the real checkpoints); no figure is taken from the code.
"""
from __future__ import annotations

import json

import pytest

from kit import models as M
from kit.errors import ModelError
from tests.conftest import SAMPLE

LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False,
             "torch_dtype": "bfloat16"}
MIXTRAL_8X7B = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "intermediate_size": 14336, "num_local_experts": 8, "num_experts_per_tok": 2,
                "vocab_size": 32000, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
               "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
               "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
               "v_head_dim": 128, "intermediate_size": 18432, "moe_intermediate_size": 2048,
               "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1,
               "first_k_dense_replace": 3, "moe_layer_freq": 1, "vocab_size": 129280,
               "tie_word_embeddings": False, "torch_dtype": "bfloat16", "num_nextn_predict_layers": 1,
               "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                       "weight_block_size": [128, 128]}}


def test_llama3_8b_bytes_per_step_by_hand():
    # attention per layer: q 4096x4096 + k,v 4096x(8x128) each + o 4096x4096
    attn = 4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096            # 41,943,040
    mlp = 3 * 4096 * 14336                                         # 176,160,768
    weights = 32 * (attn + mlp) * 2                                # bf16
    lm_head = 128256 * 4096 * 2
    embed_row = 4096 * 2
    kv = 8192 * 32 * (2 * 8 * 128) * 2                             # context 8192, K and V, 8 KV heads
    total = weights + lm_head + embed_row + kv
    assert total == 16_083_066_880
    f = M.decode_floor(LLAMA3_8B, "H200", context=8192)
    assert f.bytes_per_step == pytest.approx(total, rel=1e-12)
    assert f.model.total_params() == 32 * (attn + mlp) + 2 * 128256 * 4096     # 8.03 B, as published
    assert f.memory_us == pytest.approx(total / 4.8e12 * 1e6, rel=1e-9)       # H200 4.8 TB/s
    assert f.allreduce is None and f.floor_us == pytest.approx(f.memory_us)
    assert f.bound == "memory"


def test_mixtral_8x7b_int4_bytes_by_hand():
    attn = 4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096
    expert = 3 * 4096 * 14336
    block = 32 * (attn + 2 * expert)              # batch 1: the 2 routed experts of each layer, not all 8
    int4 = 0.5 + 4 / 128                          # 4-bit + fp16 scale and zero per group of 128
    router = 32 * 4096 * 8 * 2                    # routers stay 16-bit
    lm_head = 32000 * 4096 * 2
    kv = 4096 * 32 * (2 * 8 * 128) * 2
    total = block * int4 + router + lm_head + 4096 * 2 + kv
    assert total == pytest.approx(7_503_618_048)
    f = M.decode_floor(MIXTRAL_8X7B, "H100-SXM", context=4096, weight_format="int4")
    assert f.bytes_per_step == pytest.approx(total, rel=1e-12)
    assert f.model.total_params() == pytest.approx(46.70e9, rel=1e-3)       # Mixtral 8x7B: 46.7 B
    # batch 4: expected distinct experts hit per layer under uniform routing, 8 x (1 - (6/8)^4)
    f4 = M.decode_floor(MIXTRAL_8X7B, "H100-SXM", context=4096, batch=4)
    routed = f4.parts.set_index("part").loc["routed experts", "params"]
    assert routed == pytest.approx(32 * 8 * (1 - 0.75 ** 4) * expert)


def test_deepseek_v3_mla_moe_fp8_bytes_by_hand():
    h = 7168
    attn = (h * 1536 + 1536 * 128 * (128 + 64)       # q_a, q_b (q_lora 1536)
            + h * (512 + 64) + 512 * 128 * (128 + 128)  # kv_a (latent + rope key), kv_b
            + 128 * 128 * h)                         # o
    assert attn == 187_105_280
    dense = 3 * 3 * h * 18432                        # first 3 layers dense
    expert = 3 * h * 2048
    moe_layers = 61 - 3
    routed = moe_layers * 8 * expert                 # top-8 of 256 routed experts
    shared = moe_layers * 1 * expert
    fp8 = 1 + 4 / (128 * 128)                        # e4m3 + fp32 scale per 128x128 block
    block = (61 * attn + dense + routed + shared) * fp8
    router = moe_layers * h * 256 * 2
    lm_head = 129280 * h * 2
    kv = 4096 * 61 * (512 + 64) * 2                  # MLA: compressed latent + rope key per token and layer
    total = block + router + lm_head + h * 2 + kv
    assert total == pytest.approx(37_954_244_272)
    f = M.decode_floor(DEEPSEEK_V3, "H200", context=4096)
    assert f.weight_format == "fp8"                  # taken from quantization_config
    assert f.bytes_per_step == pytest.approx(total, rel=1e-12)
    assert f.model.total_params() == pytest.approx(671e9, rel=2e-3)      # 671 B main-model weights
    # TP 8: weights split 8 ways, the MLA latent cache replicated on every rank, all-reduce floor added
    f8 = M.decode_floor(DEEPSEEK_V3, "H200", context=4096, tp=8, measured_step_ms=20.0, measured_source="a test")
    per_gpu = (block + lm_head) / 8 + router + h * 2 + kv
    assert f8.bytes_per_gpu == pytest.approx(per_gpu, rel=1e-12)
    ar = M.allreduce_cost(tp=8, hidden_size=h, layers=61, link="nvlink_h200")
    assert f8.allreduce_us == pytest.approx(ar.per_step_us)
    assert f8.floor_us == pytest.approx(max(f8.memory_us, f8.compute_us) + ar.per_step_us)
    assert f8.efficiency == pytest.approx(f8.floor_us / 20_000.0)
    assert f8.headroom_ms == pytest.approx(20.0 - f8.floor_ms)
    assert "a test" in repr(f8) and "nvlink_h200" in f8.inputs["link"]


def test_model_shape_families_and_sources(tmp_path):
    from kit.remote import LocalHost

    qwen3_moe = {"model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
                 "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144, "moe_intermediate_size": 768,
                 "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
                 "vocab_size": 151936}
    s = M.model_shape(qwen3_moe)
    assert (s.family, s.moe_layers, s.experts_per_token, s.head_dim) == ("qwen-moe", 48, 8, 128)
    assert s.total_params() == pytest.approx(30.5e9, rel=0.02)        # Qwen3-30B-A3B
    glm45 = {"model_type": "glm4_moe", "hidden_size": 5120, "num_hidden_layers": 92, "num_attention_heads": 96,
             "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288, "moe_intermediate_size": 1536,
             "n_routed_experts": 160, "num_experts_per_tok": 8, "n_shared_experts": 1, "first_k_dense_replace": 3,
             "vocab_size": 151552}
    g = M.model_shape(glm45)
    assert (g.family, g.attention, g.moe_layers) == ("glm-moe", "gqa", 89)
    assert g.total_params() == pytest.approx(355e9, rel=0.03)           # GLM-4.5: 355 B total
    chatglm = {"model_type": "chatglm", "hidden_size": 4096, "num_layers": 40, "num_attention_heads": 32,
               "multi_query_attention": True, "multi_query_group_num": 2, "kv_channels": 128,
               "ffn_hidden_size": 13696, "padded_vocab_size": 151552}
    c = M.model_shape(chatglm)
    assert (c.kv_heads, c.intermediate, c.layers) == (2, 13696, 40)
    kimi = {**DEEPSEEK_V3, "model_type": "kimi_k2", "n_routed_experts": 384, "num_attention_heads": 64,
            "first_k_dense_replace": 1, "vocab_size": 163840}
    k = M.model_shape(kimi)
    assert k.attention == "mla" and k.total_params() == pytest.approx(1.03e12, rel=0.03)   # Kimi-K2: 1 T
    # from a file, a directory, and the same path through the public Host API
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B))
    for src in (M.model_shape(tmp_path / "config.json"), M.model_shape(tmp_path),
                M.model_shape(str(tmp_path), host=LocalHost())):
        assert src.total_params() == M.model_shape(LLAMA3_8B).total_params()
    assert "local:" in M.model_shape(str(tmp_path), host=LocalHost()).source


def test_bad_inputs_say_what_is_wrong(tmp_path):
    with pytest.raises(ModelError, match="cannot read config.json"):
        M.model_shape(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        M.model_shape(tmp_path / "bad.json")
    with pytest.raises(ModelError, match="none of hidden_size"):
        M.model_shape({"model_type": "x"})
    with pytest.raises(ModelError, match="no GPU spec matches"):
        M.gpu_spec("Voodoo 5")
    with pytest.raises(ModelError, match="no all-reduce link preset"):
        M.decode_floor(LLAMA3_8B, "B200", tp=8)
    with pytest.raises(ModelError, match="unknown weight format"):
        M.decode_floor(LLAMA3_8B, "H200", weight_format="int3")


def test_gpu_table_rows_have_sources_and_match_smi_names(tmp_path, monkeypatch):
    specs = M.gpu_specs()
    for key in ("H100-SXM", "H200", "B200", "RTX-PRO-6000", "L40S", "A100-80GB", "RTX-4090", "MI300X"):
        assert key in specs and specs[key].source and specs[key].mem_bw_gbps > 0 and specs[key].bf16_tflops > 0
    for smi, key in (("NVIDIA H200", "H200"), ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA H100 PCIe", "H100-PCIe"),
                     ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000"), ("NVIDIA L40S", "L40S"),
                     ("NVIDIA A100-SXM4-80GB", "A100-80GB"), ("NVIDIA GeForce RTX 4090", "RTX-4090"),
                     ("AMD Instinct MI300X", "MI300X"), ("NVIDIA B200", "B200")):
        assert M.gpu_spec(smi).key == key, smi
    # user extension: a new row, and an override of a shipped one
    extra = tmp_path / "gpus.toml"
    extra.write_text('[[gpu]]\nkey = "H200"\nname = "H200 measured"\nmatch = "H200"\nmemory_gb = 141\n'
                     'mem_bw_gbps = 4100\nbf16_tflops = 989\nsource = "our copy benchmark"\n')
    assert M.gpu_spec("H200", extra=extra).mem_bw_gbps == 4100
    monkeypatch.setenv("KIT_GPUS", str(extra))
    assert M.gpu_spec("NVIDIA H200").source == "our copy benchmark"


def test_gpu_from_the_fingerprint_of_the_recording_host():
    """The sample session's env/ holds the nvidia-smi capture of the H200 the traces came from."""
    from kit.env import Fingerprint, parse_gpu_query

    gpus = parse_gpu_query((SAMPLE / "env" / "nvidia-smi-query-gpu.csv").read_text())
    fp = Fingerprint(host="h200", gpus=gpus)
    f = M.decode_floor(LLAMA3_8B, fp, context=8192)
    assert f.gpu.key == "H200" and "fingerprint of h200" in f.inputs["gpu"]


def test_gpu_from_a_connected_host_without_gpus_says_so():
    """This machine has no nvidia-smi: the host path runs kit.env.fingerprint and says what is missing."""
    from kit.remote import LocalHost

    with pytest.raises(ModelError, match="local: no GPU name in the fingerprint"):
        M.decode_floor(LLAMA3_8B, host=LocalHost())
