"""Issue 28: the kernel-name rules know the state-space / linear-attention kernels of the engines.

The names are collected from the real SGLang and vLLM sources as published on PyPI (downloaded by the
same helper as tests/source/test_source_real_engines.py, into the git-ignored .kit-cache/engines/):
every Triton kernel the Mamba / flash-linear-attention / lightning-attention code of the engine
launches (``name[grid](...)`` of a ``@triton.jit`` function), and the engine's custom SSM ops. A
kernel whose name says it is a norm (the gated RMSNorm and l2norm of the mixers) may be ``norm``;
every other must be ``ssm``. Skips, saying why, when the package registry cannot be reached.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kit.profile.attribution._attribution import _FrameInfo
from kit.profile.attribution._categories import categorise, default_rules
from tests.source.test_source_real_engines import engine

SOURCES = {
    ("sglang", "0.5.9"): ["sglang/srt/layers/attention/mamba", "sglang/srt/layers/attention/fla",
                          "sglang/srt/layers/attention/linear",
                          "sglang/srt/layers/attention/hybrid_linear_attn_backend.py"],
    ("vllm", "0.11.0"): ["vllm/model_executor/layers/mamba", "vllm/model_executor/layers/fla",
                         "vllm/model_executor/layers/lightning_attn.py", "vllm/model_executor/models/qwen3_next.py"],
}
_JIT = re.compile(r"@triton\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)")


def _files(tree: Path, parts: list[str]) -> list[Path]:
    out = []
    for p in parts:
        q = tree / p
        out += sorted(q.rglob("*.py")) if q.is_dir() else [q] if q.is_file() else []
    return out


def launched_kernels(files: list[Path]) -> set[str]:
    """Triton kernels defined in ``files`` and launched there with ``kernel[grid](...)``."""
    text = "\n".join(f.read_text(encoding="utf-8", errors="replace") for f in files)
    jit = set(_JIT.findall(text))
    return {n for n in jit if re.search(rf"\b{n}\s*\[[^\]]*\]\s*\(", text)}


@pytest.mark.parametrize("name,version", list(SOURCES))
def test_engine_ssm_kernels_are_ssm(name, version):
    tree = engine(name, version)
    files = _files(tree, SOURCES[(name, version)])
    assert files, f"{name} {version}: none of {SOURCES[(name, version)]} found (moved?)"
    kernels = launched_kernels(files)
    assert len(kernels) >= 10, kernels     # the collector found the kernels, not nothing
    cats = categorise(sorted(kernels), default_rules())
    bad = {k: c for k, c in cats.items() if c != "ssm" and not (c == "norm" and "norm" in k)}
    assert not bad, bad


def test_vllm_custom_ssm_ops_are_ssm():
    tree = engine("vllm", "0.11.0")
    text = (tree / "vllm" / "_custom_ops.py").read_text(encoding="utf-8")
    ops = set(re.findall(r"torch\.ops\._C\.(\w*(?:conv1d|selective|ssm|mamba)\w*)", text))
    assert ops, "no SSM custom op found in vllm/_custom_ops.py"
    rules = [r for r in default_rules() if "op" in r.on]
    for op in ops:
        assert _FrameInfo(f"_C::{op}", "op", rules).cat == "ssm", op
