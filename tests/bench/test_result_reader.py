"""One reader of the kit's own result files (issue 46, item 5), on the exact inputs: the sample session's
six saved LoadResults (``bench/reconcile``), which ``kit audit`` could not read ("'int' object is not
subscriptable" six times on report page 00, then "nothing flagged") and ``kit bench parse``/``compare``
rejected, and the older single-stream file (``experiments/h200_live_server/single_stream.json``)."""
from __future__ import annotations

import json
import math

import pytest

from kit import bench, logs
from kit.audit import audit
from kit.cli import main
from kit.errors import BenchError
from tests.conftest import ROOT

SAMPLE = ROOT / "notebooks" / "sample"
SAVED = sorted((SAMPLE / "bench" / "reconcile").glob("*/*.json"))
OLDER = SAMPLE / "experiments" / "h200_live_server" / "single_stream.json"


def test_the_sample_has_the_six_saved_results():
    assert len(SAVED) == 6 and all(bench.read_result(p) is not None for p in SAVED)


def test_audit_reads_the_saved_results_and_flags_what_they_hold():
    a = audit([SAMPLE / "bench" / "reconcile"], traces=False)
    assert not [n for n in a.notes if "not a benchmark record" in n], a.notes
    failed = [f for f in a.findings if f.code == "failed-requests"]
    # graph/c16.json: 3 of its 32 requests failed (their error is in the file): said, not "nothing flagged"
    assert [f.run for f in failed] == [str(SAMPLE / "bench" / "reconcile" / "graph" / "c16.json")]
    assert "3 of 32 requests failed" in failed[0].verdict
    data = json.loads((SAMPLE / "bench" / "reconcile" / "graph" / "c16.json").read_text())
    assert sum(not r["ok"] for lv in data["levels"] for r in lv["requests"]) == 3


@pytest.mark.parametrize("path", SAVED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_bench_parse_gives_one_row_per_level_with_the_results_figures(path, capsys):
    res = bench.read_result(path)
    assert main(["bench", "parse", str(path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(res.levels)
    for row, s in zip(rows, res.summary()):
        assert row["tool"] == "kit.bench" and row["completed"] == s["requests_ok"]
        assert row["output_throughput"] == pytest.approx(s["output_tok_s"])
        assert row["median_tpot_ms"] == pytest.approx(s["tpot_ms_p50"]) and row["p99_itl_ms"] == pytest.approx(
            s["itl_ms_p99"])


def test_bench_compare_accepts_a_saved_result_against_a_baseline_of_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KIT_RUNS_SHARED", raising=False)
    from kit import runs

    c16 = SAMPLE / "bench" / "reconcile" / "eager" / "c16.json"
    assert main(["bench", "parse", str(c16)]) == 0
    assert main(["runs", "baseline", "eager-c16", runs.runs("bench")["run_id"][0]]) == 0
    capsys.readouterr()
    assert main(["bench", "compare", str(c16), "--baseline", "eager-c16", "--fail-on-regression", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "pass"


def test_the_older_single_stream_file_reads_into_the_one_type_with_its_own_figures():
    """Regrouped into concurrency levels; each repeat's figures recomputed from its requests equal what the
    older single_stream wrote for that repeat (medians per request, output tok/s over the repeat's wall)."""
    old = json.loads(OLDER.read_text())
    res = bench.BenchResult.load(OLDER)
    assert isinstance(res, bench.LoadResult) and [lv["target"] for lv in res.levels] == [1, 2, 4]
    for lv in res.levels:
        reps = [r for r in old["repeats"] if r["concurrency"] == lv["target"]]
        assert len(lv["per_repeat"]) == len(reps) == 3
        for got, want in zip(lv["per_repeat"], reps):
            assert got["decode_tok_s"] == pytest.approx(want["decode_tok_s"])
            assert got["ttft_ms_p50"] == pytest.approx(want["ttft_ms"])
            assert got["output_tok_s"] == pytest.approx(want["output_tok_s"])
            assert got["requests_ok"] == want["ok"]
    assert res.tok_s == pytest.approx(sum(r["decode_tok_s"] for r in old["repeats"] if r["concurrency"] == 1) / 3,
                                      rel=0.02)
    # the parser refuses it with the reason (its figures are kit.bench's), the CLI reads it through kit.bench
    with pytest.raises(Exception, match="older kit single_stream result"):
        logs.parse_bench(OLDER)
    assert len(bench.read_result(OLDER).rows()) == 3


def test_not_a_kit_result_is_none_and_a_broken_one_is_one_error(tmp_path):
    other = tmp_path / "vllm.json"
    other.write_text(json.dumps({"completed": 3, "output_throughput": 1.0, "duration": 2.0}))
    assert bench.read_result(other) is None and logs.read_kit_result(other) is None
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"levels": [{"mode": "rate", "requests": 5}]}))
    with pytest.raises(BenchError, match="broken.json.*broken entry"):
        bench.read_result(broken)
    # saved before decode_tok_s was a level's figure: NaN (said as not there), never a figure made up
    assert math.isnan(bench.read_result(SAVED[0]).tok_s)
