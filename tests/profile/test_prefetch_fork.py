"""The CLI's prefetch forks its parse workers when that is safe (a fresh process: one thread, no numpy or
pandas loaded) and falls back to spawned workers otherwise; either way the profile is the same, a
worker's error reaches the caller, and a worker killed before it answered costs a parse, not the answer."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kit.errors import KitError
from kit.profile import _load
from kit.profile.reading._read import read_raw
from tests.conftest import ROOT

TRACE = ROOT / "tests" / "data" / "traces" / "hf_llama_stack" / "trace.json.gz"

_FRESH = """
import json, sys
from kit.profile import _load
_load.PREFETCH_MIN_BYTES = 0
paths = sys.argv[1:]
with _load.prefetch(paths, cache=False) as pending:
    kinds = sorted({type(f).__name__ for f in pending.futures.values()})
    from kit import profile
    a = profile.load(paths, cache=False, prefetched=pending)
b = profile.load(paths, cache=False)
print(json.dumps({"kinds": kinds, "same": bool(a.kernels.equals(b.kernels) and a.steps.equals(b.steps)
                                               and a.runtime.equals(b.runtime)), "kernels": len(a.kernels)}))
"""


def test_a_fresh_process_forks_and_gets_the_same_profile():
    out = subprocess.run([sys.executable, "-c", _FRESH, str(TRACE)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"kinds": ["ForkedParse"], "same": True, "kernels": got["kernels"]} and got["kernels"] > 100


def test_fork_is_not_used_once_numpy_is_loaded():
    import numpy  # noqa: F401 - its thread pools make a fork unsafe

    assert not _load._fork_is_safe()


def test_a_worker_killed_before_answering_costs_a_parse_not_the_answer():
    job = _load.ForkedParse(str(TRACE), "kineto")
    os.kill(job._pid, signal.SIGKILL)
    time.sleep(0.05)
    got = job.result()
    want = read_raw(str(TRACE), "kineto")
    assert got["kernels"]["name"] == want["kernels"]["name"] and got["kernels"]["ts"] == want["kernels"]["ts"]


def test_the_workers_error_is_raised_in_the_caller(tmp_path):
    bad = tmp_path / "trace.json"
    bad.write_text('{"traceEvents": "not a list"}')
    with pytest.raises(KitError) as in_process:
        read_raw(str(bad), "kineto")
    job = _load.ForkedParse(str(bad), "kineto")
    with pytest.raises(type(in_process.value)) as forked:
        job.result()
    assert str(forked.value) == str(in_process.value)


def test_closing_an_untaken_parse_stops_its_worker():
    job = _load.ForkedParse(str(TRACE), "kineto")
    pid = job._pid
    _load.Prefetch({str(TRACE): job}).close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


@pytest.mark.shared_data
def test_ctrl_c_during_the_parse_exits_130_and_leaves_no_process(shared_data):
    """A terminal's Ctrl-C reaches the whole group (the CLI and its forked parser) at any moment after the
    program says it runs (``KIT_ANNOUNCE_READY``: its handler is installed): while the command module is
    imported, while the parse runs, while pandas is imported, while the result is read. Exit 130 (or 0 when
    it had finished), no traceback, nothing left behind. Before that line the interpreter is still starting
    and a Ctrl-C is Python's own; the test waits for the line instead of guessing a delay, so it holds at
    any machine load."""
    trace = shared_data / "traces/tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz"
    for delay in (0.0, 0.05, 0.15, 0.25, 0.4, 0.6):
        p = subprocess.Popen([sys.executable, "-m", "kit", "profile", "summary", str(trace), "--json", "--no-cache"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, start_new_session=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "KIT_ANNOUNCE_READY": "1"})
        first = p.stderr.readline().decode()
        assert first == "kit: ready\n", (delay, first)
        time.sleep(delay)
        try:
            os.killpg(p.pid, signal.SIGINT)
        except ProcessLookupError:
            pass   # done already: nothing to interrupt
        rc = p.wait(timeout=120)
        err = p.stderr.read().decode()
        # -2: the signal landed in the interpreter's own exit after the command had finished (Python restores
        # the default handler there); a shell reports that as 130 too
        assert rc in (0, 130, -signal.SIGINT) and "Traceback" not in err, (delay, rc, err[-2000:])
        assert _group_gone(p.pid), (delay, "processes left in the group")


def _group_gone(pgid: int, limit: float = 30.0) -> bool:
    """True once no process of the group is left (a signalled child may take a moment to be reaped)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        left = subprocess.run(["ps", "-o", "pid=,stat=", "-g", str(pgid)], capture_output=True, text=True).stdout
        if not left.strip():
            return True
        time.sleep(0.05)
    return False
