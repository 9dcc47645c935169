"""Shared helpers for the live tests: tinyserve's command line, free ports, and the ps check."""
from __future__ import annotations

import socket
import subprocess
import uuid

import pytest

from tests.conftest import ROOT

ENGINE = ROOT / "notebooks" / "sample" / "engine"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def engine_procs(marker: str) -> list[str]:
    """Processes on this machine whose command line carries ``marker`` (checked with ps)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,stat,args"], capture_output=True, text=True, timeout=30).stdout
    return [line for line in out.splitlines() if marker in line and " Z" not in line and "ps -ww" not in line]


@pytest.fixture
def tiny():
    """(command, env, marker): a CPU tinyserve with small latencies and a unique model name."""
    marker = f"kit-test-{uuid.uuid4().hex[:10]}"
    cmd = (f"python3 -m tinyserve.launch_server --device cpu --served-model-name {marker} "
           f"--token-ms 5 --load-seconds 0.4")
    yield cmd, {"PYTHONPATH": str(ENGINE)}, marker
    left = engine_procs(marker)
    assert not left, f"processes left behind: {left}"
