"""A session's measured record (StepTimes) and captures (Captures), read with their provenance."""
from __future__ import annotations

import json

import pytest

import kit.session
from kit.errors import SessionError
from tests.conftest import SAMPLE


def test_step_times_of_the_sample_traces():
    sess = kit.session.open(SAMPLE)
    raw = json.loads((SAMPLE / "traces" / "tp1_graph" / "measured.json").read_text())["ranks"][0]
    t = sess.step_times("tp1_graph")
    assert t.unprofiled_ms == raw["unprofiled"]["decode"]["median_ms"]
    assert t.profiled_mean_ms == raw["profiled"]["decode"]["mean_ms"] and t.variant == "graph"
    assert t.evidence.kind == "measured" and t.evidence.artefact == "traces/tp1_graph/measured.json"
    assert t.model_config()["hidden_size"] == raw["hidden"]
    gemm = sess.step_times("cmp_gemm_b")
    assert gemm.model_config() is None and gemm.known["per_step_us"] > 0  # an extra GEMM: no config shape
    assert sess.step_times("no_such_scenario") is None


def test_a_measured_record_without_step_times_is_a_session_error(tmp_path):
    (tmp_path / "traces" / "x").mkdir(parents=True)
    (tmp_path / "traces" / "x" / "measured.json").write_text('{"ranks": [{"variant": "eager"}]}')
    with pytest.raises(SessionError, match="no decode step times"):
        kit.session.open(tmp_path).step_times("x")


def test_captures_of_each_machine():
    sess = kit.session.open(SAMPLE)
    server, trace = sess.captures("server"), sess.captures("env")
    assert len(server.gpus) == 8 and server.topology.kind == "PCIe-only" and server.header is None
    assert [e.kind for e in server.evidence] == ["sample", "sample"]
    assert trace.header["driver"] and trace.fingerprint().driver == trace.header["driver"]
    assert all(e.kind == "measured" for e in trace.evidence)
    assert not sess.captures("no-such-folder").found
