"""The host fingerprint: what machine a measurement came from (OS, CPU, GPUs, link matrix, versions,
the NCCL_* variables of the running server), and the pure parsers it is built on.

``fingerprint(host)`` runs one shell round trip and one Python probe; a field the host cannot answer is
``None`` with the reason in ``missing``. The parsers take text, so saved outputs can be read too::

    kit.env.parse_topology(open("topo.txt").read()).summary   # '8 GPUs, PCIe-only (worst link SYS)'

Files:

- ``_fingerprint.py``: fingerprint(host) -> Fingerprint: one probe command, then the parsers
- ``_parsers.py``: nvidia-smi, topology, os-release, nvcc, NCCL version and environment parsers
- ``_host/versions_probe.py``: the program fingerprint() runs with the host's Python (package data)"""
from __future__ import annotations

from kit.env._fingerprint import GPU_FIELDS, Fingerprint, fingerprint
from kit.env._parsers import (
    Topology,
    link_rank,
    parse_cpu_model,
    parse_environ,
    parse_gpu_query,
    parse_nccl_version,
    parse_nvcc_version,
    parse_nvidia_smi_header,
    parse_os_release,
    parse_topology,
    with_units,
)
from kit.util import publish, strip_ansi

__all__ = ['Fingerprint', 'GPU_FIELDS', 'Topology', 'fingerprint', 'link_rank', 'parse_cpu_model', 'parse_environ',
           'parse_gpu_query', 'parse_nccl_version', 'parse_nvcc_version', 'parse_nvidia_smi_header',
           'parse_os_release', 'parse_topology', 'strip_ansi', 'with_units']

publish(globals(), __all__)
