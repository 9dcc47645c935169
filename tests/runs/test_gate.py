"""The regression gate: a real trace (compiled_graph, GPU-bound, recorded on an H200) replayed into a
baseline and repeats with per-step jitter; one set of repeats carries a planted change (GEMM kernels 15%
slower). The gate must catch every planted one and pass every one of 20 clean repeats."""
from __future__ import annotations

import json
import shutil

import pytest

from kit import runs
from kit.cli import main
from kit.testing import replay_trace
from tests.conftest import TEST_DATA

SRC = TEST_DATA / "traces" / "compiled_graph" / "trace.json.gz"
STEPS, JITTER = 32, 0.02


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KIT_RUNS_SHARED", raising=False)
    return tmp_path / "store"


@pytest.fixture
def baseline(store, tmp_path, capsys):
    """Baseline ``main``: a replay summarised from the CLI and named from the CLI, as a CI job would."""
    base = replay_trace(SRC, tmp_path / "base.json.gz", steps=STEPS, jitter=JITTER, seed=1000)
    assert main(["profile", "summary", str(base), "--phase", "decode"]) == 0
    run_id = runs.runs("summary")["run_id"][0]
    assert main(["runs", "baseline", "main", run_id, "--note", "replayed compiled_graph"]) == 0
    capsys.readouterr()
    return base


def _gate(path, *extra) -> int:
    return main(["profile", "compare", "--baseline", "main", str(path), "--fail-on-regression", *extra])


def test_planted_regressions_fail_and_clean_repeats_pass_19_in_20(baseline, tmp_path, capsys):
    clean = []
    for seed in range(20):
        rep = replay_trace(SRC, tmp_path / f"rep{seed}.json.gz", steps=STEPS, jitter=JITTER, seed=seed)
        clean.append(_gate(rep))
    assert clean == [0] * 20, clean     # every clean repeat passes (none regressed, none inconclusive)
    for seed in (50, 51, 52):
        rep = replay_trace(SRC, tmp_path / f"slow{seed}.json.gz", steps=STEPS, jitter=JITTER, seed=seed,
                           slow={"nvjet": 1.15})
        capsys.readouterr()
        assert _gate(rep, "--json") == 3
        verdict = json.loads(capsys.readouterr().out)
        assert verdict["verdict"] == "regression"
        assert verdict["where"][0]["name"] == "gemm" and verdict["where"][0]["what"] == "part"
        assert all(w["name"].startswith("nvjet") for w in verdict["where"] if w["what"] == "family")
    # every verdict is in the catalogue, with its baseline
    got = runs.query("SELECT value AS verdict, count(*) AS n FROM facts WHERE kind = 'gate' AND name = 'verdict' "
                     "GROUP BY value")
    counts = dict(zip(got["verdict"], got["n"]))
    assert counts.get("regression", 0) == 3 + clean.count(3) and counts.get("pass", 0) + counts.get("improvement", 0) \
        == clean.count(0)


@pytest.mark.chromium
def test_without_fail_on_regression_the_exit_is_0_and_the_html_diff_renders(baseline, tmp_path, capsys):
    rep = replay_trace(SRC, tmp_path / "slow.json.gz", steps=STEPS, jitter=JITTER, seed=7, slow={"nvjet": 1.3})
    page = tmp_path / "diff.html"
    assert main(["profile", "compare", "--baseline", "main", str(rep), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("REGRESSION: step") and f"diff: {page}" in out
    from kit.report._browser import chromium_path, load

    if chromium_path() is None:
        pytest.skip("chromium not installed (make system-deps)")
    shown = load(page)
    assert shown.requests == []
    assert "REGRESSION: step" in shown.dom and "id=\"parts\"" in shown.dom and "nvjet" in shown.dom
    assert "id=\"checks\"" in shown.dom
    from kit.report._browser import layout

    fit = layout(page, width=1400)      # it was 1,633 px wide: long kernel names in cells that never wrapped
    assert fit["scroll_width"] <= fit["client_width"] <= 1400, fit


def test_a_baseline_whose_trace_changed_or_went_is_an_error_not_a_pass(baseline, tmp_path, capsys):
    rep = replay_trace(SRC, tmp_path / "rep.json.gz", steps=STEPS, jitter=JITTER, seed=3)
    shutil.copy(rep, baseline)      # the baseline's file now holds other bytes
    assert _gate(rep) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "changed since run" in err and str(baseline) in err
    baseline.unlink()
    assert _gate(rep) == 1
    assert "no longer there" in capsys.readouterr().err
    assert main(["profile", "compare", "--baseline", "nope", str(rep)]) == 1
    assert "no baseline named 'nope'" in capsys.readouterr().err


def _bench_file(tmp_path, name, **changes):
    from tests.conftest import SAMPLE

    doc = json.loads((SAMPLE / "bench" / "vllm_tp8_default.json").read_text())
    doc.update(changes)
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_bench_against_a_baseline_uses_the_files_spread(store, tmp_path, capsys):
    """The sample's vllm bench serve result (16 requests, std_tpot 0.05 ms) as baseline; a repeat with TPOT
    0.4% slower (beyond two standard errors, under the 2% threshold) passes; one with TPOT 6% slower fails."""
    base = _bench_file(tmp_path, "base.json")
    assert main(["bench", "parse", str(base)]) == 0
    assert main(["runs", "baseline", "vllm-tp8", runs.runs("bench")["run_id"][0]]) == 0
    same = _bench_file(tmp_path, "same.json", mean_tpot_ms=12.17, mean_itl_ms=12.2)
    slow = _bench_file(tmp_path, "slow.json", mean_tpot_ms=12.85, mean_itl_ms=12.9, output_throughput=76.0)
    capsys.readouterr()
    assert main(["bench", "compare", str(same), "--baseline", "vllm-tp8", "--fail-on-regression"]) == 0
    assert capsys.readouterr().out.startswith("PASS")
    assert main(["bench", "compare", str(slow), "--baseline", "vllm-tp8", "--fail-on-regression", "--json"]) == 3
    got = json.loads(capsys.readouterr().out)
    verdicts = {m["metric"]: (m["verdict"], m["decided_by"]) for m in got["metrics"]}
    assert verdicts["mean_tpot_ms"] == ("regression", "spread and threshold")
    assert verdicts["output_throughput"] == ("regression", "threshold only")
    assert verdicts["mean_ttft_ms"][0] == "pass"
    assert main(["bench", "compare", str(slow), "--baseline", "vllm-tp8"]) == 0   # reported, not failed


def _name_baseline(trace, name: str) -> None:
    assert main(["profile", "summary", str(trace), "--phase", "decode"]) == 0
    assert main(["runs", "baseline", name, runs.runs("summary")["run_id"][0]]) == 0


def _stall(path, after_step: int, us: float):
    """One stall planted in a replay: every GPU event from the start of decode step ``after_step`` on moves
    ``us`` later (the GPU waits once, as a page fault or a preempted host would make it)."""
    import gzip

    doc = json.loads(gzip.open(path, "rt").read())
    gpu = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}
    t0 = min(e["ts"] for e in doc["traceEvents"] if e.get("cat") == "gpu_user_annotation"
             and e.get("name") == f"decode_step_{after_step}")
    for e in doc["traceEvents"]:
        if e.get("cat") in gpu and e.get("ts", 0) >= t0:
            e["ts"] += us
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    return path


def test_a_slowdown_of_every_step_with_one_stall_is_a_regression(baseline, tmp_path, capsys):
    """Every step 5% slower plus one 50 ms stall: the mean and its noise are the stall's (the gate passed
    it); the medians of the per-step distributions see the 5%."""
    rep = replay_trace(SRC, tmp_path / "slow.json.gz", steps=STEPS, jitter=JITTER, seed=11, slow={"": 1.05})
    _stall(rep, STEPS // 2, 50_000.0)
    capsys.readouterr()
    assert _gate(rep, "--json") == 3
    got = json.loads(capsys.readouterr().out)
    checks = {c["check"]: c for c in got["checks"]}
    assert got["verdict"] == "regression" and checks["kernel time"]["verdict"] == "regression"
    assert 0.03 < checks["step time (profiled)"]["delta"] / checks["step time (profiled)"]["baseline_value"] < 0.08


EAGER = TEST_DATA / "traces" / "sdpa_flash" / "trace.json.gz"


def test_a_launch_bound_run_with_more_kernel_time_fails_not_improves(store, tmp_path, capsys):
    """sdpa_flash -> sdpa_math (eager, launch-bound under the profiler): GPU kernel time per step +21%, 52 more
    launches per step, while the profiled step time fell 17% (the profiler's CPU overhead). The gate said
    IMPROVEMENT, exit 0; it judges kernel time, launches and syncs, and fails."""
    _name_baseline(EAGER, "flash")
    capsys.readouterr()
    math_ = TEST_DATA / "traces" / "sdpa_math" / "trace.json.gz"
    code = main(["profile", "compare", "--baseline", "flash", str(math_), "--fail-on-regression", "--json"])
    got = json.loads(capsys.readouterr().out)
    assert code == 3 and got["verdict"] == "regression" and got["basis"] == "kernel"
    checks = {c["check"]: c for c in got["checks"]}
    assert checks["kernel time"]["verdict"] == "regression" and checks["launches per step"]["verdict"] == "regression"
    assert checks["step time (profiled)"]["delta"] < 0 and not checks["step time (profiled)"]["decides"]


def test_eager_replays_uniformly_5pc_slower_fail_and_20_clean_repeats_pass(store, tmp_path, capsys):
    base = replay_trace(EAGER, tmp_path / "base.json.gz", steps=32, jitter=JITTER, seed=1000)
    _name_baseline(base, "eager")
    clean = []
    for seed in range(20):
        rep = replay_trace(EAGER, tmp_path / f"rep{seed}.json.gz", steps=32, jitter=JITTER, seed=seed)
        clean.append(main(["profile", "compare", "--baseline", "eager", str(rep), "--fail-on-regression"]))
    assert clean == [0] * 20, clean
    slow = replay_trace(EAGER, tmp_path / "slow.json.gz", steps=32, jitter=JITTER, seed=77, slow={"": 1.05})
    capsys.readouterr()
    assert main(["profile", "compare", "--baseline", "eager", str(slow), "--fail-on-regression"]) == 3
    out = capsys.readouterr().out
    assert out.startswith("REGRESSION: step (profiled)") and "judged on kernel time, launches and syncs" in out


def test_a_gate_that_cannot_decide_exits_4_and_step_ms_is_used(store, tmp_path, capsys):
    """Too few steps to judge: inconclusive, exit 4 (not 0, not 3), saying why. ``--step-ms`` with
    ``--baseline`` is the step time judged (it was ignored)."""
    short = replay_trace(SRC, tmp_path / "short.json.gz", steps=3, seed=1)
    _name_baseline(short, "short")
    rep = replay_trace(SRC, tmp_path / "rep.json.gz", steps=3, seed=2)
    capsys.readouterr()
    assert main(["profile", "compare", "--baseline", "short", str(rep), "--fail-on-regression"]) == 4
    out = capsys.readouterr().out
    assert out.startswith("INCONCLUSIVE") and "at least 5 are needed" in out
    assert main(["profile", "compare", "--baseline", "short", str(rep)]) == 0
    capsys.readouterr()
    full = replay_trace(SRC, tmp_path / "full.json.gz", steps=STEPS, jitter=JITTER, seed=3)
    _name_baseline(full, "full")
    same = replay_trace(SRC, tmp_path / "same.json.gz", steps=STEPS, jitter=JITTER, seed=4)
    capsys.readouterr()
    assert main(["profile", "compare", "--baseline", "full", str(same), "--fail-on-regression", "--json",
                 "--step-ms", "0.85", "0.95"]) == 3
    got = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in the gate's JSON"))
    assert got["basis"] == "measured" and got["step_us"] == [850.0, 950.0] and got["noise_us"] is None


@pytest.fixture
def bench_baseline(store, tmp_path, capsys):
    base = _bench_file(tmp_path, "base.json")
    assert main(["bench", "parse", str(base)]) == 0
    assert main(["runs", "baseline", "vllm-tp8", runs.runs("bench")["run_id"][0]]) == 0
    capsys.readouterr()
    return json.loads(base.read_text())


def _bench_gate(path, capsys) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["bench", "compare", str(path), "--baseline", "vllm-tp8", "--fail-on-regression", "--json"])
    return code, json.loads(capsys.readouterr().out or "{}")


@pytest.mark.parametrize("plant, metric", [
    ({"completed": 8, "failed": 8}, "failed_share"),
    ({"median_ttft_ms": 2 * 166.32}, "median_ttft_ms"),
    ({"p99_ttft_ms": 3 * 181.44}, "p99_ttft_ms"),
    ({"p99_tpot_ms": 3 * 12.485}, "p99_tpot_ms"),
])
def test_bench_gate_catches_failures_and_percentile_regressions(bench_baseline, tmp_path, capsys, plant, metric):
    """Each planted regression passed the gate (half the requests failed; TTFT median x2, p99 x3; TPOT p99 x3)."""
    code, got = _bench_gate(_bench_file(tmp_path, "new.json", **plant), capsys)
    verdicts = {m["metric"]: m["verdict"] for m in got["metrics"]}
    assert code == 3 and got["verdict"] == "regression" and verdicts[metric] == "regression", verdicts


def test_bench_gate_does_not_pass_what_it_could_not_compare(bench_baseline, tmp_path, capsys):
    """A 2x TPOT regression in values the parser dropped as not numbers ('5 metrics compared', PASS); zero
    latencies (called an improvement): inconclusive, exit 4, naming each metric and why."""
    tpot = {k: str(2 * bench_baseline[k]) for k in ("mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms")}
    code, got = _bench_gate(_bench_file(tmp_path, "strings.json", **tpot), capsys)
    skipped = {m["metric"]: m["decided_by"] for m in got["metrics"] if m["verdict"] == "not compared"}
    assert code == 4 and got["verdict"] == "inconclusive"
    assert set(tpot) <= set(skipped) and all("not a number" in skipped[k] for k in tpot)
    assert set(skipped) - set(tpot) <= {"decode_tok_s"}     # derived from the TPOT the parser dropped
    zeros = {k: 0.0 for k in bench_baseline if k.endswith("_ms") and not k.startswith("std_")}
    code, got = _bench_gate(_bench_file(tmp_path, "zeros.json", **zeros), capsys)
    assert code == 4 and got["verdict"] == "inconclusive"
    assert not any(m["verdict"] == "improvement" for m in got["metrics"])
    assert main(["bench", "compare", str(tmp_path / "zeros.json"), "--baseline", "vllm-tp8"]) == 0
    assert "not compared: a latency of 0 ms is not a measurement" in capsys.readouterr().out


def test_bench_gate_refuses_another_load(bench_baseline, tmp_path, capsys):
    capsys.readouterr()
    other = _bench_file(tmp_path, "c64.json", max_concurrency=64, max_concurrent_requests=64)
    assert main(["bench", "compare", str(other), "--baseline", "vllm-tp8", "--fail-on-regression"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "max_concurrency=1" in err and "max_concurrency=64" in err


def test_bench_gate_passes_20_clean_repeats(bench_baseline, tmp_path, capsys):
    """Repeats drawn around the baseline with the files' own spread (each statistic moved by a draw of its
    standard error; throughputs by 0.3%) pass, 20 in 20."""
    import random

    from kit.runs._bench_gate import METRICS, _quantile_se

    rng, n = random.Random(46), bench_baseline["completed"]
    codes = []
    for i in range(20):
        doc = {}
        for metric, std, _, q in METRICS:
            if metric not in bench_baseline:
                continue
            se = bench_baseline[std] * _quantile_se(q) / n ** 0.5 if std else 0.003 * bench_baseline[metric]
            doc[metric] = bench_baseline[metric] + rng.gauss(0.0, se)
        code, got = _bench_gate(_bench_file(tmp_path, f"rep{i}.json", **doc), capsys)
        codes.append((code, got["verdict"], [m["metric"] for m in got["metrics"] if m["verdict"] == "regression"]))
    assert all(c == 0 and v in ("pass", "improvement") for c, v, _ in codes), [x for x in codes if x[0]]


def test_eager_against_cuda_graph_on_the_sample_is_inconclusive_until_measured(store, capsys):
    """Notebook 06's pair: the eager baseline (launch-bound under the profiler) and the CUDA-graph run. Kernel
    time grew 2% (the graph's copies) while launches fell 136 -> 1 per step; the profiled wall time cannot weigh
    them: INCONCLUSIVE, exit 4. With the unprofiled step times (the session's CUDA events) it improves."""
    import kit
    from tests.conftest import SAMPLE

    _name_baseline(SAMPLE / "traces" / "tp1_eager" / "rank0.trace.json.gz", "eager")
    graph = str(SAMPLE / "traces" / "tp1_graph" / "rank0.trace.json.gz")
    capsys.readouterr()
    assert main(["profile", "compare", "--baseline", "eager", graph, "--fail-on-regression"]) == 4
    out = capsys.readouterr().out
    assert out.startswith("INCONCLUSIVE") and "launches per step is better" in out and "--step-ms" in out
    sess = kit.session.open(SAMPLE)
    ms = [f"{sess.step_times(n).unprofiled_ms:.4f}" for n in ("tp1_eager", "tp1_graph")]
    assert main(["profile", "compare", "--baseline", "eager", graph, "--fail-on-regression", "--step-ms", *ms]) == 0
    assert capsys.readouterr().out.startswith("IMPROVEMENT: step (measured)")
