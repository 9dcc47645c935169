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
import binascii
import getpass
import hashlib
import hmac
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
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.environ.get("KIT_KNOWN_HOSTS") or os.path.join(base, "decode-kit", "known_hosts")


@dataclass
class SSHParams:
    """Everything needed to open one connection, after resolving the target and the config."""

    hostname: str
    port: int
    user: str
    key_filenames: list[str] = field(default_factory=list)
    proxy_jump: str | None = None
    proxy_command: str | None = None
    # UserKnownHostsFile / GlobalKnownHostsFile from the config (None: not set there, OpenSSH's defaults)
    user_known_hosts: list[str] | None = None
    global_known_hosts: list[str] | None = None


_TARGET = re.compile(r"^(?:(?P<user>[^@]+)@)?(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:@\[\]]+))(?::(?P<port>\d+))?$")


def parse_target(target: str) -> tuple[str | None, str, int | None]:
    """``user@host:port`` / ``host`` / ``[::1]:22`` -> (user, host, port)."""
    m = _TARGET.match(target.strip())
    if not m:
        raise RemoteError(f"{target}: not a valid SSH target (expected user@host[:port] or an ~/.ssh/config alias)",
                          host=target)
    return m.group("user"), m.group("v6") or m.group("host"), int(m.group("port")) if m.group("port") else None


def resolve(target: str, *, user: str | None = None, port: int | None = None,
            key_filename: str | list[str] | None = None, ssh_config: str | bool | None = None,
            proxy_jump: str | None = None) -> SSHParams:
    """Resolve a target against ``~/.ssh/config`` (or ``ssh_config``; ``False`` reads no config)."""
    t_user, t_host, t_port = parse_target(target)
    cfg = _load_config(ssh_config, target)
    entry = cfg.lookup(t_host) if cfg is not None else {"hostname": t_host}
    if key_filename:
        keys = [key_filename] if isinstance(key_filename, (str, os.PathLike)) else list(key_filename)
    else:
        keys = [p for p in entry.get("identityfile", []) if os.path.exists(os.path.expanduser(p))]
    jump = _unless_none(proxy_jump if proxy_jump is not None else entry.get("proxyjump"))
    command = _unless_none(entry.get("proxycommand"))
    return SSHParams(
        hostname=entry.get("hostname", t_host),
        port=int(port or t_port or entry.get("port") or 22),
        user=user or t_user or entry.get("user") or getpass.getuser(),
        key_filenames=[os.path.expanduser(str(k)) for k in keys],
        proxy_jump=jump,
        proxy_command=None if jump else command,
        user_known_hosts=_file_list(entry.get("userknownhostsfile")),
        global_known_hosts=_file_list(entry.get("globalknownhostsfile")),
    )


def _unless_none(value: str | None) -> str | None:
    """A config value, None where it is unset or OpenSSH's ``none``."""
    return None if not value or value.strip().lower() == "none" else value


def _file_list(value) -> list[str] | None:
    """A ``UserKnownHostsFile``-style value (several paths, space-separated; ``none`` = no file)."""
    if value is None:
        return None
    words = value if isinstance(value, list) else str(value).split()
    return [] if [w.lower() for w in words] == ["none"] else [w.strip('"') for w in words]


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


# OpenSSH's defaults when ~/.ssh/config names no UserKnownHostsFile / GlobalKnownHostsFile.
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
_warned: set[tuple[str, int]] = set()


@dataclass
class KnownHosts:
    """What the known_hosts files said about one host, beyond the keys loaded into paramiko:
    its revoked keys (``(type, blob)`` -> ``file:line``) and the CA lines that were skipped."""

    name: str
    revoked: dict[tuple[str, bytes], str] = field(default_factory=dict)
    skipped_ca: list[str] = field(default_factory=list)

    def revoked_at(self, key: paramiko.PKey) -> str | None:
        """``file:line`` of the ``@revoked`` line naming ``key``, or None."""
        return self.revoked.get((key.get_name(), key.asbytes()))


def load_known_hosts(client: paramiko.SSHClient, known_hosts: str | list[str] | None, kit_file: str,
                     display: str = "ssh", *, hostname: str, port: int = 22,
                     user_files: list[str] | None = None, global_files: list[str] | None = None) -> KnownHosts:
    """Load the keys trusted for ``hostname:port`` into ``client`` and return what else the files said.

    Files: ``known_hosts`` if given (each must exist); otherwise ``user_files`` and ``global_files``
    (``UserKnownHostsFile`` / ``GlobalKnownHostsFile`` of ``~/.ssh/config``, else OpenSSH's defaults;
    missing ones are skipped, as OpenSSH does); plus the kit's own file. Lines are read as OpenSSH
    reads them: host patterns (``*``, ``?``, ``!negation``, ``[host]:port``) and hashed names match;
    ``@revoked`` keys are never trusted (even if listed as known elsewhere) and are refused on
    connection; ``@cert-authority`` lines are skipped with a warning (paramiko cannot check host
    certificates, so such a host must also be listed with its own key); a malformed line is skipped
    with a warning naming file and line, never a crash. ``display`` starts every message."""
    name = known_hosts_name(hostname, port)
    info = KnownHosts(name)
    entries: list[tuple[str, paramiko.PKey, str]] = []
    if known_hosts is not None:
        paths = [known_hosts] if isinstance(known_hosts, (str, os.PathLike)) else list(known_hosts)
        files = [os.path.expanduser(str(p)) for p in paths]
        for path in files:
            if not os.path.exists(path):
                raise RemoteError(f"{display}: known_hosts file not found: {path}", host=display)
    else:
        files = [expand_path(p, hostname, port) for p in
                 [*(user_files if user_files is not None else DEFAULT_USER_KNOWN_HOSTS),
                  *(global_files if global_files is not None else DEFAULT_GLOBAL_KNOWN_HOSTS)]]
        files = [p for p in files if os.path.exists(p)]
    if os.path.exists(kit_file):
        files.append(kit_file)
    for path in files:
        entries.extend(_read_known_hosts(path, name, info, display))
    keys = client.get_host_keys()
    for keytype, key, _where in entries:
        if info.revoked_at(key) is None:  # OpenSSH: a revoked key is refused wherever else it is listed
            keys.add(name, keytype, key)
    return info


def expand_path(path: str, hostname: str = "", port: int = 22) -> str:
    """``~`` and the tokens OpenSSH allows in known_hosts paths: %d (home), %u (local user), %h, %p, %%."""
    tokens = {"d": os.path.expanduser("~"), "u": getpass.getuser(), "h": hostname, "p": str(port), "%": "%"}
    return os.path.expanduser(re.sub(r"%(.)", lambda m: tokens.get(m[1], m[0]), path, flags=re.S))


def _read_known_hosts(path: str, name: str, info: KnownHosts, display: str) -> list[tuple[str, paramiko.PKey, str]]:
    """The plain keys of ``path`` whose host patterns match ``name``; revoked and CA lines go to ``info``."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise RemoteError(f"{display}: cannot read known_hosts {path}: {exc.strerror or exc}", host=display) from exc
    out = []
    for lineno, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        marker = None
        if line.startswith("@"):
            marker, _, line = line.partition(" ")
            line = line.strip()
            if marker not in ("@cert-authority", "@revoked"):
                _warn(path, lineno, "%s: %s: unknown marker %r: line skipped", display, where, marker)
                continue
        fields = line.split()
        if len(fields) < 3:
            _warn(path, lineno, "%s: %s: not a known_hosts line (hosts, key type, key): skipped", display, where)
            continue
        patterns, keytype, b64 = fields[:3]
        if not _host_matches(patterns, name):
            continue
        try:
            blob = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            _warn(path, lineno, "%s: %s: the key is not valid base64: line skipped", display, where)
            continue
        if marker == "@revoked":
            info.revoked[(keytype, blob)] = where
            continue
        if marker == "@cert-authority":
            info.skipped_ca.append(where)
            _warn(path, lineno, "%s: %s: @cert-authority line for %s skipped: host certificates are not "
                  "checked by the kit (paramiko cannot), so this host is trusted only through a plain key "
                  "line", display, where, name)
            continue
        try:
            key = paramiko.PKey.from_type_string(keytype, blob)
        except Exception as exc:  # noqa: BLE001 - UnknownKeyType, or a damaged key of a known type
            log.debug("%s: %s: key skipped (%s)", display, where, exc)
            continue
        out.append((keytype, key, where))
    return out


def _warn(path: str, lineno: int, fmt: str, *args) -> None:
    """Log a known_hosts problem once per file line (every connection reads the files)."""
    if (path, lineno) not in _warned:
        _warned.add((path, lineno))
        log.warning(fmt, *args)


def _host_matches(patterns: str, name: str) -> bool:
    """OpenSSH's known_hosts host matching: comma-separated patterns with ``*`` and ``?``, ``!`` negates
    (a negated match rejects the line), ``|1|salt|hash`` is a hashed name (HMAC-SHA1)."""
    name = name.lower()
    matched = False
    for pat in patterns.split(","):
        if pat.startswith("|1|"):
            parts = pat.split("|")
            try:
                salt, digest = base64.b64decode(parts[2]), base64.b64decode(parts[3])
            except (IndexError, binascii.Error, ValueError):
                continue
            if hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest):
                matched = True
            continue
        negate = pat.startswith("!")
        if negate:
            pat = pat[1:]
        rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pat.lower())
        if re.fullmatch(rx, name):
            if negate:
                return False
            matched = True
    return matched


class TrustPolicy(paramiko.MissingHostKeyPolicy):
    """Called by paramiko only for a host with no known key. Refuses, or records it (accept-new)."""

    def __init__(self, display: str, trust: str, kit_file: str, known: KnownHosts | None = None) -> None:
        if trust not in TRUST_MODES:
            raise RemoteError(f"{display}: trust must be one of {TRUST_MODES}, not {trust!r}", host=display)
        self.display = display
        self.trust = trust
        self.kit_file = kit_file
        self.known = known

    def missing_host_key(self, client, hostname, key) -> None:
        fp = fingerprint(key)
        revoked = self.known.revoked_at(key) if self.known is not None else None
        if revoked:  # never trusted, never recorded, whatever ``trust`` says
            raise revoked_key_error(self.display, key, hostname, revoked)
        if self.trust != "accept-new":
            if self.known is not None and self.known.skipped_ca:
                raise HostKeyError(
                    f"{self.display}: unknown host key for {hostname} ({key.get_name()} {fp}); the host may be "
                    f"trusted through a certificate authority ({', '.join(self.known.skipped_ca)}), which the kit "
                    f"cannot check: add the host's own key to known_hosts (ssh-keyscan, then compare the "
                    f"fingerprint) or connect with trust='accept-new'", host=self.display, fingerprint=fp)
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


def revoked_key_error(display: str, key: paramiko.PKey, name: str, where: str) -> HostKeyError:
    fp = fingerprint(key)
    return HostKeyError(f"{display}: REVOKED host key for {name}: the server offers {key.get_name()} {fp}, which "
                        f"{where} marks @revoked; refusing to connect", host=display, fingerprint=fp)


def changed_key_error(display: str, exc: paramiko.BadHostKeyException, name: str,
                      known: KnownHosts | None = None) -> HostKeyError:
    where = known.revoked_at(exc.key) if known is not None else None
    if where:
        return revoked_key_error(display, exc.key, name, where)
    got, expected = fingerprint(exc.key), fingerprint(exc.expected_key)
    return HostKeyError(
        f"{display}: HOST KEY CHANGED for {name}: the server offers {exc.key.get_name()} {got} but the "
        f"known key is {expected}; refusing (possible man-in-the-middle). If the host was really reinstalled, "
        f"remove the old entry (ssh-keygen -R '{name}') and connect again", host=display, fingerprint=got)
