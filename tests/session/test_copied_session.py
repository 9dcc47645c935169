"""A trace added under a copied sample session does not inherit the sample's "measured on H200": the
sample's manifest says *measured* of the scenario folders and files it measured, never of a whole
layout folder (``traces/``, ``env/``), so a new scenario is ``unknown`` until it is recorded."""
from __future__ import annotations

import json
import shutil

import kit
from kit.session import LAYOUT
from tests.conftest import ROOT

SAMPLE = ROOT / "notebooks" / "sample"


def test_no_measured_entry_covers_a_whole_layout_folder():
    entries = json.loads((SAMPLE / "provenance.json").read_text())["artefacts"]
    broad = [k for k, v in entries.items() if v["kind"] == "measured" and k in LAYOUT.values()]
    assert broad == []


def test_a_trace_added_under_a_copied_sample_is_not_measured(tmp_path):
    copy = tmp_path / "mine"
    shutil.copytree(SAMPLE / "traces" / "tp1_eager", copy / "traces" / "tp1_eager")
    shutil.copy(SAMPLE / "provenance.json", copy / "provenance.json")
    added = copy / "traces" / "my_run" / "rank0.trace.json.gz"
    added.parent.mkdir()
    shutil.copy(SAMPLE / "traces" / "tp1_eager" / "rank0.trace.json.gz", added)
    s = kit.session.open(copy)
    assert s.provenance("traces/tp1_eager/rank0.trace.json.gz").kind == "measured"
    assert s.provenance(added).kind == "unknown"
    assert "H200" not in kit.session.caption([s.provenance(added)])
    s.record("traces/my_run", kit.provenance.Provenance.measured(host="my-box", how="my recorder"))
    assert kit.session.open(copy).provenance(added).label.startswith("measured on my-box")
