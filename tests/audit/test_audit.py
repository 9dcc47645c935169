"""kit.audit on the cases of issue 26's "Done when", each flagged with its evidence, and a clean default run
that flags nothing: an experiment variant whose flag the engine ignored (the sample session's
``--disable-custom-all-reduce`` case, measured by kit.experiment on tinyserve, and a fresh live run), a
decode batch above the largest captured graph (a live tinyserve), custom all-reduce off on a PCIe
server (sample logs, the real 8x RTX 4090 PCIe topology), a debug variable in a real engine process's
environment, and a throttled run (a real H200 nvidia-smi capture under load)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kit
from tests.conftest import ROOT, TEST_DATA
from tests.live.conftest import ENGINE, engine_procs_gone, free_port

SAMPLE = ROOT / "notebooks" / "sample"
STORED = SAMPLE / "experiments" / "cpu_pcie_custom_allreduce"
TINY = ("python3 -m tinyserve.launch_server --device cpu --served-model-name {m} --token-ms 5 --load-seconds 0.2 "
        "--tp-size 8")


def _codes(a) -> set[str]:
    return {f.code for f in a.flagged}


def test_sample_experiment_ignored_flag_is_found_with_its_deciding_function():
    """The sample session's --disable-custom-all-reduce variant: found from the stored experiment alone
    (plan.json and each variant's server.log), not from any notebook code."""
    eff = kit.audit.experiment_effects(STORED, source=str(ENGINE / "tinyserve"))
    by = {e.setting: e for e in eff.effects}
    ar = by["--disable-custom-all-reduce"]
    assert ar.status == "ignored" and ar.verdict.startswith("no effect: the engine ignored --disable-custom-all-reduce")
    assert ar.baseline is False and ar.variant_value is False
    assert "v00-baseline/rep0/server.log:1:" in ar.evidence[0] and "Custom allreduce is disabled" in ar.evidence[0]
    assert ar.decider.function == "resolve_flags" and ar.decider.path.endswith("tinyserve/launch_server.py")
    assert "is_pcie_only()" in ar.decider.condition and "tp_size > 2" in ar.decider.condition
    (pred,) = ar.decider.predicates  # the GPU predicate that overrides the flag, followed to its definition
    assert pred.startswith("is_pcie_only() defined at ") and "tinyserve/srt/utils/common.py:" in pred
    g = by["--disable-cuda-graph"]
    assert g.status == "took effect" and (g.baseline, g.variant_value) == (True, False)
    # the measurement agrees: the ignored flag changed nothing, the graph flag did
    rows = {r["label"]: r for r in (json.loads((STORED / v / "result.json").read_text())
                                    for v in ("v00-baseline", "v01-disable_custom_all_reduce",
                                              "v02-disable_cuda_graph"))}
    tok = {k: sum(x["decode_tok_s"] for x in r["repeats"]) / len(r["repeats"]) for k, r in rows.items()}
    assert abs(tok["--disable-custom-all-reduce"] / tok["baseline"] - 1) < 0.03
    assert tok["--disable-cuda-graph"] / tok["baseline"] < 0.8
    a = kit.audit.audit([STORED], source=str(ENGINE / "tinyserve"))
    hits = [f for f in a.findings if f.code == "ignored-setting" and f.severity == "high"]
    assert len(hits) == 1 and "resolve_flags" in hits[0].verdict and hits[0].evidence


def test_cli_audit_json_and_fail_on(tmp_path):
    out = subprocess.run([sys.executable, "-m", "kit", "audit", str(STORED), "--json", "--source",
                          str(ENGINE / "tinyserve"), "--fail-on", "high"], capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    assert out.returncode == 3, out.stderr
    d = json.loads(out.stdout)
    assert d["clean"] is False and d["counts"]["high"] == 1
    f = d["findings"][0]
    assert set(f) == {"code", "severity", "verdict", "run", "evidence", "fix"}
    assert set(d) == {"clean", "counts", "findings", "runs", "inputs", "notes"}
    run = next(iter(d["runs"].values()))
    assert set(run) == {"engine", "effective", "args", "env", "evidence", "sources"}
    clean = subprocess.run([sys.executable, "-m", "kit", "audit", str(SAMPLE / "experiments" / "h200_live_server"),
                            "--fail-on", "low"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert clean.returncode == 0 and "nothing flagged" in clean.stdout, clean.stdout + clean.stderr


def test_live_experiment_ignored_on_pcie_and_taking_effect_on_nvlink(tmp_path):
    """A fresh kit.experiment on tinyserve: on 'PCIe-only' GPUs the engine turns custom all-reduce off
    itself, so the flag is ignored; without that predicate the same flag takes effect."""
    base = {"flags": {"--disable-custom-all-reduce": [False, True]}, "session": tmp_path, "repeats": 1,
            "progress": False, "bench": {"requests": 2, "warmup": 1, "max_tokens": 8, "prompt_tokens": 4}}
    for pcie, want in (("1", "ignored"), (None, "took effect")):
        name = f"ar_pcie_{pcie}"
        marker = f"kit-audit-{name}"
        env = {"PYTHONPATH": str(ENGINE), "TINYSERVE_PCIE_ONLY": pcie}
        kit.experiment(TINY.format(m=marker), env=env, port=free_port(), name=name, **base)
        assert not engine_procs_gone(marker)
        eff = kit.audit.experiment_effects(tmp_path / "experiments" / name)
        (e,) = eff.effects
        assert e.status == want, e.verdict


def test_live_attention_backend_overridden_by_the_gpu_predicate(tmp_path):
    """--attention-backend fa3 on a GPU that is not Hopper (compute capability 12.0, told to tinyserve as
    with no GPU present): the engine falls back to flashinfer, so the variant is ignored; on 9.0 it
    takes effect. The deciding function and its predicate come from tinyserve's source."""
    for cap, want in (("12.0", "ignored"), ("9.0", "took effect")):
        name = f"fa3_on_{cap.replace('.', '')}"
        marker = f"kit-audit-{name}"
        kit.experiment(TINY.format(m=marker), flags={"--attention-backend": ["flashinfer", "fa3"]},
                       env={"PYTHONPATH": str(ENGINE), "TINYSERVE_DEVICE_CAPABILITY": cap}, port=free_port(),
                       name=name, session=tmp_path, repeats=1, progress=False,
                       bench={"requests": 2, "warmup": 1, "max_tokens": 8, "prompt_tokens": 4})
        assert not engine_procs_gone(marker)
        (e,) = kit.audit.experiment_effects(tmp_path / "experiments" / name, source=str(ENGINE / "tinyserve")).effects
        assert e.status == want, e.verdict
        if want == "ignored":
            assert "Attention backend fa3 needs compute capability 9.x" in e.evidence[-1]
            assert e.decider.function == "resolve_flags" and "is_sm90_supported()" in e.decider.condition
            assert any(p.startswith("is_sm90_supported() defined at") for p in e.decider.predicates)
        else:
            assert (e.baseline, e.variant_value) == ("flashinfer", "fa3")


def test_decode_batch_above_the_largest_captured_graph(tmp_path):
    """A live tinyserve with graphs captured for batch 1 only, driven at concurrency 4: the engine's
    decode lines say 'cuda graph: False' at batch 4; the audit flags both, with the lines."""
    marker = "kit-audit-graph-coverage"
    cmd = (f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} --token-ms 3 "
           "--load-seconds 0.2 --cuda-graph-bs 1 --decode-log-interval 4")
    with kit.server("local", cmd, env={"PYTHONPATH": str(ENGINE)}, port=free_port(), session=tmp_path, name="srv",
                    progress=False) as s:
        kit.bench.single_stream(s.url, requests=4, warmup=0, repeats=1, concurrency=(4,), max_tokens=24,
                                prompt_tokens=4)
    assert not engine_procs_gone(marker)
    log = tmp_path / "logs" / "srv.log"
    a = kit.audit.audit([log])
    f = {x.code: x for x in a.findings}
    assert f["graph-coverage"].severity == "high"
    assert "largest captured CUDA graph is 1" in f["graph-coverage"].verdict
    assert any("Capture cpu graph bs [1]" in e for e in f["graph-coverage"].evidence)
    assert any("#running-req: 4" in e or "#running-req: 3" in e for e in f["graph-coverage"].evidence)
    assert f["eager-decode"].severity == "high" and "cuda graph: False" in f["eager-decode"].evidence[0]


def test_custom_all_reduce_off_on_pcie(shared_data, tmp_path):
    """The sample SGLang and vLLM logs of the 8-GPU PCIe server say the engine disabled it (line given);
    a run on the real 8x RTX 4090 PCIe topology with tp 8 is flagged before any log says so."""
    a = kit.audit.audit([SAMPLE / "logs" / "sglang_0.5.9_tp8_default.log",
                         SAMPLE / "logs" / "vllm_0.11.0_tp8_default.log"])
    hits = [f for f in a.findings if f.code == "custom-all-reduce-off"]
    assert len(hits) == 2 and all("engine disabled it itself" in f.verdict for f in hits)
    assert any(e.endswith(".log:5: (Worker_TP0 pid=355) INFO 11-20 12:00:00 [custom_all_reduce.py:271] Custom "
                          "allreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
                          "To silence this warning, specify disable_custom_all_reduce=True explicitly.") for f in hits
               for e in f.evidence)
    run = tmp_path / "run"
    run.mkdir()
    (run / "server.log").write_text("[2026-11-20 09:00:00] server_args=ServerArgs(tp_size=8, "
                                    "disable_custom_all_reduce=False, attention_backend='flashinfer')\n")
    topo = shared_data / "logs" / "nvidia_smi_topo_8x_RTX4090_pcie_nccl-tests307.log"
    b = kit.audit.audit([run, topo])
    (f,) = [x for x in b.findings if x.code == "custom-all-reduce-off"]
    assert "tp_size 8 on PCIe-only GPUs" in f.verdict
    assert any(e.startswith(f"{topo}:3:") for e in f.evidence)
    # the real 2x 2080Ti NCCL log: the two GPUs talk through host shared memory
    c = kit.audit.audit([shared_data / "logs" / "nccl_info_2x2080Ti_shm_socket_issue1190.log"])
    (p2p,) = [x for x in c.findings if x.code == "p2p-off"]
    assert p2p.evidence[0].endswith(":8: NCCL INFO Channel 00 : 1[89000] -> 0[3d000] via direct shared memory "
                                    "(NCCL connects GPUs through host memory)")


def test_debug_variable_in_a_real_engine_environment(tmp_path):
    """VLLM_TRACE_FUNCTION=1 left in a live engine's environment, read from its /proc/PID/environ."""
    if not Path("/proc/self/environ").exists():
        pytest.skip("no /proc on this system")
    marker = "kit-audit-debugvar"
    cmd = (f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} --token-ms 3 "
           "--load-seconds 0.2")
    env = {"PYTHONPATH": str(ENGINE), "VLLM_TRACE_FUNCTION": "1"}
    with kit.server("local", cmd, env=env, port=free_port(), session=tmp_path, name="srv", progress=False) as s:
        got = kit.audit.capture_settings(s.url, tmp_path / "logs", host=kit.connect("local"), pid=s.job.pid)
    assert got["environ"] == str(tmp_path / "logs" / "environ"), got
    info = json.loads((tmp_path / "logs" / "server_info.json").read_text())
    assert info["tp_size"] == 1 and info["attention_backend"] == "flashinfer"  # the engine's own report
    a = kit.audit.audit([tmp_path / "logs"])
    (f,) = [x for x in a.findings if x.code == "debug-variable"]
    assert f.severity == "high" and "VLLM_TRACE_FUNCTION=1" in f.verdict
    assert f.evidence[0].startswith(str(tmp_path / "logs" / "environ")) and "/proc/PID/environ" in f.evidence[0]


def test_throttled_run_from_a_real_h200_capture(tmp_path):
    """The H200 capture under load (SW power cap, 1500-1530 of 1980 MHz) next to a benchmark record:
    the run is flagged; the same record with the idle capture only is not (clocks unknown, not failed)."""
    bench = SAMPLE / "experiments" / "cpu_pcie_custom_allreduce" / "v00-baseline" / "rep0" / "bench.json"
    v = kit.audit.check_run(bench, TEST_DATA / "env" / "h200" / "smi_clocks_load.csv")
    assert not v.valid and v.flags[0].startswith("GPU clocks: throttled: SM clock down to 1500 of 1980 MHz")
    assert "SW power cap (4 samples)" in v.flags[0]
    idle = kit.audit.check_run(bench, TEST_DATA / "env" / "h200" / "smi_clocks_idle.csv")
    assert idle.valid and next(c for c in idle.checks if c["check"] == "GPU clocks")["ok"] is None
    run = tmp_path / "run"
    run.mkdir()
    (run / "bench.json").write_bytes(bench.read_bytes())
    (run / "clocks.csv").write_bytes((TEST_DATA / "env" / "h200" / "smi_clocks_load.csv").read_bytes())
    a = kit.audit.audit([run])
    (f,) = [x for x in a.findings if x.code == "throttled"]
    assert f.severity == "high" and "1500 of 1980 MHz" in f.verdict


def test_failed_and_short_requests_flag_the_record(tmp_path):
    rec = json.loads((STORED / "v00-baseline" / "rep0" / "bench.json").read_text())
    rec["requests"][0]["ok"] = False
    rec["requests"][1]["output_tokens"] = 3
    rec["warmup"] = 0
    rec["seed"] = None  # random prompts drawn without a seed
    v = kit.audit.check_run(rec)
    checks = {c["check"]: c for c in v.checks}
    assert checks["failed requests"]["ok"] is False and checks["output length"]["ok"] is False
    assert checks["warm-up"]["ok"] is False and checks["prompts seeded"]["ok"] is False
    assert len(v.flags) == 4
    rec["seed"] = 0
    assert next(c for c in kit.audit.check_run(rec).checks if c["check"] == "prompts seeded")["ok"] is True


def test_live_bench_record_carries_its_validity(tmp_path):
    """kit.bench.single_stream on a live tinyserve: the record says it is valid (no GPU here: clocks
    unknown with the reason), and a run asked for more tokens than the context allows is flagged short."""
    marker = "kit-audit-validity"
    cmd = (f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} --token-ms 2 "
           "--load-seconds 0.2 --context-length 64")
    with kit.server("local", cmd, env={"PYTHONPATH": str(ENGINE)}, port=free_port(), session=tmp_path, name="srv",
                    progress=False) as s:
        ok = kit.bench.single_stream(s.url, requests=2, warmup=1, repeats=1, concurrency=(1,), max_tokens=8,
                                     prompt_tokens=4, clocks="local")
    assert not engine_procs_gone(marker)
    v = ok.data["validity"]
    assert v["valid"] is True, v
    clocks = next(c for c in v["checks"] if c["check"] == "GPU clocks")
    assert clocks["ok"] is None and clocks["detail"]  # unknown, and why
    assert "NOT VALID" not in repr(ok)


def test_clean_default_runs_flag_nothing():
    """The sample's live tinyserve server (H200, default settings: log, benchmark, trace) and the
    baselines of the stored experiments: nothing flagged."""
    a = kit.audit.audit([SAMPLE / "experiments" / "h200_live_server", SAMPLE / "experiments" / "cpu_live_server"])
    assert a.clean, repr(a)
    assert any(k == "trace" for k in a.inputs.values()) and any(k == "bench" for k in a.inputs.values())
    for exp in ("h200_graph_backend_compile", "cpu_graph_backend_compile"):
        b = kit.audit.audit([SAMPLE / "experiments" / exp / "v00-baseline"], traces=False)
        assert b.clean, repr(b)
    # the PCIe experiment's baseline is not clean: the engine turned custom all-reduce off, and says so
    c = kit.audit.audit([SAMPLE / "experiments" / "cpu_pcie_custom_allreduce" / "v00-baseline"], traces=False)
    assert len(c.flagged) == 2  # one per run (rep0, rep1): a fresh engine each time
    f = c.flagged[0]
    assert f.code == "custom-all-reduce-off" and "engine disabled it itself" in f.verdict
    assert f.evidence[0].endswith("rep0/server.log:1: [2026-12-03 18:35:03] Custom allreduce is disabled because "
                                  "tinyserve does not run it on more than two PCIe-only GPUs (tp_size=8); "
                                  "all-reduce goes through NCCL")


def test_mismatch_between_the_two_sides_of_a_comparison():
    d = SAMPLE / "experiments" / "cpu_graph_backend_compile"
    a = kit.audit.audit([d / "v00-baseline" / "server.log", d / "v01-disable_cuda_graph" / "server.log"], compare=True)
    mm = [f for f in a.findings if f.code == "mismatch"]
    assert len(mm) == 1 and mm[0].verdict.startswith("cuda_graph differs between the sides")
    same = kit.audit.audit([d / "v00-baseline" / "server.log", SAMPLE / "experiments" / "h200_graph_backend_compile"
                            / "v00-baseline" / "server.log"], compare=True)
    assert not [f for f in same.findings if f.code == "mismatch"]


def test_session_audit_and_bad_paths(tmp_path):
    sess = kit.session.open(SAMPLE)
    a = sess.audit(source="engine/tinyserve")
    codes = _codes(a)
    assert {"ignored-setting", "custom-all-reduce-off"} <= codes
    assert "graph-coverage" not in codes and "throttled" not in codes
    with pytest.raises(kit.errors.UsageError, match="no such file"):
        kit.audit.audit([tmp_path / "missing"])


def test_decider_in_real_sglang_source():
    """The sample log's 'Custom allreduce is disabled ...' line, found in SGLang 0.5.9's published
    source (downloaded like the other real-engine tests): the function and the predicate that decide."""
    from tests.source.test_source_real_engines import engine

    tree = engine("sglang", "0.5.9")
    line = (SAMPLE / "logs" / "sglang_0.5.9_tp8_default.log").read_text().splitlines()[4]
    d = kit.audit.decider(kit.connect("local"), str(tree / "sglang"), line)
    assert d is not None and d.function == "CustomAllreduce.__init__"
    assert d.path.endswith("sglang/srt/distributed/device_communicators/custom_all_reduce.py")
    assert d.condition == "if world_size > 2 and not full_nvlink:"


def test_notebook_00_shows_the_audit(tmp_path):
    """Notebook 00 on the sample session: the audit table names the ignored --disable-custom-all-reduce
    variant with its deciding function, and the custom all-reduce the engines turned off themselves."""
    from kit import report
    from kit.ledger import LEDGER_ENV

    nb, run = report.execute_notebook(ROOT / "notebooks" / "00_environment.ipynb", cwd=ROOT / "notebooks",
                                      parameters={"session": "sample"},
                                      env={LEDGER_ENV: str(tmp_path / "ledger.json")})
    assert run.ok, run.error
    text = "".join(str(o.get("text", "")) + str((o.get("data") or {}).get("text/plain", ""))
                   for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "no effect: the engine ignored --disable-custom-all-reduce" in text
    assert "decided by resolve_flags" in text and "custom-all-reduce-off" in text
    # issue 46 item 5: the session's six saved load results are read (not "'int' object is not subscriptable"
    # six times, then "nothing flagged"), and the one with failed requests is flagged
    assert "not a benchmark record" not in text and "3 of 32 requests failed" in text


def test_kernels_decide_where_the_logs_are_silent(tmp_path):
    """The H200 experiment's traces without its server logs: which attention kernels ran and whether
    kernels were replayed from graphs decide the effect. With the baseline's trace in the attention
    variant's place (an engine that ignored the flag runs the same kernels), the verdict is 'ignored'."""
    src = SAMPLE / "experiments" / "h200_graph_backend_compile"
    d = tmp_path / "exp"
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("server.log"))
    by = {e.setting: e for e in kit.audit.experiment_effects(d).effects}
    assert by["--disable-cuda-graph"].status == "took effect"
    assert by["--disable-cuda-graph"].verdict == "took effect: graph kernels graph replay -> no graph replay"
    att = by["--attention-backend"]
    assert att.status == "took effect" and "softmax_warp_forward" in att.verdict and "sdpa" in att.verdict
    assert by["--enable-torch-compile"].status == "unknown"  # no kernel evidence maps to it
    shutil.copy(d / "v00-baseline" / "traces" / "rank0.trace.json.gz",
                d / "v02-attention_backend_torch_native" / "traces" / "rank0.trace.json.gz")
    att = {e.setting: e for e in kit.audit.experiment_effects(d).effects}["--attention-backend"]
    assert att.status == "ignored" and att.verdict.startswith("no effect: the engine ignored --attention-backend")


def test_enforce_eager_on_one_side_of_an_engine_comparison(tmp_path):
    """vLLM run with enforce_eager (graphs off) against the sample SGLang run with CUDA graphs: the
    comparison is flagged before any tok/s is compared."""
    v = tmp_path / "vllm.log"
    v.write_text("(APIServer pid=1) INFO 11-20 12:00:00 [utils.py:233] non-default args: {'model': "
                 "'/models/nemotron-h-sample-fp4', 'tensor_parallel_size': 8, 'enforce_eager': True, "
                 "'tokenizer_mode': 'slow'}\n")
    a = kit.audit.audit([SAMPLE / "logs" / "sglang_0.5.9_tp8_default.log", v], compare=True)
    mms = {f.verdict.split(" ")[0]: f for f in a.findings if f.code == "mismatch"}
    assert set(mms) == {"cuda_graph", "tokenizer_mode"}
    mm = mms["cuda_graph"]
    assert mm.verdict.startswith("cuda_graph differs between the sides: True in") and mm.severity == "high"
    assert any("enforce_eager=True" in e for e in mm.evidence)
    assert any(f.code == "eager-decode" and f.run == str(v) for f in a.findings)
    (slow,) = [f for f in a.findings if f.code == "slow-tokenizer"]
    assert slow.run == str(v) and slow.evidence[0].startswith(f"{v}:1: tokenizer_mode='slow'")


def test_experiment_effects_method():
    exp = kit.live.Experiment(SAMPLE, "cpu_pcie_custom_allreduce")
    t = exp.effects(source=str(ENGINE / "tinyserve")).table()
    assert list(t["status"]) == ["ignored", "took effect"]
    assert t.loc[0, "decided by"].startswith("resolve_flags (")


@pytest.fixture
def recorded_smi(tmp_path, monkeypatch):
    """An ``nvidia-smi`` on PATH that replays the real H200 capture under load (the recorded query,
    where this machine has no GPU) and then keeps running, as ``-lms`` does."""
    if shutil.which("nvidia-smi"):
        pytest.skip("a real nvidia-smi is on PATH: this test replays the recorded query only where there is none")
    d = tmp_path / "bin"
    d.mkdir()
    rec = TEST_DATA / "env" / "h200" / "smi_clocks_load.csv"
    exe = d / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\ncat {rec}\nexec sleep 60\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{d}:{os.environ['PATH']}")
    return exe


def test_throttled_clocks_flag_the_record_the_row_and_the_repr(tmp_path, recorded_smi):
    """The sampler on a host (kit.experiment's path) and locally (kit.bench's), fed the recorded H200
    throttling: the bench record, the experiment's table row and its repr say the run is not valid."""
    host = kit.connect("local")
    with kit.audit.ClockSampler(host=host, interval_ms=200) as c:
        import time as _t

        _t.sleep(1.0)
    s = c.summary()
    assert s["throttled"] is True and s["reasons"] == {"SW power cap": 4} and s["min_sm_mhz"] == 1500
    marker = "kit-audit-throttle"
    exp = kit.experiment(TINY.format(m=marker).replace("--tp-size 8", ""),
                         flags={"--disable-cuda-graph": [False, True]},
                         env={"PYTHONPATH": str(ENGINE)}, port=free_port(), name="thr", session=tmp_path, repeats=1,
                         progress=False, bench={"requests": 2, "warmup": 1, "max_tokens": 8, "prompt_tokens": 4})
    assert not engine_procs_gone(marker)
    rows = {r["variant"]: r for r in exp.rows()}
    assert rows["baseline"]["valid"] is False and "GPU clocks: throttled" in rows["baseline"]["validity"]
    assert "NOT VALID" in repr(exp)
    run = json.loads((tmp_path / "experiments" / "thr" / "v00-baseline" / "rep0" / "run.json").read_text())
    assert run["validity"]["valid"] is False
    a = kit.audit.audit([tmp_path / "experiments" / "thr"], traces=False)
    assert any(f.code == "throttled" for f in a.findings)


def test_debug_variable_in_every_variant_of_an_experiment(tmp_path):
    """A debug variable left in the environment of every variant: the baseline's runs are audited like
    any run, from the environment the kit captured from the engine process."""
    marker = "kit-audit-exp-debugvar"
    kit.experiment(TINY.format(m=marker).replace("--tp-size 8", ""), flags={"--disable-cuda-graph": [False, True]},
                   env={"PYTHONPATH": str(ENGINE), "CUDA_LAUNCH_BLOCKING": "1"}, port=free_port(), name="dbg",
                   session=tmp_path, repeats=1, progress=False,
                   bench={"requests": 2, "warmup": 1, "max_tokens": 8, "prompt_tokens": 4})
    assert not engine_procs_gone(marker)
    a = kit.audit.audit([tmp_path / "experiments" / "dbg"], traces=False)
    dbg = [f for f in a.findings if f.code == "debug-variable"]
    assert len(dbg) == 1 and "CUDA_LAUNCH_BLOCKING=1" in dbg[0].verdict and "v00-baseline" in dbg[0].run
    assert "rep0/environ" in dbg[0].evidence[0]
    assert not [f for f in a.findings if f.code == "eager-decode"]  # the variant's own change is its effect
