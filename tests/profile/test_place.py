"""Issue 32: placement by alignment with a reference run, on the real transformers twins (tests/data/traces/
hf_*_plain: eager without stack; hf_*_stack: the same model object with stack, as reference), and layers
by repetition without a reference. Truth by position (tests/profile/place_truth.py), never the aligner."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from kit import profile
from kit.profile.attribution import _place
from kit.profile.attribution._evidence import undecided
from tests.conftest import TEST_DATA
from tests.profile.module_truth import truth as module_truth
from tests.profile.place_truth import score

TRACES = TEST_DATA / "traces"
MODELS = ["llama", "qwen3", "mixtral", "qwen2moe", "deepseekv3", "nemotronh", "granitehybrid", "bamba", "zamba2",
          "falconh1", "jamba", "qwen3next"]


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))


def _trace(name: str):
    return TRACES / name / "trace.json.gz"


def _done_when(placed, reference) -> dict:
    got = score(placed.kernels, reference.kernels)
    assert got["steps_with_truth"] == got["steps"], got      # the twins run the same kernels every step
    assert got["placed_share"] >= 0.95, got
    assert got["label_agreement"] >= 0.98, got
    assert got["category_points"] <= 2.0, got
    assert got["layer_time_error"] <= 0.05, got
    return got


@pytest.mark.parametrize("model", MODELS)
def test_eager_without_stack_placed_by_its_with_stack_twin(model):
    ref = profile.load(_trace(f"hf_{model}_stack"))
    plain = profile.load(_trace(f"hf_{model}_plain"))
    p = profile.load(_trace(f"hf_{model}_plain"), reference=ref)
    _done_when(p, ref)
    assert undecided(p.kernels, p.rules)[0] < 0.05
    assert undecided(p.kernels, p.rules)[0] <= undecided(plain.kernels, plain.rules)[0]
    assert p.placement.refused is None and p.placement.score > 0.95
    assert "placed by alignment with hf_" in p.placement.provenance
    # layers and modules now exist where the plain trace had none
    assert not (plain.kernels["layer"] >= 0).any()
    lay = p.modules("layer")
    assert sorted(lay["layer"].unique()) == sorted(ref.modules("layer")["layer"].unique())


def test_category_shares_match_the_module_truth():
    """Placed categories against the module-stack truth of the stack twin (its own JSON walk, no kit)."""
    from tests.profile.module_truth import shares

    ref = profile.load(_trace("hf_llama_stack"))
    p = profile.load(_trace("hf_llama_plain"), reference=ref)
    t = shares(module_truth(_trace("hf_llama_stack")))
    s = p.summary("decode")
    for cat, share in t.items():
        assert abs(s.share(cat) - share) <= 0.05, (cat, s.share(cat), share)


def test_other_model_refused_with_one_line():
    ref = profile.load(_trace("hf_qwen3_stack"))
    p = profile.load(_trace("hf_llama_plain"), reference=ref)
    assert p.placement.refused
    w = [x for x in p.warnings if "refused" in x]
    assert len(w) == 1 and "\n" not in w[0] and "alignment score 0.85 under 0.9" in w[0]   # not "0.0% not aligned"
    assert "placed" not in p.kernels and not (p.kernels["layer"] >= 0).any()
    assert p.summary().layers.empty


def test_other_cache_refused():
    """A StaticCache step captured in a graph against a DynamicCache eager run: another program."""
    p = profile.load(_trace("hf_graph_replay"), reference=profile.load(_trace("hf_llama_stack")))
    assert p.placement.refused and any("refused" in w for w in p.warnings)


def test_a_scrambled_step_is_unplaced_with_its_reason():
    ref = profile.load(_trace("hf_llama_stack"))
    p = profile.load(_trace("hf_llama_plain"))
    k = p.kernels
    rows = np.flatnonzero(k["step"].to_numpy() == 2)
    rng = np.random.default_rng(0)
    names = k["name"].astype(object).to_numpy().copy()
    names[rows] = names[rng.permutation(rows)]
    k["name"] = names
    k["name"] = k["name"].astype("category")
    pl = _place.place(p, ref)
    assert pl.refused is None
    st = pl.steps.set_index("step")["score"]
    assert st[2] < _place.MIN_SCORE <= st.drop(2).min()
    un = k["placed"].astype(str) == "unplaced"
    assert set(k.loc[un, "step"]) == {2}
    share = float(k.loc[un, "dur_us"].sum() / k["dur_us"].sum())
    assert abs(pl.unplaced_share - share) < 1e-9 and 0.1 < share < 0.25
    assert any("step aligned" in r for r in pl.reasons)
    assert any("not placed by the reference" in w and "placed by alignment with" in w for w in p.warnings)


def test_align_gaps_and_name_tiers():
    codes = _place.Codes()
    ref = ["nvjet_sm90_tst_8x64_64x16_4x1_v_bz_TNN", "void at::native::vectorized_elementwise_kernel<4, Add>(int)",
           "cudnn_sdpa_fwd", "void at::native::reduce_kernel<512, 1>(x)"]
    tgt = ["Memcpy DtoD (Device -> Device)", "nvjet_sm90_tst_16x64_64x16_2x1_v_bz_splitK_TNN",
           "void at::native::vectorized_elementwise_kernel<8, Add>(int)", "cudnn_sdpa_fwd",
           "void at::native::reduce_kernel<512, 1>(x)"]
    m = _place.align(codes.of(np.array(tgt, object)), codes.of(np.array(ref, object)))
    assert m.tolist() == [-1, 0, 1, 2, 3]
    assert _place.canonical(ref[0]) == _place.canonical("nvjet_sm90_tst_16x64_64x16_4x1_v_bz_TNN")
    assert _place.kind(tgt[1]) == "gemm" and _place.kind(tgt[0]) == "memcpy"


@pytest.mark.parametrize("model", MODELS)
def test_layers_by_repetition_without_reference(model):
    """The layer count of every twin, or 'not found' said: never a wrong count."""
    p = profile.load(_trace(f"hf_{model}_plain"))
    ref = profile.load(_trace(f"hf_{model}_stack"))
    n = len(np.unique(ref.kernels["layer"][ref.kernels["layer"] >= 0]))
    g = p.find_layers()
    if g.layers:
        assert g.layers == n, g
        assert g.confidence in ("high", "medium", "low")
        assert sorted(p.modules("layer")["layer"].unique()) == list(range(n))
    else:
        assert g.confidence == "not found" and g.how
        assert not (p.kernels["layer"] >= 0).any()


def test_cli_reference_and_by_layer():
    kit = [sys.executable, "-m", "kit", "profile", "summary"]
    out = subprocess.run(kit + [str(_trace("hf_llama_plain")), "--reference", str(_trace("hf_llama_stack")),
                                "--json", "--no-cache"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["placement"]["refused"] is None and d["placement"]["placed_share"] >= 0.95
    assert len(d["placement"]["layers"]) == 4
    out = subprocess.run(kit + [str(_trace("hf_graph_replay")), "--by", "layer", "--no-cache"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "layers by repetition" in out.stdout and "layers=4" in out.stdout
    out = subprocess.run(kit + [str(_trace("hf_llama_plain")), "--reference", str(_trace("hf_qwen3_stack")),
                                "--no-cache"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "refused" in out.stdout and "Traceback" not in out.stderr


def test_a_stream_too_long_to_align_is_said(monkeypatch):
    monkeypatch.setattr(_place, "MAX_CELLS", 1000)
    p = profile.load(_trace("hf_llama_plain"), reference=profile.load(_trace("hf_llama_stack")))
    assert p.placement.refused and "too long to align" in p.placement.refused


def test_a_refused_placement_is_printed_once_with_its_real_reason(capsys):
    """The refusal was printed twice by ``kit profile summary --reference``, and one refused for its score said
    "0.0% of kernel time not aligned" as its reason."""
    import numpy as np
    import pandas as pd

    from kit.cli import main
    from kit.profile.attribution._place import _refusal

    assert main(["profile", "summary", str(_trace("hf_llama_plain")), "--reference",
                 str(_trace("hf_qwen3_stack"))]) == 0
    out = capsys.readouterr().out
    assert out.count("refused") == 1, out
    steps = pd.DataFrame({"kernels": [100], "ref_kernels": [300], "matched": [100]})
    why = _refusal(np.ones(100), np.ones(100, bool), steps, 0, None)
    assert why.startswith("alignment score 0.50 under 0.9") and "not aligned" not in why
