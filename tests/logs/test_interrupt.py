"""Issue 45 item 15: Ctrl-C early in a large ``kit logs parse`` (parsed by forked workers) ends with exit
130 and no worker traceback: the interrupt is sent to the command's whole process group, as a terminal
sends it, the moment its workers exist (a signal waited for, never a fixed sleep)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import ROOT

SAMPLE_LOG = ROOT / "notebooks" / "sample" / "logs" / "sglang_0.5.9_tp8_default.log"


@pytest.fixture(scope="module")
def big_log(tmp_path_factory):
    """The sample SGLang log's lines repeated past the parallel threshold (64 MB)."""
    from kit.logs._parallel import PARALLEL_MIN

    body = SAMPLE_LOG.read_bytes()
    path = tmp_path_factory.mktemp("biglog") / "big.log"
    with open(path, "wb") as f:
        written = 0
        while written < PARALLEL_MIN + (8 << 20):
            f.write(body)
            written += len(body)
    return path


def _interrupt_when_workers_run(path) -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-m", "kit", "logs", "parse", str(path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    me = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if len(me.children()) >= 2:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.mark.skipif(os.cpu_count() is None or os.cpu_count() < 2, reason="one core: logs are parsed serially")
def test_ctrl_c_early_in_a_parallel_parse_leaves_no_worker_traceback(big_log):
    outcomes = [_interrupt_when_workers_run(big_log) for _ in range(6)]
    assert [rc for rc, _ in outcomes] == [130] * 6, [e[-500:] for _, e in outcomes]
    assert not [e for _, e in outcomes if "Traceback" in e or "KeyboardInterrupt" in e]
