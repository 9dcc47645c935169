"""Hybrid and linear-attention layers: which kind each layer is, and what its mixer weighs and keeps.

A hybrid decoder mixes attention layers with state-space (Mamba-1, Mamba-2) or linear-attention
(gated DeltaNet) mixers, each followed (or not) by a dense MLP or an MoE block. Per layer the kit
keeps a kind string ``"<mixer>+<ffn>"`` (mixer: ``attention``, ``mamba1``, ``mamba2``, ``gdn``,
``none``; ffn: ``mlp``, ``moe``, ``none``), read from the config of each family:

- Nemotron-H: ``hybrid_override_pattern`` (``M`` Mamba-2, ``*`` attention, ``-`` MLP, ``E`` MoE, one
  block per layer, as transformers' ``NemotronHConfig`` maps it) or ``layers_block_type``;
- Granite-4 hybrid (``granitemoehybrid``), Bamba, Falcon-H1, Jamba: ``layer_types`` /
  ``attn_layer_indices`` / every layer both / ``attn_layer_period``+``expert_layer_period``;
- Qwen3-Next (gated DeltaNet): ``layer_types`` or ``full_attention_interval``.

Mixer weights (per layer; ``inner`` = heads x head_dim, ``bc`` = 2 x groups x state):

- Mamba-2: in_proj ``h x (2 inner + bc + heads)`` (z, x, B, C, dt), conv1d ``(inner + bc) x K``,
  out_proj ``inner x h``; state per sequence ``heads x head_dim x state`` + conv ``(inner + bc) x (K-1)``.
- gated DeltaNet: the same with v = value heads x value dim as ``inner``, q/k = key heads x key dim
  as ``bc / 2`` each, two gates (beta, alpha) per value head; state ``v_heads x k_dim x v_dim``.
- Mamba-1: in_proj ``h x 2 inner``, conv ``inner x K``, x_proj ``inner x (dt_rank + 2 state)``,
  dt_proj ``dt_rank x inner``, A ``inner x state``, out_proj ``inner x h``; state ``inner x state``.

A decode step reads and writes each sequence's recurrent and conv state once per mixer layer, whatever
the context length: the SSM analogue of the KV cache, constant in context. Fields a config leaves
out take the defaults of the transformers config class of that family, and the shape lists each
default it assumed (``ModelShape.assumed``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kit.errors import ModelError

__all__ = ["HYBRID_TYPES", "Mixer", "hybrid_layout"]

# model_type -> what the kit reads (for the error that names what is not supported)
HYBRID_TYPES = {
    "nemotron_h": "Nemotron-H (Mamba-2 + attention + MLP/MoE)",
    "granitemoehybrid": "Granite-4 hybrid (Mamba-2 + attention + MoE)",
    "bamba": "Bamba (Mamba-2 + attention)",
    "falcon_h1": "Falcon-H1 (parallel Mamba-2 and attention in every layer)",
    "jamba": "Jamba (Mamba-1 + attention + MoE)",
    "qwen3_next": "Qwen3-Next (gated DeltaNet + gated attention + MoE)",
}
_ATTENTION = ("attention", "full_attention", "sliding_attention")
# keys that mark a config as a state-space / linear-attention hybrid
_SSM_KEYS = ("mamba", "ssm_state_size", "linear_num_value_heads", "linear_attn", "hybrid_override_pattern",
             "layers_block_type", "attn_layer_indices", "attn_layer_period", "conv_L_cache", "linear_head_dim")


@dataclass(frozen=True)
class Mixer:
    """The state-space / linear-attention mixer of a hybrid (one kind for every such layer)."""

    kind: str            # mamba1 | mamba2 | gdn
    heads: int           # Mamba-2 heads / gated-DeltaNet value heads (Mamba-1: 0)
    head_dim: int        # Mamba-2 head dim / value head dim
    state: int           # d_state / key head dim
    groups: int          # B/C groups / key heads
    conv_kernel: int
    inner: int           # heads x head_dim (Mamba-1: expand x hidden)
    dt_rank: int = 0     # Mamba-1

    def params(self, hidden: int) -> int:
        """Weights of one mixer layer (biases and norms ignored)."""
        if self.kind == "mamba1":
            return (hidden * 2 * self.inner + self.inner * self.conv_kernel
                    + self.inner * (self.dt_rank + 2 * self.state) + self.dt_rank * self.inner
                    + self.inner * self.state + self.inner * hidden)
        bc = 2 * self.groups * self.state
        gates = self.heads * (2 if self.kind == "gdn" else 1)
        return hidden * (2 * self.inner + bc + gates) + (self.inner + bc) * self.conv_kernel + self.inner * hidden

    def state_elements(self) -> int:
        """Recurrent state one sequence keeps per layer."""
        if self.kind == "mamba1":
            return self.inner * self.state
        return self.heads * self.head_dim * self.state

    def conv_elements(self) -> int:
        """Conv state one sequence keeps per layer (the last K-1 inputs of the conv1d)."""
        ch = self.inner if self.kind == "mamba1" else self.inner + 2 * self.groups * self.state
        return ch * max(self.conv_kernel - 1, 0)

    def describe(self) -> str:
        if self.kind == "mamba1":
            return f"Mamba-1 inner {self.inner}, state {self.state}, conv {self.conv_kernel}, dt_rank {self.dt_rank}"
        what = "gated DeltaNet" if self.kind == "gdn" else "Mamba-2"
        g = "key heads" if self.kind == "gdn" else "groups"
        return (f"{what} {self.heads} heads x {self.head_dim}, state {self.state}, {self.groups} {g}, "
                f"conv {self.conv_kernel}")


def is_hybrid(cfg: dict) -> bool:
    """Whether a config describes state-space or linear-attention layers."""
    if str(cfg.get("model_type", "")).lower() in HYBRID_TYPES:
        return True
    lt = cfg.get("layer_types") or []
    if any(str(t) not in _ATTENTION for t in lt):
        return True
    return any(any(k in key for k in _SSM_KEYS) for key in cfg)


def _get(cfg: dict, assumed: dict, key: str, default: Any, *alts: str) -> Any:
    for k in (key, *alts):
        if cfg.get(k) is not None:
            return cfg[k]
    assumed[key] = default
    return default


def _mamba2(cfg: dict, assumed: dict, hidden: int, d: dict) -> Mixer:
    heads = int(_get(cfg, assumed, d["heads"][0], d["heads"][1], *d["heads"][2:]))
    hd = cfg.get(d["head_dim"][0]) or next((cfg[k] for k in d["head_dim"][2:] if cfg.get(k)), None)
    if hd is None:
        expand = int(_get(cfg, assumed, d["expand"][0], d["expand"][1], *d["expand"][2:]))
        hd = expand * hidden // heads
        assumed[d["head_dim"][0]] = f"{hd} (expand x hidden / heads)"
    return Mixer("mamba2", heads, int(hd), int(_get(cfg, assumed, *d["state"])),
                 int(_get(cfg, assumed, *d["groups"])), int(_get(cfg, assumed, *d["conv"])), heads * int(hd))


# per family: config key, transformers default, alternative keys
_M2 = {
    "nemotron_h": {"heads": ("mamba_num_heads", 128), "expand": ("expand", 2, "mamba_expand"),
                   "head_dim": ("mamba_head_dim", 64), "state": ("ssm_state_size", 128),
                   "groups": ("n_groups", 8, "mamba_n_groups"), "conv": ("conv_kernel", 4, "mamba_d_conv")},
    **dict.fromkeys(("granitemoehybrid", "bamba", "falcon_h1"), {  # the same keys and defaults
        "heads": ("mamba_n_heads", 128), "expand": ("mamba_expand", 2), "head_dim": ("mamba_d_head", None),
        "state": ("mamba_d_state", 256), "groups": ("mamba_n_groups", 1), "conv": ("mamba_d_conv", 4)}),
}


def _nemotron_kinds(cfg: dict, layers: int) -> list[str]:
    pattern = cfg.get("hybrid_override_pattern")
    if pattern:
        m = {"M": "mamba2+none", "*": "attention+none", "-": "none+mlp", "E": "none+moe"}
        bad = sorted({c for c in pattern if c not in m})
        if bad:
            raise ModelError(f"hybrid_override_pattern has unknown layer letters {bad} (known: M * - E)")
        return [m[c] for c in pattern]
    types = cfg.get("layers_block_type") or cfg.get("layer_types")
    if not types:
        raise ModelError("Nemotron-H config has neither hybrid_override_pattern nor layers_block_type")
    m = {"mamba": "mamba2+none", "linear_attention": "mamba2+none", "attention": "attention+none",
         "full_attention": "attention+none", "mlp": "none+mlp", "moe": "none+moe"}
    return [m[str(t)] for t in types]


def _layout(mt: str, cfg: dict, layers: int, moe: bool, assumed: dict) -> list[str]:
    ffn = "moe" if moe else "mlp"
    if mt == "nemotron_h":
        return _nemotron_kinds(cfg, layers)
    if mt in ("granitemoehybrid", "bamba"):
        types = cfg.get("layer_types")
        if not types and cfg.get("attn_layer_indices") is not None:
            idx = set(cfg["attn_layer_indices"])
            types = ["attention" if i in idx else "mamba" for i in range(layers)]
        if not types:
            types = ["mamba"] * layers
            assumed["layer_types"] = "every layer Mamba-2 (no layer_types / attn_layer_indices)"
        return [("attention" if t in _ATTENTION else "mamba2") + "+" + ffn for t in types]
    if mt == "falcon_h1":
        return [f"attention,mamba2+{ffn}"] * layers
    if mt == "jamba":
        ap, ao = int(_get(cfg, assumed, "attn_layer_period", 8)), int(_get(cfg, assumed, "attn_layer_offset", 4))
        ep, eo = int(_get(cfg, assumed, "expert_layer_period", 2)), int(_get(cfg, assumed, "expert_layer_offset", 1))
        return [("attention" if i % ap == ao else "mamba1") + "+" + ("moe" if moe and i % ep == eo else "mlp")
                for i in range(layers)]
    if mt == "qwen3_next":
        types = cfg.get("layer_types")
        if not types:
            every = int(_get(cfg, assumed, "full_attention_interval", 4))
            types = ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)]
        step = int(cfg.get("decoder_sparse_step") or 1)
        only = set(cfg.get("mlp_only_layers") or [])
        return [("attention" if t == "full_attention" else "gdn") + "+"
                + ("moe" if moe and i not in only and (i + 1) % step == 0 else "mlp") for i, t in enumerate(types)]
    raise AssertionError(mt)


def _mixer(mt: str, cfg: dict, hidden: int, assumed: dict) -> Mixer:
    if mt in _M2:
        return _mamba2(cfg, assumed, hidden, _M2[mt])
    if mt == "jamba":
        inner = int(_get(cfg, assumed, "mamba_expand", 2)) * hidden
        dt = cfg.get("mamba_dt_rank") or "auto"
        dt_rank = -(-hidden // 16) if dt == "auto" else int(dt)
        return Mixer("mamba1", 0, 0, int(_get(cfg, assumed, "mamba_d_state", 16)), 0,
                     int(_get(cfg, assumed, "mamba_d_conv", 4)), inner, dt_rank)
    vh = int(_get(cfg, assumed, "linear_num_value_heads", 32))
    vd = int(_get(cfg, assumed, "linear_value_head_dim", 128))
    return Mixer("gdn", vh, vd, int(_get(cfg, assumed, "linear_key_head_dim", 128)),
                 int(_get(cfg, assumed, "linear_num_key_heads", 16)),
                 int(_get(cfg, assumed, "linear_conv_kernel_dim", 4)), vh * vd)


def hybrid_layout(cfg: dict, src: str, layers: int, hidden: int, moe: bool) -> tuple[list[str], Mixer, dict]:
    """(kind of each layer, the mixer, {config key: default assumed}) for a hybrid config, or a
    :class:`ModelError` that names the architecture when the kit does not model it."""
    mt = str(cfg.get("model_type", "")).lower()
    if mt not in HYBRID_TYPES:
        arch = " ".join(cfg.get("architectures") or []) or mt or "this config"
        raise ModelError(f"{src}: {arch} (model_type {mt or '?'}) has state-space or linear-attention layers "
                         f"that the kit does not model; supported hybrids: {', '.join(sorted(HYBRID_TYPES))}")
    assumed: dict[str, Any] = {}
    try:
        kinds = _layout(mt, cfg, layers, moe, assumed)
        mixer = _mixer(mt, cfg, hidden, assumed)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"{src}: {HYBRID_TYPES[mt]} config not readable: {exc}") from None
    except ModelError as exc:
        raise ModelError(f"{src}: {exc}") from None
    if len(kinds) != layers:
        raise ModelError(f"{src}: {HYBRID_TYPES[mt]}: the layer pattern has {len(kinds)} layers, "
                         f"num_hidden_layers says {layers}")
    return kinds, mixer, assumed
