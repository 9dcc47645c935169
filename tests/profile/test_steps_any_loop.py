"""Issue 44: steps in any serving loop's trace, and placement that holds whatever the steps are.

On the recorded fixtures of several architectures (tests/data/traces: transformers twins, graph pairs),
with their step ranges renamed to a name no engine table knows (a serving loop's own range) or removed
(a loop with no step range at all; tests/profile/derived_traces.py): the steps found equal the steps
recorded (the recorder's own ranges: the truth), on a replay and on its reference alike, a
``--step-marker`` names the range, and placement by a reference is right by position
(tests/profile/place_truth.py), never by the kit's aligner."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kit import profile
from tests.conftest import TEST_DATA
from tests.profile import derived_traces as D
from tests.profile.place_truth import score

TRACES = TEST_DATA / "traces"
NAME = "myengine.iteration"
# dense, MoE, hybrid state-space, linear attention, encoder-decoder, Conv1D projections
TWINS = ["llama", "mixtral", "granitehybrid", "qwen3next", "t5", "gpt2"]


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))


def _recorded(scenario: str) -> int:
    """The steps the recorder marked (its own ranges, read by the known family)."""
    return len(profile.load(TRACES / scenario / "trace.json.gz").steps)


def _kinds(p) -> set:
    return {s.split(":")[1] if s.startswith("annotation:") else s for s in p.steps["source"]}


@pytest.mark.parametrize("model", TWINS)
def test_a_loops_own_range_is_its_step_on_every_architecture(tmp_path, model):
    for twin in ("stack", "plain"):
        n = _recorded(f"hf_{model}_{twin}")
        p = profile.load(D.ranges_renamed(tmp_path / f"{twin}.json.gz", f"hf_{model}_{twin}", NAME))
        assert len(p.steps) == n, (twin, p.steps)
        assert set(p.steps["source"]) == {f"annotation:range:{NAME}:cpu"}
        assert (p.kernels["step"] >= 0).all()


@pytest.mark.parametrize("model", TWINS)
def test_without_any_range_the_reference_steps_are_its_forwards(tmp_path, model):
    n = _recorded(f"hf_{model}_stack")
    p = profile.load(D.ranges_renamed(tmp_path / "s.json.gz", f"hf_{model}_stack", None))
    assert len(p.steps) == n, p.steps
    assert _kinds(p) == {"forward"}, p.steps["source"]


@pytest.mark.parametrize("pair", ["llama", "mixtral", "twostream", "piecewise", "bamba"])
def test_a_replay_and_its_reference_find_the_same_steps(tmp_path, pair):
    """Renamed: both by the range; removed: the replay by its graph launches, the reference by its forwards."""
    n = _recorded(f"place_{pair}_graph")
    assert n == _recorded(f"place_{pair}_ref")
    for new in (NAME, None):
        g = profile.load(D.ranges_renamed(tmp_path / f"g{new}.json.gz", f"place_{pair}_graph", new))
        r = profile.load(D.ranges_renamed(tmp_path / f"r{new}.json.gz", f"place_{pair}_ref", new))
        if pair == "piecewise" and new is None:   # one graph per piece: launches are pieces, not steps
            assert len(r.steps) == n
            continue
        assert len(g.steps) == len(r.steps) == n, (new, g.steps, r.steps)


@pytest.mark.parametrize("model", ["llama", "mixtral", "granitehybrid", "qwen3next"])
@pytest.mark.parametrize("new", [NAME, None], ids=["engine-range", "no-range"])
def test_placed_by_position_whatever_the_steps(tmp_path, model, new):
    """Without stack placed by the with-stack twin: per step where the steps correspond, over the stream
    as a whole where they do not (no range: the plain run has only gaps); right by position either way."""
    ref = profile.load(D.ranges_renamed(tmp_path / "s.json.gz", f"hf_{model}_stack", new))
    p = profile.load(D.ranges_renamed(tmp_path / "p.json.gz", f"hf_{model}_plain", new), reference=ref)
    pl = p.placement
    assert pl.refused is None, pl
    assert pl.how.startswith("per step" if new else "the stream as a whole"), pl
    got = score(p.kernels, ref.kernels, "paired" if new else "whole")
    assert got["steps_with_truth"] == got["steps"] >= 1, got
    assert got["placed_share"] >= 0.95, got
    assert got["label_agreement"] >= 0.98, got
    assert got["category_points"] <= 3.0, got
    assert got["layer_time_error"] <= 0.05, got


def test_step_marker_names_the_range(tmp_path):
    path = D.ranges_renamed(tmp_path / "s.json.gz", "hf_llama_stack", NAME)
    n = _recorded("hf_llama_stack")
    for marker in (NAME, "LlamaForCausalLM", "nn.Module: LlamaForCausalLM_0"):
        p = profile.load(path, step_marker=marker)
        assert len(p.steps) == n, (marker, p.steps)
        assert {s.rsplit(":", 1)[0] for s in p.steps["source"]} == {f"annotation:marker:{marker}"}
    # a marker that names every decoder layer: one step per layer call, as asked
    layers = profile.load(path, step_marker="LlamaDecoderLayer")
    assert len(layers.steps) == n * int((layers.kernels["layer"].max() + 1))
    missing = profile.load(path, step_marker="no.such.range")
    assert missing.steps.empty and any("no range named 'no.such.range'" in w for w in missing.warnings)
    # numbers match any number: ProfilerStep names ProfilerStep#N
    ps = profile.load(D.profiler_steps_around(tmp_path / "p.json.gz", "hf_llama_stack", NAME, 2),
                      step_marker="ProfilerStep")
    assert len(ps.steps) == n // 2


def test_a_profiler_step_of_several_iterations_yields_to_the_loops_range(tmp_path):
    n = _recorded("hf_llama_stack")
    p = profile.load(D.profiler_steps_around(tmp_path / "p.json.gz", "hf_llama_stack", NAME, 3))
    assert len(p.steps) == n and set(p.steps["source"]) == {f"annotation:range:{NAME}:cpu"}


def test_a_repeated_part_of_the_step_is_not_the_step(tmp_path):
    """A training loop's ProfilerStep#N with a repeated range around each attention inside it: the
    inner range covers part of each step only; the profiler step is the step."""
    n = _recorded("hf_llama_stack")
    p = profile.load(D.profiler_steps_with_inner(tmp_path / "t.json.gz", "hf_llama_stack", "LlamaAttention",
                                                 "attention_range"))
    assert len(p.steps) == n and set(p.steps["source"]) <= {"annotation:profiler-step:cpu",
                                                            "annotation:profiler-step:gpu"}, p.steps


def test_cli_step_marker(tmp_path):
    path = D.ranges_renamed(tmp_path / "s.json.gz", "hf_llama_stack", NAME)
    out = subprocess.run([sys.executable, "-m", "kit", "profile", "summary", str(path), "--step-marker",
                          "LlamaForCausalLM", "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["steps"] == _recorded("hf_llama_stack"), {k: d[k] for k in list(d)[:12]}


def test_a_profiler_step_holding_the_whole_run_stays_the_step(shared_data):
    """A real inference trace (TraceLens' xDiT SD3.5): one ProfilerStep#N around the run, four calls of a
    compiled graph inside covering part of it: a repeated range that tiles less than the profiler step is
    part of it, not the step."""
    p = profile.load(shared_data / "traces" / "tracelens" / "inference" / "xdit_sd_3.5"
                     / "profile_trace_rank_0.json.gz")
    assert len(p.steps) == 1 and set(p.steps["source"]) == {"annotation:profiler-step:cpu"}, p.steps
    assert (p.kernels["step"] >= 0).all()
