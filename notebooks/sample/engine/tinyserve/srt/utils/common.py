"""Device probes of the stand-in engine: which GPU architecture is this process running on?

Every architecture predicate below reduces to :func:`get_device_capability`, which works on a
machine with no GPU and no torch: it asks torch when torch can see a CUDA device, else
``nvidia-smi``, else the environment variable ``TINYSERVE_DEVICE_CAPABILITY`` (e.g. ``"12.0"``),
and otherwise answers ``None`` (no GPU known), in which case every ``is_sm*`` predicate is False.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from typing import Optional, Tuple

logger = logging.getLogger(__name__)

CAPABILITY_ENV = "TINYSERVE_DEVICE_CAPABILITY"
CUDA_VERSION_ENV = "TINYSERVE_CUDA_VERSION"
_NVIDIA_SMI_TIMEOUT_S = 10.0

Capability = Tuple[int, int]


def _parse_version_pair(text: str) -> Optional[Capability]:
    """``"12.0"`` -> ``(12, 0)``; ``"9"`` -> ``(9, 0)``; anything else -> None."""
    text = (text or "").strip()
    if not text:
        return None
    major, _, minor = text.partition(".")
    try:
        return int(major), int(minor or 0)
    except ValueError:
        return None


def _torch_capability() -> Optional[Capability]:
    try:
        import torch  # noqa: PLC0415 - optional, and slow to import
    except Exception:  # torch missing or broken: fall through to the next probe
        return None
    try:
        if not torch.cuda.is_available():
            return None
        major, minor = torch.cuda.get_device_capability()
        return int(major), int(minor)
    except Exception as exc:  # driver mismatch and the like
        logger.debug("torch could not report a device capability: %s", exc)
        return None


def _nvidia_smi(*query: str) -> Optional[str]:
    """First line of ``nvidia-smi`` output, or None when it is missing, fails or hangs."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        proc = subprocess.run(
            [exe, *query], capture_output=True, text=True, timeout=_NVIDIA_SMI_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return proc.stdout


def _nvidia_smi_capability() -> Optional[Capability]:
    out = _nvidia_smi("--query-gpu=compute_cap", "--format=csv,noheader")
    if out is None:
        return None
    # One line per GPU; the engine assumes a homogeneous node and reads the first.
    return _parse_version_pair(out.splitlines()[0])


def get_device_capability(device_id: int = 0) -> Optional[Capability]:
    """Compute capability ``(major, minor)`` of the GPU, or None when no GPU can be found.

    Order: torch.cuda (if importable and a device is visible) -> ``nvidia-smi --query-gpu=compute_cap``
    -> ``$TINYSERVE_DEVICE_CAPABILITY`` -> None. ``device_id`` only matters for torch.
    """
    cap = _torch_capability() if device_id == 0 else None
    if cap is not None:
        return cap
    cap = _nvidia_smi_capability()
    if cap is not None:
        return cap
    return _parse_version_pair(os.environ.get(CAPABILITY_ENV, ""))


def get_device_name() -> Optional[str]:
    """Marketing name of GPU 0 as nvidia-smi prints it, or None."""
    out = _nvidia_smi("--query-gpu=name", "--format=csv,noheader")
    return out.splitlines()[0].strip() if out else None


def get_cuda_version() -> Optional[Capability]:
    """CUDA runtime version as ``(major, minor)``: torch's build, else the driver's, else the env var."""
    try:
        import torch  # noqa: PLC0415

        if torch.version.cuda:
            return _parse_version_pair(torch.version.cuda)
    except Exception:
        pass
    out = _nvidia_smi()
    if out:
        for line in out.splitlines():
            if "CUDA Version:" in line:
                return _parse_version_pair(line.split("CUDA Version:", 1)[1].split()[0])
    return _parse_version_pair(os.environ.get(CUDA_VERSION_ENV, ""))


def is_hip() -> bool:
    """ROCm builds set ``TINYSERVE_HIP=1`` in this stand-in (a real engine asks torch.version.hip)."""
    return os.environ.get("TINYSERVE_HIP", "0") == "1"


def is_cuda_alike() -> bool:
    return is_hip() or get_device_capability() is not None


def _cuda_at_least(major: int, minor: int) -> bool:
    version = get_cuda_version()
    # Unknown CUDA version: trust the capability alone rather than refusing every feature.
    return version is None or version >= (major, minor)


def is_sm90_supported() -> bool:
    """Hopper (H100/H200/H20): compute capability 9.x."""
    cap = get_device_capability()
    return cap is not None and cap[0] == 9


def is_hopper_with_cuda_12_3() -> bool:
    """Hopper with a CUDA runtime new enough for the FA3 kernels."""
    return is_sm90_supported() and _cuda_at_least(12, 3)


def is_sm100_supported() -> bool:
    """Datacenter Blackwell (B200/GB200/B300): compute capability major 10, CUDA >= 12.8.

    Note that workstation Blackwell (RTX PRO 6000, RTX 50xx) reports 12.0 and is *not* sm100.
    """
    cap = get_device_capability()
    return cap is not None and cap[0] == 10 and _cuda_at_least(12, 8)


def is_sm120_supported() -> bool:
    """Workstation/consumer Blackwell (RTX PRO 6000, RTX 50xx): compute capability major 12."""
    cap = get_device_capability()
    return cap is not None and cap[0] == 12


def is_blackwell_supported() -> bool:
    """Any Blackwell: compute capability major 10, 11 or 12."""
    cap = get_device_capability()
    return cap is not None and cap[0] in (10, 11, 12)


PCIE_ONLY_ENV = "TINYSERVE_PCIE_ONLY"


def is_pcie_only() -> bool:
    """True when the GPUs of this node are not all connected by NVLink: read from ``nvidia-smi topo -m``
    (any GPU-GPU link that is not ``NV#``), else from ``$TINYSERVE_PCIE_ONLY`` (``1``) on a machine
    without one. With one GPU or no topology at all: False."""
    out = _nvidia_smi("topo", "-m")
    if out is not None:
        links = []
        rows = [ln.split() for ln in out.splitlines() if ln.startswith("GPU")]
        for i, row in enumerate(rows):
            cells = row[1:1 + len(rows)]
            links += [c for j, c in enumerate(cells) if j != i]
        if links:
            return not all(c.startswith("NV") for c in links)
    return os.environ.get(PCIE_ONLY_ENV) == "1"
