"""kit.live.reference_command: the graph-off command recorded beside a graph profile (issue 32)."""
from __future__ import annotations

import shlex

import pytest

from kit.errors import UsageError
from kit.live import reference_command


def test_sglang_graphs_off_same_program():
    r = reference_command("sglang", "python -m sglang.launch_server --model-path m --cuda-graph-max-bs 8 --tp 2")
    assert r.same_program and r.warning is None
    argv = shlex.split(r.cmd)
    assert "--disable-cuda-graph" in argv and "--cuda-graph-max-bs" not in argv and argv[-3:-1] == ["--tp", "2"]


def test_vllm_keeps_compilation_where_the_version_can():
    r = reference_command("vllm", "vllm serve m --enforce-eager --max-num-seqs 4", version="0.11.0")
    argv = shlex.split(r.cmd)
    assert r.same_program and "--enforce-eager" not in argv
    assert argv[argv.index("--compilation-config") + 1] == '{"cudagraph_mode": "NONE"}'
    assert argv[:4] == ["vllm", "serve", "m", "--max-num-seqs"]


def test_old_vllm_enforce_eager_is_another_program_and_says_so():
    r = reference_command("vllm", "vllm serve m", version="0.9.2")
    assert not r.same_program and "--enforce-eager" in r.cmd
    assert r.warning and "torch.compile off" in r.warning


def test_trtllm_and_unknown_engines_are_told():
    with pytest.raises(UsageError, match="cuda_graph_config: null"):
        reference_command("trtllm", "trtllm-serve m")
    with pytest.raises(UsageError, match="one of sglang, vllm"):
        reference_command("lmdeploy", "x")
