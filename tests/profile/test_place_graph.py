"""Issue 32 "Done when" on the recorded graph pairs (tests/data/traces/place_*: tools/record_place_traces.py):
each CUDA-graph replay placed by alignment with the eager with-stack reference of the same step. Truth by
position where a replay step and a reference step have the same kernel count per stream
(tests/profile/place_truth.py), never the aligner."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kit import profile
from tests.conftest import TEST_DATA
from tests.profile.place_truth import layer_names, score

TRACES = TEST_DATA / "traces"
PAIRS = sorted((p.name, p.name[:-len("_graph")] + "_ref") for p in TRACES.glob("place_*_graph"))
# the padded case: the graph of batch 4 against the eager reference at batch 3
PADDED = [(t, r.replace("_ref", "_ref_bs3")) for t, r in PAIRS if (TRACES / r.replace("_ref", "_ref_bs3")).exists()]


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))


def _load(name, **kw):
    return profile.load(TRACES / name / "trace.json.gz", **kw)


def test_the_recorded_pairs_are_there():
    names = {t for t, _ in PAIRS}
    for want in ("place_llama_graph", "place_mixtral_graph", "place_compiled_graph", "place_piecewise_graph",
                 "place_twostream_graph"):
        assert want in names
    assert any(n not in ("place_llama_graph", "place_mixtral_graph", "place_compiled_graph", "place_piecewise_graph",
                         "place_twostream_graph") for n in names), "a hybrid state-space pair"
    assert PADDED


@pytest.mark.parametrize("target,ref", PAIRS + PADDED)
def test_graph_replay_placed(target, ref):
    r = _load(ref)
    bare = _load(target)
    p = _load(target, reference=r)
    pl = p.placement
    assert pl.refused is None, pl
    got = score(p.kernels, r.kernels)
    truth_steps = json.loads((TRACES / "README.md").read_text().split("<!-- place-truth -->")[1]
                             .split("<!-- /place-truth -->")[0])
    assert got["steps_with_truth"] == truth_steps[f"{target} vs {ref}"], got   # as the README states
    assert got["placed_share"] >= 0.95, got
    if got["steps_with_truth"]:
        assert got["label_agreement"] >= 0.98, got
        assert got["category_points"] <= 2.0, got
        assert got["layer_time_error"] <= 0.05, got
    else:   # no positional truth: every reference layer's kernels found in that layer, few extra
        for lay, (extra, missing, n) in layer_names(p.kernels, r.kernels).items():
            assert missing == 0 and extra <= 0.15 * n, (lay, extra, missing, n)
    # the replay had no module and no layer before
    graph = bare.kernels["graph"].to_numpy(bool)
    assert graph.any() and not (bare.kernels.loc[graph, "layer"] >= 0).any()
    assert (p.kernels.loc[graph, "layer"] >= 0).any()
    # per-step and per-layer scores exist and durations are the replay's own
    assert len(pl.steps) == p.kernels["step"].nunique() and (pl.steps["score"] > 0.8).all()
    assert np.array_equal(p.kernels["dur_us"].to_numpy(), bare.kernels["dur_us"].to_numpy())
    assert "placed by alignment with" in pl.provenance
    ev = p.summary().evidence.set_index("decided_by")["share_of_kernel"]
    assert ev.get("reference", 0) >= 0.9   # the categories now come from the reference, and say so


@pytest.mark.parametrize("target,ref", PAIRS)
def test_layers_without_reference(target, ref):
    """The layer count of each replay by repetition alone (truth: the recorded model's config), or
    'not found' said."""
    m = json.loads((TRACES / target / "measured.json").read_text())
    n = m["config"]["num_hidden_layers"] if "config" in m else m["model"]["layers"]
    g = _load(target).find_layers()
    assert g.layers in (0, n), g
    assert g.layers or g.confidence == "not found"


def test_another_models_reference_refused():
    p = _load("place_llama_graph", reference=_load("place_mixtral_ref"))
    assert p.placement.refused
    assert sum("refused" in w for w in p.warnings) == 1
    assert p.summary().layers.empty


def test_compare_by_op_and_module_with_a_reference_per_side():
    """The graph run compared with the eager run: by op and by module once the replay is placed; not
    before (a replay links no kernel to an op)."""
    ref = _load("place_llama_ref")
    bare = profile.compare(ref, _load("place_llama_graph"), labels=("eager", "graph"))
    placed = profile.compare(ref, _load("place_llama_graph", reference=ref), labels=("eager", "graph"))
    assert bare.by_module is None or not len(bare.by_module)
    assert placed.by_module is not None and "LlamaAttention" in set(placed.by_module.iloc[:, 0].astype(str))
    assert placed.by_op is not None and len(placed.by_op)
    assert any("placed by alignment with" in w for w in placed.warnings)


def test_check_reads_placed_kernels_as_linked():
    """kit profile check: the op and module views of a replay are unusable bare, usable once placed."""
    ref = _load("place_llama_ref")
    bare, placed = _load("place_llama_graph").health(), _load("place_llama_graph", reference=ref).health()
    assert bare.status("op_view") == "unreliable" and bare.status("module_view") == "unreliable"
    assert placed.status("op_view") == "usable" and placed.status("module_view") == "usable"
