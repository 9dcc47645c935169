"""Analytical models an investigation checks measurements against: AllReduce cost of tensor-parallel decode,
speculative-decoding break-even, and the decode speed of light (:func:`decode_floor`: the bytes a step must move
over the GPU's memory bandwidth, plus the all-reduce floor, against a measured step).

Files:

- ``_core.py``: AllReduce cost model, link presets and fit; speculative decoding tokens, speed-up, break-even
- ``_shapes.py``: model shapes (dense, MoE, MLA, hybrids) from a config.json dict, file or host path
- ``_hybrid.py``: hybrid layouts (attention, Mamba, gated DeltaNet, MLP, MoE per layer) and the mixer's
  weights and per-sequence state
- ``_gpus.py``: the GPU spec table (``gpus.toml``, user-extendable) and lookup by name / host fingerprint
- ``_floor.py``: bytes per decode step, the memory-bandwidth and all-reduce floor, efficiency
"""
from __future__ import annotations

from kit.models._core import (
    LINKS,
    AllReduceCost,
    LinkModel,
    SpecEstimate,
    acceptance_for_length,
    allreduce_cost,
    allreduce_time_us,
    break_even,
    drafter_cost,
    expected_tokens,
    fit,
    link,
    spec_estimate,
    spec_from_summary,
    speedup,
    speedup_curves,
)
from kit.models._floor import WEIGHT_FORMATS, DecodeFloor, decode_floor
from kit.models._gpus import GPUSpec, gpu_spec, gpu_specs
from kit.models._hybrid import HYBRID_TYPES, Mixer
from kit.models._shapes import ModelShape, model_shape
from kit.util import publish

__all__ = ["AllReduceCost", "DecodeFloor", "GPUSpec", "HYBRID_TYPES", "LINKS", "LinkModel", "Mixer", "ModelShape",
           "SpecEstimate",
           "WEIGHT_FORMATS", "acceptance_for_length", "allreduce_cost", "allreduce_time_us", "break_even",
           "decode_floor", "drafter_cost", "expected_tokens", "fit", "gpu_spec", "gpu_specs", "link", "model_shape",
           "spec_estimate", "spec_from_summary", "speedup", "speedup_curves"]

publish(globals(), __all__)
