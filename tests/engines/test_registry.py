"""The engine registry (``kit.engines``): one home per engine, and the areas that read it."""
from __future__ import annotations

import re

import pytest

import kit.engines as engines
from kit.errors import UsageError


def test_every_engine_has_one_row_and_unknown_is_last():
    names = engines.names()
    assert names[:2] == ["sglang", "vllm"] and names[-1] == "unknown"
    assert {"trtllm", "transformers", "tinyserve"} <= set(names)
    assert len(set(names)) == len(names)
    with pytest.raises(UsageError, match="one of sglang, vllm"):
        engines.engine("lmdeploy")
    assert engines.engine(None).name == engines.engine("").name == "unknown"


@pytest.mark.parametrize(("cmd", "name"), [
    ("python3 -m sglang.launch_server --model-path m", "sglang"),
    ("vllm serve m --tensor-parallel-size 2", "vllm"),
    ("python -m sglang.launch_server --model-path /models/vllm-tuned", "sglang"),   # the first word wins
    ("python3 -m tinyserve.launch_server --device cpu", "tinyserve"),
    ("trtllm-serve m --extra_llm_api_options o.yaml", "trtllm"),
    ("transformers serve --continuous-batching", "transformers"),
    ("./my_server --port 9", "unknown"),
])
def test_a_launch_command_names_its_engine(cmd, name):
    assert engines.guess(cmd).name == name


def test_the_graph_off_mode_is_chosen_by_version():
    vllm = engines.engine("vllm")
    assert "cudagraph_mode" in " ".join(vllm.graph_off_for("0.11.0").add)
    assert vllm.graph_off_for("0.9.2").add == ("--enforce-eager",) and not vllm.graph_off_for("0.9.2").same_program
    assert engines.engine("trtllm").graph_off_for(None).options == {"cuda_graph_config": None}
    assert engines.engine("unknown").graph_off_for(None) is None


def test_step_markers_come_from_the_engines_and_give_phases():
    markers = dict(engines.step_markers())
    sg, vl = markers["sglang"], markers["vllm"]
    assert sg.phase(re.match(sg.pattern, "step[DECODE bs=4]")) == "decode"
    assert sg.phase(re.match(sg.pattern, "step[EXTEND bs=1]")) == "prefill"
    m = re.match(vl.pattern, "execute_context_1(16)_generation_3(3)")
    assert vl.phase(m) == "mixed"
    from kit.profile.steps import _windows  # the profile's families start with the registry's markers, in order
    assert [f for f, _, _ in _windows.families()[:2]] == ["sglang", "vllm"]


def test_live_and_logs_read_the_registry():
    import kit.live
    from kit.logs import _formats
    from kit.logs._records import flag_keys

    assert kit.live.PHASES["vllm"] == list(engines.engine("vllm").phases)
    assert kit.live.PHASES[""] == list(engines.engine("unknown").phases)
    assert [f.name for f in _formats.engine_formats()] == ["sglang", "sglang-request-stats", "vllm",
                                                           "tinyserve-records"]
    flags = flag_keys()
    assert flags["enforce_eager"][0] == "cuda_graph" and flags["enforce_eager"][1]("true") is False


def test_every_known_engine_says_how_it_starts():
    for e in engines.engines():
        assert bool(e.launch) == (e.name != "unknown"), e.name
        assert e.name == "unknown" or engines.guess(e.launch + " --port 1").name == e.name   # its own command names it
    assert engines.engine("tinyserve").bundled == "notebooks/sample/engine"


def test_the_cli_and_mcp_take_every_registered_engine():
    import argparse

    from kit.cli import _logs
    from kit.mcp import _tools

    p = argparse.ArgumentParser()
    _logs.register(p.add_subparsers().add_parser("logs"))
    for name in engines.names():   # --engine trtllm, transformers, ... as well as sglang and vllm
        assert p.parse_args(["logs", "parse", "x.log", "--engine", name]).engine == name
    tool = next(t for t in _tools.TOOLS if t.name == "logs_parse")
    assert tool.properties["engine"]["enum"] == engines.names()
