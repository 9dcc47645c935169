"""A real OpenSSH server for tests, reusable outside this project (like ``fabric.testing``): ``SSHServer`` and
the ``sshd`` pytest fixture (which errors, never skips, without an ``sshd`` binary, saying how to install it).

``SSHServer`` starts ``sshd`` on 127.0.0.1 at a free port with throwaway host and client keys and a
known_hosts file, and stops it (and every process its sessions left) afterwards. As root it logs in as a
throwaway user ``kituser-<random>`` with a clean shell rc, unique to this server and removed by ``stop()``;
otherwise as the current user. That user may not be able to read the checkout (a clone in root's 0700
home): :meth:`SSHServer.stage` copies what a session must read where it can.

Options: ``allow_tcp_forwarding=False`` (``AllowTcpForwarding no``); ``netns=True`` (root and iproute2: the
server in a network namespace of its own, reached through a veth pair at a 10.x ``host``, so what its
sessions bind to 127.0.0.1 is unreachable from the test process, as an engine on a remote host's loopback
is); :meth:`SSHServer.add_user` (root) makes another login user of the same server."""
from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from kit.remote import connect

TEST_USER = "kituser"  # prefix of the throwaway login users (kituser-<random>) made when run as root
_SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd")


def find_sshd() -> str:
    """Path of the OpenSSH server binary; FileNotFoundError with the fix when it is missing."""
    found = shutil.which("sshd") or next((p for p in _SSHD_CANDIDATES if os.access(p, os.X_OK)), None)
    if not found:
        raise FileNotFoundError("sshd (OpenSSH server) not found: install it with "
                                "`apt-get install openssh-server` (`make test` does this when run as root)")
    return found


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def _create_user(name: str) -> pwd.struct_passwd:
    """Create a throwaway login user with Debian's default skeleton rc files, unlocked for keys.
    The name must be new: a user that exists already belongs to someone else and is never reused."""
    if _uid(name) is not None:
        raise RuntimeError(f"test user {name} exists already; refusing to reuse (or later remove) it")
    made = subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], capture_output=True,
                          text=True, timeout=30)
    if made.returncode != 0:
        raise RuntimeError(f"useradd {name} failed: {made.stderr.strip()}")
    # useradd leaves the account locked ('!'), and sshd then refuses even a valid key.
    subprocess.run(["usermod", "-p", "*", name], check=True, capture_output=True, timeout=30)
    return pwd.getpwnam(name)


def _remove_user(name: str) -> None:
    """``userdel -r`` the throwaway user this server created (its processes are gone by then), and the
    kit's private directories it left in /tmp (``kit-<uid>``, ``kit-<uid>.*``): a later user given the
    same uid must not find them."""
    uid = _uid(name)
    tmp = Path(tempfile.gettempdir())
    for p in [tmp / f"kit-{uid}", *tmp.glob(f"kit-{uid}.*")] if uid is not None else []:
        with contextlib.suppress(OSError):
            if not p.is_symlink() and p.is_dir() and p.lstat().st_uid == uid:
                shutil.rmtree(p, ignore_errors=True)
    for _ in range(3):
        done = subprocess.run(["userdel", "-r", name], capture_output=True, text=True, timeout=30)
        if done.returncode in (0, 6):  # 6: no such user
            return
        time.sleep(0.5)  # "user is currently used by process": a session still exiting


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process this user can see (``/proc/PID/stat``'s fourth field)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                data = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            out[int(entry)] = int(data[data.rfind(b")") + 2:].split()[1])
    return out


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class SSHServer:
    """A running loopback ``sshd``. Attributes: ``target``, ``host``, ``port``, ``user``, ``key_path``,
    ``known_hosts``, ``host_key_pub`` (the server's public key line), ``tmp`` (a directory the login
    user can write, for file tests), ``pid``."""

    def __init__(self, user: str | None = None, workdir: str | None = None, *, allow_tcp_forwarding: bool = True,
                 netns: bool = False) -> None:
        self.sshd_path = find_sshd()
        self.host = "127.0.0.1"
        self.port = 0
        self.allow_tcp_forwarding = allow_tcp_forwarding
        self.netns: str | None = None  # the namespace's name once started with netns=True
        self._want_netns = netns
        self._extra_users: list[str] = []
        self._veth = ""
        self._as_root = os.geteuid() == 0
        self._id = uuid.uuid4().hex[:12]
        self._made_user = user is None and self._as_root
        self._user_created = False
        if user is None:
            user = f"{TEST_USER}-{self._id[:8]}" if self._as_root else pwd.getpwuid(os.geteuid()).pw_name
        self.user = user
        self._workdir = Path(workdir or tempfile.mkdtemp(prefix="kit-sshd-"))
        self._proc: subprocess.Popen | None = None

    # --- paths --------------------------------------------------------------------------------
    @property
    def key_path(self) -> str:
        return str(self._workdir / "keys" / "client_ed25519")

    @property
    def known_hosts(self) -> str:
        return str(self._workdir / "keys" / "known_hosts")

    @property
    def kit_known_hosts(self) -> str:
        """A kit-owned known_hosts path private to this server's tests (for ``trust="accept-new"``)."""
        return str(self._workdir / "keys" / "kit_known_hosts")

    @property
    def target(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def host_key_pub(self) -> str:
        return " ".join((self._workdir / "keys" / "host_ed25519.pub").read_text().split()[:2])

    @property
    def tmp(self) -> str:
        return str(self._workdir / "tmp")

    def stage(self, path: str | os.PathLike[str], name: str | None = None) -> str:
        """Copy the file or directory ``path`` where the login user can read it, and return the copy's
        path. For tests whose SSH session reads project files: the checkout itself may sit in a
        directory that user cannot enter. The copy keeps modes and times; it goes with the server."""
        src = Path(path)
        dest = self._workdir / "stage" / uuid.uuid4().hex[:8] / (name or src.name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        for d in (self._workdir / "stage", dest.parent):
            os.chmod(d, 0o755)
        if src.is_dir():
            shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest)
        for p in [dest, *(dest.rglob("*") if dest.is_dir() else [])]:
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | (0o755 if p.is_dir() else 0o444))
        return str(dest)

    def known_hosts_line(self, key_line: str | None = None) -> str:
        """A known_hosts line for this server (``[127.0.0.1]:PORT keytype base64``)."""
        return f"[{self.host}]:{self.port} {key_line or self.host_key_pub}\n"

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 15.0) -> "SSHServer":
        wd = self._workdir
        os.chmod(wd, 0o711)
        keys, auth, tmp = wd / "keys", wd / "auth", wd / "tmp"
        keys.mkdir(mode=0o700, exist_ok=True)
        auth.mkdir(mode=0o755, exist_ok=True)
        tmp.mkdir(mode=0o755, exist_ok=True)
        for key in ("host_ed25519", "client_ed25519"):
            if not (keys / key).exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"kit-test-{key}",
                                "-f", str(keys / key)], check=True, capture_output=True, timeout=30)
        shutil.copy(keys / "client_ed25519.pub", auth / "authorized_keys")
        os.chmod(auth / "authorized_keys", 0o644)
        if self._as_root:
            if self._made_user and not self._user_created:
                _create_user(self.user)
                self._user_created = True
            pw = pwd.getpwnam(self.user)
            os.chown(tmp, pw.pw_uid, pw.pw_gid)
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
        if self._want_netns and self.netns is None:
            self._make_netns()
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        last_err = ""
        for _ in range(3):  # sshd cannot bind port 0: pick one, retry if someone took it meanwhile
            self.port = _free_port()
            config = wd / "sshd_config"
            config.write_text(_SSHD_CONFIG.format(port=self.port, listen=self.host, host_key=keys / "host_ed25519",
                                                  forwarding="yes" if self.allow_tcp_forwarding else "no",
                                                  pid=wd / "sshd.pid", auth=auth / "authorized_keys", id=self._id,
                                                  root="prohibit-password" if self.user == "root" else "no"))
            log = open(wd / "sshd.log", "ab")  # noqa: SIM115 - handed to the child
            self._proc = subprocess.Popen([*prefix, self.sshd_path, "-D", "-e", "-f", str(config)], stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            log.close()
            if self._wait_ready(timeout):
                Path(self.known_hosts).write_text(self.known_hosts_line())
                return self
            last_err = (wd / "sshd.log").read_text(errors="replace").strip()[-500:]
            self._terminate()
        raise RuntimeError(f"sshd on {self.host} did not start (config {wd / 'sshd_config'}): {last_err}")

    def _make_netns(self) -> None:
        """A network namespace with its own loopback and a veth pair to this one (/30, 10.x)."""
        if not self._as_root or not shutil.which("ip"):
            raise RuntimeError("SSHServer(netns=True) needs root and `ip` (iproute2)")
        name, out_if, in_if = f"kit-{self._id}", f"kv{self._id[:8]}a", f"kv{self._id[:8]}b"

        def ip(*args: str) -> None:
            done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")

        ip("netns", "add", name)
        self.netns = name
        ip("link", "add", out_if, "type", "veth", "peer", "name", in_if)
        self._veth = out_if
        ip("link", "set", in_if, "netns", name)
        for attempt in range(8):
            h = uuid.uuid4().bytes
            net = f"10.{64 + h[0] % 128}.{h[1]}"
            outer, inner = f"{net}.{4 * (h[2] % 63) + 1}", f"{net}.{4 * (h[2] % 63) + 2}"
            try:
                ip("addr", "add", f"{outer}/30", "dev", out_if)
                break
            except RuntimeError:
                if attempt == 7:
                    raise
        ip("link", "set", out_if, "up")
        ip("netns", "exec", name, "ip", "addr", "add", f"{inner}/30", "dev", in_if)
        ip("netns", "exec", name, "ip", "link", "set", in_if, "up")
        ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        self.host = inner

    def _drop_netns(self) -> None:
        if self.netns is None:
            return
        for args in ([["link", "del", self._veth]] if self._veth else []) + [["netns", "del", self.netns]]:
            subprocess.run(["ip", *args], capture_output=True, timeout=30)
        self.netns = None

    def add_user(self) -> str:
        """Another throwaway login user of this server (root only; same key), removed by ``stop()``.
        Connect as it with ``connect(user=name)``."""
        if not self._as_root:
            raise RuntimeError("SSHServer.add_user needs root (useradd)")
        name = f"{TEST_USER}-{uuid.uuid4().hex[:8]}"
        _create_user(name)
        self._extra_users.append(name)
        return name

    def _wait_ready(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self._proc.poll() is not None:
                return False
            with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=1) as s:
                if s.recv(64).startswith(b"SSH-"):
                    return True
            time.sleep(0.05)
        return False

    def _children(self, parent: dict[int, int] | None = None) -> list[int]:
        """PIDs of the listener's per-connection processes."""
        return [pid for pid, pp in (parent or _parents()).items() if pp == self._proc.pid] if self._proc else []

    def drop_connections(self) -> int:
        """Kill every open SSH connection on the server side (the listener keeps running), as a server reboot
        or a network drop between calls would; returns how many were dropped."""
        parent = _parents()
        kids = self._children(parent)
        # the privileged monitor and its unprivileged child (which holds the socket and would go on
        # serving an open channel): kill the whole tree of each connection
        tree, todo = [], list(kids)
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(p for p, pp in parent.items() if pp == pid)
        _kill(tree)
        return len(kids)

    def _session_processes(self) -> list[int]:
        """Processes started through this server's sessions, detached ones included: sshd gives every
        session ``KIT_SSHD_ID`` (SetEnv), so other servers' processes of the same user are left alone."""
        marker = f"KIT_SSHD_ID={self._id}".encode()
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    with open(f"/proc/{entry}/environ", "rb") as fh:
                        if marker in fh.read().split(b"\0"):
                            pids.append(int(entry))
                except OSError:
                    continue
        return pids

    def _terminate(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def stop(self) -> None:
        """Stop sshd, its connections, and whatever its sessions left running (detached jobs too)."""
        self.drop_connections()
        self._terminate()
        _kill(self._session_processes())
        if self._user_created:
            _remove_user(self.user)
            self._user_created = False
        while self._extra_users:
            _remove_user(self._extra_users.pop())
        self._drop_netns()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> "SSHServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- clients ------------------------------------------------------------------------------
    def connect_options(self, **opts) -> dict:
        """kit.connect options for this server: its key, its known_hosts, no agent, no ~/.ssh/config."""
        base = dict(key_filename=self.key_path, known_hosts=self.known_hosts, kit_known_hosts=self.kit_known_hosts,
                    look_for_keys=False, allow_agent=False, ssh_config=False, connect_timeout=10)
        base.update(opts)
        return base

    def connect(self, user: str | None = None, **opts):
        """An open :class:`kit.remote.SSHHost` to this server, strict host-key checking (as ``user``,
        default the server's login user)."""
        target = self.target if user is None else f"{user}@{self.host}:{self.port}"
        return connect(target, **self.connect_options(**opts))

    @property
    def ssh_dest(self) -> str:
        """``user@127.0.0.1``: the destination argument for the ``ssh`` binary (port is in ssh_args)."""
        return f"{self.user}@{self.host}"

    def ssh_args(self) -> list[str]:
        """OpenSSH client options for this server, strict host keys, no prompts; append ``ssh_dest``
        and the command: ``["ssh", *sshd.ssh_args(), sshd.ssh_dest, "true"]``."""
        return ["-F", os.devnull, "-p", str(self.port), "-i", self.key_path, "-o", "IdentitiesOnly=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"]

    def __repr__(self) -> str:
        return f"SSHServer(target={self.target!r})"


_SSHD_CONFIG = """\
Port {port}
ListenAddress {listen}
AllowTcpForwarding {forwarding}
HostKey {host_key}
PidFile {pid}
AuthorizedKeysFile {auth}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin {root}
MaxStartups 100:30:200
MaxSessions 100
LogLevel ERROR
Subsystem sftp internal-sftp
SetEnv KIT_SSHD_ID={id}
"""

try:  # the pytest fixture, when pytest is there
    import pytest  # optional: kit.testing works without pytest

    @pytest.fixture(scope="session")
    def sshd():
        """A real OpenSSH server on 127.0.0.1 for the whole test session (see :class:`SSHServer`)."""
        server = SSHServer()
        try:
            server.start()
            yield server
        finally:
            server.stop()  # also removes its throwaway user
except ImportError:  # pragma: no cover - kit.testing used without pytest
    sshd = None
