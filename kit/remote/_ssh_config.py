"""SSH target resolution and host-key trust, kept apart from the connection code.

paramiko reads neither ``~/.ssh/config`` nor does ProxyJump by itself, so targets are resolved here:
``user@host[:port]`` or an alias whose ``HostName``, ``User``, ``Port``, ``IdentityFile``, ``ProxyJump``
and ``ProxyCommand`` are honoured (explicit options > the target string > the config file).

Host keys: known_hosts files are loaded read-only; an unknown key is refused with its SHA256
fingerprint and the way to trust it; ``trust="accept-new"`` records it in the kit's own known_hosts
file (like OpenSSH's ``StrictHostKeyChecking=accept-new``); a changed key is always refused.
"""
from __future__ import annotations

import base64
import getpass
import hashlib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from kit.errors import HostKeyError, RemoteError

log = logging.getLogger("kit.remote")

TRUST_MODES = ("strict", "accept-new")


def default_kit_known_hosts() -> str:
    """The kit-owned known_hosts file (``$KIT_KNOWN_HOSTS`` or ``~/.config/decode-kit/known_hosts``)."""
    env = os.environ.get("KIT_KNOWN_HOSTS")
    if env:
        return env
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "decode-kit", "known_hosts")


@dataclass
class SSHParams:
    """Everything needed to open one connection, after resolving the target and the config."""

    hostname: str
    port: int
    user: str
    key_filenames: list[str] = field(default_factory=list)
    proxy_jump: str | None = None
    proxy_command: str | None = None


_TARGET = re.compile(r"^(?:(?P<user>[^@]+)@)?(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:@\[\]]+))(?::(?P<port>\d+))?$")


def parse_target(target: str) -> tuple[str | None, str, int | None]:
    """``user@host:port`` / ``host`` / ``[::1]:22`` -> (user, host, port)."""
    m = _TARGET.match(target.strip())
    if not m:
        raise RemoteError(f"{target}: not a valid SSH target (expected user@host[:port] or an ~/.ssh/config alias)",
                          host=target)
    port = int(m.group("port")) if m.group("port") else None
    return m.group("user"), m.group("v6") or m.group("host"), port


def resolve(target: str, *, user: str | None = None, port: int | None = None,
            key_filename: str | list[str] | None = None, ssh_config: str | bool | None = None,
            proxy_jump: str | None = None) -> SSHParams:
    """Resolve a target against ``~/.ssh/config`` (or ``ssh_config``; ``False`` reads no config)."""
    t_user, t_host, t_port = parse_target(target)
    cfg = _load_config(ssh_config, target)
    entry = cfg.lookup(t_host) if cfg is not None else {"hostname": t_host}
    keys: list[str] = []
    if key_filename:
        keys = [key_filename] if isinstance(key_filename, (str, os.PathLike)) else list(key_filename)
    else:
        keys = [p for p in entry.get("identityfile", []) if os.path.exists(os.path.expanduser(p))]
    jump = proxy_jump if proxy_jump is not None else entry.get("proxyjump")
    if jump and jump.strip().lower() == "none":
        jump = None
    command = entry.get("proxycommand")
    if command and command.strip().lower() == "none":
        command = None
    return SSHParams(
        hostname=entry.get("hostname", t_host),
        port=int(port or t_port or entry.get("port") or 22),
        user=user or t_user or entry.get("user") or getpass.getuser(),
        key_filenames=[os.path.expanduser(str(k)) for k in keys],
        proxy_jump=jump or None,
        proxy_command=None if jump else command,
    )


def _load_config(ssh_config: str | bool | None, target: str = "ssh"):
    if ssh_config is False:
        return None
    path = os.path.expanduser(ssh_config if isinstance(ssh_config, str) else "~/.ssh/config")
    if not os.path.exists(path):
        if isinstance(ssh_config, str):
            raise RemoteError(f"{target}: ssh config file not found: {path}", host=target)
        return None
    try:
        return paramiko.SSHConfig.from_path(path)
    except Exception as exc:  # paramiko raises assorted errors on bad syntax  # noqa: BLE001
        raise RemoteError(f"{target}: cannot read ssh config {path}: {exc}", host=target) from exc


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style ``SHA256:...`` fingerprint of a public key."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def load_known_hosts(client: paramiko.SSHClient, known_hosts: str | list[str] | None, kit_file: str,
                     display: str = "ssh") -> None:
    """Load the trusted keys: ``known_hosts`` (default: the user's and the system's) plus the kit file.
    ``display`` (the target) starts every error message."""
    if known_hosts is None:
        for path in ("/etc/ssh/ssh_known_hosts", os.path.expanduser("~/.ssh/known_hosts")):
            if os.path.exists(path):
                _load(client, path, display)
    else:
        paths = [known_hosts] if isinstance(known_hosts, (str, os.PathLike)) else list(known_hosts)
        for path in paths:
            path = os.path.expanduser(str(path))
            if not os.path.exists(path):
                raise RemoteError(f"{display}: known_hosts file not found: {path}", host=display)
            _load(client, path, display)
    if os.path.exists(kit_file):
        try:
            client.get_host_keys().load(kit_file)
        except (OSError, paramiko.SSHException) as exc:
            raise RemoteError(f"{display}: cannot read kit known_hosts {kit_file}: {exc}", host=display) from exc


def _load(client: paramiko.SSHClient, path: str, display: str = "ssh") -> None:
    try:
        client.load_system_host_keys(path)  # read-only: paramiko never writes these back
    except (OSError, paramiko.SSHException) as exc:
        raise RemoteError(f"{display}: cannot read known_hosts {path}: {exc}", host=display) from exc


class TrustPolicy(paramiko.MissingHostKeyPolicy):
    """Called by paramiko only for a host with no known key. Refuses, or records it (accept-new)."""

    def __init__(self, display: str, trust: str, kit_file: str) -> None:
        if trust not in TRUST_MODES:
            raise RemoteError(f"{display}: trust must be one of {TRUST_MODES}, not {trust!r}", host=display)
        self.display = display
        self.trust = trust
        self.kit_file = kit_file

    def missing_host_key(self, client, hostname, key) -> None:
        fp = fingerprint(key)
        if self.trust != "accept-new":
            raise HostKeyError(
                f"{self.display}: unknown host key for {hostname} ({key.get_name()} {fp}); check the fingerprint "
                f"with the host's owner, then connect with trust='accept-new' (records it in {self.kit_file}) "
                f"or add it to ~/.ssh/known_hosts", host=self.display, fingerprint=fp)
        path = Path(self.kit_file)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="ascii") as fh:
                os.chmod(path, 0o600)
                fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        except OSError as exc:
            raise HostKeyError(f"{self.display}: cannot record the host key in {path}: {exc}",
                               host=self.display, fingerprint=fp) from exc
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.warning("%s: new host key %s %s for %s recorded in %s (trust='accept-new')",
                    self.display, key.get_name(), fp, hostname, path)


def known_hosts_name(hostname: str, port: int) -> str:
    """How known_hosts names a host: ``host`` on port 22, ``[host]:port`` otherwise."""
    return hostname if port == 22 else f"[{hostname}]:{port}"


def changed_key_error(display: str, exc: paramiko.BadHostKeyException, name: str) -> HostKeyError:
    got, expected = fingerprint(exc.key), fingerprint(exc.expected_key)
    return HostKeyError(
        f"{display}: HOST KEY CHANGED for {name}: the server offers {exc.key.get_name()} {got} but the "
        f"known key is {expected}; refusing (possible man-in-the-middle). If the host was really reinstalled, "
        f"remove the old entry (ssh-keygen -R '{name}') and connect again", host=display, fingerprint=got)
