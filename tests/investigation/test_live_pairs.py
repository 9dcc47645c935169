"""kit investigate on real tinyserve runs with a planted cause on the output path or the HTTP path and a run with
failed requests (a run against its own repeat: the stored experiment's two runs, in test_investigate.py; two
live runs at different moments of a loaded machine could differ for real). Each run is a folder as a live
session leaves it: the kit's client records (``load.json``), the engine's log with its step records,
``server.json`` (command, environment, URL). The truth is the planted delay: a single change, so 100 % of the
ITL gap."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit
from tests.conftest import ROOT
from tests.live.conftest import ENGINE, free_port, wait_http

TOKEN_MS = 10.0


@pytest.fixture
def run(tmp_path):
    """Factory: start a tinyserve (step records on, ``env`` added), optionally behind the throttling proxy,
    bench it with the kit's client and leave the run's folder; returns the folder."""
    procs: list[subprocess.Popen] = []

    def start(name: str, env: dict | None = None, proxy_ms: float | None = None, requests: int = 8,
              client: str = "load_test") -> Path:
        d = tmp_path / name
        d.mkdir()
        port = free_port()
        cmd = [sys.executable, "-m", "tinyserve.launch_server", "--device", "cpu", "--port", str(port), "--token-ms",
               str(TOKEN_MS), "--load-seconds", "0.1"]
        full = dict(os.environ, PYTHONPATH=str(ENGINE), TINYSERVE_STEP_RECORDS="1", **(env or {}))
        with open(d / "engine.log", "w") as out:
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full))
        url = f"http://127.0.0.1:{port}"
        wait_http(url)
        if proxy_ms is not None:
            p = subprocess.Popen([sys.executable, "-m", "tests.bench.throttle_proxy", str(port), str(proxy_ms)],
                                 stdout=subprocess.PIPE, cwd=ROOT, text=True)
            procs.append(p)
            url = f"http://127.0.0.1:{int(p.stdout.readline())}"
        (d / "server.json").write_text(json.dumps({"cmd": " ".join(cmd[1:]).replace(str(port), "8000"),
                                                   "env": {"TINYSERVE_STEP_RECORDS": "1", **(env or {})},
                                                   "url": url}))
        if client == "single_stream":
            kit.bench.single_stream(url, requests=requests, max_tokens=24, warmup=1, repeats=2, concurrency=(1,),
                                    prompt_tokens=8, save=d / "bench.json", timeout=20)
        else:
            kit.bench.load_test(url, concurrency=1, requests=requests, max_tokens=24, warmup=1, prompt_tokens=8,
                                save=d / "load.json")
        return d

    yield start
    for p in procs:
        p.terminate()
        p.wait(20)


def _tolerance(inv, own: str) -> float:
    """10 points, plus what the other parts really moved between the two runs (two live runs on a loaded machine:
    scheduling and host time change by themselves, and the planted part's share is then less than 100 %), at most
    25 points."""
    data = inv.steps["itl"].data
    others = sum(abs(v["delta_ms"]) for k, v in data["parts"].items() if k != own)
    return min(0.25, 0.10 + others / abs(data["delta_ms"]))


def test_a_slow_detokenizer_is_the_output_path(run):
    base, slow = run("base"), run("detok", {"TINYSERVE_DETOK_MS": "25"})
    inv = kit.investigate(base, slow, labels=("base", "detok"))
    top = inv.ranked[0]
    assert top.key == "output" and abs(top.share - 1.0) < _tolerance(inv, "output"), inv
    assert "TINYSERVE_DETOK_MS" in top.setting and top.experiment.runnable
    assert "'TINYSERVE_DETOK_MS': [None, '25']" in top.experiment.call
    assert inv.steps["gap"].data["beyond_noise"] is True


def test_a_throttling_proxy_is_the_http_path(run):
    base, proxied = run("base"), run("proxy", proxy_ms=25.0)
    inv = kit.investigate(base, proxied, labels=("direct", "proxy"))
    top = inv.ranked[0]
    assert top.key == "http" and abs(top.share - 1.0) < _tolerance(inv, "http"), inv
    assert top.experiment.runnable and "kit.bench.load_test" in top.experiment.call
    assert "HTTP path" in top.experiment.variant


def test_a_run_with_failed_requests_is_said_first(run):
    """The engine dies after 3 requests (TINYSERVE_CRASH=after:3): the rest fail, the run is invalid."""
    base = run("base", requests=4, client="single_stream")
    broken = run("crash", {"TINYSERVE_CRASH": "after:3"}, requests=4, client="single_stream")
    inv = kit.investigate(base, broken, labels=("base", "crash"))
    assert inv.headline.startswith("INVALID: crash") and "failed-requests" in " ".join(inv.steps["validity"].lines)
    assert not inv.ranked and inv.steps["gap"].status == "refused" and inv.steps["itl"].status == "refused"


def test_one_command_on_the_sample_session_under_30_s():
    """The sample session's vLLM-vs-SGLang pair, as the report's A vs B page gives it, from the command line."""
    import time

    s = ROOT / "notebooks" / "sample"
    side = f"{s / 'model/config.json'},{s / 'server/nvidia-smi-query-gpu.csv'}"
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "kit", "investigate",
                          f"{s / 'bench/vllm_tp8_default.json'},{s / 'logs/vllm_0.11.0_tp8_default.log'},{side}",
                          f"{s / 'bench/sglang_tp8_default.jsonl'},{s / 'logs/sglang_0.5.9_tp8_default.log'},{side}",
                          "--labels", "vLLM", "SGLang", "--json"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert took < 30, took
    ran = {s["name"]: s for s in got["steps"] if s["status"] == "ran"}
    assert list(ran) == ["inputs", "validity", "gap", "itl", "settings", "floor"]
    # the engines' decode/throughput lines reconcile only as distributions: where the gap lies is said, not ranked
    assert ran["itl"]["data"]["compared"] is False and any("of the gap is inside the engine" in x
                                                           for x in ran["itl"]["lines"])
    assert got["causes"][0]["key"] == "overlap_schedule" and "candidates" in got["headline"]
