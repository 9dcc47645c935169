"""The engine's lifecycle as a real investigation meets it: a busy port, a grandchild that calls
setsid, a Server nobody kept in a variable, a driver stopped with SIGTERM or killed with kill -9,
and a log copied byte for byte while the engine writes fast. Real processes, checked with ps."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import kit
from kit.bench import stream_request
from kit.errors import ServerError
from tests.conftest import ROOT
from tests.live.conftest import engine_procs, free_port


def test_busy_port_is_a_clear_error_and_nothing_is_measured(tiny, tmp_path, timed_server):
    cmd, env, marker = tiny
    other, _ = timed_server(itl_ms=8)
    port = int(other.rsplit(":", 1)[1])
    t0 = time.monotonic()
    with pytest.raises(ServerError) as err:
        kit.server("local", cmd, env=env, port=port, session=tmp_path, name="busy", progress=False)
    msg = str(err.value)
    assert f"port {port} is already in use by pid" in msg and "tests.live.timed_server" in msg, msg
    assert "not started" in msg and "\n" not in msg and time.monotonic() - t0 < 10
    assert not engine_procs(marker)
    assert not (tmp_path / "logs" / "busy.log").exists()  # nothing was started, nothing recorded


def test_port_taken_after_the_check_is_not_ready(tiny, tmp_path, timed_server, monkeypatch):
    """The second line of defence: health answers (another server), but the engine's own process
    does not hold the socket; the engine dies on 'Address already in use': an error naming the holder."""
    cmd, env, marker = tiny
    other, _ = timed_server(itl_ms=8)
    port = int(other.rsplit(":", 1)[1])
    monkeypatch.setattr(kit.live.Server, "_refuse_busy_port", lambda self: None)
    with pytest.raises(ServerError) as err:
        kit.server("local", cmd, env=env, port=port, session=tmp_path, name="race", progress=False)
    msg = str(err.value)
    assert f"port {port} is held by pid" in msg and "not by this engine" in msg and "nothing was measured" in msg
    assert "Address already in use" in err.value.tail
    rec = json.loads((tmp_path / "logs" / "race.engine.json").read_text())
    assert rec["port"] == port and rec["stopped"] and rec["left"] == []
    assert not engine_procs(marker)


def test_ready_means_the_engine_owns_the_socket(tiny, tmp_path):
    cmd, env, marker = tiny
    with kit.server("local", cmd, env=env, port="free", session=tmp_path, name="own", progress=False) as s:
        assert s.owner == "own" and s.port > 0 and f"--port {s.port}" in s.cmd
        rec = json.loads((tmp_path / "logs" / "own.engine.json").read_text())
        assert rec["pid"] == s.job.pid == rec["pgid"] == rec["sid"] and rec["tag"] == s.tag
        assert rec["driver"]["pid"] == os.getpid()
        assert set(s.pids()) >= {s.job.pid} and len(s.pids()) >= 2  # the wrapper shell and the engine
    assert s.describe()["port_owner"] == "own"


def test_setsid_grandchild_is_stopped(tiny, tmp_path):
    cmd, env, marker = tiny
    escape = f"{marker}-escaped"
    wrapped = (f"setsid python3 -c 'import sys, time; time.sleep(600)' {escape} & "
               f"{cmd}")
    with kit.server("local", wrapped, env=env, port=free_port(), session=tmp_path, progress=False) as s:
        sleeper = [x for x in engine_procs(escape) if "python3 -c import" in x]
        assert len(sleeper) == 1, engine_procs(escape)
        sid = subprocess.run(["ps", "-o", "sid=", "-p", sleeper[0].split()[0]], capture_output=True,
                             text=True).stdout.strip()
        assert sid != str(s.job.pid)  # it really left the engine's session
    assert not engine_procs(escape) and not engine_procs(marker)


def _driver(tmp_path, body: str) -> subprocess.Popen:
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, str(script)], env=env, cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_line(p: subprocess.Popen, word: str, timeout: float = 30) -> str:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        line = p.stdout.readline()
        if word in line:
            return line
        if p.poll() is not None:
            break
    raise AssertionError(f"driver never printed {word!r}: {p.stderr.read()[-2000:]}")


def test_server_not_kept_in_a_variable_is_stopped_at_exit(tiny, tmp_path):
    cmd, env, marker = tiny
    p = _driver(tmp_path, f"""
        import kit
        kit.server("local", {cmd!r}, env={env!r}, port="free", session="s", progress=False)
        import gc; gc.collect()
        print("started", flush=True)
    """)
    _wait_line(p, "started")
    assert p.wait(60) == 0
    assert not engine_procs(marker)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_driver_stopped_by_signal_stops_its_engine(tiny, tmp_path, sig):
    cmd, env, marker = tiny
    p = _driver(tmp_path, f"""
        import time, kit
        s = kit.server("local", {cmd!r}, env={env!r}, port="free", session="s", progress=False)
        print("started", s.url, flush=True)
        time.sleep(600)
    """)
    _wait_line(p, "started")
    assert engine_procs(marker)
    p.send_signal(sig)
    rc = p.wait(60)
    assert rc == -sig  # the driver still ends as killed by that signal (Python re-raises SIGINT too)
    assert not engine_procs(marker)


def test_driver_killed_leaves_a_record_and_the_next_server_names_the_orphan(tiny, tmp_path):
    cmd, env, marker = tiny
    port = free_port()
    p = _driver(tmp_path, f"""
        import time, kit
        s = kit.server("local", {cmd!r}, env={env!r}, port={port}, session="s", name="orphan", progress=False)
        print("started", flush=True)
        time.sleep(600)
    """)
    _wait_line(p, "started")
    p.kill()  # kill -9: nothing of the driver runs
    p.wait(30)
    from kit.live._engine import TAG_VAR, kill_tagged

    rec = json.loads((tmp_path / "s" / "logs" / "orphan.engine.json").read_text())
    try:
        assert engine_procs(marker), "kill -9 cannot stop anything: the engine is an orphan now"
        with pytest.raises(ServerError, match=f"port {port} is already in use by pid"):
            kit.server("local", cmd, env=env, port=port, session=tmp_path, progress=False)
    finally:
        pids, how = kill_tagged(kit.connect("local"), TAG_VAR, rec["tag"], grace=5)
    assert rec["pid"] in pids and how == "terminated"
    assert not engine_procs(marker)


def test_log_copy_is_byte_faithful(tiny, tmp_path):
    cmd, env, marker = tiny
    writer = tmp_path / "noisy.py"  # fast writes, invalid UTF-8, lines cut across writes, while it loads
    writer.write_text("import sys, time\nfor i in range(3000):\n"
                      "    sys.stdout.buffer.write(b'line %d \\xe2\\x82\\xac \\xff\\xfe partial' % i)\n"
                      "    sys.stdout.buffer.write(b'\\n' if i % 7 else b'')\n"
                      "    sys.stdout.flush()\n    time.sleep(0.0003)\n")
    noisy = f"python3 {writer} & {cmd}"
    with kit.server("local", noisy, env=env, port=free_port(), session=tmp_path, name="noisy", progress=False,
                    poll=0.01) as s:
        t0 = time.monotonic()
        # polled while the writer writes
        while [x for x in engine_procs(str(writer)) if "bash" not in x] and time.monotonic() - t0 < 30:
            stream_request(s.url, model=marker, prompt="a b", max_tokens=4)
            s.sync_log()
        remote, offset = s.job.log, s.job.offset
    with open(remote, "rb") as f:
        f.seek(offset)
        want = f.read()
    got = (tmp_path / "logs" / "noisy.log").read_bytes()
    assert b"line 2999" in want and b"\xff\xfe" in want
    assert got == want
