"""kit.experiment against tinyserve's CPU runner, whose per-token latency effects are known
(``tinyserve.runtime.TRUTH``): 4 variants x 3 repeats, interrupted after two variants and resumed
without re-running them; the detected differences must match the configured truth."""
from __future__ import annotations

import json
import math
import uuid

import pytest

import kit
from kit.errors import ExperimentError
from kit.ledger import Ledger
from kit.live import plan
from tests.live.conftest import engine_procs, free_port

# the configured truth (tinyserve/runtime.py TRUTH): per-token time x0.70 for NCCL_PROTO=LL,
# x1.00 for NCCL_ALGO=Ring, x1.25 for the triton attention backend -> tok/s ratios:
TRUTH = {"NCCL_PROTO=LL": 1 / 0.70, "NCCL_ALGO=Ring": 1.0, "--attention-backend triton": 1 / 1.25}


def test_plan_modes():
    one = plan("serve", {"A": [None, "1"], "B": ["x", "y", "z"]}, {"--f": [False, True]}, mode="ofat")
    assert [v["label"] for v in one] == ["baseline", "A=1", "B=y", "B=z", "--f"]
    assert one[0]["env"] == {"B": "x"} and one[1]["env"] == {"A": "1", "B": "x"} and one[4]["cmd"] == "serve --f"
    grid = plan("serve", {"A": [None, "1"], "B": ["x", "y", "z"]}, {"--f": [False, True]}, mode="grid")
    assert len(grid) == 12 and len({v["slug"] for v in grid}) == 12
    assert grid[-1]["label"] == "A=1, B=z, --f"
    flags = plan("serve", flags={"--attention-backend": [None, "triton"]})
    assert flags[1]["cmd"] == "serve --attention-backend triton"
    with pytest.raises(ExperimentError, match="mode"):
        plan("serve", {"A": [1, 2]}, mode="random")
    with pytest.raises(ExperimentError, match="environment variable"):
        plan("serve", {"A B": [1, 2]})


def test_experiment_finds_the_truth_and_resumes(tmp_path):
    marker = f"kit-exp-truth-{uuid.uuid4().hex[:8]}"  # unique: other checkouts may run the same test now
    cmd = (f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} "
           "--token-ms 10 --load-seconds 0.2")
    from tests.live.conftest import ENGINE

    kw = dict(matrix={"NCCL_PROTO": [None, "LL"], "NCCL_ALGO": [None, "Ring"]},
              flags={"--attention-backend": [None, "triton"]}, env={"PYTHONPATH": str(ENGINE)},
              port=free_port(), session=tmp_path, name="truth", repeats=3, progress=False,
              bench={"requests": 3, "warmup": 1, "max_tokens": 24, "prompt_tokens": 8})
    seen = []

    def interrupt_after_two(variant, result):
        seen.append(variant["label"])
        if len(seen) == 2:
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C in the notebook

    with pytest.raises(KeyboardInterrupt):
        kit.experiment(cmd, on_variant=interrupt_after_two, **kw)
    assert not engine_procs(marker)
    d = tmp_path / "experiments" / "truth"
    done = {str(p.parent.relative_to(d)): p.stat().st_mtime_ns for p in d.glob("*/rep*/run.json")}
    assert sorted(done) == ["v00-baseline/rep0", "v01-NCCL_PROTO_LL/rep0"]

    rerun = []
    exp = kit.experiment(cmd, on_variant=lambda v, r: rerun.append((v["label"], r["repeat"])), **kw)
    # finished runs not re-run; the rest interleaved, rounds alternating direction
    assert rerun == [("NCCL_ALGO=Ring", 0), ("--attention-backend triton", 0),
                     ("--attention-backend triton", 1), ("NCCL_ALGO=Ring", 1), ("NCCL_PROTO=LL", 1), ("baseline", 1),
                     ("baseline", 2), ("NCCL_PROTO=LL", 2), ("NCCL_ALGO=Ring", 2), ("--attention-backend triton", 2)]
    assert {k: (d / k / "run.json").stat().st_mtime_ns for k in done} == done
    assert not engine_procs(marker)
    meta = json.loads((d / "plan.json").read_text())
    assert meta["interleave"] and len(meta["order"]) == 12 and "drift" in meta["statistics"]["covers"]
    assert meta["order"][:5] == [{"variant": "v00-baseline", "repeat": 0},
                                 {"variant": "v01-NCCL_PROTO_LL", "repeat": 0},
                                 {"variant": "v02-NCCL_ALGO_Ring", "repeat": 0},
                                 {"variant": "v03-attention_backend_triton", "repeat": 0},
                                 {"variant": "v03-attention_backend_triton", "repeat": 1}]
    pids = set()
    for run in d.glob("*/rep*/run.json"):  # every run measured on its own engine, which held the port
        r = json.loads(run.read_text())
        assert r["engine"]["port_owner"] == "own" and r["engine"]["stopped"] == "terminated"
        pids.add(r["engine"]["pid"])
    assert len(pids) == 12

    rows = {r["variant"]: r for r in exp.rows()}
    assert all(r["status"] == "ok" and r["n"] == 3 for r in rows.values())
    for label, ratio in TRUTH.items():
        r = rows[label]
        assert r["significant"] == (ratio != 1.0), (label, r)
        assert math.isclose(r["speedup"], ratio, rel_tol=0.10), (label, r["speedup"], ratio)
        assert r["speedup_lo"] <= ratio * 1.05 and r["speedup_hi"] >= ratio * 0.95, (label, r)
    # every artefact is in the session with its command, environment and provenance
    v = json.loads((d / "v01-NCCL_PROTO_LL" / "variant.json").read_text())
    assert v["env"]["NCCL_PROTO"] == "LL" and v["cmd"].startswith("python3 -m tinyserve")
    assert "fired up" in (d / "v03-attention_backend_triton" / "rep2" / "server.log").read_text()
    assert len(kit.bench.read_result(d / "v00-baseline" / "rep1" / "bench.json").requests) == 3
    sess = kit.session.open(tmp_path)
    assert sess.provenance("experiments/truth/v02-NCCL_ALGO_Ring/rep0/bench.json").is_measured
    assert "NCCL_ALGO=Ring" in sess.provenance("experiments/truth/v02-NCCL_ALGO_Ring/rep1/server.log").note

    ledger = Ledger.open(tmp_path / "ledger.json")
    assert exp.decide(ledger, "HX1", "NCCL_PROTO=LL", statement="LL speeds decode") == "confirmed"
    assert exp.decide(ledger, "HX2", "NCCL_ALGO=Ring", statement="Ring speeds decode") == "rejected"
    assert exp.decide(ledger, "HX3", "--attention-backend triton", statement="triton is slower",
                      expect="slower") == "confirmed"
    assert Ledger.open(tmp_path / "ledger.json")["HX1"].numbers["significant"] is True

    again = kit.live.Experiment.open(tmp_path, "truth")
    assert [r["tok_s"] for r in again.rows()] == [r["tok_s"] for r in exp.rows()]
    assert "NCCL_PROTO=LL" in repr(again) and "<table>" in again._repr_html_() and "drift" in again._repr_html_()
    fig = exp.plot()
    assert fig.axes[0].get_xlabel().startswith("decode tok/s")
    assert list(exp.table["variant"]) == ["baseline", "NCCL_PROTO=LL", "NCCL_ALGO=Ring", "--attention-backend triton"]
    with pytest.raises(ExperimentError, match="different experiment"):
        kit.experiment(cmd + " --token-ms 3", **kw)


def test_a_variant_that_crashes_is_stored_as_failed(tmp_path):
    from tests.live.conftest import ENGINE

    marker = f"kit-exp-crash-{uuid.uuid4().hex[:8]}"  # unique: other checkouts may run the same test now
    cmd = (f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} "
           "--token-ms 2 --load-seconds 0.2")
    exp = kit.experiment(cmd, matrix={"TINYSERVE_CRASH": [None, "load"]}, env={"PYTHONPATH": str(ENGINE)},
                         port=free_port(), session=tmp_path, name="crash", repeats=2, progress=False,
                         bench={"requests": 2, "warmup": 0, "max_tokens": 8})
    rows = {r["variant"]: r for r in exp.rows()}
    assert rows["baseline"]["status"] == "ok"
    bad = rows["TINYSERVE_CRASH=load"]
    assert bad["status"] == "failed" and "died during loading weights" in bad["error"]
    assert math.isnan(bad["tok_s"]) and not bad["significant"]
    assert not engine_procs(marker)


def _start_driver(tmp_path, cmd, port, marker_env):
    import os
    import subprocess
    import sys
    import textwrap

    from tests.conftest import ROOT

    script = tmp_path / "drive.py"
    script.write_text(textwrap.dedent(f"""
        import kit
        kit.experiment({cmd!r}, matrix={{"NCCL_PROTO": [None, "LL"]}}, env={marker_env!r}, port={port},
                       session="s", name="killed", repeats=2, progress=False,
                       bench={{"requests": 3, "warmup": 1, "max_tokens": 24, "prompt_tokens": 8}})
    """))
    return subprocess.Popen([sys.executable, str(script)], cwd=str(tmp_path),
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _wait_engine_serving(d, p, n_done: int, timeout: float = 60):
    """Until an engine is ready in a run folder without run.json, after ``n_done`` finished runs."""
    import time

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        done = list(d.glob("*/rep*/run.json"))
        live = [e for e in d.glob("*/rep*/engine.json")
                if not (e.parent / "run.json").exists() and json.loads(e.read_text()).get("ready_s")]
        if len(done) >= n_done and live:
            return live[0]
        assert p.poll() is None, p.stderr.read()[-2000:]
        time.sleep(0.05)
    raise AssertionError("the driver never got an engine serving")


@pytest.mark.parametrize("how", ["kill -9", "SIGTERM"])
def test_killed_driver_resume_measures_each_variant_on_its_own_engine(tmp_path, how):
    import signal

    from tests.live.conftest import ENGINE

    marker = f"kit-exp-killed-{how[-1]}-{uuid.uuid4().hex[:8]}"
    cmd = (f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} "
           "--token-ms 10 --load-seconds 0.2")
    port = free_port()  # one fixed port for every engine: an orphan on it would answer the next one's benchmark
    p = _start_driver(tmp_path, cmd, port, {"PYTHONPATH": str(ENGINE)})
    d = tmp_path / "s" / "experiments" / "killed"
    try:
        live = _wait_engine_serving(d, p, n_done=1)
        p.send_signal(signal.SIGKILL if how == "kill -9" else signal.SIGTERM)
        assert p.wait(60) == (-signal.SIGKILL if how == "kill -9" else -signal.SIGTERM)
        orphan = json.loads(live.read_text())
        if how == "SIGTERM":
            assert not engine_procs(marker), "SIGTERM of the driver must stop its engine"
        else:
            assert engine_procs(marker), "kill -9 leaves the engine running (nothing can run in the driver)"
        exp = kit.experiment(cmd, matrix={"NCCL_PROTO": [None, "LL"]}, env={"PYTHONPATH": str(ENGINE)}, port=port,
                             session=tmp_path / "s", name="killed", repeats=2, progress=False,
                             bench={"requests": 3, "warmup": 1, "max_tokens": 24, "prompt_tokens": 8})
    finally:
        if p.poll() is None:
            p.kill()
    assert not engine_procs(marker), "no engine left afterwards"
    meta = json.loads((d / "plan.json").read_text())
    if how == "kill -9":
        assert meta["leftovers"] and orphan["pid"] in meta["leftovers"][0]["pids"]
    else:
        assert meta["leftovers"] == []
    runs = [json.loads(f.read_text()) for f in sorted(d.glob("*/rep*/run.json"))]
    assert len(runs) == 4 and all(r["status"] == "ok" and r["engine"]["port_owner"] == "own" for r in runs)
    assert len({r["engine"]["pid"] for r in runs}) == 4 and orphan["pid"] not in {r["engine"]["pid"] for r in runs}
    row = exp.row("NCCL_PROTO=LL")
    # the resumed runs measure the variant (its significance at 2 repeats of 3 requests is load-dependent: not
    # this test's subject)
    assert math.isclose(row["speedup"], 1 / 0.70, rel_tol=0.10), row


def test_interleaving_keeps_drift_out_of_the_speedup(tmp_path):
    """A machine that slows down 3 % a second (tinyserve TINYSERVE_DRIFT, the same for every engine):
    run back to back, the later variant pays for the drift; interleaved, the truth comes out."""
    import time

    from tests.live.conftest import ENGINE

    marker = f"kit-exp-drift-{uuid.uuid4().hex[:8]}"  # unique: other checkouts may run the same test now
    cmd = (f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} "
           "--token-ms 8 --load-seconds 0.1")
    truth = 1 / 0.70
    got = {}
    for interleave in (False, True):
        env = {"PYTHONPATH": str(ENGINE), "TINYSERVE_DRIFT": f"{time.time():.3f}:0.03"}
        exp = kit.experiment(cmd, matrix={"NCCL_PROTO": [None, "LL"]}, env=env, port=free_port(), session=tmp_path,
                             name=f"drift-{interleave}", repeats=3, progress=False, interleave=interleave,
                             bench={"requests": 3, "warmup": 1, "max_tokens": 24, "prompt_tokens": 8})
        got[interleave] = exp.row("NCCL_PROTO=LL")
    assert not engine_procs(marker)
    blocks, inter = got[False]["speedup"], got[True]["speedup"]
    assert blocks < truth * 0.92, f"back to back the drift should show: x{blocks:.3f} vs truth x{truth:.3f}"
    assert math.isclose(inter, truth, rel_tol=0.06), f"interleaved x{inter:.3f} vs truth x{truth:.3f}"
    assert got[True]["speedup_lo"] <= truth <= got[True]["speedup_hi"] * 1.02


def test_a_rerun_while_the_first_driver_still_runs_is_refused(tmp_path):
    """Leftovers are stopped only when their driver is gone: a second run of the same experiment while
    the first one is alive gets a clear error naming the engines and the driver, and stops nothing."""
    import signal

    from kit.errors import ExperimentError
    from tests.live.conftest import ENGINE

    marker = f"kit-exp-refused-{uuid.uuid4().hex[:8]}"  # unique: other checkouts may run the same test now
    cmd = (f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} "
           "--token-ms 10 --load-seconds 0.2")
    port = free_port()
    p = _start_driver(tmp_path, cmd, port, {"PYTHONPATH": str(ENGINE)})
    d = tmp_path / "s" / "experiments" / "killed"
    try:
        _wait_engine_serving(d, p, n_done=0)
        with pytest.raises(ExperimentError, match=r"still in progress \(driver pid \d+") as err:
            kit.experiment(cmd, matrix={"NCCL_PROTO": [None, "LL"]}, env={"PYTHONPATH": str(ENGINE)}, port=port,
                           session=tmp_path / "s", name="killed", repeats=2, progress=False,
                           bench={"requests": 3, "warmup": 1, "max_tokens": 24, "prompt_tokens": 8})
        assert str(p.pid) in str(err.value) and "\n" not in str(err.value)
        assert engine_procs(marker), "nothing of the running experiment was stopped"
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)
    assert not engine_procs(marker)


def test_experiment_on_a_reasoning_engine_in_chat_mode(tmp_path):
    """tinyserve streaming 20 reasoning tokens before the answer: decode tok/s is the engine's (10 ms a
    token: 100 tok/s; x1/0.7 with NCCL_PROTO=LL), TTFT the first token of any kind, not the answer's."""
    from tests.live.conftest import ENGINE

    marker = f"kit-exp-reasoning-{uuid.uuid4().hex[:8]}"  # unique: other checkouts may run the same test now
    cmd = (f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} --token-ms 10 "
           f"--load-seconds 0.1 --reasoning-tokens 20")
    exp = kit.experiment(cmd, matrix={"NCCL_PROTO": [None, "LL"]}, env={"PYTHONPATH": str(ENGINE)}, port="free",
                         session=tmp_path, name="reasoning", repeats=2, progress=False,
                         bench={"requests": 3, "warmup": 1, "max_tokens": 32, "prompt_tokens": 8, "chat": True})
    assert not engine_procs(marker)
    rows = {r["variant"]: r for r in exp.rows()}
    # a sleep only overshoots on a loaded machine: at most 5 % over the engine's rate, and up to 20 % under it;
    # counting the answer's tokens alone would read 12/32 of it
    assert 0.80 * 100 <= rows["baseline"]["tok_s"] <= 1.05 * 100, rows["baseline"]
    assert math.isclose(rows["NCCL_PROTO=LL"]["tok_s"] / rows["baseline"]["tok_s"], 1 / 0.7, rel_tol=0.10), rows
    assert rows["baseline"]["ttft_ms"] < 10  # the first reasoning token, not the answer 20 tokens later
    run = json.loads((tmp_path / "experiments" / "reasoning" / "v00-baseline" / "rep0" / "run.json").read_text())
    assert run["bench"]["reasoning_tokens"] == 20 and run["bench"]["answer_tokens"] == 12


def test_busy_port_fails_every_run_clearly_and_measures_nothing(tmp_path, timed_server):
    from tests.live.conftest import ENGINE

    other, _ = timed_server(itl_ms=8)  # another server already answers on the port
    port = int(other.rsplit(":", 1)[1])
    marker = f"kit-exp-busy-{uuid.uuid4().hex[:8]}"  # unique: other checkouts may run the same test now
    cmd = (f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} "
           "--token-ms 10 --load-seconds 0.1")
    exp = kit.experiment(cmd, matrix={"NCCL_PROTO": [None, "LL"]}, env={"PYTHONPATH": str(ENGINE)}, port=port,
                         session=tmp_path, name="busy", repeats=1, progress=False,
                         bench={"requests": 2, "warmup": 0, "max_tokens": 8})
    for r in exp.rows():
        assert r["status"] == "failed" and f"port {port} is already in use by pid" in r["error"], r
        assert math.isnan(r["tok_s"]) and not r["significant"]
    d = tmp_path / "experiments" / "busy"
    assert not list(d.glob("*/rep*/bench.json")) and not engine_procs(marker)


def _payloads(marker) -> list[str]:
    t = f"touch {marker}"
    return [f"--x$({t})", f"--x`{t}`", f"--x;{t}", f"--x && {t}", f"--x|{t}", f"--x\n{t}", f"--x'$({t})'",
            f'--x"$({t})"', f"--x>{marker}", f"--x $({t})", f"-x;{t}", f"--x{{a,b}};{t}", f"--x\t;{t}",
            f"--$({t})", f"--x=$({t})"]


@pytest.mark.parametrize("as_json", [False, True], ids=["dict", "papermill-json"])
def test_flag_and_env_names_cannot_reach_the_host_shell(tmp_path, as_json):
    """Issue 34: names were not quoted (9 of 15 payloads ran on the host). Every payload is refused by
    name; the names that are accepted go through the host's shell as one word each."""
    marker = tmp_path / "pwned"
    host = kit.connect("local")
    for p in _payloads(marker):
        flags = {p: [None, True]}
        with pytest.raises(ExperimentError, match="not a flag name"):
            plan("printf '<%s>'", flags=json.dumps(flags) if as_json else flags)
        for env in ({p.lstrip("-"): [None, "1"]}, None):
            with pytest.raises(ExperimentError, match="environment variable name"):
                plan("true", env if env else None, env={p.lstrip("-"): "1"} if env is None else None)
    assert not marker.exists()
    ok = plan("printf '<%s>'", flags={"--a.b_c-d": [None, "x y"], "-tp": [False, True]}, mode="grid")
    out = host.run(ok[-1]["cmd"], timeout=30).stdout
    assert out == "<--a.b_c-d><x y><-tp>"
