"""The run catalogue (kit.runs): what the kit's commands record, how it is queried, redacted, shared."""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys

import pandas as pd
import pytest

from kit import runs
from kit.cli import main
from kit.errors import UsageError
from tests.conftest import ROOT, SAMPLE, TEST_DATA

TRACE = TEST_DATA / "traces" / "cpu_eager" / "trace.json.gz"
TRACE_B = TEST_DATA / "traces" / "cpu_graph" / "trace.json.gz"
SECRET = "sk-Zq81rT0pLm3Vx9cB7nD2fG6hJ4kW5yQe"


@pytest.fixture
def store(tmp_path, monkeypatch):
    root = tmp_path / "store"
    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(root))
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KIT_RUNS_SHARED", raising=False)
    return root


def test_cli_summary_is_recorded_with_its_input_hash_figures_and_tables(store, capsys):
    assert main(["profile", "summary", str(TRACE), "--phase", "decode"]) == 0
    listed = runs.runs()
    assert list(listed["kind"]) == ["summary"]
    run = runs.get(listed["run_id"][0][:15])
    assert run["inputs"][0]["sha256"] == hashlib.sha256(TRACE.read_bytes()).hexdigest()
    assert run["inputs"][0]["bytes"] == TRACE.stat().st_size
    assert run["command"].startswith("kit profile summary") and "--phase decode" in run["command"]
    assert run["user"] and run["machine"] and run["created"].year >= 2024
    from kit import profile

    s = profile.load([str(TRACE)], cache=False).summary("decode")
    figs = runs.query("SELECT name, value FROM figures WHERE name IN ('kernel_time_us', 'steps')")
    got = dict(zip(figs["name"], figs["value"]))
    assert got["kernel_time_us"] == pytest.approx(s.kernel_time_us) and got["steps"] == s.steps
    cats = runs.table(run["run_id"], "categories")
    assert list(cats["category"]) == list(s.categories["category"])
    capsys.readouterr()
    assert main(["runs", "show", run["run_id"]]) == 0
    out = capsys.readouterr().out
    assert "sha256 " + run["inputs"][0]["sha256"][:16] in out and "figure       steps = " in out


def test_each_kind_of_analysis_records_one_run(store):
    """Summary, comparison, log parse, bench parse and audit each leave one run; the audit, which parses
    logs and reads traces inside, is one run, not one per file it read."""
    assert main(["profile", "compare", str(TRACE), "--", str(TRACE_B), "--labels", "eager", "graph"]) == 0
    assert main(["logs", "parse", str(SAMPLE / "logs" / "sglang_0.5.9_tp8_eagle3.log")]) == 0
    assert main(["bench", "parse", str(TEST_DATA / "logs" / "vllm_bench_serve_0.34.txt")]) == 0
    assert main(["audit", str(SAMPLE / "logs")]) == 0
    kinds = runs.query("SELECT kind, count(*) AS n FROM runs GROUP BY kind ORDER BY kind")
    assert dict(zip(kinds["kind"], kinds["n"])) == {"audit": 1, "bench": 1, "comparison": 1, "logs": 1}
    cmp = runs.query("SELECT * FROM figures WHERE kind = 'comparison' AND name = 'step_us' ORDER BY item")
    assert list(cmp["item"]) == ["eager", "graph"] and (cmp["value"] > 0).all()
    roles = runs.query("SELECT role FROM inputs WHERE kind = 'comparison' ORDER BY role")["role"].tolist()
    assert roles == ["a", "b"]


def test_secrets_never_reach_the_store(store):
    """A token typed on the command line, in settings, a fact, a warning and a table cell: no file of
    the store holds it afterwards."""
    runs.record("summary", inputs=[str(TRACE)], command=f"kit x --api-key {SECRET}",
                settings={"env": f"OPENAI_API_KEY={SECRET}", "args": ["--token", SECRET]},
                facts={"cmd": f"--hf-token {SECRET}"}, warnings=[f"Authorization: Bearer {SECRET}"],
                tables={"t": pd.DataFrame({"cmdline": [f"serve --api-key {SECRET}", "ok"], "n": [1, 2]})})
    assert main(["logs", "parse", str(SAMPLE / "logs" / "sglang_0.5.9_tp8_eagle3.log"), "--version",
                 f"token={SECRET}"]) == 0
    files = [p for p in store.rglob("*") if p.is_file()]
    assert len(files) >= 3
    assert not [p for p in files if SECRET.encode() in p.read_bytes() or SECRET[3:20].encode() in p.read_bytes()]
    assert "REDACTED" in runs.table(runs.runs("summary")["run_id"][0], "t")["cmdline"][0]


def test_recording_never_fails_the_analysis(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(blocker / "store"))   # cannot be created: a file is in the way
    assert main(["profile", "summary", str(TRACE), "--json"]) == 0
    out, err = capsys.readouterr()
    assert '"kernel_time_us"' in out
    assert len(err.strip().splitlines()) == 1 and "run not recorded in the catalogue" in err and "KIT_RUNS=off" in err


def test_off_records_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_RUNS", "off")
    monkeypatch.setenv("KIT_RUNS_DIR", str(tmp_path / "store"))
    assert main(["profile", "summary", str(TRACE)]) == 0
    assert not (tmp_path / "store").exists()


def test_a_copied_store_is_read_as_it_is_read_only(store, tmp_path, monkeypatch):
    """Alice exports her summaries; Bob copies the folder, makes it read-only and queries it beside his own."""
    for t in (TRACE, TRACE_B):
        assert main(["profile", "summary", str(t)]) == 0
    assert main(["logs", "parse", str(SAMPLE / "logs" / "sglang_0.5.9_tp8_eagle3.log")]) == 0
    first = runs.runs("summary")["run_id"].iloc[-1]
    runs.set_baseline("eager", first, note="before graphs")
    out = tmp_path / "alice"
    assert runs.export(out, "kind = 'summary'") == 2
    bob = tmp_path / "bob-copy"
    shutil.copytree(out, bob)
    for p in [bob, *bob.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        monkeypatch.setenv("KIT_RUNS_DIR", str(tmp_path / "bob-own"))
        monkeypatch.setenv("KIT_RUNS_SHARED", str(bob))
        got = runs.query("SELECT kind, count(*) AS n FROM runs GROUP BY kind")
        assert dict(zip(got["kind"], got["n"])) == {"summary": 2}
        assert runs.baseline("eager")["run_id"] == first
        assert len(runs.table(first, "categories"))
        before = sorted((p, p.stat().st_mtime_ns) for p in bob.rglob("*"))
        runs.query("SELECT * FROM figures")
        assert sorted((p, p.stat().st_mtime_ns) for p in bob.rglob("*")) == before
    finally:
        for p in [bob, *bob.rglob("*")]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)


def test_compaction_keeps_every_run_once(store):
    ids = [runs.record("bench", figures={"p99_itl_ms": 10.0 + i}).run_id for i in range(6)]
    loose = sorted((store / "runs").glob("2*.parquet"))
    assert len(loose) == 6
    keep = loose[0].read_bytes()
    assert runs.compact() == 6
    assert not list((store / "runs").glob("2*.parquet")) and len(list((store / "runs").glob("pack-*.parquet"))) == 1
    (store / "runs" / loose[0].name).write_bytes(keep)     # a reader between pack and delete sees a run twice
    got = runs.query("SELECT run_id FROM runs ORDER BY run_id")["run_id"].tolist()
    assert got == sorted(ids)
    over = runs.query("SELECT run_id FROM figures WHERE name = 'p99_itl_ms' AND value > 13")["run_id"].tolist()
    assert sorted(over) == sorted(ids[4:])


def test_bad_queries_and_ids_are_one_line_errors(store, capsys):
    runs.record("bench", figures={"x": 1})
    with pytest.raises(UsageError, match="no run 'nope'"):
        runs.get("nope")
    with pytest.raises(UsageError, match="kit.runs.query"):
        runs.query("SELECT nonexistent FROM runs")
    with pytest.raises(UsageError, match="no baseline named 'main'"):
        runs.baseline("main")
    assert main(["runs", "query", "SELECT bogus FROM runs"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("kit: error:")


def test_kit_runs_cli_lists_queries_and_names_baselines(store):
    assert main(["profile", "summary", str(TRACE)]) == 0
    run_id = runs.runs()["run_id"][0]

    def kit(*args):
        return subprocess.run([sys.executable, "-m", "kit", *args], capture_output=True, text=True, cwd=ROOT,
                              timeout=120)

    out = kit("runs", "query", "SELECT kind, value FROM figures WHERE name = 'steps'", "--json")
    assert out.returncode == 0 and '"kind": "summary"' in out.stdout, out.stderr
    out = kit("runs", "baseline", "main", run_id[:16], "--note", "first")
    assert out.returncode == 0 and run_id in out.stdout
    out = kit("runs", "list", "--kind", "summary")
    assert out.returncode == 0 and run_id in out.stdout
    assert runs.baseline("main")["run_id"] == run_id


def test_the_kit_program_ends_at_its_answer_and_a_reader_waits_for_its_run(store, tmp_path):
    """The ``kit`` program writes its run in a child of its own session after the answer (issue 48): the
    command's output ends (the caller's pipes close) without it, and a reader started right after the
    command waits for the writer (``runs/.writing``) instead of missing the run. Three commands in a row,
    each listed at once."""
    env = {**os.environ, "KIT_CACHE_DIR": str(tmp_path / "cache"), "KIT_PROGRESS": "off"}
    for n in range(1, 4):
        p = subprocess.run([sys.executable, "-m", "kit", "profile", "summary", str(TRACE), "--json"], cwd=ROOT,
                           env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and '"steps"' in p.stdout and not p.stderr, p.stderr
        assert len(runs.runs()) == n
        assert runs.failures() == []
    assert (store / "runs" / ".writing").exists()
