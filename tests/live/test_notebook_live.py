"""Notebook 05 in live mode with its defaults on ``local``, executed by a real kernel through papermill:
the experiment is run now (tinyserve's CPU runner, whose true effects are known), into a new session,
on free ports, and the figures, provenance and verdict come from that run; the bundled sample session
is left untouched and no engine is left running."""
from __future__ import annotations

import hashlib
import json

import papermill as pm

import kit
from kit.live._engine import TAG_VAR, tagged_pids
from tests.conftest import ROOT, SAMPLE

NB = ROOT / "notebooks" / "05_live_experiment.ipynb"


def _digest(root) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_parameters_parse_for_papermill():
    params = pm.inspect_notebook(str(NB))
    for name in ("matrix", "flags", "bench", "load", "slo", "port", "live_session"):
        assert name in params, name
    assert params["flags"]["default"].startswith('{"--disable-cuda-graph": [False, True]')
    assert params["hypothesis_variant"]["default"] == '"--disable-cuda-graph"'  # it is in the default flags


def test_notebook_05_runs_live_with_its_defaults(tmp_path):
    before = _digest(SAMPLE)
    live = tmp_path / "live"
    out = tmp_path / "out.ipynb"
    # dict parameters as papermill passes them: a dict (Python API, -y) and JSON text (-p on the command line)
    pm.execute_notebook(str(NB), str(out), cwd=str(NB.parent), progress_bar=False, kernel_name="python3",
                        parameters={"run_live": True, "live_session": str(live),
                                    "flags": {"--disable-cuda-graph": [False, True],
                                              "--attention-backend": [None, "triton"]},
                                    "matrix": '{"NCCL_PROTO": [null, "LL"]}'})
    assert _digest(SAMPLE) == before, "live mode must not write into the bundled sample session"
    nb = json.loads(out.read_text())
    text = "\n".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                     for c in nb["cells"] for o in c.get("outputs", []))
    assert "provenance: measured on local" in text and "recorded now: engines on local" in text
    assert "provenance unknown" not in text and "recording machine:" not in text  # nothing of the sample's
    d = live / "experiments" / "live_graph_backend"
    meta = json.loads((d / "plan.json").read_text())
    assert meta["interleave"] and meta["repeats"] == 3 and [v["label"] for v in meta["variants"]] == [
        "baseline", "NCCL_PROTO=LL", "--disable-cuda-graph", "--attention-backend triton"]
    ports, host = set(), kit.connect("local")
    for f in d.glob("*/rep*/engine.json"):
        rec = json.loads(f.read_text())
        assert rec["stopped"] and rec["port_owner"] == "own" and not tagged_pids(host, TAG_VAR, rec["tag"])
        ports.add(rec["port"])
    assert len(ports) > 1 and 30000 not in ports  # a free port for each engine, not the engine's default
    exp = kit.live.Experiment.open(live, "live_graph_backend")
    rows = {r["variant"]: r for r in exp.rows()}
    assert abs(rows["--disable-cuda-graph"]["speedup"] - 1 / 1.5) < 0.05  # tinyserve TRUTH: x1.5 step time
    ledger = kit.ledger.Ledger.open(live / "ledger.json")
    assert ledger["H7"].verdict == "confirmed" and "live_graph_backend" in ledger["H7"].test
    sess = kit.session.open(live)
    assert sess.provenance("bench/live_graph_backend-load.json").is_measured
    load = kit.bench.LoadResult.load(live / "bench" / "live_graph_backend-load.json")
    assert [r["level"] for r in load.summary()] == ["20 req/s", "60 req/s", "c=1", "c=4"]
    assert all(r["distinct_prompts"] == 24 for r in load.summary())
