"""Issue 44 "Done when" on a serving loop the kit was not written for: transformers' continuous batching
(tests/data/traces/cb_*: tools/record_cb_traces.py; prefill chunks and decodes in one padded batch, paged
attention, one CUDA graph per padded signature), recorded as a graph replay, a stackless eager run and a
with-stack eager run (the reference) of the same requests, each scheduler iteration in a range of the
loop's own name, and the same three with no step range at all. Truth: the iterations the recorder counted
(``measured.json``), and by position (tests/profile/place_truth.py: step i of the replay against step i of
the reference, or each run's kernels as one sequence), never the kit's aligner."""
from __future__ import annotations

import json

import pytest

from kit import profile
from tests.conftest import TEST_DATA
from tests.profile.place_truth import score

TRACES = TEST_DATA / "traces"
MODELS = sorted({p.name.split("_")[1] for p in TRACES.glob("cb_*_graph")})


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))


def _load(name: str, **kw):
    return profile.load(TRACES / name / "trace.json.gz", **kw)


def _iterations(name: str) -> int:
    return json.loads((TRACES / name / "measured.json").read_text())["iterations"]


def test_the_recordings_are_there():
    assert "llama" in MODELS, MODELS


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("run", ["graph", "eager", "ref", "graph_norange", "ref_norange"])
def test_steps_found_are_the_iterations_recorded(model, run):
    name = f"cb_{model}_{run}"
    p = _load(name)
    assert len(p.steps) == _iterations(name), (name, p.steps[["name", "kernels", "source"]])


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("run", ["graph", "eager", "graph_norange", "eager_norange"])
def test_placed_by_the_reference(model, run):
    suffix = "_norange" if run.endswith("_norange") else ""
    ref = _load(f"cb_{model}_ref{suffix}")
    p = _load(f"cb_{model}_{run}", reference=ref)
    pl = p.placement
    assert pl.refused is None, pl
    mode = "paired" if pl.how == "per step, steps corresponding" else "whole"
    got = score(p.kernels, ref.kernels, mode)
    assert got["steps_with_truth"] == got["steps"] >= 1, (pl, got)
    assert got["placed_share"] >= 0.95, (pl, got)
    assert got["category_points"] <= 3.0, (pl, got)
    assert got["layer_time_error"] <= 0.05, (pl, got)
