"""Registry of attention backend names and what each one needs (stand-in; no kernels here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional, Tuple

from ...utils import get_device_capability, is_package_available


@dataclass(frozen=True)
class BackendSpec:
    """What an attention backend requires: a minimum capability and an importable package."""

    name: str
    min_capability: Tuple[int, int] = (8, 0)
    max_capability: Optional[Tuple[int, int]] = None
    package: Optional[str] = None
    supports_mla: bool = False
    supports_topk_gt1: bool = True


ATTENTION_BACKENDS: Dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec("triton", min_capability=(7, 0), supports_mla=True),
        BackendSpec("torch_native", min_capability=(7, 0)),
        BackendSpec("flashinfer", package="flashinfer", supports_mla=True),
        BackendSpec("fa3", min_capability=(9, 0), max_capability=(9, 9), supports_mla=True),
        BackendSpec("fa4", min_capability=(10, 0), max_capability=(10, 9), supports_topk_gt1=False),
        BackendSpec("trtllm_mha", min_capability=(10, 0), max_capability=(10, 9), supports_topk_gt1=False),
        BackendSpec("trtllm_mla", min_capability=(10, 0), max_capability=(10, 9), supports_mla=True,
                    supports_topk_gt1=False),
        BackendSpec("cutlass_mla", min_capability=(10, 0), supports_mla=True),
        BackendSpec("aiter", min_capability=(0, 0), supports_mla=True),
        BackendSpec("nsa", min_capability=(9, 0), supports_mla=True),
    )
}

MLA_CAPABLE_BACKENDS: FrozenSet[str] = frozenset(n for n, s in ATTENTION_BACKENDS.items() if s.supports_mla)


def check_attention_backend(name: str, *, use_mla: bool = False, topk: Optional[int] = None) -> Optional[str]:
    """Why ``name`` cannot run here, or None when it can (unknown device capability is not checked)."""
    spec = ATTENTION_BACKENDS.get(name)
    if spec is None:
        return f"unknown attention backend {name!r}; known: {', '.join(sorted(ATTENTION_BACKENDS))}"
    if use_mla and not spec.supports_mla:
        return f"attention backend {name!r} does not implement MLA"
    if topk is not None and topk > 1 and not spec.supports_topk_gt1:
        return f"attention backend {name!r} requires speculative topk == 1, got {topk}"
    cap = get_device_capability()
    if cap is not None:
        if cap < spec.min_capability:
            return f"attention backend {name!r} needs compute capability >= {spec.min_capability}, device is {cap}"
        if spec.max_capability is not None and cap > spec.max_capability:
            return f"attention backend {name!r} supports compute capability <= {spec.max_capability}, device is {cap}"
    if spec.package and not is_package_available(spec.package):
        return f"attention backend {name!r} needs the package {spec.package!r}"
    return None
