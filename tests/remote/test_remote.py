"""kit.remote over both backends: LocalHost (subprocess) and SSHHost against the real sshd fixture."""
from __future__ import annotations

import os
import random
import shlex
import time
import tracemalloc

import pytest

import kit
from kit.errors import CommandFailed, CommandTimeout, RemoteError, RemoteFileError

HOSTILE = "a b;$(touch PWNED)'\"`touch PWNED2`"


@pytest.fixture
def scratch(host, sshd):
    """A fresh directory the host's login user owns (inside the sshd fixture's world-readable tmp)."""
    res = host.run(f"mktemp -d -p {shlex.quote(sshd.tmp)} t.XXXXXX", check=True)
    return res.stdout.strip()


def _procs_matching(token: str) -> list[str]:
    out = kit.connect("local").run("ps -eo pid,stat,args").stdout.splitlines()
    return [ln for ln in out if token in ln and " Z" not in ln and "ps -eo" not in ln]


def test_result_fields_and_exit_codes(host):
    res = host.run("echo out; echo err >&2; exit 3")
    assert (res.stdout, res.stderr, res.exit_code, res.ok) == ("out\n", "err\n", 3, False)
    assert res.cmd == "echo out; echo err >&2; exit 3" and res.host == host.name
    assert 0 < res.duration_s < 10
    assert host.run("true").ok
    assert "exit_code=3" in repr(res) and "0x" not in repr(res)
    assert "exit 3" in res._repr_html_()


def test_check_raises_with_stderr_tail_and_host(host):
    with pytest.raises(CommandFailed) as err:
        host.run("echo first >&2; echo 'the real reason' >&2; exit 2", check=True)
    msg = str(err.value)
    assert host.name in msg and "the real reason" in msg and "exited 2" in msg
    assert err.value.result.exit_code == 2


def test_env_cwd_input_are_passed_and_quoted(host, scratch):
    work = f"{scratch}/{HOSTILE}"
    host.run(f"mkdir -- {shlex.quote(work)}", check=True)
    res = host.run('printf "%s|%s|" "$KIT_A" "$KIT_B"; pwd', env={"KIT_A": HOSTILE, "KIT_B": "x y"}, cwd=work)
    assert res.stdout == f"{HOSTILE}|x y|{work}\n"
    assert host.run(f"ls -A {shlex.quote(scratch)}").stdout == f"{HOSTILE}\n"  # nothing was executed
    assert host.run(f"ls -A {shlex.quote(work)}").stdout == ""
    assert host.run("bash -s", input="echo from-stdin; exit 4").stdout == "from-stdin\n"
    with pytest.raises(RemoteError, match="invalid environment variable name"):
        host.run("true", env={"BAD NAME": "1"})
    missing = host.run("true", cwd=scratch + "/missing")
    assert missing.exit_code == 1 and "missing" in missing.stderr


def test_invalid_utf8_is_replaced_not_fatal(host):
    res = host.run(r"printf 'ok \xff\xfe done\n'; printf '\xc3' >&2")
    assert res.stdout == "ok \ufffd\ufffd done\n" and res.stderr == "\ufffd"


def test_stream_shows_output_live(host, capfd):
    res = host.run("for i in 1 2 3; do echo line$i; done; echo warn >&2", stream=True)
    captured = capfd.readouterr()
    assert captured.out == "line1\nline2\nline3\n" and captured.err == "warn\n"
    assert res.stdout == "line1\nline2\nline3\n"


def test_timeout_kills_the_whole_process_group(host):
    token = f"{random.randint(100000, 999999)}"
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout) as err:
        host.run(f"echo started; sleep 7{token} & sleep 8{token}; echo never", timeout=1.0)
    assert time.monotonic() - t0 < 6
    assert err.value.stdout == "started\n" and err.value.timeout == 1.0
    assert host.name in str(err.value)
    deadline = time.monotonic() + 3
    while _procs_matching(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _procs_matching(token) == []


def test_timeout_before_any_output_still_kills_the_command(host):
    """A timeout that expires before the command reported its process group must still kill it."""
    token = f"{random.randint(100000, 999999)}"
    with pytest.raises(CommandTimeout) as err:
        host.run(f"sleep 9{token}", timeout=0.001)
    assert "may still be running" not in str(err.value)
    deadline = time.monotonic() + 3
    while _procs_matching(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _procs_matching(token) == []


def test_local_timeout_closes_the_output_pipes():
    """A process that left the command's group keeps the pipes' write ends open: LocalHost must still
    close its read ends (not leave them to the garbage collector) when the command times out."""
    host = kit.connect("local")
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(CommandTimeout) as err:  # err keeps the run's frame, and so its Popen, alive
        host.run("setsid sleep 2 & sleep 30", timeout=0.3)
    assert err.value.timeout == 0.3
    assert len(os.listdir("/proc/self/fd")) == fds


def test_stdin_input_neither_defeats_the_timeout_nor_fails_a_command_that_ignores_it(host):
    big = b"x" * 20_000_000  # far more than the pipe / SSH window: the send blocks until read
    token = f"{random.randint(100000, 999999)}"
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout):
        host.run(f"sleep 8{token}", input=big, timeout=1.0)
    assert time.monotonic() - t0 < 6
    res = host.run("echo done", input=big, timeout=30)  # exits without reading its stdin
    assert (res.exit_code, res.stdout) == (0, "done\n")
    assert host.run("wc -c", input=big, timeout=60).stdout.strip() == str(len(big))


def test_interrupt_kills_the_remote_command_too(host):
    """A notebook "interrupt kernel" (KeyboardInterrupt) must not leave the command running."""
    import signal

    token = f"{random.randint(100000, 999999)}"

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.7)
    try:
        with pytest.raises(KeyboardInterrupt):
            host.run(f"sleep 6{token} & sleep 5{token}", timeout=30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    deadline = time.monotonic() + 3
    while _procs_matching(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _procs_matching(token) == []
    assert host.run("echo still usable").stdout == "still usable\n"


def test_100mb_output_to_file_with_bounded_memory(host, tmp_path):
    out, err = tmp_path / "out.bin", tmp_path / "err.bin"
    # 20 MB on stderr before any stdout: reading stdout first would deadlock.
    cmd = "head -c 20000000 /dev/zero >&2; head -c 100000000 /dev/zero; echo end >&2"
    tracemalloc.start()
    try:
        res = host.run(cmd, timeout=120, stdout_file=str(out), stderr_file=str(err))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.ok
    assert out.stat().st_size == 100_000_000 and err.stat().st_size == 20_000_004
    assert len(res.stdout) <= 200_000 and res.stderr.endswith("end\n")
    assert peak < 16 * 1024 * 1024, f"peak Python memory {peak / 1e6:.1f} MB while streaming 120 MB to files"


def test_bad_local_output_path_is_a_clear_error_and_nothing_runs(host, scratch, tmp_path):
    marker = f"{scratch}/ran"
    bad = str(tmp_path / "no-such-dir" / "err.log")
    with pytest.raises(RemoteFileError) as err:
        host.run(f"touch {shlex.quote(marker)}", stdout_file=str(tmp_path / "out.log"), stderr_file=bad)
    assert err.value.path == bad and str(err.value).startswith(f"local: {bad}: ")
    assert host.run(f"ls -A {shlex.quote(scratch)}").stdout == ""  # the command was never started


def test_large_output_in_memory_does_not_deadlock(host):
    res = host.run("head -c 8000000 /dev/zero | tr '\\0' a; head -c 8000000 /dev/zero | tr '\\0' b >&2", timeout=60)
    assert len(res.stdout) == 8_000_000 and len(res.stderr) == 8_000_000


def test_python_returns_last_expression(host):
    assert host.python("import sys\nprint('noise')\nx = 6 * 7\n[x, sys.version_info[0], (1, 2)]") == [42, 3, [1, 2]]
    assert host.python("y = 1") is None
    with pytest.raises(CommandFailed, match="ZeroDivisionError"):
        host.python("1 / 0")
    with pytest.raises(CommandFailed, match="not JSON-serialisable"):
        host.python("object()")
    with pytest.raises(CommandFailed, match="not found"):
        host.python("1", python="no-such-python-xyz")


def test_files_stat_read_errors(host, scratch):
    path = f"{scratch}/{HOSTILE}"
    host.run(f"printf 'h\\xc3\\xa9llo\\n' > {shlex.quote(path)}", check=True)
    st = host.stat(path)
    assert st.size == 7 and not st.is_dir and st.path == path and abs(st.mtime - time.time()) < 120
    assert host.stat(scratch).is_dir
    assert host.read_bytes(path) == "héllo\n".encode()
    assert host.read_text(path) == "héllo\n"
    for bad, why in ((f"{scratch}/nope", "no such file"), (scratch, "is a directory")):
        with pytest.raises(RemoteFileError, match=why) as err:
            host.read_bytes(bad)
        assert err.value.path == bad and host.name in str(err.value)
    with pytest.raises(RemoteFileError, match="no such file"):
        host.stat(f"{scratch}/nope")
    assert host.run(f"ls -A {shlex.quote(scratch)}").stdout.splitlines() == [HOSTILE]


def test_get_put_round_trip_hostile_names(host, scratch, tmp_path):
    data = os.urandom(3_000_000)
    local = tmp_path / HOSTILE
    local.write_bytes(data)
    remote = f"{scratch}/{HOSTILE}.bin"
    host.put(str(local), remote, progress=True)
    assert host.stat(remote).size == len(data)
    back = tmp_path / "back.bin"
    host.get(remote, str(back))
    assert back.read_bytes() == data
    # A failed download leaves the existing local file untouched.
    back.write_bytes(b"precious")
    with pytest.raises(RemoteFileError):
        host.get(f"{scratch}/missing", str(back))
    assert back.read_bytes() == b"precious"
    assert sorted(os.listdir(tmp_path)) == sorted([HOSTILE, "back.bin"])  # no temp left, nothing executed
    assert sorted(host.run(f"ls -A {shlex.quote(scratch)}").stdout.splitlines()) == [f"{HOSTILE}.bin"]


def test_spawn_wait_for_stop_background_server(host, scratch):
    port = random.randint(20000, 40000)
    log = f"{scratch}/server {HOSTILE}.log"
    host.run(f"echo 'earlier content' > {shlex.quote(log)}", check=True)
    job = host.spawn(f"echo loading; sleep 0.5; exec python3 -u -m http.server {port} --bind 127.0.0.1",
                     log=log, cwd=scratch, env={"KIT_JOB": "1"})
    try:
        line = job.wait_for(pattern=r"Serving HTTP", url=f"http://127.0.0.1:{port}/", timeout=30, progress=False)
        assert "Serving HTTP" in line
        assert job.alive
        assert "earlier content" not in job.tail(10) and "loading" in job.tail(10)
        assert host.read_text(log).startswith("earlier content\n")  # appended, never truncated
        if host.target != "local":  # survives the SSH connection closing
            host.close()
            assert job.alive
    finally:
        outcome = job.stop(grace=5)
    assert outcome == "terminated"
    assert not job.alive
    assert job.stop() == "not running"
    assert _procs_matching(f"http.server {port}") == []


def test_spawn_relative_log_with_cwd_is_one_file(host, scratch, tmp_path, monkeypatch):
    """A relative ``log`` is where the caller is (not inside ``cwd``), for the job and for tail/wait_for."""
    monkeypatch.chdir(tmp_path)  # LocalHost starts where this process is: not in the repository
    start = host.run("pwd", timeout=10).stdout.strip()
    name = f"kit-job-{random.randint(100000, 999999)}.log"
    job = host.spawn("echo 'server ready'; sleep 30", log=name, cwd=scratch)
    try:
        assert job.log == f"{start}/{name}"
        assert "server ready" in job.wait_for(pattern="server ready", timeout=20, progress=False)
        assert job.tail(5) == "server ready\n"
        assert host.run(f"ls -A {shlex.quote(scratch)}").stdout == ""  # nothing written inside cwd
    finally:
        job.stop(grace=2)
        host.run(f"rm -f -- {shlex.quote(job.log)}", timeout=10)


def test_wait_for_reports_early_exit_and_timeout(host, scratch):
    job = host.spawn("echo starting; echo 'fatal: weights not found'; exit 3", log=f"{scratch}/crash.log")
    with pytest.raises(CommandFailed, match="weights not found"):
        job.wait_for(pattern="fired up", timeout=20, progress=False)
    slow = host.spawn("echo loading shard 1/8; sleep 60", log=f"{scratch}/slow.log")
    try:
        with pytest.raises(CommandTimeout, match="loading shard 1/8"):
            slow.wait_for(pattern="fired up", timeout=1.5, poll=0.2)
        assert slow.alive  # a wait timeout leaves the job running
    finally:
        slow.stop(grace=2)
    assert not slow.alive


def test_hosts_fan_out_local_and_context_manager():
    with kit.hosts(["local", "local"]) as group:
        res = group.run("echo fan")
    assert res.ok and [r.stdout for r in res.results.values()] == ["fan\n", "fan\n"]
    assert list(res.to_frame()["host"]) == ["local", "local#2"]


def test_connect_local_rejects_options():
    with pytest.raises(kit.errors.UsageError, match="takes no options"):
        kit.connect("local", port=22)


def test_public_surface():
    import kit.remote as remote

    assert sorted(remote.__all__) == sorted(["connect", "hosts", "Host", "LocalHost", "SSHHost", "Result",
                                             "FileStat", "Job", "HostGroup", "GroupResult",
                                             "HOST_OPTIONS", "add_host_options", "connect_options",
                                             "Transfer", "TransferReport", "Fetched", "Forward"])
    for name in remote.__all__:
        assert getattr(remote, name) is not None
    assert kit.connect is remote.connect and kit.Result is remote.Result and kit.Job is remote.Job
    assert issubclass(remote.SSHHost, remote.Host) and issubclass(remote.LocalHost, remote.Host)
    assert repr(kit.connect("local")) == "LocalHost('local')"


def test_fan_out_keeps_any_exception_in_its_own_slot(tmp_path):
    good = kit.connect("local")
    # a bad output path raises before the command runs (a RemoteFileError); an unexpected keyword a
    # TypeError: neither escapes run(), both stay with their host
    with kit.hosts([good, good]) as group:
        res = group.run("echo x", stdout_file=str(tmp_path / "missing-dir" / "out"))
        assert not res.ok and len(res.errors) == 2 and not res.results
        res = group.run("echo x", no_such_option=1)
        assert all(isinstance(e, TypeError) for e in res.errors.values())
