"""``kit serve``, ``kit bench run`` and the commands that read their result, driven as a user drives them:
subprocesses, a real tinyserve, a real local load. The saved result is read by ``kit audit``, ``kit bench
parse``/``compare``/``reconcile`` as it is; the table's figures are the library's on the same run; a Ctrl-C
at any point leaves no engine process and no file a later command could take for a result."""
from __future__ import annotations

import gzip
import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from kit.bench import read_result
from kit.bench._result import summarize
from tests.conftest import ROOT
from tests.live.conftest import engine_procs_gone

FAST = "--token-ms 3 --load-seconds 0.1"


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "KIT_RUNS": "off", "KIT_PROGRESS": "off", **extra}


def _kit(*args, cwd, env=None, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kit", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=env or _env())


def _start(args, cwd, env=None) -> subprocess.Popen:
    """A kit command in its own process group (as a terminal runs it: Ctrl-C reaches the group)."""
    return subprocess.Popen([sys.executable, "-m", "kit", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=cwd, start_new_session=True, env=env or _env(KIT_ANNOUNCE_READY="1"))


def _wait_line(p: subprocess.Popen, prefix: str, limit: float = 120.0) -> list[str]:
    """stderr lines up to and including the first that starts with ``prefix`` (the command's own signal)."""
    seen: list[str] = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith(prefix):
            return seen
    raise AssertionError(f"no line {prefix!r} from {p.args}: {''.join(seen)[-2000:]}")


def _table(stdout: str) -> list[dict[str, str]]:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    head = lines[0].split("  ")
    head = [h.strip() for h in head if h.strip()]
    rows = []
    for ln in lines[1:]:
        if ln.startswith(("note:", "TTFT, ITL")):
            break
        rows.append(dict(zip(head, ln.split())))
    return rows


@pytest.fixture
def served(tmp_path):
    """``kit serve tinyserve`` (step records on): (URL, engine log, marker, the process)."""
    marker = f"kit-cli-{uuid.uuid4().hex[:10]}"
    p = _start(["serve", "--env", "TINYSERVE_STEP_RECORDS=1", "tinyserve", "--served-model-name", marker,
                *FAST.split()], tmp_path)
    try:
        ready = _wait_line(p, "kit: serving")[-1]
        url = p.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url in ready
        log = ready.rsplit("log ", 1)[1].strip()
        yield url, log, marker, p
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
            p.wait(60)
        assert not engine_procs_gone(marker), "engine processes left behind"


def test_serve_bench_run_and_the_commands_that_read_it(served, tmp_path):
    url, log, marker, serve = served
    out, plot = tmp_path / "run.json", tmp_path / "run.png"
    got = _kit("bench", "run", url, "--concurrency", "1", "2", "--requests", "6", "--max-tokens", "16",
               "--warmup", "0", "--seed", "5", "--out", str(out), "--plot", str(plot), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert plot.stat().st_size > 1000
    res = read_result(out)
    # the table is the library's figures of that run, level by level
    rows = _table(got.stdout)
    assert [r["level"] for r in rows] == [s["level"] for s in res.summary()] == ["c=1", "c=2"]
    for r, s in zip(rows, res.summary()):
        assert int(r["ok"]) == s["requests_ok"] == 6 and int(r["failed"]) == 0
        for col, key in (("TTFT", "ttft_ms_p50"), ("decode", "decode_tok_s"), ("out", "output_tok_s")):
            shown = float(r[next(h for h in r if h.startswith(col))].replace(",", ""))
            assert math.isclose(shown, s[key], rel_tol=0.01, abs_tol=0.06), (col, shown, s[key])
    assert all(q["output_tokens"] == 16 for q in res.requests)
    for lv in res.levels:  # and the library's figures of the saved requests are the saved figures
        again = summarize(lv["requests"], lv["summary"]["duration_s"])
        assert all(again[k] == pytest.approx(lv["summary"][k]) for k in ("ttft_ms_p50", "decode_tok_s", "itl_ms_p99",
                                                                          "output_tok_s", "e2e_ms_mean"))
    # kit bench parse: the same figures as rows
    parsed = _kit("bench", "parse", str(out), "--json", cwd=tmp_path)
    assert parsed.returncode == 0, parsed.stderr
    prow = json.loads(parsed.stdout)
    assert [p["completed"] for p in prow] == [6, 6] and [p["max_concurrency"] for p in prow] == [1, 2]
    assert math.isclose(prow[0]["median_ttft_ms"], res.summary()[0]["ttft_ms_p50"])
    assert math.isclose(prow[1]["decode_tok_s"], res.summary()[1]["decode_tok_s"])
    # kit audit reads it (no warm-up was asked: flagged, naming the file), and nothing is unreadable
    audit = _kit("audit", str(out), "--json", cwd=tmp_path)
    assert audit.returncode == 0, audit.stderr
    a = json.loads(audit.stdout)
    assert any(f["code"] == "no-warmup" and str(out) in f["run"] for f in a["findings"]), a
    assert not any("not a benchmark record" in n for n in a["notes"]), a["notes"]
    # kit bench reconcile: the engine's step records against the saved client records
    rec = _kit("bench", "reconcile", str(out), log, "--json", cwd=tmp_path)
    assert rec.returncode == 0, rec.stderr
    assert not json.loads(rec.stdout)["refused"]
    # kit bench compare: the run as its own baseline (recorded from 'kit bench parse')
    store = _env(KIT_RUNS="on", KIT_RUNS_DIR=str(tmp_path / "store"), KIT_CACHE_DIR=str(tmp_path / "cache"))
    store.pop("KIT_RUNS_SHARED", None)
    assert _kit("bench", "parse", str(out), cwd=tmp_path, env=store).returncode == 0
    listed = _kit("runs", "list", "--json", cwd=tmp_path, env=store)
    run_id = next(r["run_id"] for r in json.loads(listed.stdout) if r["kind"] == "bench")
    assert _kit("runs", "baseline", "mine", run_id, cwd=tmp_path, env=store).returncode == 0
    cmp = _kit("bench", "compare", str(out), "--baseline", "mine", "--fail-on-regression", "--json", cwd=tmp_path,
               env=store)
    assert cmp.returncode == 0, cmp.stderr
    assert json.loads(cmp.stdout)["verdict"] == "pass"


def test_profile_capture_of_a_served_engine(served, tmp_path):
    """``kit profile capture URL --steps N``: the engine's own profile, through its endpoints, whole files
    that ``kit profile summary`` reads."""
    url, *_ = served
    got = _kit("profile", "capture", url, "--steps", "4", "--out", str(tmp_path / "caps"), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    placed = got.stdout.split()
    assert placed == [str(tmp_path / "caps" / "rank0.trace.json.gz")]
    with gzip.open(placed[0]) as f:
        assert "traceEvents" in json.load(f)
    assert not list((tmp_path / "caps").glob(".capture.*"))
    summary = _kit("profile", "summary", placed[0], "--json", cwd=tmp_path)
    assert summary.returncode == 0, summary.stderr


def test_ctrl_c_during_a_capture_leaves_no_trace_and_the_engine_not_profiling(served, tmp_path):
    url, *_ = served
    caps = tmp_path / "caps"
    p = _start(["profile", "capture", url, "--seconds", "120", "--out", str(caps)], tmp_path)
    _wait_line(p, "kit: recording")
    os.killpg(p.pid, signal.SIGINT)
    rc = p.wait(60)
    err = p.stderr.read()
    assert rc in (130, -signal.SIGINT) and "Traceback" not in err, (rc, err[-2000:])
    assert not caps.exists() or not list(caps.iterdir())
    again = _kit("profile", "capture", url, "--steps", "2", "--out", str(caps), cwd=tmp_path)
    assert again.returncode == 0, again.stderr  # the interrupted recording was stopped: a new one starts


def test_ctrl_c_after_serving_stops_the_engine(served):
    *_, marker, serve = served
    os.killpg(serve.pid, signal.SIGINT)
    assert serve.wait(60) in (0, 130)
    err = serve.stderr.read()
    assert "stopped" in err and "Traceback" not in err, err
    assert not engine_procs_gone(marker)


@pytest.mark.parametrize("when", ["kit: ready", "kit: serving"])
def test_ctrl_c_in_a_whole_loop_leaves_no_engine_and_no_result(tmp_path, when):
    """``kit bench run --serve``: a Ctrl-C as the program starts, and once the engine serves (the benchmark
    running): exit 130, the engine gone, no result file and no temporary one."""
    marker = f"kit-cli-{uuid.uuid4().hex[:10]}"
    out = tmp_path / "loop.json"
    p = _start(["bench", "run", "--serve", "tinyserve", "--engine-args", f"--served-model-name {marker} {FAST}",
                "--concurrency", "1", "--requests", "400", "--max-tokens", "64", "--out", str(out)], tmp_path)
    _wait_line(p, when)
    os.killpg(p.pid, signal.SIGINT)
    rc = p.wait(90)
    err = p.stderr.read()
    assert rc in (130, -signal.SIGINT) and "Traceback" not in err, (rc, err[-2000:])
    assert not engine_procs_gone(marker)
    assert not out.exists() and not list(tmp_path.glob(".loop.json*")), list(tmp_path.iterdir())


def test_errors_are_one_line(tmp_path):
    from tests.live.conftest import free_port

    for args, want in ((["bench", "run", f"http://127.0.0.1:{free_port()}", "--requests", "1"], "/v1/models"),
                       (["bench", "run"], "give the server's URL"),
                       (["bench", "run", "http://x:1", "--serve", "tinyserve"], "not both"),
                       (["bench", "run", "http://x:1", "--slo", "ttft"], "METRIC=MS"),
                       (["bench", "run", "http://x:1", "--out", str(tmp_path)], "is a directory"),
                       (["serve", "--env", "1X=2", "tinyserve"], "NAME=VALUE"),
                       (["profile", "capture", "http://example.invalid:1", "--steps", "2"], "not on this machine"),
                       (["profile", "capture", "http://127.0.0.1:1", "--seconds", "1", "--engine", "vllm"],
                        "--trace-dir"),
                       (["profile", "capture", f"http://127.0.0.1:{free_port()}", "--steps", "2"], "start_profile")):
        got = _kit(*args, cwd=tmp_path)
        lines = got.stderr.strip().splitlines()
        assert got.returncode == 1 and len(lines) == 1 and want in lines[0], (args, got.stderr)
