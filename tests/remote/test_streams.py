"""Streams of any length in bounded memory, stdin in bounded chunks, and transport failures as kit
errors: over the real sshd (and LocalHost where the behaviour is shared)."""
from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import tracemalloc

import pytest

import kit
from kit.errors import ConnectError
from kit.testing import STREAM_PROBE, SSHServer
from tests.conftest import ROOT

pytestmark = pytest.mark.ssh



def stream_in_child(server: SSHServer, size: int) -> dict:
    opts = server.connect_options()
    proc = subprocess.run([sys.executable, "-c", STREAM_PROBE, json.dumps(opts), server.target, str(size)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def rekeying_sshd():
    """The real sshd fixture, configured to re-key every 256 MiB, so that a 2 GiB stream goes through
    several key exchanges (OpenSSH's default for AES would be every 64 GiB)."""
    import kit.testing._sshd as kt

    original = kt._SSHD_CONFIG
    kt._SSHD_CONFIG = original + "RekeyLimit 256M\n"
    server = kt.SSHServer()
    try:
        server.start()
    finally:
        kt._SSHD_CONFIG = original
    yield server
    server.stop()


def test_2gib_streamed_over_ssh_in_flat_memory_through_rekeys(rekeying_sshd):
    """``stream=True`` (``kit run``, ``%%remote``) used to fail near 1 GiB with paramiko's raw
    "Key-exchange timed out" and kept ~3x the output in memory."""
    size = 2 * 1024 ** 3
    got = stream_in_child(rekeying_sshd, size)
    assert got["chars"] == size and got["stdout_bytes"] == size
    assert (got["exit"], got["stderr"]) == (0, "end\n")
    assert got["truncated"] and got["kept"] == 1024 * 1024  # the Result keeps a 1 MiB tail
    assert got["kex"] >= 4, f"expected the server to re-key every 256 MiB, saw {got['kex']} key exchanges"
    growth = got["peak"] - got["rss_before"]
    assert growth < 64 * 1024 ** 2, f"peak RSS grew {growth / 2**20:.0f} MiB while streaming 2 GiB"


def test_streamed_result_keeps_a_bounded_tail_and_says_so(host, capfd):
    res = host.run("head -c 3000000 /dev/zero | tr '\\0' a; echo END; echo warn >&2", stream=True, timeout=60)
    shown = capfd.readouterr()
    assert len(shown.out) == 3_000_004 and shown.err == "warn\n"
    assert res.stdout_bytes == 3_000_004 and len(res.stdout) == 1024 * 1024 and res.stdout.endswith("aaaEND\n")
    assert res.truncated and (res.stderr, res.stderr_bytes) == ("warn\n", 5)
    assert "tail of stdout_bytes=3000004" in repr(res) and "the tail of 3000004 bytes" in res._repr_html_()
    full = host.run("head -c 3000000 /dev/zero | tr '\\0' a", timeout=60)  # not streamed: all kept
    assert len(full.stdout) == 3_000_000 and not full.truncated and "tail of" not in repr(full)


def test_large_stdin_is_fed_in_bounded_chunks(host):
    """80 MB of stdin took 63 s over SSH (the whole remainder was copied for every packet)."""
    big = b"z" * 100_000_000
    tracemalloc.start()
    try:
        res = host.run("wc -c; echo done >&2", input=big, timeout=120)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (res.stdout.strip(), res.stderr) == ("100000000", "done\n")
    assert peak < 16 * 1024 * 1024, f"peak Python memory {peak / 1e6:.1f} MB while feeding 100 MB of stdin"


def _procs_matching(token: str) -> list[str]:
    out = kit.connect("local").run("ps -eo pid,stat,args").stdout.splitlines()
    return [ln for ln in out if token in ln and " Z" not in ln and "ps -eo" not in ln]


def test_connection_lost_mid_command_is_a_kit_error_and_the_command_is_killed(sshd):
    token = f"{random.randint(100000, 999999)}"
    cmd = f"echo started; sleep 9{token}"
    with sshd.connect() as host:
        assert host.run("true").ok
        # The network goes away under the connection (sshd.drop_connections() would kill only sshd's
        # monitor process: the session process keeps the TCP connection open while the command is silent).
        sock = host._client.get_transport().sock
        timer = threading.Timer(1.0, sock.shutdown, args=(socket.SHUT_RDWR,))
        timer.start()
        try:
            t0 = time.monotonic()
            with pytest.raises(ConnectError) as err:
                host.run(cmd, timeout=30)
            assert time.monotonic() - t0 < 15
        finally:
            timer.join()
        msg = str(err.value)
        assert msg.startswith(f"{host.name}: connection failed while running ") and f"sleep 9{token}" in msg
        deadline = time.monotonic() + 5
        while _procs_matching(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _procs_matching(token) == []  # killed over a fresh connection
        assert host.run("echo usable").stdout == "usable\n"


def test_unwritable_output_file_is_a_clear_error_and_the_command_is_killed(host):
    token = f"{random.randint(100000, 999999)}"
    with pytest.raises(kit.errors.RemoteFileError) as err:
        host.run(f"yes {token}", stdout_file="/dev/full", timeout=60)
    assert err.value.path == "/dev/full" and str(err.value).startswith("local: /dev/full: cannot write command output")
    deadline = time.monotonic() + 5
    while _procs_matching(f"yes {token}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _procs_matching(f"yes {token}") == []


def test_a_host_that_cannot_be_reached_names_host_and_command(sshd):
    from kit.remote import SSHHost

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    host = SSHHost(f"{sshd.user}@127.0.0.1:{port}", **sshd.connect_options(connect_timeout=5))
    with pytest.raises(ConnectError) as err:
        host.run("echo never-started")
    assert str(err.value).startswith(host.name) and "'echo never-started'" in str(err.value)
