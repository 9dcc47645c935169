"""kit.experiment against tinyserve's CPU runner, whose per-token latency effects are known
(``tinyserve.runtime.TRUTH``): 4 variants x 3 repeats, interrupted after two variants and resumed
without re-running them; the detected differences must match the configured truth."""
from __future__ import annotations

import json
import math

import pytest

import kit
from kit.errors import ExperimentError
from kit.ledger import Ledger
from kit.live import plan
from tests.live.conftest import engine_procs, free_port

# the configured truth (tinyserve/runtime.py TRUTH): per-token time x0.70 for NCCL_PROTO=LL,
# x1.00 for NCCL_ALGO=Ring, x1.25 for the triton attention backend -> tok/s ratios:
TRUTH = {"NCCL_PROTO=LL": 1 / 0.70, "NCCL_ALGO=Ring": 1.0, "--attention-backend triton": 1 / 1.25}


def test_plan_modes():
    one = plan("serve", {"A": [None, "1"], "B": ["x", "y", "z"]}, {"--f": [False, True]}, mode="ofat")
    assert [v["label"] for v in one] == ["baseline", "A=1", "B=y", "B=z", "--f"]
    assert one[0]["env"] == {"B": "x"} and one[1]["env"] == {"A": "1", "B": "x"} and one[4]["cmd"] == "serve --f"
    grid = plan("serve", {"A": [None, "1"], "B": ["x", "y", "z"]}, {"--f": [False, True]}, mode="grid")
    assert len(grid) == 12 and len({v["slug"] for v in grid}) == 12
    assert grid[-1]["label"] == "A=1, B=z, --f"
    flags = plan("serve", flags={"--attention-backend": [None, "triton"]})
    assert flags[1]["cmd"] == "serve --attention-backend triton"
    with pytest.raises(ExperimentError, match="mode"):
        plan("serve", {"A": [1, 2]}, mode="random")
    with pytest.raises(ExperimentError, match="environment variable"):
        plan("serve", {"A B": [1, 2]})


def test_experiment_finds_the_truth_and_resumes(tmp_path):
    marker = "kit-exp-truth"
    cmd = f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} --token-ms 10 --load-seconds 0.2"
    from tests.live.conftest import ENGINE

    kw = dict(matrix={"NCCL_PROTO": [None, "LL"], "NCCL_ALGO": [None, "Ring"]},
              flags={"--attention-backend": [None, "triton"]}, env={"PYTHONPATH": str(ENGINE)},
              port=free_port(), session=tmp_path, name="truth", repeats=3, progress=False,
              bench={"requests": 3, "warmup": 1, "max_tokens": 24, "prompt_tokens": 8})
    seen = []

    def interrupt_after_two(variant, result):
        seen.append(variant["label"])
        if len(seen) == 2:
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C in the notebook

    with pytest.raises(KeyboardInterrupt):
        kit.experiment(cmd, on_variant=interrupt_after_two, **kw)
    assert not engine_procs(marker)
    d = tmp_path / "experiments" / "truth"
    done = {p.parent.name: p.stat().st_mtime_ns for p in d.glob("*/result.json")}
    assert sorted(done) == ["v00-baseline", "v01-NCCL_PROTO_LL"]

    rerun = []
    exp = kit.experiment(cmd, on_variant=lambda v, r: rerun.append(v["label"]), **kw)
    assert rerun == ["NCCL_ALGO=Ring", "--attention-backend triton"]  # finished variants not re-run
    assert {p.parent.name: p.stat().st_mtime_ns for p in d.glob("*/result.json") if p.parent.name in done} == done
    assert not engine_procs(marker)

    rows = {r["variant"]: r for r in exp.rows()}
    assert all(r["status"] == "ok" and r["n"] == 3 for r in rows.values())
    for label, ratio in TRUTH.items():
        r = rows[label]
        assert r["significant"] == (ratio != 1.0), (label, r)
        assert math.isclose(r["speedup"], ratio, rel_tol=0.10), (label, r["speedup"], ratio)
    # every artefact is in the session with its command, environment and provenance
    v = json.loads((d / "v01-NCCL_PROTO_LL" / "variant.json").read_text())
    assert v["env"]["NCCL_PROTO"] == "LL" and v["cmd"].startswith("python3 -m tinyserve")
    assert "fired up" in (d / "v03-attention_backend_triton" / "server.log").read_text()
    assert len(json.loads((d / "v00-baseline" / "bench.json").read_text())["requests"]) == 9
    sess = kit.session.open(tmp_path)
    assert sess.provenance("experiments/truth/v02-NCCL_ALGO_Ring/bench.json").is_measured
    assert "NCCL_ALGO=Ring" in sess.provenance("experiments/truth/v02-NCCL_ALGO_Ring/server.log").note

    ledger = Ledger.open(tmp_path / "ledger.json")
    assert exp.decide(ledger, "HX1", "NCCL_PROTO=LL", statement="LL speeds decode") == "confirmed"
    assert exp.decide(ledger, "HX2", "NCCL_ALGO=Ring", statement="Ring speeds decode") == "rejected"
    assert exp.decide(ledger, "HX3", "--attention-backend triton", statement="triton is slower",
                      expect="slower") == "confirmed"
    assert Ledger.open(tmp_path / "ledger.json")["HX1"].numbers["significant"] is True

    again = kit.live.Experiment.open(tmp_path, "truth")
    assert [r["tok_s"] for r in again.rows()] == [r["tok_s"] for r in exp.rows()]
    assert "NCCL_PROTO=LL" in repr(again) and "<table>" in again._repr_html_()
    fig = exp.plot()
    assert fig.axes[0].get_xlabel().startswith("decode tok/s")
    assert list(exp.table["variant"]) == ["baseline", "NCCL_PROTO=LL", "NCCL_ALGO=Ring", "--attention-backend triton"]
    with pytest.raises(ExperimentError, match="different experiment"):
        kit.experiment(cmd + " --token-ms 3", **kw)


def test_a_variant_that_crashes_is_stored_as_failed(tmp_path):
    from tests.live.conftest import ENGINE

    marker = "kit-exp-crash"
    cmd = f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} --token-ms 2 --load-seconds 0.2"
    exp = kit.experiment(cmd, matrix={"TINYSERVE_CRASH": [None, "load"]}, env={"PYTHONPATH": str(ENGINE)},
                         port=free_port(), session=tmp_path, name="crash", repeats=2, progress=False,
                         bench={"requests": 2, "warmup": 0, "max_tokens": 8})
    rows = {r["variant"]: r for r in exp.rows()}
    assert rows["baseline"]["status"] == "ok"
    bad = rows["TINYSERVE_CRASH=load"]
    assert bad["status"] == "failed" and "died during loading weights" in bad["error"]
    assert math.isnan(bad["tok_s"]) and not bad["significant"]
    assert not engine_procs(marker)
