"""SSH-only behaviour against the real sshd fixture: host keys, auth, reconnect, config aliases and
ProxyJump, fan-out with a dead host, and the ``kit run`` CLI."""
from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time

import pytest

import kit
from kit.errors import AuthError, ConnectError, HostKeyError
from kit.testing import SSHServer

pytestmark = pytest.mark.ssh


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _server_fingerprint(sshd) -> str:
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", "/dev/stdin"], input=sshd.host_key_pub,
                         capture_output=True, text=True, check=True).stdout
    return out.split()[1]


def test_fixture_serves_the_ssh_binary_too(sshd):
    res = subprocess.run(["ssh", *sshd.ssh_args(), sshd.ssh_dest, "echo via-openssh"], capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "via-openssh\n"


def test_tcp_nodelay_and_one_persistent_connection(sshd):
    import socket as s

    with sshd.connect() as host:
        sock = host._client.get_transport().sock
        assert sock.getsockopt(s.IPPROTO_TCP, s.TCP_NODELAY) == 1
        transport = host._client.get_transport()
        for _ in range(5):
            host.run("true")
        assert host._client.get_transport() is transport and host.reconnects == 0


def test_unknown_host_key_refused_with_fingerprint(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError) as err:
        sshd.connect(known_hosts=str(empty), kit_known_hosts=str(tmp_path / "kit_kh"))
    msg = str(err.value)
    fp = _server_fingerprint(sshd)
    assert fp in msg and err.value.fingerprint == fp
    assert "trust='accept-new'" in msg and sshd.target in msg
    assert not (tmp_path / "kit_kh").exists()  # nothing recorded without consent


def test_accept_new_records_then_trusts(sshd, tmp_path, caplog):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    kit_kh = tmp_path / "sub" / "kit_known_hosts"
    with caplog.at_level(logging.WARNING, logger="kit.remote"):
        with sshd.connect(known_hosts=str(empty), kit_known_hosts=str(kit_kh), trust="accept-new") as host:
            assert host.run("echo ok").stdout == "ok\n"
    assert kit_kh.read_text() == sshd.known_hosts_line()
    assert "recorded" in caplog.text and _server_fingerprint(sshd) in caplog.text
    # Now known: strict mode connects with the recorded key, and does not append it again.
    with sshd.connect(known_hosts=str(empty), kit_known_hosts=str(kit_kh), trust="strict") as host:
        assert host.run("echo again").stdout == "again\n"
    assert kit_kh.read_text() == sshd.known_hosts_line()


def test_changed_host_key_always_refused(sshd, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    other = " ".join((tmp_path / "other.pub").read_text().split()[:2])
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts_line(other))
    for trust in ("strict", "accept-new"):
        with pytest.raises(HostKeyError, match="HOST KEY CHANGED") as err:
            sshd.connect(known_hosts=str(kh), kit_known_hosts=str(tmp_path / "kit_kh"), trust=trust)
        assert _server_fingerprint(sshd) in str(err.value) and f"[127.0.0.1]:{sshd.port}" in str(err.value)
    assert not (tmp_path / "kit_kh").exists()


def test_bad_trust_value_and_auth_failure(sshd, tmp_path):
    with pytest.raises(kit.errors.RemoteError, match="trust must be one of"):
        sshd.connect(trust="yes")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
    with pytest.raises(AuthError, match="authentication failed") as err:
        sshd.connect(key_filename=str(tmp_path / "stranger"))
    assert sshd.target in str(err.value)


def test_unreachable_host_is_a_connect_error(sshd):
    port = _closed_port()
    with pytest.raises(ConnectError, match=f"127.0.0.1:{port}"):
        kit.connect(f"{sshd.user}@127.0.0.1:{port}", **sshd.connect_options())


def test_reconnect_after_server_dropped_connection(sshd, caplog):
    with sshd.connect() as host:
        assert host.run("echo one").stdout == "one\n"
        assert sshd.drop_connections() >= 1
        time.sleep(0.2)
        with caplog.at_level(logging.WARNING, logger="kit.remote"):
            assert host.run("echo two").stdout == "two\n"
        assert host.reconnects == 1
        assert "connection lost" in caplog.text and "reconnected" in caplog.text
        # SFTP reconnects as well.
        sshd.drop_connections()
        time.sleep(0.2)
        assert host.stat("/").is_dir


def test_fan_out_with_one_unreachable_host(sshd):
    dead = f"{sshd.user}@127.0.0.1:{_closed_port()}"
    group = kit.hosts([sshd.target, dead, sshd.target], **sshd.connect_options(connect_timeout=5))
    try:
        t0 = time.monotonic()
        res = group.run("echo alive")
        assert time.monotonic() - t0 < 10
    finally:
        group.close()
    assert not res.ok
    assert [type(v).__name__ for _, v in res] == ["Result", "ConnectError", "Result"]
    assert [r.stdout for r in res.results.values()] == ["alive\n", "alive\n"]
    assert dead in str(res.errors[dead])
    frame = res.to_frame()
    assert list(frame["exit_code"].isna()) == [False, True, False]
    assert "ConnectError" in repr(res) and "ConnectError" in res._repr_html_()


def test_ssh_config_alias_with_proxyjump(sshd, tmp_path):
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host gpu-box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.key_path}\n  ProxyJump bastion\n\n"
        f"Host bastion\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n  IdentityFile {sshd.key_path}\n"
    )
    with kit.connect("gpu-box", ssh_config=str(cfg), known_hosts=sshd.known_hosts, look_for_keys=False,
                     allow_agent=False, kit_known_hosts=sshd.kit_known_hosts) as host:
        assert host.params.hostname == "127.0.0.1" and host.params.port == sshd.port
        assert host.params.proxy_jump == "bastion"
        assert host._jump is not None and host._jump.target == "bastion"
        assert host.run("whoami").stdout.strip() == sshd.user
        # The target's transport runs over a direct-tcpip channel of the bastion, not a socket of ours.
        import paramiko

        assert isinstance(host._client.get_transport().sock, paramiko.Channel)


def test_failed_connection_through_proxyjump_closes_the_jump_connection(sshd, tmp_path):
    """The bastion is trusted, the target (another name, so another known_hosts entry) is not: the
    HostKeyError must not leave the bastion's SSH connection open behind it."""
    from kit.remote import SSHHost

    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host gpu-box\n  HostName localhost\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.key_path}\n  ProxyJump bastion\n\n"
        f"Host bastion\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n  IdentityFile {sshd.key_path}\n"
    )
    before = len(sshd._children())
    host = SSHHost("gpu-box", ssh_config=str(cfg), known_hosts=sshd.known_hosts, look_for_keys=False,
                   allow_agent=False, kit_known_hosts=str(tmp_path / "kit_kh"))
    with pytest.raises(HostKeyError, match=rf"unknown host key for \[localhost\]:{sshd.port}"):
        host.open()
    assert host._jump is None and host._client is None
    deadline = time.monotonic() + 3
    while len(sshd._children()) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(sshd._children()) <= before  # no connection left open on the server (earlier ones may close)


def test_a_hung_read_times_out_kills_the_reader_on_the_host_and_the_next_call_works(sshd, monkeypatch):
    """The host-side reader blocks in open() on a FIFO nobody writes to: like a hung file system, the
    call must end with an error naming host and path, nothing may be left running on the host (the
    reader's process group is killed: the FIFO has no reader any more), and the host stay usable."""
    import errno
    import os
    import shlex

    import kit.remote._ssh
    from kit.errors import RemoteFileError

    monkeypatch.setattr(kit.remote._ssh, "SFTP_TIMEOUT_S", 1.0)
    with sshd.connect() as host:
        scratch = host.run(f"mktemp -d -p {shlex.quote(sshd.tmp)} fifo.XXXXXX", check=True).stdout.strip()
        fifo = f"{scratch}/pipe"
        host.run(f"mkfifo {shlex.quote(fifo)}", check=True)
        try:
            t0 = time.monotonic()
            with pytest.raises(RemoteFileError, match="no data from the host within 1 s") as err:
                host.read_bytes(fifo)
            assert time.monotonic() - t0 < 10
            assert host.name in str(err.value) and fifo in str(err.value) and "killed" in str(err.value)
            assert host.stat(scratch).is_dir
            host.run(f"echo fine > {shlex.quote(scratch)}/ok", check=True)
            assert host.read_bytes(f"{scratch}/ok") == b"fine\n"
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and any(fifo in p for p in _host_processes()):
                time.sleep(0.1)
            assert not any(fifo in p for p in _host_processes())  # the reader is gone on the host
            with pytest.raises(OSError) as gone:  # and nobody holds the FIFO open for reading
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            assert gone.value.errno == errno.ENXIO
        finally:  # if a reader were still blocked there, let its open() return
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass


def _host_processes() -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True, timeout=30).stdout
    return [ln for ln in out.splitlines() if " Z" not in ln and "ps -eo" not in ln]


def test_missing_ssh_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(kit.errors.RemoteError, match="ssh config file not found"):
        kit.connect("gpu-box", ssh_config=str(tmp_path / "nope"))


def test_missing_known_hosts_and_config_files_name_the_target_and_path(sshd, tmp_path):
    nope = str(tmp_path / "nope")
    with pytest.raises(kit.errors.RemoteError) as err:
        sshd.connect(known_hosts=nope)
    assert str(err.value) == f"{sshd.target}: known_hosts file not found: {nope}"
    assert err.value.host == sshd.target
    with pytest.raises(kit.errors.RemoteError) as err:
        kit.connect("gpu-box", ssh_config=nope)
    assert str(err.value) == f"gpu-box: ssh config file not found: {nope}"


def test_cli_run_and_env(sshd):
    base = [sys.executable, "-m", "kit"]
    opts = ["--host", sshd.target, "-i", sshd.key_path, "--known-hosts", sshd.known_hosts, "--no-ssh-config"]
    res = subprocess.run(base + ["run", *opts, "--", "echo", "cli-out;", "exit", "7"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 7 and res.stdout == "cli-out\n"
    res = subprocess.run(base + ["run", *opts, "--timeout", "0.5", "--", "sleep", "30"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 124 and "timed out" in res.stderr
    res = subprocess.run(base + ["env", *opts, "--json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["host"] == sshd.target and data["os"] and data["gpus"] is None
    assert "nvidia-smi" in data["missing"]["gpus"]


def test_sshd_fixture_missing_binary_fails_loudly(monkeypatch):
    import kit.testing._sshd as kt

    monkeypatch.setattr(kt.shutil, "which", lambda name: None)
    monkeypatch.setattr(kt, "_SSHD_CANDIDATES", ())
    with pytest.raises(FileNotFoundError, match="apt-get install openssh-server"):
        SSHServer()
