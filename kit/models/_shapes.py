"""Model shapes from a Hugging Face ``config.json``: what a decode step must read.

Families: Llama / Qwen2 / Qwen3 / Mistral / GLM-4 (dense, GQA), Mixtral and Qwen2/3-MoE (MoE,
GQA), DeepSeek-V3 / Kimi-K2 / GLM-4.5 (MoE with dense first layers; MLA for DeepSeek/Kimi), and the
older ChatGLM layout (``num_layers``, ``multi_query_group_num``, ``ffn_hidden_size``). A config that
nests the language model under ``text_config`` is read from there.

Parameter counts (biases, norms and rotary tables ignored: < 0.1% of the weights):

- GQA attention per layer: ``q = h x H*d``, ``k = v = h x Hkv*d``, ``o = H*d x h``.
- MLA attention per layer: ``q_a = h x q_lora`` and ``q_b = q_lora x H*(d_nope+d_rope)`` (or
  ``q = h x H*(d_nope+d_rope)`` without q_lora), ``kv_a = h x (kv_lora+d_rope)``,
  ``kv_b = kv_lora x H*(d_nope+d_v)``, ``o = H*d_v x h``.
- Gated MLP (SwiGLU): ``3 x h x I`` (gate, up, down); an expert the same with its own ``I``; Nemotron-H
  MLPs and experts are not gated (squared ReLU): ``2 x h x I``.
- Router: ``h x E``; embeddings and LM head ``V x h`` each (one when tied).
- KV cache per token and layer: GQA ``2 x Hkv x d`` elements; MLA the compressed latent
  ``kv_lora + d_rope`` (what an absorbed-MLA decode kernel reads).

Hybrids (Nemotron-H, Granite-4 hybrid, Bamba, Falcon-H1, Jamba, Qwen3-Next): each layer has a kind
(``layer_kinds``, ``"<mixer>+<ffn>"``), attention weights and the KV cache count on attention layers
only, and the state-space / linear-attention mixer (``mixer``) has its own weights and a per-sequence
state that does not grow with context (``_hybrid.py`` has the formulas). A state-space config the kit
does not model raises a :class:`ModelError` naming its architecture.
"""
from __future__ import annotations

import html
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kit.errors import ModelError
from kit.models._hybrid import Mixer, hybrid_layout, is_hybrid

__all__ = ["ModelShape", "model_shape"]


@dataclass(frozen=True)
class ModelShape:
    """The shape of a decoder-only model, as far as decode bytes and FLOPs need it."""

    name: str
    family: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int                  # dense MLP width (dense layers)
    tied_embeddings: bool = False
    attention: str = "gqa"             # "gqa" or "mla"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    experts: int = 0                   # routed experts per MoE layer
    experts_per_token: int = 0
    expert_intermediate: int = 0
    shared_intermediate: int = 0       # total width of the shared expert(s) per MoE layer
    moe_layers: int = 0
    weight_format: str = "bf16"        # from quantization_config / torch_dtype
    source: str = ""
    layer_kinds: tuple[str, ...] = ()  # hybrids: "<mixer>+<ffn>" per layer; empty: every layer attention
    mixer: Mixer | None = None         # hybrids: the state-space / linear-attention mixer
    attention_gate: bool = False       # gated attention (Qwen3-Next): q_proj also makes the output gate
    ssm_state_dtype: str = ""          # the config's mamba_ssm_cache_dtype, when it sets one
    mlp_matrices: int = 3              # 3: gated (SwiGLU: gate, up, down); 2: plain up/down (Nemotron-H relu^2)
    assumed: tuple[tuple[str, str], ...] = ()  # (config key, default the kit assumed) for fields left out

    def _count(self, part: int, names: tuple[str, ...]) -> int:
        return sum(1 for k in self.layer_kinds if any(n in k.split("+")[part].split(",") for n in names))

    @property
    def dense_layers(self) -> int:
        return self._count(1, ("mlp",)) if self.layer_kinds else self.layers - self.moe_layers

    @property
    def attention_layers(self) -> int:
        """Layers with (full) attention: the ones that hold a KV cache."""
        return self._count(0, ("attention",)) if self.layer_kinds else self.layers

    @property
    def ssm_layers(self) -> int:
        """Layers with a state-space or linear-attention mixer."""
        return self._count(0, ("mamba1", "mamba2", "gdn")) if self.layer_kinds else 0

    def blocks_with_output(self) -> int:
        """Row-parallel outputs per step (mixers + FFNs): the all-reduces of tensor-parallel decode."""
        if not self.layer_kinds:
            return 2 * self.layers
        return sum((k.split("+")[0] != "none") + (k.split("+")[1] != "none") for k in self.layer_kinds)

    def layers_table(self):
        """One row per layer: its kind, mixer and FFN (hybrids show which layers are attention, SSM, MoE)."""
        kinds = self.layer_kinds or tuple(("attention+" + ("moe" if i >= self.layers - self.moe_layers else "mlp"))
                                          for i in range(self.layers))
        return pd.DataFrame([{"layer": i, "kind": k, "mixer": k.split("+")[0], "ffn": k.split("+")[1]}
                             for i, k in enumerate(kinds)])

    def attention_params(self) -> int:
        """Attention weights of one layer."""
        h, H = self.hidden, self.heads
        if self.attention == "mla":
            dq = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (h * self.q_lora_rank + self.q_lora_rank * H * dq) if self.q_lora_rank else h * H * dq
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * H * (
                self.qk_nope_head_dim + self.v_head_dim)
            return q + kv + H * self.v_head_dim * h
        d = self.head_dim
        q = h * H * d * (2 if self.attention_gate else 1)
        return q + 2 * h * self.kv_heads * d + H * d * h

    def mlp_params(self) -> int:
        """Dense (gated) MLP weights of one dense layer."""
        return self.mlp_matrices * self.hidden * self.intermediate

    def expert_params(self) -> int:
        return self.mlp_matrices * self.hidden * self.expert_intermediate

    def shared_params(self) -> int:
        return self.mlp_matrices * self.hidden * self.shared_intermediate

    def router_params(self) -> int:
        return self.hidden * self.experts if self.experts else 0

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def kv_elements_per_token(self) -> int:
        """KV-cache elements one token of context holds, summed over layers."""
        per_layer = (self.kv_lora_rank + self.qk_rope_head_dim) if self.attention == "mla" else \
            2 * self.kv_heads * self.head_dim
        return per_layer * self.attention_layers

    def mixer_params(self) -> int:
        """State-space / linear-attention mixer weights of one such layer (0 without a mixer)."""
        return self.mixer.params(self.hidden) if self.mixer else 0

    def state_elements_per_sequence(self) -> int:
        """Recurrent + conv state one sequence holds, summed over mixer layers (constant in context)."""
        if not self.mixer:
            return 0
        return self.ssm_layers * (self.mixer.state_elements() + self.mixer.conv_elements())

    def total_params(self) -> int:
        moe = self.moe_layers * (self.experts * self.expert_params() + self.shared_params() + self.router_params())
        emb = self.embedding_params() * (1 if self.tied_embeddings else 2)
        return (self.attention_layers * self.attention_params() + self.ssm_layers * self.mixer_params()
                + self.dense_layers * self.mlp_params() + moe + emb)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __repr__(self) -> str:
        moe = (f", MoE {self.experts} experts top-{self.experts_per_token} x{self.expert_intermediate} in "
               f"{self.moe_layers} layers"
               + (f" + shared {self.shared_intermediate}" if self.shared_intermediate else "")
               if self.experts else "")
        att = (f"MLA kv_lora {self.kv_lora_rank}+rope {self.qk_rope_head_dim}" if self.attention == "mla" else
               f"GQA {self.heads}/{self.kv_heads} heads x {self.head_dim}")
        if self.mixer:
            att = (f"{self.attention_layers} attention layers ({att}), {self.ssm_layers} {self.mixer.describe()} "
                   f"layers")
        return (f"ModelShape({self.name}: {self.family}, hidden {self.hidden}, {self.layers} layers, {att}, "
                f"MLP {self.intermediate}{moe}, vocab {self.vocab}, {self.total_params() / 1e9:.2f}B params, "
                f"weights {self.weight_format})")

    def _repr_html_(self) -> str:
        return f"<code>{html.escape(repr(self))}</code>"


def _weight_format(cfg: dict) -> str:
    q = cfg.get("quantization_config") or {}
    method = str(q.get("quant_method", "")).lower()
    algo = str(q.get("quant_algo", "")).upper()
    if "NVFP4" in algo or method == "nvfp4":
        return "nvfp4"
    if method == "mxfp4" or "MXFP4" in algo:
        return "mxfp4"
    if method == "fp8" or algo == "FP8" or "fp8" in str(q.get("fmt", "")).lower() or \
            str(q.get("fmt", "")).lower() in ("e4m3", "e5m2"):
        return "fp8"
    if method in ("awq", "gptq", "marlin", "bitsandbytes") or q.get("bits") == 4 or q.get("w_bit") == 4:
        return "int4"
    if method == "compressed-tensors":
        for g in (q.get("config_groups") or {}).values():
            w = (g or {}).get("weights") or {}
            bits, typ = w.get("num_bits"), str(w.get("type", ""))
            if bits == 8 and typ == "float":
                return "fp8"
            if bits == 4 and typ == "float":
                return "nvfp4"
            if bits == 4:
                return "int4"
    dt = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    if "bfloat16" in dt:
        return "bf16"
    if "float16" in dt:
        return "fp16"
    return "fp32" if "float32" in dt else "bf16"


def _req(cfg: dict, src: str, *keys: str) -> int:
    for k in keys:
        if cfg.get(k) is not None:
            return int(cfg[k])
    raise ModelError(f"{src}: config has none of {', '.join(keys)}")


def _from_dict(cfg: dict, src: str, name: str | None) -> ModelShape:
    if "text_config" in cfg and "hidden_size" not in cfg:
        cfg = {**cfg["text_config"], "quantization_config": cfg.get("quantization_config"),
               "torch_dtype": cfg.get("torch_dtype")}
    mt = str(cfg.get("model_type", "")).lower()
    arch = " ".join(cfg.get("architectures") or [])
    name = name or cfg.get("_name_or_path") or mt or "model"
    hidden = _req(cfg, src, "hidden_size", "n_embd", "d_model")
    if mt == "nemotron_h" and cfg.get("num_hidden_layers") is None:   # transformers 5 keeps only the pattern
        cfg = {**cfg, "num_hidden_layers": len(cfg.get("hybrid_override_pattern") or cfg.get("layers_block_type") or [])
               or None}
    layers = _req(cfg, src, "num_hidden_layers", "num_layers", "n_layer")
    heads = _req(cfg, src, "num_attention_heads", "n_head")
    if is_hybrid(cfg):
        return _hybrid_shape(cfg, src, name, hidden, layers, heads)
    if mt == "chatglm" or "ChatGLM" in arch:
        kv = int(cfg.get("multi_query_group_num") or heads) if cfg.get("multi_query_attention") else heads
        hd = int(cfg.get("kv_channels") or hidden // heads)
        return ModelShape(name, "chatglm", hidden, layers, heads, kv, hd,
                          _req(cfg, src, "padded_vocab_size", "vocab_size"), _req(cfg, src, "ffn_hidden_size"),
                          bool(cfg.get("tie_word_embeddings", False)), weight_format=_weight_format(cfg), source=src)
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    vocab = _req(cfg, src, "vocab_size")
    inter = int(cfg.get("intermediate_size") or 0)
    tied = bool(cfg.get("tie_word_embeddings", False))
    fmt = _weight_format(cfg)
    kw: dict[str, Any] = {}
    if cfg.get("kv_lora_rank"):
        kw.update(attention="mla", q_lora_rank=int(cfg.get("q_lora_rank") or 0), kv_lora_rank=int(cfg["kv_lora_rank"]),
                  qk_nope_head_dim=int(cfg["qk_nope_head_dim"]), qk_rope_head_dim=int(cfg["qk_rope_head_dim"]),
                  v_head_dim=int(cfg["v_head_dim"]))
        head_dim = int(cfg["qk_nope_head_dim"]) + int(cfg["qk_rope_head_dim"])
        kv_heads = heads
    experts = int(cfg.get("n_routed_experts") or cfg.get("num_local_experts") or cfg.get("num_experts") or 0)
    family = "dense"
    if experts:
        topk = _req(cfg, src, "num_experts_per_tok", "moe_topk", "top_k")
        if cfg.get("n_routed_experts"):                       # DeepSeek-V3 / Kimi-K2 / GLM-4.5
            family = "deepseek-moe" if kw.get("attention") == "mla" else "glm-moe"
            e_inter = _req(cfg, src, "moe_intermediate_size")
            shared = int(cfg.get("n_shared_experts") or 0) * e_inter
            first_dense = int(cfg.get("first_k_dense_replace") or 0)
            freq = int(cfg.get("moe_layer_freq") or 1)
            moe_layers = sum(1 for i in range(layers) if i >= first_dense and i % freq == 0)
        elif cfg.get("num_local_experts"):                    # Mixtral: every layer MoE, I is the expert width
            family = "mixtral"
            e_inter, shared, moe_layers = inter, 0, layers
        else:                                                 # Qwen2-MoE / Qwen3-MoE
            family = "qwen-moe"
            e_inter = _req(cfg, src, "moe_intermediate_size")
            shared = int(cfg.get("shared_expert_intermediate_size") or 0)
            step = int(cfg.get("decoder_sparse_step") or 1)
            only = set(cfg.get("mlp_only_layers") or [])
            moe_layers = sum(1 for i in range(layers) if i not in only and (i + 1) % step == 0)
        kw.update(experts=experts, experts_per_token=topk, expert_intermediate=e_inter, shared_intermediate=shared,
                  moe_layers=moe_layers)
    elif mt:
        family = mt
    if not inter and (not experts or kw.get("moe_layers", 0) < layers):
        raise ModelError(f"{src}: config has no intermediate_size for its dense MLP layers")
    return ModelShape(name, family, hidden, layers, heads, kv_heads, head_dim, vocab, inter, tied,
                      weight_format=fmt, source=src, **kw)


def _hybrid_moe(mt: str, cfg: dict, inter: int) -> tuple[int, int, int, int, int]:
    """(experts, top-k, expert width, shared width, dense MLP width) of a hybrid family."""
    g = cfg.get
    if mt == "nemotron_h":
        e = int(g("n_routed_experts") or 0)
        ei = int(g("moe_intermediate_size") or 0)
        sh = int(g("n_shared_experts") or 0) * int(g("moe_shared_expert_intermediate_size") or ei)
        return e, int(g("num_experts_per_tok") or 0), ei, sh, inter
    if mt == "granitemoehybrid":      # a shared MLP in every layer, plus routed experts when configured
        e, sh = int(g("num_local_experts") or 0), int(g("shared_intermediate_size") or inter)
        return e, int(g("num_experts_per_tok") or 0), inter, sh if e else 0, sh
    if mt == "jamba":
        return int(g("num_experts") or 0), int(g("num_experts_per_tok") or 0), inter, 0, inter
    if mt == "qwen3_next":
        return (int(g("num_experts") or 0), int(g("num_experts_per_tok") or 0), int(g("moe_intermediate_size") or 0),
                int(g("shared_expert_intermediate_size") or 0), inter)
    return 0, 0, 0, 0, inter


def _hybrid_shape(cfg: dict, src: str, name: str, hidden: int, layers: int, heads: int) -> ModelShape:
    mt = str(cfg.get("model_type", "")).lower()
    inter = int(cfg.get("intermediate_size") or 0)
    experts, topk, e_inter, shared, dense_inter = _hybrid_moe(mt, cfg, inter)
    kinds, mixer, assumed = hybrid_layout(cfg, src, layers, hidden, moe=experts > 0)
    moe_layers = sum(1 for k in kinds if k.endswith("+moe"))
    if experts and not moe_layers:
        assumed["note"] = f"{experts} routed experts configured but no layer of the pattern is MoE: not counted"
    if experts and moe_layers and not (topk and e_inter):
        raise ModelError(f"{src}: {mt} MoE layers need num_experts_per_tok and the expert width")
    if any(k.endswith("+mlp") for k in kinds) and not dense_inter:
        raise ModelError(f"{src}: {mt} config has no intermediate_size for its MLP layers")
    st = str(cfg.get("mamba_ssm_cache_dtype") or "")
    st = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(
        st, st if st in ("fp32", "bf16", "fp16") else "")
    return ModelShape(name, mt, hidden, layers, heads, int(cfg.get("num_key_value_heads") or heads),
                      int(cfg.get("head_dim") or hidden // heads), _req(cfg, src, "vocab_size"), dense_inter,
                      bool(cfg.get("tie_word_embeddings", False)), experts=experts if moe_layers else 0,
                      experts_per_token=topk if moe_layers else 0, expert_intermediate=e_inter if moe_layers else 0,
                      shared_intermediate=shared if moe_layers else 0, moe_layers=moe_layers,
                      weight_format=_weight_format(cfg), source=src, layer_kinds=tuple(kinds), mixer=mixer,
                      attention_gate=mt == "qwen3_next", ssm_state_dtype=st,
                      mlp_matrices=2 if mt == "nemotron_h" else 3,
                      assumed=tuple((k, str(v)) for k, v in assumed.items()))


def model_shape(config: Any, *, host=None, name: str | None = None, source: str | None = None) -> ModelShape:
    """A :class:`ModelShape` from a config dict, a ``config.json`` path (or its directory), or that
    path on ``host`` (a :class:`kit.remote.Host`: read with ``host.read_text``). ``source``: where a
    dict came from (shown as the shape's provenance)."""
    if isinstance(config, ModelShape):
        return config
    if isinstance(config, dict):
        return _from_dict(config, source or "a config dict", name)
    path = str(config)
    if host is not None:
        text = None
        where = f"{getattr(host, 'name', host)}:{path}"
        for p in (path, path.rstrip("/") + "/config.json"):
            try:
                text = host.read_text(p)
                where = f"{getattr(host, 'name', host)}:{p}"
                break
            except Exception:  # noqa: BLE001 - a directory, or absent: try the next candidate
                continue
        if text is None:
            raise ModelError(f"{where}: cannot read config.json on the host")
    else:
        p = Path(path)
        if p.is_dir():
            p = p / "config.json"
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelError(f"{p}: cannot read config.json ({exc.strerror or exc})") from None
        where = os.fspath(p)
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(cfg, dict):
        raise ModelError(f"{where}: config.json is not a JSON object")
    return _from_dict(cfg, where, name)
