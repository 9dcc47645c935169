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
    label = ks.open(tmp_path).provenance("logs/a.log").label
    assert label == "measured on gpu-box, 2026-12-03 07:00 UTC, by kit.server"
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


def test_parsers_say_where_their_input_came_from(tmp_path):
    """LogData/Profile carry a provenance without a session in hand (kit.session.provenance_of)."""
    import kit.logs
    import kit.profile

    log = kit.logs.read(SAMPLE / "logs" / "sglang_0.5.9_tp8_default.log", version="0.5.9")
    assert log.provenance.kind == "sample" and "not measured" in log.provenance.label
    assert log.to_dict(tables=False)["provenance"]["kind"] == "sample"
    assert "not measured" in log._repr_html_()
    bench = kit.logs.read(SAMPLE / "bench" / "vllm_tp8_default.json")
    assert bench.provenance.kind == "sample"
    prof = kit.profile.load(sorted((SAMPLE / "traces" / "tp1_eager").glob("rank*.trace.json.gz")))
    assert prof.provenance.is_measured and "H200" in prof.provenance.label
    # outside any session: the file's own marks, else unknown (never assumed measured)
    (tmp_path / "a.log").write_text("# SAMPLE by hand\n[2025-01-01 00:00:00] hello\n")
    (tmp_path / "b.log").write_text("[2025-01-01 00:00:00] hello\n")
    assert ks.provenance_of(tmp_path / "a.log").kind == "sample"
    assert ks.provenance_of(tmp_path / "b.log").kind == "unknown"
    assert ks.provenance_of(tmp_path / "missing.log").kind == "unknown"
    line = "(APIServer pid=1) INFO 11-20 12:00:00 [api_server.py:1896] vLLM API server version 0.11.0\n"
    assert kit.logs.read_lines([line]).provenance.kind == "unknown"


def test_evidence_and_captions(tmp_path, monkeypatch):
    s = ks.open(SAMPLE)
    ev = s.evidence("logs/sglang_0.5.9_tp8_default.log", "step time")
    assert ev.to_ledger() == {"artefact": "logs/sglang_0.5.9_tp8_default.log", "kind": "sample",
                              "label": ev.label, "role": "step time"}
    # a path built from the session's root, relative to the working directory, is the same artefact
    monkeypatch.chdir(SAMPLE.parent)
    rel = ks.open("sample")
    artefact = rel.evidence(rel.path("logs", "sglang_0.5.9_tp8_default.log")).artefact
    assert artefact == "logs/sglang_0.5.9_tp8_default.log"
    cap = ks.caption([ev, s.evidence("traces/tp1_eager"), ev])
    assert cap.startswith("Source: sample written to the") and cap.count("sample written") == 1
    assert "measured on NVIDIA H200" in cap
    assert ks.caption([]) == "Source: provenance not stated"


def test_hand_run_notebooks_never_rewrite_a_posed_ledger(tmp_path, monkeypatch):
    import shutil

    from kit.ledger import LEDGER_ENV

    monkeypatch.delenv(LEDGER_ENV, raising=False)
    sess = tmp_path / "sample"
    shutil.copytree(SAMPLE, sess, ignore=shutil.ignore_patterns(".kit"))
    before = (sess / "ledger.json").read_bytes()
    led = ks.open(sess).ledger()
    assert led.path == sess / ".kit" / "ledger.json" and [h.id for h in led][:2] == ["H0", "H1"]
    led.record("H0", verdict="confirmed", evidence="by hand")
    assert (sess / "ledger.json").read_bytes() == before
    assert ks.open(sess).ledger()["H0"].evidence == "by hand"  # the working copy persists
    assert (sess / ".kit" / ".gitignore").read_text() == "*\n"
    monkeypatch.setenv(LEDGER_ENV, str(tmp_path / "report-ledger.json"))
    assert ks.open(sess).ledger().path == tmp_path / "report-ledger.json"
    # a session whose ledger is not marked as posed records into it directly
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.delenv(LEDGER_ENV)
    assert ks.open(plain).ledger().path == plain / "ledger.json"


def test_names_that_lead_outside_the_session_are_refused(tmp_path):
    """A scenario, experiment, log or trace name holding ``../`` (or an absolute path elsewhere) must
    not make the kit write outside the session: one SessionError naming the session and the name."""
    from kit.live import Experiment

    root = tmp_path / "sess"
    (root / "traces" / "tp1").mkdir(parents=True)
    elsewhere = tmp_path / "data"
    (elsewhere / "tp2").mkdir(parents=True)
    (root / "linked").symlink_to(elsewhere, target_is_directory=True)  # a folder kept on another disk
    s = ks.open(root)
    for parts in [("logs", "../../evil.log"), ("experiments", "../../../x"), ("traces", "a/../../../b"),
                  ("experiments", str(tmp_path / "stolen")), ("..",), ("../outside.json",)]:
        with pytest.raises(SessionError, match=r"resolves outside the session") as err:
            s.path(*parts)
        assert str(root) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(SessionError, match="outside"):
        s / "../escape"
    with pytest.raises(SessionError, match="outside"):
        s.measured("../../..")
    with pytest.raises(SessionError, match="outside"):
        s.record("../x.json", ks.Provenance.sample(source="nothing"))
    with pytest.raises(SessionError, match="outside"):
        s.record(tmp_path / "data" / "tp2", ks.Provenance.sample(source="nothing"))
    with pytest.raises(SessionError, match="outside"):
        s.path(str(elsewhere), "..", "..", "etc")  # a file named explicitly, then a name escaping it
    with pytest.raises(SessionError, match="outside"):
        Experiment(root, "../../stolen")
    assert not (tmp_path / "stolen").exists() and not (tmp_path / "x").exists()
    # what stays inside is fine: nested names, absolute paths into it, a symlinked folder, the root
    assert s.path("traces", "tp1", "rank0.trace.json.gz") == root / "traces" / "tp1" / "rank0.trace.json.gz"
    assert s.path(str(root / "logs" / "x.log")) == root / "logs" / "x.log"
    assert s.path("linked", "tp2") == root / "linked" / "tp2"
    assert s.path("logs", "a", "..", "b.log") == root / "logs" / "a" / ".." / "b.log"
    assert s.path() == root
    # a file the user names explicitly (an absolute path: a notebook parameter) is read where it is
    assert s.path(str(elsewhere / "tp2")) == elsewhere / "tp2"
