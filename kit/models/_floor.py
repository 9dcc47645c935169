"""The decode speed of light: the least time a decode step can take on a GPU.

A decode step must read every weight it uses once (weights are shared by the batch) and each
sequence's KV cache up to its context length; at batch sizes where decode is memory-bound, the step
cannot beat those bytes over the GPU's memory bandwidth. Per step::

    bytes = attention weights + dense MLP weights + routed experts actually hit + shared experts
            + routers + LM head (+ the embedding rows)      [each in its weight format]
          + batch x context x KV bytes per token            [MLA: the compressed latent; hybrids:
                                                             attention layers only]
          + batch x SSM state read and written             [hybrids: recurrent + conv state of every
                                                             Mamba / gated-DeltaNet layer, constant in
                                                             context]
    memory floor  = bytes per GPU / memory bandwidth        (weights split over TP ranks; GQA KV
                                                             split over KV heads, MLA KV replicated)
    compute floor = 2 x active weights x batch / peak FLOP/s (+ attention), for the weight format
    floor         = max(memory, compute) + all-reduce floor (kit.models.allreduce_cost, TP > 1)

Routed experts hit per MoE layer: ``E x (1 - (1 - k/E)^batch)`` (uniform routing; ``k`` at batch 1).
Weight formats (bytes per weight incl. scales, :data:`WEIGHT_FORMATS`) apply to the transformer
blocks' linear layers; embeddings, LM head and routers stay 16-bit, as checkpoints ship them.
Against a measured step: ``efficiency = floor / measured`` and ``headroom = measured - floor``.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from kit.errors import ModelError
from kit.models._core import AllReduceCost, LinkModel, allreduce_cost
from kit.models._core import link as _link
from kit.models._gpus import GPUSpec, gpu_spec
from kit.models._shapes import ModelShape, model_shape

__all__ = ["WEIGHT_FORMATS", "DecodeFloor", "decode_floor"]

# name -> (bytes per weight incl. scales, what the scales are)
WEIGHT_FORMATS: dict[str, tuple[float, str]] = {
    "fp32": (4.0, "32-bit"),
    "bf16": (2.0, "16-bit"),
    "fp16": (2.0, "16-bit"),
    "fp8": (1.0 + 4.0 / (128 * 128), "e4m3 + one fp32 scale per 128x128 block (DeepSeek-V3 style)"),
    "int8": (1.0 + 2.0 / 128, "int8 + fp16 scale per group of 128"),
    "int4": (0.5 + 4.0 / 128, "int4 + fp16 scale and fp16 zero per group of 128 (GPTQ/AWQ)"),
    "nvfp4": (0.5 + 1.0 / 16, "e2m1 + one e4m3 scale per 16 weights"),
    "mxfp4": (0.5 + 1.0 / 32, "e2m1 + one e8m0 scale per 32 weights"),
}
KV_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}


def _row(table: dict, key: str, what: str):
    if key not in table:
        raise ModelError(f"unknown {what} {key!r}; one of {', '.join(table)}")
    return table[key]


@dataclass(eq=False)
class DecodeFloor:
    """The floor of one decode step and where each input came from. Times in µs, bytes per step."""

    model: ModelShape
    gpu: GPUSpec
    tp: int
    batch: int
    context: int
    weight_format: str
    kv_dtype: str
    parts: pd.DataFrame              # part, params, bytes_per_param, bytes, bytes_per_gpu, time_us, note
    bytes_per_step: float
    bytes_per_gpu: float
    memory_us: float
    compute_us: float
    allreduce: AllReduceCost | None
    floor_us: float
    measured_ms: float | None = None
    inputs: dict[str, str] = field(default_factory=dict)

    @property
    def allreduce_us(self) -> float:
        return self.allreduce.per_step_us if self.allreduce is not None else 0.0

    @property
    def floor_ms(self) -> float:
        return self.floor_us / 1e3

    @property
    def bytes_per_token(self) -> float:
        """Bytes moved per generated token (a step makes ``batch`` tokens)."""
        return self.bytes_per_step / self.batch

    @property
    def bound(self) -> str:
        return "memory" if self.memory_us >= self.compute_us else "compute"

    @property
    def efficiency(self) -> float | None:
        """floor / measured: 1.0 would be the speed of light."""
        return None if not self.measured_ms else self.floor_us / (self.measured_ms * 1e3)

    @property
    def headroom_ms(self) -> float | None:
        return None if not self.measured_ms else self.measured_ms - self.floor_ms

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model.name, "gpu": self.gpu.key, "tp": self.tp, "batch": self.batch,
                "context": self.context, "weight_format": self.weight_format, "kv_dtype": self.kv_dtype,
                "bytes_per_step": self.bytes_per_step, "bytes_per_gpu": self.bytes_per_gpu,
                "bytes_per_token": self.bytes_per_token, "memory_us": self.memory_us, "compute_us": self.compute_us,
                "allreduce_us": self.allreduce_us, "floor_us": self.floor_us, "bound": self.bound,
                "measured_ms": self.measured_ms, "efficiency": self.efficiency, "headroom_ms": self.headroom_ms,
                "parts": self.parts.to_dict("records"), "inputs": dict(self.inputs)}

    def _lines(self) -> list[str]:
        out = [f"DecodeFloor({self.model.name} on {self.gpu.key} x TP{self.tp}, batch {self.batch}, context "
               f"{self.context:,}, weights {self.weight_format}, KV {self.kv_dtype})",
               f"bytes per step {self.bytes_per_step / 1e9:.3f} GB ({self.bytes_per_gpu / 1e9:.3f} GB per GPU) -> "
               f"memory {self.memory_us:,.1f} us at {self.gpu.mem_bw_gbps:,.0f} GB/s; "
               f"compute {self.compute_us:,.1f} us; "
               f"all-reduce {self.allreduce_us:,.1f} us; floor {self.floor_us:,.1f} us/step ({self.bound}-bound)"]
        if self.measured_ms:
            out.append(f"step {self.measured_ms:.3f} ms (see its source below): "
                       f"efficiency {self.efficiency:.1%} of the floor, "
                       f"headroom {self.headroom_ms:.3f} ms")
        return out

    def __repr__(self) -> str:
        lines = self._lines()
        lines.append(f"{'part':<22}{'GB/step':>10}{'GB/GPU':>9}{'us':>10}")
        for r in self.parts.itertuples():
            lines.append(f"{r.part:<22}{r.bytes / 1e9:>10.4f}{r.bytes_per_gpu / 1e9:>9.4f}{r.time_us:>10.1f}")
        lines += [f"input {k}: {v}" for k, v in self.inputs.items()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{html.escape(r.part)}</td><td style='text-align:right'>{r.bytes / 1e9:.4f}</td>"
                       f"<td style='text-align:right'>{r.bytes_per_gpu / 1e9:.4f}</td>"
                       f"<td style='text-align:right'>{r.time_us:,.1f}</td><td>{html.escape(r.note)}</td></tr>"
                       for r in self.parts.itertuples())
        src = "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in self.inputs.items())
        head = "<br>".join(html.escape(x) for x in self._lines())
        return (f"<div><b>{head}</b><table><thead><tr><th>part</th><th>GB/step</th><th>GB/GPU</th><th>us</th>"
                f"<th>note</th></tr></thead><tbody>{rows}</tbody></table><p>Inputs:</p><ul>{src}</ul></div>")


def routed_experts_hit(experts: int, k: int, batch: int) -> float:
    """Expected distinct experts a batch of tokens hits in one layer (uniform routing)."""
    if not experts:
        return 0.0
    return experts * (1.0 - (1.0 - k / experts) ** batch)


def _gpu_input(spec, fmt: str, gpu) -> str:
    """The GPU row used, its figures and where they and the GPU came from."""
    out = (f"{spec.name}: {spec.mem_bw_gbps:,.0f} GB/s, {spec.peak_tflops(fmt):g} TFLOP/s dense "
           f"({fmt}); {spec.source}" + (f"; {spec.note}" if spec.note else ""))
    if isinstance(gpu, str) or isinstance(gpu, GPUSpec):
        return out + " [GPU given by name]"
    return out + f" [GPU from the fingerprint of {getattr(gpu, 'host', getattr(gpu, 'name', gpu))}]"


def _parts_table(rows: list[tuple], spec) -> pd.DataFrame:
    """The bytes each part of the model moves per step, and the time at the GPU's bandwidth (parts of
    size 0 left out)."""
    recs = []
    for part, n, bpp, split, note in rows:
        if n == 0:
            continue
        b = n * bpp
        recs.append({"part": part, "params": float(n), "bytes_per_param": bpp, "bytes": b, "bytes_per_gpu": b / split,
                     "time_us": b / split / (spec.mem_bw_gbps * 1e3), "note": note})
    return pd.DataFrame(recs, columns=["part", "params", "bytes_per_param", "bytes", "bytes_per_gpu", "time_us",
                                       "note"])


def _step_allreduce(s: ModelShape, spec, tp: int, batch: int, link, algorithm: str,
                    allreduces_per_layer: int | None, inputs: dict):
    """The all-reduces of one decode step over TP ``tp`` (their link and count said in ``inputs``)."""
    lk = link if link is not None else (spec.link or None)
    if lk is None:
        raise ModelError(f"decode_floor: TP={tp} on {spec.key}, which has no all-reduce link preset; give link= "
                         f"(a kit.models.LINKS name or a kit.models.fit of a measured sweep)")
    lm = _link(lk)
    if allreduces_per_layer is None:
        n_ar, per = s.blocks_with_output(), 1
        inputs["all-reduces"] = (f"{n_ar} per step: one per mixer and per FFN output of the "
                                 f"{'hybrid ' if s.layer_kinds else ''}layers")
    else:
        n_ar, per = s.layers, allreduces_per_layer
    ar = allreduce_cost(tp=tp, hidden_size=s.hidden, layers=n_ar, tokens_per_step=batch,
                        allreduces_per_layer=per, link=lm, algorithm=algorithm)
    inputs["link"] = f"{lm!r}: {lm.source}"
    return ar


def decode_floor(model: Any, gpu: Any = None, *, host=None, tp: int = 1, batch: int = 1, context: int = 4096,
                 weight_format: str | None = None, kv_dtype: str = "bf16", link: str | LinkModel | None = None,
                 algorithm: str = "ring", allreduces_per_layer: int | None = None,
                 measured_step_ms: float | None = None, measured_source: str | None = None, gpus_file=None,
                 ssm_state_dtype: str | None = None) -> DecodeFloor:
    """The minimum time of one decode step of ``model`` on ``gpu`` (see the module docstring).

    ``model``: a :class:`ModelShape`, a config dict or a ``config.json`` path (read on ``host`` when
    given). ``gpu``: a key/name, a :class:`GPUSpec`, a fingerprint; None takes the GPU of ``host``
    (``kit.env.fingerprint``). ``weight_format``: None takes the config's (quantization_config /
    torch_dtype). ``link``: all-reduce link for ``tp > 1`` (default: the GPU row's preset).
    ``measured_step_ms``: a measured step time to set against the floor (say where it came from in
    ``measured_source``). ``allreduces_per_layer``: None counts the model's row-parallel outputs (2 per
    layer for dense and MoE; one per mixer and per FFN for hybrids). ``ssm_state_dtype``: the Mamba /
    DeltaNet state cache type (None: the config's ``mamba_ssm_cache_dtype``, else bf16 as engines
    default to the model dtype).
    """
    shape = model_shape(model, host=host) if not isinstance(model, ModelShape) else model
    if gpu is None:
        if host is None:
            raise ModelError("decode_floor: give gpu= (a name like 'H200') or a connected host=")
        gpu = host
    spec = gpu_spec(gpu, extra=gpus_file)
    if tp < 1 or batch < 1 or context < 0:
        raise ModelError(f"decode_floor: tp and batch must be >= 1 and context >= 0 (tp={tp}, batch={batch}, "
                         f"context={context})")
    fmt = weight_format or shape.weight_format
    wb, kvb = _row(WEIGHT_FORMATS, fmt, "weight format")[0], _row(KV_BYTES, kv_dtype, "KV dtype")
    s = shape
    hit = routed_experts_hit(s.experts, s.experts_per_token, batch)
    if s.attention == "mla":
        kv_split, kv_note = 1, "MLA latent, replicated on every TP rank"
    else:
        per_rank_heads = -(-s.kv_heads // tp)
        kv_split, kv_note = s.kv_heads / per_rank_heads, f"{per_rank_heads} of {s.kv_heads} KV heads per rank"
    st_dtype = ssm_state_dtype or s.ssm_state_dtype or "bf16"
    _row(KV_BYTES, st_dtype, "SSM state dtype")
    mx = s.mixer
    rows = [
        ("attention weights", s.attention_layers * s.attention_params(), wb, tp,
         f"{s.attention_layers} of {s.layers} layers, {s.attention.upper()}"),
        ("SSM mixer weights", s.ssm_layers * s.mixer_params(), wb, tp,
         f"{s.ssm_layers} layers, {mx.describe()}" if mx else "none"),
        ("dense MLP weights", s.dense_layers * s.mlp_params(), wb, tp, f"{s.dense_layers} dense layers x 3 x "
                                                                       f"{s.hidden} x {s.intermediate}"),
        ("routed experts", s.moe_layers * hit * s.expert_params(), wb, tp,
         f"{hit:.2f} of {s.experts} experts hit per layer x {s.moe_layers} MoE layers" if s.experts else "none"),
        ("shared experts", s.moe_layers * s.shared_params(), wb, tp, f"width {s.shared_intermediate}"),
        ("routers", s.moe_layers * s.router_params(), 2.0, 1, "16-bit, replicated"),
        ("LM head", s.embedding_params(), 2.0, tp, "16-bit, vocab-parallel"),
        ("embedding rows", batch * s.hidden, 2.0, 1, "one row per token"),
        ("KV cache", batch * context * s.kv_elements_per_token(), kvb, kv_split,
         f"{batch} x {context:,} tokens x {s.kv_elements_per_token():,} elements ({kv_note})"),
        ("SSM state (read+write)", 2 * batch * s.state_elements_per_sequence(), KV_BYTES[st_dtype], tp,
         f"{batch} x {s.state_elements_per_sequence():,} elements ({s.ssm_layers} layers x (state "
         f"{mx.state_elements():,} + conv {mx.conv_elements():,})), read and written, {st_dtype}" if mx else "none"),
    ]
    parts = _parts_table(rows, spec)
    total = float(parts["bytes"].sum())
    per_gpu = float(parts["bytes_per_gpu"].sum())
    memory_us = per_gpu / (spec.mem_bw_gbps * 1e3)
    weights = parts[~parts["part"].isin(("KV cache", "SSM state (read+write)"))]["params"].sum()
    per_head = s.kv_lora_rank * 2 + s.qk_rope_head_dim if s.attention == "mla" else s.head_dim * 2
    flops = 2.0 * weights * batch + 2.0 * batch * context * s.attention_layers * s.heads * per_head
    compute_us = flops / tp / (spec.peak_tflops(fmt) * 1e6)
    inputs = {"model": f"{s.name} from {s.source or 'given shape'}", "gpu": _gpu_input(spec, fmt, gpu)}
    inputs["weight format"] = (f"{fmt} ({WEIGHT_FORMATS[fmt][1]}), "
                               + ("given" if weight_format else "from the config"))
    if mx:
        inputs["SSM state dtype"] = st_dtype + (" (given)" if ssm_state_dtype
                                                else " (mamba_ssm_cache_dtype of the config)" if s.ssm_state_dtype
                                                else " (default: the model dtype, as engines use)")
    if s.assumed:
        inputs["defaults assumed"] = "; ".join(f"{k}={v}" for k, v in s.assumed) + \
            " (the config leaves them out; the transformers config class's defaults)"
    ar = _step_allreduce(s, spec, tp, batch, link, algorithm, allreduces_per_layer, inputs) if tp > 1 else None
    floor = max(memory_us, compute_us) + (ar.per_step_us if ar else 0.0)
    if measured_step_ms is not None:
        if measured_step_ms <= 0:
            raise ModelError(f"decode_floor: measured_step_ms must be positive, got {measured_step_ms}")
        inputs["measured step"] = measured_source or "given by the caller (source not stated)"
    return DecodeFloor(s, spec, tp, batch, context, fmt, kv_dtype, parts, total, per_gpu, memory_us, compute_us, ar,
                       floor, measured_step_ms, inputs)
