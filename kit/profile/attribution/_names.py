"""Names the profile reads, in one place: kernel families, graph launches, the CPU ops that wait for the GPU.

Two runs (two engines, two versions, a graph replay and its eager reference) spell one kernel with other
template arguments, tile sizes and parameter lists: :func:`kernel_family` (compare, ranks, the audit) drops
them; :func:`canonical` (the placement's alignment) also numbers away tile sizes and SM variants.
"""
from __future__ import annotations

import re

# CPU ops that wait for the GPU (``tensor.item()``): the first is the op that does the wait
SYNC_OPS = ("aten::_local_scalar_dense", "aten::item")
# runtime calls that launch a CUDA/HIP graph (``cudaGraphLaunch``, ``hipGraphLaunch``)
GRAPH_LAUNCH = re.compile(r"GraphLaunch")

_TEMPLATE = re.compile(r"<[^<>]*>")
_PARAMS = re.compile(r"\([^()]*\)")
_NUM = re.compile(r"\d+")


def _without_templates(s: str, rounds: int) -> str:
    for _ in range(rounds):
        s, n = _TEMPLATE.subn("", s)
        if not n:
            break
    return s


def kernel_family(name: str) -> str:
    """``void ns::kernel<T, 4>(args)`` -> ``ns::kernel``: what matches across two runs."""
    s = str(name).strip().replace("(anonymous namespace)::", "")
    if s.startswith("void "):
        s = s[5:]
    s = _without_templates(s, 8)
    i = s.find("(")
    if i > 0:
        s = s[:i]
    return s.strip() or str(name)


def canonical(name: str) -> str:
    """A kernel name without template arguments, parameter lists, ``void`` and numbers: GEMM tile
    sizes, split-K and SM variants of one kernel read the same."""
    s = _PARAMS.sub("", _without_templates(name, 12)).replace("void ", "").strip()
    return _NUM.sub("#", s)
