"""Where an inter-token latency goes, reconciled against a real engine with known injected delays.

tinyserve (the sample engine, a real HTTP server with a continuous-batching scheduler) records its own
steps and requests (``TINYSERVE_STEP_RECORDS=1``); the kit's client measures the tokens; each delay is
injected alone (a slow detokenizer, a blocking host copy per step, a throttling proxy, a co-scheduled
long prefill from a second client, an overlapping scheduler) and must land in its own part. Figures
are compared as ratios against a run without the delay taken in the same test, so machine load moves
both alike."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import kit
from kit.errors import LogFormatError
from tests.conftest import ROOT
from tests.live.conftest import ENGINE, free_port, wait_http

TOKEN_MS = 10.0
MAX_TOKENS = 24


@pytest.fixture
def engine(tmp_path):
    """Factory: a tinyserve with step records and the given environment; returns (url, log path)."""
    procs: list[subprocess.Popen] = []

    def start(env: dict | None = None, proxy_ms: float | None = None) -> tuple[str, Path]:
        port = free_port()
        log = tmp_path / f"engine-{port}.log"
        full = dict(os.environ, PYTHONPATH=str(ENGINE), TINYSERVE_STEP_RECORDS="1", **(env or {}))
        with open(log, "w") as out:
            procs.append(subprocess.Popen([sys.executable, "-m", "tinyserve.launch_server", "--device", "cpu",
                                           "--port", str(port), "--token-ms", str(TOKEN_MS), "--load-seconds", "0.1"],
                                          stdout=out, stderr=subprocess.STDOUT, env=full))
        url = f"http://127.0.0.1:{port}"
        wait_http(url)
        if proxy_ms is not None:
            p = subprocess.Popen([sys.executable, "-m", "tests.bench.throttle_proxy", str(port), str(proxy_ms)],
                                 stdout=subprocess.PIPE, cwd=ROOT, text=True)
            procs.append(p)
            url = f"http://127.0.0.1:{int(p.stdout.readline())}"
        return url, log

    yield start
    for p in procs:
        p.terminate()
        p.wait(20)


def _run(engine, env=None, *, proxy_ms=None, conc=1, n=6, during=None):
    url, log = engine(env, proxy_ms)
    stop = threading.Event()
    side = threading.Thread(target=during, args=(url, stop), daemon=True) if during else None
    if side:
        side.start()
    try:
        res = kit.bench.load_test(url, concurrency=conc, requests=n, max_tokens=MAX_TOKENS, warmup=1, prompt_tokens=8)
    finally:
        stop.set()
        if side:
            side.join(30)
    return kit.bench.reconcile(res, log), res, log


def _p50(rec, part: str) -> float:
    return float(rec.table.set_index("part").loc[part, "median_band"])


def _lands_in_own_part(base, hit, own: str) -> None:
    """The injected delay's share of the ITL increase in its own part is at least 90 %; every other part
    moves by less than a tenth of the increase."""
    d_itl = _p50(hit, "client ITL") - _p50(base, "client ITL")
    assert d_itl > 0.3 * TOKEN_MS, (own, d_itl)
    assert _p50(hit, own) - _p50(base, own) >= 0.9 * d_itl, (own, hit.table, base.table)
    for part in [*hit.parts, "residual"]:
        if part != own:
            assert abs(_p50(hit, part) - _p50(base, part)) < 0.1 * d_itl, (own, part, hit.table, base.table)


def test_each_injected_delay_lands_in_its_own_part(engine):
    base, _, _ = _run(engine)
    assert not base.refused, base.refused
    for env, proxy, own in (({"TINYSERVE_DETOK_MS": "25"}, None, "output"),
                            ({"TINYSERVE_HOST_COPY_MS": "8"}, None, "host"),
                            ({}, 25.0, "http")):
        hit, _, _ = _run(engine, env, proxy_ms=proxy)
        assert not hit.refused, hit.refused
        _lands_in_own_part(base, hit, own)


def test_the_delays_together_each_land_in_their_part(engine):
    base, _, _ = _run(engine)
    both, _, _ = _run(engine, {"TINYSERVE_HOST_COPY_MS": "6", "TINYSERVE_DETOK_MS": "30"})
    # the host copy lengthens the step (10 -> 16 ms); the detokenizer (30 ms) is then the slowest stage
    assert 0.9 * 6.0 <= _p50(both, "host") <= 2 * 6.0, both.table   # a sleep overshoots on a loaded machine
    d_itl = _p50(both, "client ITL") - _p50(base, "client ITL")
    step_delta = _p50(both, "host") - _p50(base, "host")
    assert _p50(both, "output") - _p50(base, "output") >= 0.9 * (d_itl - step_delta)
    assert both.residual_share["median_band"] <= 0.05


def test_an_overlapping_scheduler_hides_host_work_from_the_critical_path(engine):
    base, _, _ = _run(engine)
    hidden, _, _ = _run(engine, {"TINYSERVE_HOST_COPY_MS": "6", "TINYSERVE_OVERLAP": "1"})
    exposed, _, _ = _run(engine, {"TINYSERVE_HOST_COPY_MS": "6"})
    assert _p50(hidden, "host") < 0.1 * _p50(exposed, "host")
    assert 0.9 * 6.0 <= hidden.hidden_host_ms <= 2 * 6.0, hidden   # a sleep overshoots on a loaded machine
    assert _p50(hidden, "client ITL") < _p50(base, "client ITL") + 0.15 * 6.0   # not summed into the gap
    assert "hidden by overlap" in repr(hidden)


def test_a_co_scheduled_long_prefill_lands_in_the_prefill_part(engine):
    def long_prompts(url, stop):
        while not stop.is_set():
            kit.bench.stream_request(url, model="tinyserve/random-llama", prompt="w " * 3000, max_tokens=1)
            stop.wait(0.15)

    rec, _, _ = _run(engine, during=long_prompts)
    t = rec.tokens
    hit = t[t["prefill"] > 50]   # 3000 prompt tokens x 0.05 ms: ~150 ms of prefill inside the gap
    assert len(hit) >= 3, t.describe()
    excess = hit["gap"] - t["gap"].median()
    assert (hit["prefill"] >= 0.9 * excess).all(), hit
    assert rec.residual_share["slowest_1pct"] <= 0.10


@pytest.mark.parametrize("conc", [1, 16])
def test_the_residual_is_small_at_concurrency_1_and_16(engine, conc):
    rec, res, _ = _run(engine, conc=conc, n=max(6, 2 * conc))
    assert not rec.refused, rec.refused
    share = rec.residual_share
    assert share["median_band"] <= 0.05 and share["slowest_1pct"] <= 0.10, (share, rec.table)
    assert len(rec.tokens) == sum(r["output_tokens"] - 1 for r in res.requests if r["ok"])


def test_a_planted_clock_offset_is_found_and_cancels(engine):
    rec, _, _ = _run(engine, {"TINYSERVE_CLOCK_OFFSET_S": "2.5"})
    assert not rec.refused
    assert abs(rec.offset_ms - 2500.0) <= rec.offset_bound_ms + 1.0, (rec.offset_ms, rec.offset_bound_ms)


def test_clocks_that_jump_or_records_of_another_run_are_refused(engine, tmp_path):
    rec, res, log = _run(engine)
    # the engine's clock jumps by 50 ms half-way through the run: every later record moves
    lines = log.read_text().splitlines()
    reqs = [i for i, line in enumerate(lines) if "Request record: " in line]
    for i in reqs[len(reqs) // 2:]:
        head, body = lines[i].split("Request record: ", 1)
        r = json.loads(body)
        for key in ("emit", "got", "sent"):
            r[key] = [t + 0.05 for t in r[key]]
        r["arrival"] += 0.05
        lines[i] = head + "Request record: " + json.dumps(r)
    jumped = tmp_path / "jumped.log"
    jumped.write_text("\n".join(lines) + "\n")
    refused = kit.bench.reconcile(res, jumped)
    assert refused.refused and ("drift" in refused.refused or "cannot be aligned" in refused.refused)
    assert refused.table is None and "refused" in repr(refused)
    fig = refused.plot()
    assert not fig.axes[0].patches   # the reason, not a waterfall
    other = kit.bench.reconcile([{**r, "response_id": "cmpl-999"} for r in res.requests], log)
    assert "no client request matches" in other.refused


def test_the_forward_is_split_by_a_trace_busy_share(engine):
    rec, res, log = _run(engine)
    trace = ROOT / "tests" / "data" / "traces" / "cpu_eager" / "trace.json.gz"
    split = kit.bench.reconcile(res, log, trace=trace)
    s = kit.profile.load(trace).summary("all")
    busy = float(s.per_rank["busy_us"].sum() / s.per_rank["wall_us"].sum())
    assert split.busy_share == pytest.approx(busy, rel=1e-6) and 0 < busy < 1
    t = split.table.set_index("part")
    assert "forward" not in t.index and t.loc["gpu_busy", "mean"] + t.loc["gpu_idle", "mean"] == pytest.approx(
        rec.table.set_index("part").loc["forward", "mean"], rel=1e-6)
    assert str(trace) in t.loc["gpu_busy", "source"]
    fig = split.plot()
    assert fig.axes[0].patches and "GPU split by" in fig.axes[0].get_title()


def test_saved_records_reconcile_from_the_cli(engine, tmp_path):
    url, log = engine()
    saved = tmp_path / "load.json"
    kit.bench.load_test(url, concurrency=1, requests=4, max_tokens=12, warmup=1, save=saved)
    out = subprocess.run([sys.executable, "-m", "kit", "bench", "reconcile", str(saved), str(log), "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert not got["refused"] and {r["part"] for r in got["table"]} >= {"http", "output", "sched", "client ITL"}
    text = subprocess.run([sys.executable, "-m", "kit", "bench", "reconcile", str(saved), str(log)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert text.returncode == 0 and "client ITL" in text.stdout and "clock offset" in text.stdout


@pytest.mark.shared_data
def test_real_engine_logs_without_step_records_are_a_one_line_error(shared_data):
    for log in sorted((shared_data / "logs").glob("sglang_*.log"))[:3]:
        with pytest.raises(LogFormatError) as err:
            kit.logs.step_records(log)
        assert str(log) in str(err.value) and "\n" not in str(err.value)


def test_unreadable_record_lines_are_counted(tmp_path):
    log = tmp_path / "e.log"
    good = {"step": 1, "fwd0": 1.0, "fwd1": 1.01, "rids": [1]}
    log.write_text(f"Step record: {json.dumps(good)}\nStep record: {{broken\nStep record: {{\"step\": 2}}\n")
    rec = kit.logs.step_records(log)
    assert len(rec.steps) == 1 and "2 step record lines unreadable (first at line 2)" in rec.warnings[0]



SAMPLE = ROOT / "notebooks" / "sample" / "bench" / "reconcile"


@pytest.mark.parametrize("mode", ["graph", "eager"])
@pytest.mark.parametrize("conc", [1, 16])
def test_the_sample_session_runs_reconcile_within_the_residual_limits(mode, conc):
    rec = kit.bench.reconcile(SAMPLE / mode / f"c{conc}.json", SAMPLE / mode / "engine.log")
    assert not rec.refused and not rec.warnings, (rec.refused, rec.warnings)
    assert rec.residual_share["median_band"] <= 0.05 and rec.residual_share["slowest_1pct"] <= 0.10
    t = rec.table.set_index("part")
    # the CPU runner's step is the gap
    assert t.loc["forward", "median_band"] > 0.8 * t.loc["client ITL", "median_band"]
    assert "measured" in rec.provenance and "record_reconcile.py" in rec.provenance


def test_the_sample_reconciliation_names_its_bands_and_its_reasons(tmp_path):
    """Issue 46 item 6 on the sample's records: columns named for what they hold (band means, not 'p50'/'p99'),
    no part below zero (the output part read -0.005 ms inside the clock bound: shown as 0 and said), and a trace
    given without GPU busy time named as the reason the forward is not split (it said 'no trace given')."""
    import gzip

    from tests.conftest import SAMPLE
    from tests.profile import derived_traces as D

    runs = SAMPLE / "bench" / "reconcile" / "graph"
    rec = kit.bench.reconcile(runs / "c1.json", runs / "engine.log")
    t = rec.table.set_index("part")
    assert {"mean", "median_band", "slowest_1pct", "shown"} <= set(t.columns) and "p50" not in t.columns
    parts = t.drop(index=["residual", "client ITL"])
    assert (parts[["mean", "median_band", "slowest_1pct"]] >= 0).all(axis=None), parts
    assert t.loc["output", "shown"].startswith(f"0 (within +-{rec.offset_bound_ms:.3f} ms")
    path, _ = D.graph_without_timing(tmp_path / "untimed.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if "annotation" not in str(e.get("cat"))]
    f = tmp_path / "untimed.json"
    f.write_text(json.dumps(doc))
    rec = kit.bench.reconcile(runs / "c1.json", runs / "engine.log", trace=f)
    src = rec.table.set_index("part").loc["forward", "source"]
    assert "no trace given" not in src and "untimed.json" in src and "no step with GPU busy time" in src
