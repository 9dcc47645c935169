"""known_hosts read as OpenSSH reads it, checked against the real sshd fixture and the ``ssh`` binary:
``@cert-authority`` and ``@revoked`` lines, unknown markers and broken lines, host patterns, hashed
names, and ``UserKnownHostsFile`` from ``~/.ssh/config`` (several files, ``~`` and ``%d``)."""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import subprocess

import pytest

import kit
from kit.errors import HostKeyError
from kit.remote._ssh_config import _host_matches

pytestmark = pytest.mark.ssh


def _new_key(tmp_path, name: str) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name)], check=True)
    return " ".join((tmp_path / f"{name}.pub").read_text().split()[:2])


def _openssh_accepts(sshd, known_hosts: str) -> tuple[bool, str]:
    """What the OpenSSH client decides with this known_hosts file (strict checking, no other file)."""
    args = [a for a in sshd.ssh_args()]
    i = args.index(f"UserKnownHostsFile={sshd.known_hosts}")
    args[i] = f"UserKnownHostsFile={known_hosts}"
    res = subprocess.run(["ssh", *args, "-o", "GlobalKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                          sshd.ssh_dest, "echo ok"], capture_output=True, text=True, timeout=30)
    return res.returncode == 0 and res.stdout == "ok\n", res.stderr


def _kit(sshd, known_hosts: str, tmp_path, **opts):
    return sshd.connect(known_hosts=known_hosts, kit_known_hosts=str(tmp_path / "kit_kh"), **opts)


def test_ca_line_and_broken_lines_are_skipped_with_a_warning_never_a_crash(sshd, tmp_path, caplog):
    ca, other = _new_key(tmp_path, "ca"), _new_key(tmp_path, "other")
    kh = tmp_path / "known_hosts"
    kh.write_text(
        "# comment\n\n"
        f"@cert-authority * {ca}\n"
        f"@revoked * {other}\n"              # another key revoked: not this server's
        f"@bogus-marker * {other}\n"
        "not-a-line\n"
        f"[{sshd.host}]:{sshd.port} ssh-ed25519 !!!not-base64!!!\n"
        f"example.org ssh-ed25519 {other.split()[1]}\n"
        + sshd.known_hosts_line())
    ok, err = _openssh_accepts(sshd, str(kh))
    assert ok, err
    with caplog.at_level(logging.WARNING, logger="kit.remote"):
        with _kit(sshd, str(kh), tmp_path) as host:
            assert host.run("echo ok").stdout == "ok\n"
    text = caplog.text
    assert f"{kh}:3: @cert-authority line" in text and "skipped" in text
    assert f"{kh}:5: unknown marker '@bogus-marker'" in text
    assert f"{kh}:6: not a known_hosts line" in text
    assert f"{kh}:7: the key is not valid base64" in text


def test_revoked_server_key_is_refused_like_openssh(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts_line() + f"@revoked * {sshd.host_key_pub}\n")
    ok, err = _openssh_accepts(sshd, str(kh))
    assert not ok and "REVOKED" in err
    for trust in ("strict", "accept-new"):
        with pytest.raises(HostKeyError, match="REVOKED host key") as exc:
            _kit(sshd, str(kh), tmp_path, trust=trust)
        assert f"{kh}:2" in str(exc.value) and sshd.target in str(exc.value)
    assert not (tmp_path / "kit_kh").exists()  # never recorded, even with accept-new


def test_revoked_key_recorded_earlier_by_accept_new_is_refused(sshd, tmp_path):
    kit_kh = tmp_path / "kit_kh"
    kit_kh.write_text(sshd.known_hosts_line())
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@revoked [{sshd.host}]:{sshd.port} {sshd.host_key_pub}\n")
    with pytest.raises(HostKeyError, match="REVOKED"):
        sshd.connect(known_hosts=str(kh), kit_known_hosts=str(kit_kh))


def test_host_trusted_only_through_a_ca_is_refused_with_the_reason(sshd, tmp_path):
    """The fixture's sshd has no host certificate, so OpenSSH refuses too; the kit says why."""
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority [{sshd.host}]:* {_new_key(tmp_path, 'ca')}\n")
    ok, _ = _openssh_accepts(sshd, str(kh))
    assert not ok
    with pytest.raises(HostKeyError, match="certificate authority") as exc:
        _kit(sshd, str(kh), tmp_path)
    assert f"{kh}:1" in str(exc.value)


def test_patterns_negation_and_hashed_names(sshd, tmp_path):
    name = f"[{sshd.host}]:{sshd.port}"
    salt = os.urandom(20)
    hashed = "|1|{}|{}".format(base64.b64encode(salt).decode(),
                               base64.b64encode(hmac.new(salt, name.encode(), hashlib.sha1).digest()).decode())
    assert _host_matches(hashed, name) and not _host_matches(hashed, "[127.0.0.2]:22")
    assert _host_matches("[127.0.0.?]:*", name) and _host_matches("other,*", name)
    assert not _host_matches(f"*,!{name}", name)
    # (OpenSSH also tries the bare address for an IP target, so the negation names both forms.)
    for line, trusted in ((f"{hashed} {sshd.host_key_pub}\n", True), (f"[127.0.0.?]:* {sshd.host_key_pub}\n", True),
                          (f"*,!{sshd.host},![{sshd.host}]:* {sshd.host_key_pub}\n", False)):
        kh = tmp_path / "known_hosts"
        kh.write_text(line)
        assert _openssh_accepts(sshd, str(kh))[0] is trusted, line
        if trusted:
            with _kit(sshd, str(kh), tmp_path) as host:
                assert host.run("true").ok
        else:
            with pytest.raises(HostKeyError, match="unknown host key"):
                _kit(sshd, str(kh), tmp_path)


def test_user_known_hosts_file_from_ssh_config(sshd, tmp_path, monkeypatch):
    """Several files, missing ones skipped, ``~`` and ``%d`` expanded; ``ssh`` agrees (absolute paths,
    since OpenSSH's ``~`` is the passwd home and the test moves only $HOME)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "kh").mkdir()
    (tmp_path / "kh" / "third").write_text(sshd.known_hosts_line())
    (tmp_path / "kh" / "second").write_text("")

    def config(files: str) -> str:
        cfg = tmp_path / "ssh_config"
        cfg.write_text(f"Host box\n  HostName {sshd.host}\n  Port {sshd.port}\n  User {sshd.user}\n"
                       f"  IdentityFile {sshd.key_path}\n  IdentitiesOnly yes\n  UserKnownHostsFile {files}\n"
                       f"  GlobalKnownHostsFile {tmp_path}/no-global\n  StrictHostKeyChecking yes\n"
                       "  BatchMode yes\n")
        return str(cfg)

    opts = dict(look_for_keys=False, allow_agent=False, kit_known_hosts=str(tmp_path / "kit_kh"))
    with kit.connect("box", ssh_config=config("~/missing ~/kh/second %d/kh/third"), **opts) as host:
        assert host.run("echo via-config").stdout == "via-config\n"
    with pytest.raises(HostKeyError, match="unknown host key"):
        kit.connect("box", ssh_config=config("~/missing ~/kh/second"), **opts)
    for files, trusted in ((f"{tmp_path}/missing {tmp_path}/kh/third", True), (f"{tmp_path}/kh/second", False)):
        res = subprocess.run(["ssh", "-F", config(files), "box", "true"], capture_output=True, text=True, timeout=30)
        assert (res.returncode == 0) is trusted, res.stderr
        if trusted:
            with kit.connect("box", ssh_config=config(files), **opts) as host:
                assert host.run("true").ok
        else:
            with pytest.raises(HostKeyError):
                kit.connect("box", ssh_config=config(files), **opts)
