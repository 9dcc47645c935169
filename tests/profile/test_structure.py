"""Two runs by structure (layer kind x operation family) on real traces whose difference is known.

The pairs were recorded on an H200 (tests/data/traces/README.md): the same decoder with RMSNorm as one
fused kernel vs written out (``cpu_norm_fused`` / ``cpu_norm_manual``), and the same model with only the
SDPA backend changed (``sdpa_*``). Their kernel-time difference must sit in the norm and attention
nodes. A run against its own repeat (its first steps against its last) must be within noise
everywhere; runs of different shapes are refused; real engine traces (SGLang, ../shared/data) give their
layers and families.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

import kit
import kit.plots
from kit.errors import TraceError, UsageError
from kit.profile.analyses._structure import families
from tests.conftest import ROOT

T = ROOT / "tests" / "data" / "traces"
ENGINE_LOGS = ROOT / "notebooks" / "sample" / "logs"


def _trace(name: str):
    return kit.profile.load(T / name / "trace.json.gz")


def _kernel_delta(diff, family: str) -> tuple[float, float]:
    """(the family's kernel-time delta over all layer kinds, the whole kernel-time delta), per step."""
    n = diff.nodes[~diff.nodes["family"].isin(["GPU idle", "overlap", "step tail"])]
    d = n["b_kernel_us"] - n["a_kernel_us"]
    return float(d[n["family"] == family].sum()), float(d.sum())


@pytest.mark.parametrize("a,b,family", [("cpu_norm_fused", "cpu_norm_manual", "norm"),
                                        ("sdpa_flash", "sdpa_math", "attention"),
                                        ("sdpa_efficient", "sdpa_math", "attention")])
def test_a_known_difference_sits_in_its_node(a, b, family):
    diff = kit.profile.diff_structure(_trace(a), _trace(b), labels=(a, b))
    own, whole = _kernel_delta(diff, family)
    assert whole > 0 and own >= 0.9 * whole, (own, whole, diff.nodes)
    node = diff.nodes[(diff.nodes["family"] == family) & (diff.nodes["layer_kind"] == "attention+mlp")].iloc[0]
    assert node["beyond_noise"], node
    # the nodes add up to the step difference (the residual is said, and it is nothing here)
    assert abs(diff.residual_us) < 1e-6 * max(diff.step_us)
    assert diff.nodes["delta_us"].sum() == pytest.approx(diff.delta_us, abs=1e-3)
    assert min(diff.structural_share) >= 0.95


def test_launch_bound_pairs_say_their_step_difference_is_cpu_time():
    diff = kit.profile.diff_structure(_trace("cpu_norm_fused"), _trace("cpu_norm_manual"))
    assert any("GPU idle is over 30%" in w for w in diff.warnings)
    assert any("steps [0]" in w for w in diff.warnings)   # the warm-up step is left out, and said
    wall = kit.profile.diff_structure(_trace("cpu_norm_fused"), _trace("cpu_norm_manual"), basis="wall")
    norm = wall.nodes[(wall.nodes["family"] == "norm") & (wall.nodes["layer_kind"] == "attention+mlp")].iloc[0]
    # written out, the norm is 9 kernels instead of 1: in wall time its launch gaps come with it
    assert norm["delta_us"] > 5 * (norm["b_kernel_us"] - norm["a_kernel_us"]) > 0
    assert abs(wall.residual_us) < 1e-6 * max(wall.step_us)
    with pytest.raises(UsageError):
        kit.profile.diff_structure(_trace("sdpa_flash"), _trace("sdpa_math"), basis="both")


@pytest.mark.parametrize("name", ["hf_llama_stack", "sdpa_flash", "cpu_norm_manual", "hf_qwen2moe_stack",
                                  "hf_jamba_stack", "hf_qwen3next_stack", "moe_decode"])
def test_a_run_against_its_repeat_is_within_noise_in_every_node(name):
    p = _trace(name)
    steps = sorted(p.steps["step"].unique())
    half = len(steps) // 2
    first = dataclasses.replace(p, steps=p.steps[p.steps["step"].isin(steps[:half])])
    last = dataclasses.replace(p, steps=p.steps[p.steps["step"].isin(steps[half:])])
    diff = kit.profile.diff_structure(first, last)
    kernel_nodes = diff.nodes[~diff.nodes["family"].isin(["GPU idle", "overlap", "step tail"])]
    assert not kernel_nodes["beyond_noise"].any(), kernel_nodes[kernel_nodes["beyond_noise"]]


@pytest.mark.parametrize("name,kinds", [("hf_qwen2moe_stack", {"attention+moe": {"qkv proj", "attention", "o proj",
                                                                                  "router", "experts", "norm"}}),
                                        ("hf_jamba_stack", {"ssm+mlp": {"ssm mixer", "gate/up", "down"},
                                                            "ssm+moe": {"ssm mixer", "router", "experts"},
                                                            "attention+mlp": {"qkv proj", "attention", "o proj"}}),
                                        ("hf_qwen3next_stack", {"ssm+moe": {"ssm mixer", "experts"},
                                                                "attention+moe": {"attention", "experts"}})])
def test_families_follow_the_blocks_of_architectures_not_tuned_on(name, kinds):
    p = _trace(name)
    k = p.kernels
    fam = families(k)
    for kind, want in kinds.items():
        got = set(fam[k["layer_kind"].astype(object) == kind])
        assert want <= got, (kind, want - got)


def test_runs_of_different_shapes_are_refused_in_one_line():
    with pytest.raises(TraceError) as err:
        kit.profile.diff_structure(_trace("hf_llama_stack"), _trace("cpu_norm_fused"))
    assert "not the same model shape" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(TraceError, match="not the same model shape"):
        kit.profile.diff_structure(_trace("hf_qwen2moe_stack"), _trace("hf_llama_stack"))


def test_a_fused_family_is_reported_as_merged():
    """Run B is run A with each MLP's activation fused into its gate/up GEMM (the activation kernels'
    time added to the GEMM before them): the gate/up node of B holds what A runs as two families."""
    a = _trace("sdpa_flash")
    k = a.kernels.copy()
    fam = families(k)
    for _, g in k[fam.isin(["gate/up", "activation"])].groupby(["step", "layer"]):
        gate = g.index[fam[g.index] == "gate/up"]
        if len(gate):
            act = g.index[fam[g.index] == "activation"]
            k.loc[gate[0], "dur_us"] += k.loc[act, "dur_us"].sum()
            k.loc[act, "dur_us"] = 0.0
    b = dataclasses.replace(a, kernels=k[k["dur_us"] > 0])
    diff = kit.profile.diff_structure(a, b)
    gate = diff.nodes[(diff.nodes["family"] == "gate/up") & (diff.nodes["layer_kind"] == "attention+mlp")].iloc[0]
    assert "B fuses activation" in gate["merged"]


@pytest.mark.shared_data
def test_a_real_engine_trace_gives_its_layers_and_families(shared_data):
    sg = shared_data / "traces/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"
    p = kit.profile.load(sg)
    diff = kit.profile.diff_structure(p, p, phase="all")
    layer_nodes = diff.nodes[diff.nodes["layer_kind"] == "attention+mlp"]
    assert {"qkv proj", "attention", "o proj", "gate/up", "activation", "down", "norm"} <= set(layer_nodes["family"])
    assert min(diff.structural_share) >= 0.95
    assert not diff.nodes["beyond_noise"].any()
    with pytest.raises(TraceError, match="not the same model shape"):
        kit.profile.diff_structure(p, _trace("hf_llama_stack"), phase="all")
    vllm = shared_data / "traces/tracelens/inference/vllm_decode_full/graph_execution.json.gz"
    sgd = shared_data / "traces/tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"
    with pytest.raises(TraceError, match="not the same model shape"):   # MoE (vLLM's) against dense Qwen3-8B
        kit.profile.diff_structure(vllm, sgd)


def test_the_settings_that_differ_stand_beside_the_nodes_they_explain():
    a = kit.logs.settings([ENGINE_LOGS / "sglang_0.5.9_tp8_default.log"])
    b = kit.logs.settings([ENGINE_LOGS / "sglang_0.5.9_tp8_nccl_ll.log"])
    c = kit.logs.settings([ENGINE_LOGS / "vllm_0.11.0_tp8_default.log"])
    diff = kit.profile.diff_structure(_trace("sdpa_flash"), _trace("sdpa_math"), settings=(a, b))
    rows = diff.settings.set_index("setting")
    assert list(rows.index) == ["nccl_proto"] and rows.loc["nccl_proto", "explains"] == "all-reduce"
    two = kit.profile.diff_structure(_trace("sdpa_flash"), _trace("sdpa_math"), settings=(a, c)).settings
    att = two.set_index("setting").loc["attention_backend"]
    assert (att["a"], att["b"], att["status"], att["explains"]) == ("flashinfer", "flash_attn", "took effect",
                                                                     "attention")
    assert "unknown" in set(two["status"])   # vLLM's log says nothing of CUDA graphs: not claimed either way


def test_cli_diff_and_the_waterfall(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "kit", "profile", "diff", str(T / "sdpa_flash/trace.json.gz"),
           str(T / "sdpa_math/trace.json.gz"), "--json", "--labels", "flash", "math",
           "--settings", str(ENGINE_LOGS / "sglang_0.5.9_tp8_default.log"),
           str(ENGINE_LOGS / "vllm_0.11.0_tp8_default.log")]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    nodes = pd.DataFrame(got["nodes"])
    top = nodes.loc[nodes["delta_us"].abs().idxmax()]
    assert got["labels"] == ["flash", "math"] and top["family"] == "GPU idle"
    assert any(s["setting"] == "attention_backend" for s in got["settings"])
    bad = subprocess.run([sys.executable, "-m", "kit", "profile", "diff", str(T / "hf_llama_stack/trace.json.gz"),
                          str(T / "cpu_norm_fused/trace.json.gz")], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=300)
    assert bad.returncode == 1 and "not the same model shape" in bad.stderr and "Traceback" not in bad.stderr
    fig = kit.plots.structure_waterfall(kit.profile.diff_structure(_trace("sdpa_flash"), _trace("sdpa_math")))
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels[0].startswith("A") and labels[-1].startswith("B") and any("attention" in s for s in labels)


def test_graph_replays_are_compared_through_their_placed_kernels():
    """A CUDA-graph replay placed by its eager reference (issue 32's placement) against that eager run:
    the same kernels in the same nodes (every kernel node within noise), the difference in GPU idle."""
    graph, ref = T / "place_llama_graph/trace.json.gz", T / "place_llama_ref/trace.json.gz"
    diff = kit.profile.diff_structure(ref, graph, labels=("eager", "graph"), references=(None, ref))
    nodes = diff.nodes.set_index(["layer_kind", "family"])
    assert {"qkv proj", "attention", "o proj", "gate/up", "down", "norm"} <= set(nodes.loc["attention+mlp"].index)
    kernel_nodes = diff.nodes[~diff.nodes["family"].isin(["GPU idle", "overlap", "step tail"])]
    assert not kernel_nodes["beyond_noise"].any(), kernel_nodes[kernel_nodes["beyond_noise"]]
    idle = nodes.loc[("(all)", "GPU idle")]
    assert idle["delta_us"] <= 0.95 * diff.delta_us < 0   # the graph's gain is the eager run's launch gaps
    unplaced = kit.profile.diff_structure(ref, graph)   # unplaced, the replay's layers are found by repetition
    assert unplaced.structure[1].startswith("layers by repetition (high")
    layer = unplaced.nodes[unplaced.nodes["layer_kind"] == "attention+mlp"]
    assert {"qkv proj", "attention", "o proj", "gate/up", "down", "norm"} <= set(layer["family"][layer["b_us"] > 0])


SAMPLE_SDPA = ROOT / "notebooks" / "sample" / "traces"


def test_the_sample_replays_get_their_layers_by_repetition_and_say_what_is_undecided():
    """Page 04's pair (CUDA-graph replays, no module frames, no shapes): once every GEMM outside a layer
    (1,075 us per step of 'gemm (unplaced)'); now the layers are found by repetition and their GEMMs are
    projections by place; the last layer of a step runs to its end (layers found by their first kernels), so
    what follows it (final norm, lm head) is undecided, and that share is said."""
    diff = kit.profile.diff_structure(SAMPLE_SDPA / "cmp_sdpa_cudnn" / "rank0.trace.json.gz",
                                      SAMPLE_SDPA / "cmp_sdpa_efficient" / "rank0.trace.json.gz")
    fam = diff.nodes.set_index("family")["a_us"]
    assert "gemm (unplaced)" not in fam and "lm head" not in fam
    assert fam[["qkv proj", "o proj", "gate/up", "down"]].sum() > 900
    assert all(s.startswith("layers by repetition (low") for s in diff.structure)
    assert 0 < diff.undecided_share[0] < 0.1 and fam["undecided"] > 0
    assert any("% undecided" in w for w in diff.warnings)


def test_a_planted_gemm_outside_the_layers_is_unplaced_not_the_lm_head():
    """hf_llama_stack (shapes recorded): its lm head is the last GEMM, N = vocabulary (4096 here). One extra
    GEMM per layer planted outside the layers (N = hidden) lands in 'gemm (unplaced)'; the lm head keeps its
    time. A last GEMM narrower than another of its step is not called the lm head."""
    p = _trace("hf_llama_stack")
    k = p.kernels
    gem = k[(k["category"] == "gemm") & (k["layer"] >= 0) & (k["module"] == "Linear")]
    first = gem.groupby(["step", "layer"]).head(1).copy()
    first["layer"], first["start_us"] = -1, first["start_us"] - 0.001
    first["dur_us"] = 7.0
    planted = dataclasses.replace(p, kernels=pd.concat([k, first], ignore_index=True))
    before = kit.profile.diff_structure(p, p).nodes.set_index("family")["a_us"]
    after = kit.profile.diff_structure(p, planted).nodes.set_index("family")
    assert after.loc["lm head", "b_us"] == pytest.approx(before["lm head"])
    assert after.loc["gemm (unplaced)", "b_us"] == pytest.approx(7.0 * first.groupby("step").size().median())
    # the last GEMM made narrower than the layers' (N 4096 -> 64): not the lm head
    last = k[(k["category"] == "gemm") & (k["layer"] < 0)].index
    narrow = k.copy()
    narrow["input_dims"] = narrow["input_dims"].astype(object)
    narrow.loc[last, "input_dims"] = "[[1,512],[512,64]]"
    fam = families(narrow[narrow["step"] == narrow.loc[last[0], "step"]])
    assert set(fam.loc[[i for i in last if narrow.loc[i, "step"] == narrow.loc[last[0], "step"]]]) == \
        {"gemm (unplaced)"}
