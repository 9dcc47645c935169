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


def engine_procs_gone(marker: str, limit: float = 20.0) -> list[str]:
    """The processes carrying ``marker`` once none is left, or what is still there after ``limit`` s: a
    stopped engine's last threads can take a moment to leave the process table on a loaded machine."""
    import time

    end = time.monotonic() + limit
    while (left := engine_procs(marker)) and time.monotonic() < end:
        time.sleep(0.1)
    return left


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


def wait_http(url: str, timeout: float = 20.0) -> None:
    import time
    import urllib.request

    t0 = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return
        except OSError:
            if time.monotonic() - t0 > timeout:
                raise
            time.sleep(0.05)


@pytest.fixture
def timed_server(tmp_path):
    """Factory: start ``tests.live.timed_server`` (a real HTTP server of known timing) in its own
    process with the given options; returns (url, truth_path). Every one is stopped afterwards."""
    import os
    import sys

    procs = []

    def start(**opts):
        port = free_port()
        truth = tmp_path / f"truth-{port}.jsonl"
        args = [sys.executable, "-m", "tests.live.timed_server", "--port", str(port), "--truth", str(truth)]
        for k, v in opts.items():
            flag = "--" + k.replace("_", "-")
            args += [flag] if v is True else [flag, str(v)]
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=str(ROOT))
        procs.append(p)
        url = f"http://127.0.0.1:{port}"
        wait_http(url)
        return url, truth

    yield start
    for p in procs:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def truth_requests(path) -> list[dict]:
    import json

    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
