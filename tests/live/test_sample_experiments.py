"""The live experiments bundled in the sample session: labelled as measured where they were, and the
CPU-runner recording's findings agree with tinyserve's known truth."""
from __future__ import annotations

import math

import kit
from tests.conftest import SAMPLE


def test_h200_recording_is_measured_and_complete():
    sess = kit.session.open(SAMPLE)
    exp = kit.live.Experiment.open(SAMPLE, "h200_graph_backend_compile")
    prov = sess.provenance("experiments/h200_graph_backend_compile")
    assert prov.is_measured and "H200" in prov.label and "record_live_session" in prov.label
    assert all(r["status"] == "ok" and r["n"] == 3 for r in exp.rows())
    for v in exp.variants:
        assert sess.provenance(f"experiments/h200_graph_backend_compile/{v['slug']}/server.log").is_measured
        assert (SAMPLE / "experiments" / "h200_graph_backend_compile" / v["slug"] / "traces"
                / "rank0.trace.json.gz").is_file()
    assert sess.provenance("experiments/h200_live_server/single_stream.json").is_measured


def test_cpu_recording_matches_the_known_truth():
    # tinyserve/runtime.py TRUTH: no CUDA graph x1.5, torch_native x1.6, torch.compile x0.9 per-token time
    truth = {"--disable-cuda-graph": 1 / 1.5, "--attention-backend torch_native": 1 / 1.6,
             "--enable-torch-compile": 1 / 0.9}
    rows = {r["variant"]: r for r in kit.live.Experiment.open(SAMPLE, "cpu_graph_backend_compile").rows()}
    for label, ratio in truth.items():
        assert rows[label]["significant"], rows[label]
        assert math.isclose(rows[label]["speedup"], ratio, rel_tol=0.05), (label, rows[label]["speedup"], ratio)
