"""The third engine's live loop on this CPU: the kit starts ``transformers serve`` with continuous batching
(the engine's registry launch command, under ``opentelemetry-instrument``) through ``kit.server``, benchmarks
it at concurrency 1 and 4, collects its spans with its own OTLP receiver and reconciles per request
(``tools/record_transformers_run.py``, the script that records the committed fixture, run whole).

Needs the serving stack in ``.kit-cache/transformers-serve`` (torch, ``transformers[serving]`` 5.0 to 5.8,
``opentelemetry-distro``, the OTLP/HTTP exporter); CI does not install torch (several GB), so there it skips
and ``tests/bench/test_reconcile_transformers.py`` reads the recorded run instead."""
from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import ROOT

TOOL = ROOT / "tools" / "record_transformers_run.py"
VENV = ROOT / ".kit-cache" / "transformers-serve"

pytestmark = pytest.mark.skipif(
    not (VENV / "bin" / "opentelemetry-instrument").exists() or not (VENV / "bin" / "transformers").exists(),
    reason="no transformers serving stack in .kit-cache/transformers-serve (torch, transformers[serving] 5.0-5.8, "
           "opentelemetry-distro, opentelemetry-exporter-otlp-proto-http: see tools/record_transformers_run.py); "
           "CI does not install torch, the recorded run is tests/bench/test_reconcile_transformers.py")


def _tool():
    spec = importlib.util.spec_from_file_location("record_transformers_run", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_transformers_serve_benchmarked_and_reconciled_from_its_own_spans(tmp_path):
    rec = _tool().record(tmp_path, VENV, requests=3, max_tokens=8)
    assert not rec.refused, rec.refused
    assert rec.level == "request" and len(rec.tokens) == 6   # 3 requests at concurrency 1, 3 at 4
    assert not any("no engine request record" in w or "different number of chunks" in w for w in rec.warnings)
    assert "transformers continuous-batching OpenTelemetry spans" in rec.warnings[0]
    parts = ["forward", "execute_other", "engine_other", "outside"]
    assert (rec.tokens[parts].sum(axis=1) - rec.tokens["gap"]).abs().max() < 1e-9
    assert (rec.tokens["forward"] > 0).all()
    phases = json.loads((tmp_path / "server.json").read_text())["phases"]   # the registry row's phases, in order
    assert {"loading weights", "HTTP server", "ready"} <= set(phases), phases
    assert phases["loading weights"] <= phases["ready"]
    versions = json.loads((tmp_path / "versions.json").read_text())
    assert versions["transformers"].startswith("5.")
    assert "MODEL_DIR" in (tmp_path / "client.json").read_text()   # no path of this machine in the records
