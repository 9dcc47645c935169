"""kit investigate on pairs with a planted, known cause (recorded fixtures and stored experiments): the top
cause is the planted one, its share within 10 points of the measured truth, its experiment names the planted
variant; a run against its own repeat has no cause beyond noise; an invalid run is said first."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import anyio
import pytest

import kit
from kit.ledger import Ledger
from tests.conftest import ROOT, SAMPLE

TRACES = ROOT / "tests" / "data" / "traces"
PCIE = SAMPLE / "experiments" / "cpu_pcie_custom_allreduce"


def _measured(name: str) -> dict:
    return json.loads((TRACES / name / "measured.json").read_text())


@pytest.mark.parametrize("fast", ["sdpa_flash", "sdpa_efficient"])
def test_attention_backend_pair_ranks_attention_first(fast):
    """Both runs eager under the profiler (step time degraded): the GPU-time gap is explained, attention first.
    Truth: the backend is the only change between the recordings (tests/data/traces/README.md), so 100 % of the
    gap; and the cause's size agrees with the attention modules' GPU time measured outside the profiler (each
    module call replayed in a CUDA graph, ``modules_graph_us``)."""
    inv = kit.investigate(TRACES / fast, TRACES / "sdpa_math", labels=(fast, "sdpa_math"))
    top = inv.ranked[0]
    assert top.key == "attention" and top.step == "structure"
    assert abs(top.share - 1.0) < 0.10, inv
    graph_us = {n: _measured(n)["modules_graph_us"]["Attention"] for n in (fast, "sdpa_math")}
    truth_us = graph_us["sdpa_math"] - graph_us[fast]
    assert top.delta == pytest.approx(truth_us, rel=0.15), (top.delta, truth_us)
    assert "attention backend" in top.experiment.variant
    kernels = " ".join(top.evidence)
    assert "attention kernels" in kernels and ("flash" in kernels or "fmha" in kernels or "efficient" in kernels)
    assert inv.steps["gap"].status == "skipped" and "no benchmark" in inv.steps["gap"].reason
    assert inv.remainder and inv.remainder[0]["share"] == pytest.approx(1 - sum(c.share for c in inv.ranked))


def test_fused_vs_unfused_norm_ranks_norm_first():
    """The only change between the recordings is the RMSNorm (tests/data/traces/README.md): truth 100 %."""
    inv = kit.investigate(TRACES / "cpu_norm_fused", TRACES / "cpu_norm_manual")
    top = inv.ranked[0]
    assert top.key == "norm" and abs(top.share - 1.0) < 0.10, inv
    assert "norm implementation" in top.experiment.variant
    assert "GPU idle (CPU side, not ranked)" in repr(inv)
    # the step measured without the profiler (CUDA events) says how much of the whole gap the GPU time is
    assert any(x.startswith("the step gap without the profiler is +1,518 us") for x in inv.steps["structure"].lines)


@pytest.mark.parametrize("pair", ["cpu", "place_llama"])
def test_cuda_graphs_vs_eager_is_the_launch_cause(pair, tmp_path):
    """One run replays CUDA graphs, the other launches kernel by kernel: the gap is GPU idle (truth: 100 %, the
    same kernels run); the graph replay is placed with its eager reference (reference/ folder)."""
    if pair == "cpu":
        a, b = TRACES / "cpu_graph", TRACES / "cpu_eager"
    else:
        a = tmp_path / "graph"
        (a / "reference").mkdir(parents=True)
        shutil.copy(TRACES / "place_llama_graph" / "trace.json.gz", a / "trace.json.gz")
        shutil.copy(TRACES / "place_llama_ref" / "trace.json.gz", a / "reference" / "trace.json.gz")
        b = TRACES / "place_llama_ref"
    inv = kit.investigate(a, b, labels=("graph", "eager"))
    top = inv.ranked[0]
    assert top.key == "cuda_graph" and abs(top.share - 1.0) < 0.10 and top.trust == "degraded"
    assert "CUDA graphs" in top.experiment.variant and "--disable-cuda-graph" in top.experiment.variant
    assert any(e.startswith("eager: launch-bound") and "kernel launches/step" in e for e in top.evidence), top.evidence
    if pair == "place_llama":
        assert inv.steps["inputs"].lines[0].startswith("graph: 1 trace(s), 1 reference trace(s)")
        assert "no kernel is placed in a layer" not in repr(inv)


def test_an_ignored_flag_explains_none_of_the_gap():
    """--disable-custom-all-reduce on PCIe-only GPUs, which the engine ignores (it turned custom all-reduce off
    itself): the measured gap is within noise, the flag is said ignored with its evidence, share 0, and its
    experiment is a kit.experiment call kit.live.plan accepts."""
    inv = kit.investigate(PCIE / "v00-baseline", PCIE / "v01-disable_custom_all_reduce")
    assert not inv.ranked and "no cause beyond noise" in inv.headline
    (c,) = [c for c in inv.causes if c.key == "--disable-custom-all-reduce"]
    assert c.share == 0 and "ignored" in c.setting and any("Custom allreduce is disabled" in e for e in c.evidence)
    assert c.experiment.runnable and "'--disable-custom-all-reduce': [None, True]" in c.experiment.call
    assert inv.steps["gap"].data["beyond_noise"] is False


def test_a_run_against_its_own_repeat_has_no_cause():
    """Two fresh engines of the same variant (the experiment's two runs): within noise, and it says so."""
    base = PCIE / "v00-baseline"
    inv = kit.investigate(base / "rep0", base / "rep1", labels=("rep0", "rep1"))
    assert inv.steps["gap"].status == "ran" and inv.steps["gap"].data["beyond_noise"] is False
    assert not inv.ranked and not [c for c in inv.causes if c.share is None]
    assert "no cause beyond noise" in inv.headline and "the gap is within noise" in repr(inv)


def test_a_throttled_run_is_said_first_and_nothing_it_affects_is_ranked(tmp_path):
    """The same benchmark beside a real throttled clock capture (H200 under a GEMM loop, SW power cap)."""
    bad = tmp_path / "throttled"
    shutil.copytree(PCIE / "v00-baseline" / "rep0", bad)
    shutil.copy(ROOT / "tests" / "data" / "env" / "h200" / "smi_clocks_load.csv", bad / "clocks.csv")
    inv = kit.investigate(PCIE / "v00-baseline" / "rep1", bad, labels=("ok", "throttled"))
    assert inv.headline.startswith("INVALID: throttled") and repr(inv).startswith("INVALID")
    assert inv.steps["gap"].status == "refused" and not inv.ranked
    out = subprocess.run([sys.executable, "-m", "kit", "investigate", str(PCIE / "v00-baseline" / "rep1"), str(bad)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 3 and out.stdout.startswith("INVALID") and not out.stderr.strip()


def test_missing_inputs_are_said_and_their_steps_skipped():
    inv = kit.investigate(TRACES / "cpu_graph", PCIE / "v00-baseline" / "rep0")
    st = inv.steps
    assert "missing bench, engine log, model config, GPU capture" in " ".join(st["inputs"].lines)
    assert st["structure"].status == "skipped" and "no trace in B" in st["structure"].reason
    assert st["gap"].status == "skipped" and st["floor"].status == "skipped"
    assert [s["name"] for s in inv.to_dict()["steps"]] == ["inputs", "validity", "gap", "itl", "structure",
                                                          "settings", "floor"]


def test_causes_go_into_the_ledger_as_open_hypotheses(tmp_path):
    led = tmp_path / "ledger.json"
    inv = kit.investigate(TRACES / "cpu_norm_fused", TRACES / "cpu_norm_manual", ledger=led)
    h = Ledger.open(led)["AB1"]
    assert h.verdict == "open" and "norm" in h.statement and h.numbers["share"] == pytest.approx(inv.ranked[0].share,
                                                                                             abs=1e-4)
    assert "cpu_norm_manual" in h.evidence and h.provenance and h.test == inv.ranked[0].experiment.call


def test_the_mcp_tool_is_read_only_and_answers_with_trust():
    from mcp import Client

    from kit.mcp import Policy, available, build_server

    assert next(t for t in available(Policy(roots=(ROOT,))) if t.name == "investigate").mode == "read"

    async def go():
        async with Client(build_server(Policy(roots=(ROOT,)))) as c:
            return (await c.call_tool("investigate", {"a": [str(TRACES / "cpu_graph")],
                                                      "b": [str(TRACES / "cpu_eager")]})).structured_content

    out = anyio.run(go)
    assert out["result"]["causes"][0]["key"] == "cuda_graph" and out["trust"]["verdict"] == "degraded"
    assert out["provenance"] and any("gap: skipped" in w for w in out["warnings"])


def test_runs_by_catalogue_id_and_runs_with_nothing_to_compare(tmp_path):
    """A run id of the catalogue stands for the inputs that run recorded (here two audits of the experiment's
    runs); two empty folders say that nothing could be measured, not that there is no cause."""
    env = {**os.environ, "KIT_RUNS": "on", "KIT_RUNS_DIR": str(tmp_path / "runs"), "PYTHONPATH": str(ROOT)}
    ids = []
    for rep in ("rep0", "rep1"):
        subprocess.run([sys.executable, "-m", "kit", "audit", str(PCIE / "v00-baseline" / rep)], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=120, check=True)
        out = subprocess.run([sys.executable, "-m", "kit", "runs", "list", "--json"], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=120, check=True)
        ids.append(json.loads(out.stdout)[0]["run_id"])
    assert ids[0] != ids[1]
    out = subprocess.run([sys.executable, "-m", "kit", "investigate", *ids], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "catalogue run" in out.stderr and "[gap] ran" in out.stdout and "within noise" in out.stdout
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    inv = kit.investigate(tmp_path / "a", tmp_path / "b")
    assert inv.headline.startswith("B vs A: nothing to compare") and not inv.causes


def test_a_cause_with_its_setting_gets_a_runnable_experiment():
    """A node whose differing setting the structural diff names: the experiment swaps that flag on A's command,
    as kit.live.plan builds it (a normalised setting name becomes its flag, an upper-case name a variable)."""
    from kit.investigation._experiments import build
    from kit.investigation._inputs import RunInputs

    a, b = RunInputs("A", [], command="python3 -m sglang.launch_server --model m"), RunInputs("B", [])
    c = {"source": "structure", "key": "attention", "delta": 50.0, "noise": 2.0, "unit": "us/step", "gap_name": "g",
         "settings": [{"setting": "attention_backend", "a": "fa3", "b": "flashinfer", "status": "took effect"}]}
    e = build(c, [a, b], [])
    assert e.runnable and "flags={'--attention-backend': ['fa3', 'flashinfer']}" in e.call and e.repeats == 3
    variants = kit.live.plan(a.command, flags={"--attention-backend": ["fa3", "flashinfer"]})
    assert variants[1]["cmd"].endswith("--attention-backend flashinfer")
    c["settings"] = [{"setting": "NCCL_PROTO", "a": None, "b": "LL", "status": "unknown"}]
    assert "matrix={'NCCL_PROTO': [None, 'LL']}" in build(c, [a, b], []).call
