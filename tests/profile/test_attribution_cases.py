"""Issue 20's hard cases on real traces: world-size-1 collectives, graph replays without timing,
math SDPA, MoE routers, sampling, the undecided share and the with/without-frames self-check."""
from __future__ import annotations

import re

import pytest

from kit import profile
from tests.profile import derived_traces as D


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))


def _calls(msg: str) -> int:
    m = re.search(r"([\d,]+) (?:allreduce |collective )?call\(s\)", msg)
    assert m, msg
    return int(m.group(1).replace(",", ""))


def test_world_size_1_warnings_agree_with_each_other_and_the_trace(tmp_path):
    path = D.collectives_only(tmp_path / "ws1.json.gz", n=16)
    p = profile.load(path, cache=False)
    s = p.summary()
    no_kernel = [w for w in s.warnings if "no GPU kernels" in w]
    coll = [w for w in s.warnings if "launched no GPU kernel" in w]
    assert len(no_kernel) == 1 and len(coll) == 1, s.warnings
    assert _calls(no_kernel[0]) == _calls(coll[0]) == 16
    assert "CUPTI" not in no_kernel[0] and "none was launched" in no_kernel[0]
    assert "size 1" in no_kernel[0] and "size 1" in coll[0]


def test_world_size_1_full_trace_counts_each_call_once():
    from tests.conftest import TEST_DATA

    p = profile.load(TEST_DATA / "traces" / "moe_decode" / "trace.json.gz", cache=False)
    s = p.summary("decode")
    coll = [w for w in s.warnings if "launched no GPU kernel" in w]
    # 2 layers x (attention + MoE block) x 8 steps, each call a c10d::allreduce_ + record_param_comms pair
    assert len(coll) == 1 and _calls(coll[0]) == 32
    assert int(p.comms["name"].eq("c10d::allreduce_").sum()) == 32
