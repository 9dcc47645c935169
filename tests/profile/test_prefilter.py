"""The Kineto reader's byte prefilter drops no evidence: its tables equal those of an unfiltered parse.

``_kineto._prefiltered`` drops most events as bytes before JSON parsing (the speed of the reader);
the exact filters run afterwards in ``_Collector.collect``; the typed decoder (msgspec) has no
byte prefilter and must give the same tables. Here every real trace is also parsed whole,
every event handed to a fresh collector, and each kept table (kernels, annotations, launches, CPU
frames, collectives) must come out identical: a byte test that missed a kept name (``rotat`` did not
match ``apply_rotary_pos_emb``) fails here.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from kit.profile.reading import _kineto
from tests.conftest import ROOT, TEST_DATA

OWN = sorted((TEST_DATA / "traces").glob("*/trace.json.gz"))
SHARED = ROOT.parent / "shared" / "data" / "traces"
SHARED_STACK = [  # real traces with python_function frames and cpu ops (with_stack)
    "tracelens/b200/eager_trace.json.gz",
    "tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz",
    "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
]


def _unfiltered(path: Path) -> dict:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = orjson.loads(data)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    col = _kineto._Collector()
    col.add_dicts(events)
    return {"kernels": col.k, "annotations": col.a, "launches": col.r, "frames": col.f, "comms": col.comm}


def _check(path: Path) -> None:
    want = _unfiltered(path)
    for decoder in _kineto.DECODERS:   # the byte prefilter (orjson path) and the typed decoder
        got = _kineto.read_kineto(path, decoder)
        for table, cols in want.items():
            for c, v in cols.items():
                assert got[table][c] == v, f"{path.name}: {table}.{c} ({decoder}) differs from the unfiltered parse"
    assert want["kernels"]["name"], f"{path.name}: no kernels (the comparison would prove nothing)"


@pytest.mark.parametrize("path", OWN, ids=[p.parent.name for p in OWN])
def test_prefilter_keeps_what_the_unfiltered_parse_keeps_own(path):
    _check(path)


@pytest.mark.parametrize("rel", SHARED_STACK)
def test_prefilter_keeps_what_the_unfiltered_parse_keeps_shared(rel):
    p = SHARED / rel
    if not p.is_file():
        pytest.skip(f"shared trace absent: ../shared/data/traces/{rel}")
    _check(p)


def test_rotary_frames_are_kept():
    """HF Llama's ``apply_rotary_pos_emb`` frame (the RoPE evidence of with_stack traces) survives the prefilter."""
    got = _kineto.read_kineto(TEST_DATA / "traces" / "hf_eager_stack" / "trace.json.gz")
    names = [n for n, k in zip(got["frames"]["name"], got["frames"]["kind"]) if k == "function"]
    assert any(n.endswith(": apply_rotary_pos_emb") for n in names)
