"""kit.session: the layout of a session and the provenance of each artefact."""
from __future__ import annotations

import json

import pytest

import kit.session as ks
from kit.errors import SessionError
from tests.conftest import SAMPLE


def test_sample_session_says_what_is_measured_and_what_is_not():
    s = ks.open(SAMPLE)
    trace = s.provenance("traces/tp1_eager/rank0.trace.json.gz")
    assert trace.is_measured and "H200" in trace.label
    for rel in ("logs/sglang_0.5.9_tp8_default.log", "bench/sglang_tp8_default.jsonl", "server/nvidia-smi-topo.txt"):
        p = s.provenance(rel)
        assert p.kind == "sample", rel
        assert "measured" not in p.label.replace("not measured", ""), p.label


def test_longest_prefix_wins_and_record_is_atomic(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.log").write_text("x\n")
    s = ks.open(tmp_path)
    assert s.provenance("logs/a.log").kind == "unknown"
    s.record("logs", ks.Provenance.sample(source="SGLang 0.5.9 log"))
    s.record("logs/a.log", ks.Provenance.measured(host="gpu-box", how="kit.server", when="2026-12-03 07:00 UTC"))
    assert ks.open(tmp_path).provenance("logs/a.log").label == "measured on gpu-box, 2026-12-03 07:00 UTC, by kit.server"
    assert ks.open(tmp_path).provenance("logs/b.log").kind == "sample"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_sample_marks_inside_files_are_read(tmp_path):
    (tmp_path / "x.log").write_text("# SAMPLE written by make_samples.py, not measured\nline\n")
    (tmp_path / "y.json").write_text(json.dumps({"sample": True, "tok_s": 1}))
    s = ks.open(tmp_path)
    assert s.provenance("x.log").kind == "sample" and s.provenance("y.json").kind == "sample"
    assert s.provenance(tmp_path / "x.log").kind == "sample"


def test_damaged_manifest_and_missing_session_are_one_line_errors(tmp_path):
    with pytest.raises(SessionError, match="session directory not found"):
        ks.open(tmp_path / "nope")
    (tmp_path / "provenance.json").write_text("{not json")
    with pytest.raises(SessionError, match="provenance.json: unreadable"):
        ks.open(tmp_path).provenance("x")
    (tmp_path / "provenance.json").write_text(json.dumps({"artefacts": {"x": {"kind": "made-up"}}}))
    with pytest.raises(SessionError, match="bad provenance entry"):
        ks.open(tmp_path).provenance("x")
    assert ks.open(tmp_path).root == tmp_path


def test_scenarios_and_measured():
    s = ks.open(SAMPLE)
    sc = s.scenarios()
    assert {"tp1_eager", "tp1_graph"} <= set(sc)
    assert s.measured("tp1_eager")["ranks"][0]["device"] == "NVIDIA H200"
    assert s.measured("nope") is None
