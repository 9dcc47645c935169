"""Profile.health() against what was measured outside the profiler: on every recorded trace of the kit
(tests/data/traces, H200) each metric marked ``usable`` is right, and every metric that is wrong is
marked ``degraded`` or ``unreliable``.

"Right" is decided by the recording's own measurements (``measured.json``):
- step time: the trace's median decode step (first step excluded: it carries the profiler's start)
  within 15 % of the median step measured with CUDA events in an identical run *without* the profiler;
- category shares: kernel durations that add up (kernel time per step > 0 and at most 1.1 x the
  unprofiled step) and, where per-module GPU times were measured outside the profiler, the norm share
  within 15 % of RMSNorm's measured share of the step;
- module view: where those module times exist, the RMSNorm row's share within 15 % of its measured share.
A derived variant of a real graph-replay trace with every kernel duration zeroed (what some
PyTorch/CUPTI versions record) checks the no-timing capture mode.
"""
from __future__ import annotations

import gzip
import json

import numpy as np
import orjson
import pytest

from kit import profile
from tests.conftest import TEST_DATA

TRACES = TEST_DATA / "traces"
SCENARIOS = sorted(p.name for p in TRACES.iterdir() if (p / "trace.json.gz").is_file())
# known defect, found by issue 32's piecewise fixture: a step of graph pieces with eager attention between
# them is called a graph replay, so its step time "usable", though the eager part's launches are stretched
# by the profiler (0.73 ms profiled vs 0.43 ms unprofiled)
KNOWN = {"place_piecewise_graph": "piecewise graph step: eager launches between the pieces inflated by the profiler"}
SCENARIOS = [pytest.param(s, marks=pytest.mark.xfail(reason=KNOWN[s], strict=True)) if s in KNOWN else s
             for s in SCENARIOS]
TOL = 0.15


def _truth(p, m: dict) -> dict[str, bool]:
    """metric -> is the figure right (only metrics the recording can decide)."""
    out: dict[str, bool] = {}
    st = p.steps[p.steps["phase"] == "decode"]
    k = p.kernels[(p.kernels["phase"] == "decode") & (p.kernels["kind"] == "kernel")]
    unprof = (m.get("unprofiled") or {}).get("decode") or {}
    if unprof.get("median_ms") and len(st) > 1:
        trace_ms = float(np.median(st["wall_us"].to_numpy()[1:])) / 1000.0
        out["step_time"] = abs(trace_ms - unprof["median_ms"]) / unprof["median_ms"] <= TOL
    if unprof.get("median_ms") and len(st):
        per_step_us = float(k["dur_us"].sum()) / len(st)
        ok = 0 < per_step_us <= 1.1 * unprof["median_ms"] * 1000.0
        graph = m.get("modules_graph_us") or {}
        if ok and "RMSNorm" in graph and m.get("step_graph_us"):
            want = graph["RMSNorm"] / m["step_graph_us"]
            share = p.summary("decode").share("norm")
            ok = abs(share - want) / want <= TOL
        out["category_shares"] = ok
    graph = m.get("modules_graph_us") or {}
    if "RMSNorm" in graph and m.get("step_graph_us"):
        want = graph["RMSNorm"] / m["step_graph_us"]
        t = p.modules("block")
        row = t[t["block"] == "RMSNorm"] if len(t) else t
        out["module_view"] = bool(len(row)) and abs(float(row["share_of_kernel"].sum()) - want) / want <= TOL
    return out


def _check(p, m: dict, label: str) -> dict[str, bool]:
    h = p.health()
    truth = _truth(p, m)
    for metric, right in truth.items():
        status = h.status(metric)
        if status == "usable":
            assert right, f"{label}: {metric} marked usable but wrong ({h.metrics[metric]['reason']})"
        if not right:
            assert status in ("degraded", "unreliable"), f"{label}: {metric} is wrong but marked {status}"
    return truth


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_usable_metrics_are_right_and_wrong_ones_are_flagged(scenario):
    d = TRACES / scenario
    m = json.loads((d / "measured.json").read_text())
    p = profile.load(d / "trace.json.gz")
    h = p.health()
    assert set(h.metrics) == {"category_shares", "step_time", "allreduce_share", "op_view", "module_view"}
    assert all(v["status"] in ("usable", "degraded", "unreliable") and v["reason"] for v in h.metrics.values())
    assert all(v["fix"] for v in h.metrics.values() if v["status"] != "usable")
    _check(p, m, scenario)
    d = h.to_dict()
    assert json.loads(json.dumps(d)) == d  # JSON-ready as documented


def test_capture_modes_and_the_wrong_step_times_they_explain():
    """Eager launch-bound steps are inflated by the profiler (moe_decode: 8.5 ms traced vs 4.5 ms
    without the profiler) and marked degraded; graph replay is usable and right."""
    eager = profile.load(TRACES / "moe_decode" / "trace.json.gz")
    he = eager.health()
    assert he.capture["mode"] == "eager" and he.status("step_time") == "degraded"
    assert he.capture["idle_in_steps"] > 0.5 and "launch-bound" in he.metrics["step_time"]["reason"]
    truth = _truth(eager, json.loads((TRACES / "moe_decode" / "measured.json").read_text()))
    assert truth["step_time"] is False and truth["category_shares"] is True  # the flag is needed, shares hold
    graph = profile.load(TRACES / "hf_graph_replay" / "trace.json.gz")
    hg = graph.health()
    assert hg.capture["mode"] == "graph replay with per-kernel timing"
    assert hg.status("step_time") == "usable" and hg.status("op_view") == "unreliable"
    assert any(a.startswith("cudaGraphLaunch") for a in hg.capture["launch_apis"])


def test_mixed_window_is_said():
    h = profile.load(TRACES / "mixed_window" / "trace.json.gz").health()
    assert h.capture["mixed_phases"] is True and h.capture["phases"] == ["decode", "prefill"]
    assert any("prefill and decode" in n for n in h.notes)


def test_graph_replay_without_per_kernel_timing(tmp_path):
    """The real graph-replay trace with every kernel duration zeroed: shares cannot be computed
    (kernel time 0) and are marked unreliable; step spans still come from GPU annotations."""
    for scenario in ("compiled_graph", "hf_graph_replay"):
        doc = orjson.loads(gzip.decompress((TRACES / scenario / "trace.json.gz").read_bytes()))
        for e in doc["traceEvents"]:
            if e.get("cat") == "kernel":
                e["dur"] = 0
        f = tmp_path / f"{scenario}_zero.json"
        f.write_bytes(orjson.dumps(doc))
        p = profile.load(f, cache=False)
        h = p.health()
        assert h.capture["mode"] == "graph replay without per-kernel timing", scenario
        assert h.status("category_shares") == "unreliable" and h.status("allreduce_share") == "unreliable"
        assert "zero duration" in h.metrics["category_shares"]["reason"]
        truth = _check(p, json.loads((TRACES / scenario / "measured.json").read_text()), scenario + " zeroed")
        assert truth["category_shares"] is False


def test_renamed_nccl_kernel_recognised_and_a_misfiling_rule_flagged(tmp_path):
    """Synthetic edge case on a real trace: an NCCL kernel under a new name (HTA's ``^nccl.*Kernel``
    misses such renames) is still counted as communication; a user rule that files it elsewhere leaves
    a communication-like kernel outside communication, and the shares and AllReduce share say so."""
    doc = orjson.loads(gzip.decompress((TRACES / "compiled_graph" / "trace.json.gz").read_bytes()))
    k = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e.get("dur", 0) > 0)
    k["name"] = "ncclDevKernelX_Fancy_Sum_bf16(ncclDevKernelArgsStorage<4096ul>)"
    f = tmp_path / "renamed.json"
    f.write_bytes(orjson.dumps(doc))
    h = profile.load(f, cache=False).health()
    assert (h.capture["comm_kernels"], h.capture["comm_unrecognised"]) == (1, 0)
    assert h.status("category_shares") == "usable" and h.status("allreduce_share") == "usable"
    bad = profile.load(f, cache=False, rules=[("Fancy_Sum", "gemm")]).health()
    assert (bad.capture["comm_kernels"], bad.capture["comm_unrecognised"]) == (0, 1)
    assert bad.status("category_shares") == "degraded" and bad.status("allreduce_share") == "degraded"
    assert "ncclDevKernelX_Fancy_Sum_bf16" in bad.metrics["category_shares"]["reason"]


@pytest.mark.shared_data
def test_real_third_party_traces(shared_data):
    """Real traces of other projects: graph replay recognised in vLLM's and SGLang's decode traces,
    a CPU-only trace says it has no GPU kernels, one rank of the 8-rank DLRM run leaves the AllReduce
    share degraded (exposure and spread need every rank) and all eight make it usable."""
    t = shared_data / "traces"
    for f in ("tracelens/inference/vllm_decode_full/graph_execution.json.gz",
              "tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"):
        h = profile.load(t / f).health()
        assert h.capture["mode"] == "graph replay with per-kernel timing", f
        assert h.status("op_view") == "unreliable" and h.status("category_shares") == "usable"
    cpu = profile.load(t / "hta" / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz").health()
    assert cpu.capture["mode"] == "no GPU kernels" and set(v["status"] for v in cpu.metrics.values()) == {"unreliable"}
    ranks = sorted((t / "param" / "dlrm_kineto").glob("worker*.json.gz"))
    one = profile.load(ranks[0]).health()
    assert one.status("allreduce_share") == "degraded" and "1 of 8 ranks" in one.metrics["allreduce_share"]["reason"]
    every = profile.load(ranks).health()
    assert every.capture["ranks"] == 8 and every.capture["comm_kernels"] >= 8
    assert every.status("allreduce_share") == "usable"


def test_dropped_and_repaired_events_are_counted(tmp_path):
    """Synthetic edge case on a real trace: a negative duration and a text timestamp are dropped, a
    duration given as text is repaired; the health counts them and degrades the shares."""
    doc = orjson.loads(gzip.decompress((TRACES / "compiled_graph" / "trace.json.gz").read_bytes()))
    ks = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    ks[0]["dur"], ks[1]["ts"], ks[2]["dur"] = -5, "abc", "12.5"
    f = tmp_path / "bad.json"
    f.write_bytes(orjson.dumps(doc))
    h = profile.load(f, cache=False).health()
    assert (h.capture["events_dropped"], h.capture["events_repaired"]) == (2, 1)
    assert h.status("category_shares") == "degraded" and "2 events dropped" in h.metrics["category_shares"]["reason"]
