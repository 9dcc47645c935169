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


def test_graph_replays_without_timing_are_executions_not_duplicates(tmp_path):
    """compiled_graph rewritten as an untimed replay trace (``ts = dur = 0``, every replay repeating the
    first replay's correlation ids; derived_traces.graph_without_timing): no kernel dropped, the
    kernels of each replay in their own step, step times from the GPU annotations within 5% of the
    timed original's step spans."""
    from tests.conftest import TEST_DATA

    path, per = D.graph_without_timing(tmp_path / "untimed.json.gz")
    timed = profile.load(TEST_DATA / "traces" / "compiled_graph" / "trace.json.gz", cache=False)
    p = profile.load(path, cache=False)
    assert not any("duplicated" in w for w in p.warnings), p.warnings
    assert len(p.kernels) == len(timed.kernels)
    st, st0 = p.steps, timed.steps
    assert len(st) == len(st0) == 8
    assert (st["kernels"].to_numpy() == st0["kernels"].to_numpy()).all() and (st["kernels"] == per).all()
    assert set(st["span_from"]) == {"gpu annotation"}
    rel = abs(st["wall_us"].to_numpy() - st0["wall_us"].to_numpy()) / st0["wall_us"].to_numpy()
    assert rel.max() < 0.05, (st["wall_us"], st0["wall_us"])
    s = p.summary("decode")
    assert s.steps == 8 and s.wall_time_us == pytest.approx(st["wall_us"].sum())
    # the kernels of replay r are the kernels of step r in the timed trace (same names, same order)
    for r in range(8):
        a = p.kernels[p.kernels["step"] == r]["name"].astype(str).tolist()
        b = timed.kernels[timed.kernels["step"] == r].sort_values("start_us")["name"].astype(str).tolist()
        assert a == b


def test_graph_replays_without_timing_and_without_annotations_step_per_launch(tmp_path):
    """The same untimed trace with its decode_step ranges removed: one step per cudaGraphLaunch, each
    holding one replay's kernels."""
    import gzip

    import orjson

    path, per = D.graph_without_timing(tmp_path / "untimed.json.gz")
    doc = orjson.loads(gzip.decompress(path.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if "annotation" not in str(e.get("cat"))]
    f = tmp_path / "untimed_noann.json"
    f.write_bytes(orjson.dumps(doc))
    p = profile.load(f, cache=False)
    assert set(p.steps["source"]) == {"cuda-graph"} and len(p.steps) == 8
    assert (p.steps["kernels"] == per).all()
