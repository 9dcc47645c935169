"""Utilities of the stand-in engine, re-exported so callers write ``from tinyserve.srt.utils import ...``."""

from .common import (
    get_cuda_version,
    get_device_capability,
    get_device_name,
    is_blackwell_supported,
    is_cuda_alike,
    is_hip,
    is_hopper_with_cuda_12_3,
    is_pcie_only,
    is_sm90_supported,
    is_sm100_supported,
    is_sm120_supported,
)
from .imports import is_package_available

__all__ = [
    "get_cuda_version",
    "get_device_capability",
    "get_device_name",
    "is_blackwell_supported",
    "is_cuda_alike",
    "is_hip",
    "is_hopper_with_cuda_12_3",
    "is_package_available",
    "is_pcie_only",
    "is_sm90_supported",
    "is_sm100_supported",
    "is_sm120_supported",
]
