"""A new engine is one file: ``tests/engines/toy/toyllm.py`` (its log format, step marker, records, launch
phases, graph-off flag, settings flag), found through ``KIT_ENGINE_PATH``, and the kit reads it everywhere:
``kit.logs`` (read, settings, records), ``kit.profile``'s steps, ``kit.live``'s graph-off command,
``kit bench reconcile``, and the CLI's and MCP's engine choices, with no other change."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pandas as pd
import pytest

import kit
import kit.engines
from tests.conftest import ROOT

TOY = Path(__file__).parent / "toy"
RECORDS = ROOT / "tests" / "data" / "engine_records"


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setenv("KIT_ENGINE_PATH", str(TOY))
    kit.engines.refresh()
    yield kit.engines.engine("toyllm")
    monkeypatch.delenv("KIT_ENGINE_PATH")
    kit.engines.refresh()


def _toy_log(path: Path) -> Path:
    """Eight requests of the planted client records (tests/data/engine_records/client.json): 24 tokens, the
    engine's decode 10 ms per token."""
    lines = ["[toy] ToyLLM version 1.2.3 starting", "[toy] loading weights", "[toy] toy attention backend: paged",
             *[f"[toy] step={i} running={1 + i % 4} tok/s={100 + i % 7}.5" for i in range(40)],
             *[f"[toy] request id=chatcmpl-{i:04x} tokens=24 decode_ms=230.0" for i in range(8)], "[toy] ToyLLM ready"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_toy_engine_is_read_everywhere(tmp_path, toy):
    assert "toyllm" in kit.engines.names() and kit.engines.names()[-1] == "unknown"
    assert kit.engines.guess("toyllm-serve --model m").name == "toyllm"
    log = kit.logs.read(_toy_log(tmp_path / "toy.log"))
    assert log.engine == "toyllm" and log.version == "1.2.3" and not log.engine_inferred
    assert log.counts == {"toy": 40, "toy_requests": 8}
    s = kit.logs.settings(tmp_path / "toy.log")
    assert s.engine == "toyllm" and s.effective["attention_backend"] == "paged"
    assert kit.logs.Settings.key_for("--toy-graphs") == "cuda_graph"
    # its step marker comes first among the trace's step families
    from kit.profile.steps import _windows

    ann = pd.DataFrame({"name": ["toy_iteration#1", "toy_iteration#2", "decode"], "ts": [0.0, 10.0, 20.0],
                        "dur": [9.0, 9.0, 1.0], "side": ["cpu"] * 3})
    fam, sel = _windows._markers(ann)
    assert fam == "toyllm" and len(sel) == 2 and set(sel["phase"]) == {"decode"}
    # its graph-off flag and launch phases
    ref = kit.live.reference_command("toyllm", "toyllm-serve m --toy-graphs")
    assert ref.cmd == "toyllm-serve m --no-toy-graphs" and ref.same_program
    assert toy.phases[-1][0] == "ready"   # a Server reads its engine's row from the registry when it starts


def test_the_toy_engine_records_give_a_reconciliation_per_request(tmp_path, toy):
    recs = kit.logs.step_records(_toy_log(tmp_path / "toy.log"))
    assert recs.engine == "toyllm" and recs.level == "request" and len(recs.requests) == 8
    rec = kit.bench.reconcile(RECORDS / "client.json", recs)
    assert not rec.refused and rec.level == "request"
    t = rec.table.set_index("part")
    mid = "median_band" if "median_band" in t else "p50"    # the band around the median client gap
    assert t.loc["engine_decode", mid] == pytest.approx(10.0) and t.loc["outside", mid] == pytest.approx(1.0)


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "KIT_ENGINE_PATH": str(TOY)}


def test_the_cli_and_mcp_offer_the_toy_engine(tmp_path):
    log = _toy_log(tmp_path / "toy.log")
    run = subprocess.run([sys.executable, "-m", "kit", "logs", "parse", str(log), "--engine", "toyllm", "--json"],
                         capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["engine"] == "toyllm"
    run = subprocess.run([sys.executable, "-m", "kit", "bench", "reconcile", str(RECORDS / "client.json"), str(log),
                          "--json"], capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["level"] == "request"
    without = subprocess.run([sys.executable, "-m", "kit", "logs", "parse", str(log), "--engine", "toyllm"],
                             capture_output=True, text=True, cwd=ROOT, timeout=120,
                             env={k: v for k, v in _env().items() if k != "KIT_ENGINE_PATH"})
    assert without.returncode == 2 and "toyllm" in without.stderr   # argparse: not a choice without the file

    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "kit", "mcp", "--root", str(ROOT), "--root",
                                                                 str(tmp_path)], cwd=str(ROOT),
                                   env={"PYTHONPATH": str(ROOT), "KIT_ENGINE_PATH": str(TOY),
                                        "KIT_CACHE_DIR": str(tmp_path / "cache")})

    async def main() -> tuple[dict, dict]:
        async with Client(params) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            parsed = (await c.call_tool("logs_parse", {"path": str(log), "engine": "toyllm"})).structured_content
            return tools["logs_parse"].input_schema, parsed

    schema, parsed = anyio.run(main)
    assert "toyllm" in schema["properties"]["engine"]["enum"]
    assert parsed["ok"] and parsed["result"]["engine"] == "toyllm"
