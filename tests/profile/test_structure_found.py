"""The structural diff of a side without module frames (issue 44's two-engine pair): its structure from its
placement against its own reference run where one is accepted, else from its layers found by repetition and
the categories of its kernels, said per side.

The pair: transformers' continuous batching (``cb_llama_graph``, placed by ``cb_llama_ref``) against
tinyserve on the same Llama shape (``ts_llama_graph``: no ``nn.Module`` frames at all, its eager reference
refused by placement), both recorded on an H100 (tests/data/traces/README.md). Architectures the rule was
not tuned on (Qwen3, Mixtral, Qwen2-MoE, GPT-2, GraniteMoeHybrid): the same trace with its module frames
and stripped of them, so the truth of every node is the frames' answer, and the eager ``_plain`` twins
(recorded without stacks) against their ``_stack`` runs.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import kit
from kit.errors import TraceError
from tests.conftest import ROOT

T = ROOT / "tests" / "data" / "traces"
KERNEL_NODES = ["GPU idle", "overlap", "step tail"]
LAYER_FAMILIES = {"qkv proj", "attention", "o proj", "norm", "gate/up", "activation", "down"}
# outside the layers a side without frames cannot tell the embedding's gather from the other setup kernels,
# nor confirm the lm head by its shape: the same kernels under another name, not another structure
SAME = {"embedding": "setup (masks, positions)", "lm head (by place, no shape)": "lm head"}


def _trace(name: str):
    return T / name / "trace.json.gz"


def _stripped(p):
    """``p`` without what its module frames gave: no layer, layer kind, block or module on any kernel."""
    k = p.kernels.copy()
    k["layer"] = -1
    for col in ("module", "block", "layer_kind"):
        k[col] = np.nan
    return dataclasses.replace(p, kernels=k)


def _error(diff) -> float:
    """Share of A's kernel time that B's structure puts in another node (half the sum of node differences)."""
    n = diff.nodes[~diff.nodes["family"].isin(KERNEL_NODES)]
    g = n.groupby(n["layer_kind"] + " | " + n["family"].replace(SAME))[["a_kernel_us", "b_kernel_us"]].sum()
    return float((g["b_kernel_us"] - g["a_kernel_us"]).abs().sum() / 2 / g["a_kernel_us"].sum())


@pytest.mark.parametrize("basis", ["kernel", "wall"])
def test_the_two_engine_pair_puts_each_sides_step_in_named_nodes(basis):
    diff = kit.profile.diff_structure(_trace("cb_llama_graph"), _trace("ts_llama_graph"), basis=basis,
                                      references=(_trace("cb_llama_ref"), _trace("ts_llama_ref")),
                                      labels=("transformers CB", "tinyserve"))
    assert min(diff.structural_share) >= 0.95, diff.structural_share
    assert abs(diff.nodes["delta_us"].sum() - diff.delta_us) <= 0.02 * abs(diff.delta_us)
    cb, ts = diff.structure
    assert "placed by alignment with cb_llama_ref" in cb
    assert "reference refused" in ts and "layers by repetition (high" in ts and "blocks by place" in ts
    layer = diff.nodes[diff.nodes["layer_kind"] == "attention+mlp"].set_index("family")
    for side in ("a_kernel_us", "b_kernel_us"):   # both engines' layers, by operation family
        assert LAYER_FAMILIES <= set(layer.index[layer[side] > 0]), (side, layer)
    outside = diff.nodes[diff.nodes["layer_kind"] == "outside layers"].set_index("family")
    assert outside.loc["lm head (by place, no shape)", ["a_us", "b_us"]].min() > 0
    assert outside.loc["sampling", ["a_us", "b_us"]].min() > 0
    assert any("tinyserve: structure from" in w for w in diff.warnings)
    assert "tinyserve: structure from reference refused" in repr(diff)


def test_tinyserve_without_its_reference_is_found_the_same_way():
    with_ref = kit.profile.diff_structure(_trace("cb_llama_graph"), _trace("ts_llama_graph"),
                                          references=(_trace("cb_llama_ref"), _trace("ts_llama_ref")))
    alone = kit.profile.diff_structure(_trace("cb_llama_graph"), _trace("ts_llama_graph"),
                                       references=(_trace("cb_llama_ref"), None))
    assert alone.structure[1].startswith("layers by repetition")
    assert alone.nodes["b_us"].to_numpy() == pytest.approx(with_ref.nodes["b_us"].to_numpy())


def test_a_side_whose_layers_no_rule_finds_is_refused_saying_why():
    """tinyserve's eager reference is one burst of 12 forwards (no step marker in it): the repetition finds
    forwards, not a layer's bounds in a step, so no structure is decided and the refusal says so."""
    with pytest.raises(TraceError) as err:
        kit.profile.diff_structure(_trace("cb_llama_ref"), _trace("ts_llama_ref"))
    msg = str(err.value)
    assert "B's structure: no module frames, no layers found by repetition" in msg and "\n" not in msg


@pytest.mark.parametrize("name", ["hf_qwen3_stack", "hf_mixtral_stack", "hf_qwen2moe_stack", "hf_gpt2_stack",
                                  "hf_granitehybrid_stack", "hf_bamba_stack", "cb_llama_ref"])
def test_without_frames_the_undecided_share_covers_the_error(name):
    """The same kernels with and without their module frames: where the rule by repetition and place
    differs from the frames, the share it says is undecided covers the difference (GPT-2: layers found
    by their first kernels, the last layer open-ended; GraniteMoeHybrid: a shared MLP beside the experts)."""
    p = kit.profile.load(_trace(name))
    diff = kit.profile.diff_structure(p, _stripped(p))
    assert diff.structure == ("module frames", diff.structure[1]) and "layers by repetition" in diff.structure[1]
    assert _error(diff) <= diff.undecided_share[1] + 0.005, (_error(diff), diff.undecided_share)
    assert diff.undecided_share[0] == pytest.approx(0.0, abs=1e-9)


def test_the_undecided_share_is_said_where_the_rule_cannot_decide():
    p = kit.profile.load(_trace("hf_gpt2_stack"))
    diff = kit.profile.diff_structure(p, _stripped(p), labels=("frames", "none"))
    assert 0.02 < diff.undecided_share[1] < 0.2
    assert any(w.startswith("none: structure from layers by repetition (low") and "undecided" in w
               for w in diff.warnings)
    assert diff.to_dict()["structure"][1].startswith("layers by repetition (low")


@pytest.mark.parametrize("model", ["qwen3", "mixtral", "qwen2moe", "llama"])
def test_eager_runs_without_stacks_match_their_twins_with_frames(model):
    """``hf_<model>_plain`` (no Python frames: no modules) against ``hf_<model>_stack`` (the same model and
    decode with frames): the same shape found, each node within 1% of the kernel time (run to run)."""
    diff = kit.profile.diff_structure(_trace(f"hf_{model}_stack"), _trace(f"hf_{model}_plain"))
    assert min(diff.structural_share) >= 0.95
    assert _error(diff) <= diff.undecided_share[1] + 0.01
