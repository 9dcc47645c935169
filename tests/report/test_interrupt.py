"""Issue 45 item 15: Ctrl-C during ``kit report`` (sent to the command's process group, as a terminal
sends it: once the first notebook is announced, and once its kernel runs; signals waited for, not
fixed sleeps) ends with one line and exit 130: the notebook is not recorded as failed (no
'AssertionError'), the next one does not start, no traceback, and the report directory is not written."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import ROOT, SAMPLE


def _kernel_runs(pid: int) -> bool:
    try:
        return any("ipykernel" in " ".join(c.cmdline()) for c in psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return False


@pytest.mark.parametrize("when", ["announced", "kernel running"])
def test_ctrl_c_during_kit_report_is_one_line_and_exit_130(tmp_path, when):
    out = tmp_path / "report"
    proc = subprocess.Popen([sys.executable, "-m", "kit", "report", "--session", str(SAMPLE), "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    before = [proc.stdout.readline()]
    assert "[1/" in before[0], before
    if when == "kernel running":
        deadline = time.monotonic() + 120
        while not _kernel_runs(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _kernel_runs(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)
    after = proc.stdout.read().splitlines()
    assert proc.wait(timeout=120) == 130
    assert len(after) == 1 and "interrupted" in after[0], after
    text = "".join(before) + "\n".join(after)
    assert "Traceback" not in text and "AssertionError" not in text and "[2/" not in text
    assert not out.exists()
