"""SSHHost: the Host API over one persistent paramiko connection.

Measured pitfalls this module answers (see the project's ecosystem notes):

- ``TCP_NODELAY`` is set on the socket: without it Nagle + delayed ACK cost ~40 ms per command.
- stdout and stderr are drained in one loop (no ``recv_exit_status()`` before reading: that deadlocks
  past the 2 MiB window), with a bounded buffer when output goes to a file.
- paramiko cannot signal a remote process, and closing a channel leaves a PTY-less command running.
  So every command runs as the leader of its own process group (the login shell sshd starts is a
  session leader; otherwise ``setsid``) and reports its pgid first; on timeout or interrupt a second
  channel TERMs, then KILLs, that group.
- sshd turns Nagle off on its side only once a command started on the connection: forwards, and the
  connection to a ProxyJump bastion, start a no-op first (measured: +22 ms TTFT without it).
- One connection per host, reused; if it died between calls it is reopened once and that is logged.
- paramiko's own volume-triggered re-key is off (it can deadlock its transport thread when a channel
  closes mid-exchange; see ``NO_CLIENT_REKEY``); the server's re-keys go on, so streams of any length
  work. The command loop itself (timeout, kill, output, stdin) is ``_runner.py``'s.

The host account's login shell must be POSIX-like (bash, dash, zsh: not fish/csh); commands run in bash.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import posixpath
import select
import socket
import stat as stat_mod
import threading
import time

import paramiko

from kit.errors import AuthError, ConnectError, HostKeyError, RemoteError
from kit.remote import _transfer_io as io_
from kit.remote._base import Host
from kit.remote._forward import close_forwards
from kit.remote._result import FileStat
from kit.remote._runner import MARK_LINE, Process
from kit.remote._ssh_config import (
    TrustPolicy,
    changed_key_error,
    default_kit_known_hosts,
    known_hosts_name,
    load_known_hosts,
    resolve,
)
from kit.util import clip
from kit.util import quote as _q

log = logging.getLogger("kit.remote")

# Run by the user's login shell (sh-compatible). sshd makes that shell a session leader (setsid()),
# so its pid is the process group to kill: a bash login shell evals the command in place (no extra
# exec), another shell execs bash in place; only if it is not a group leader is setsid used.
_WRAPPER = ('read -r _ _ _ _ kit_pg _ 2>/dev/null < /proc/$$/stat; '
            'if [ "$kit_pg" = "$$" ]; then '
            'if [ -n "$BASH_VERSION" ]; then eval {inner}; exit; fi; '
            'exec bash --norc --noprofile -c {inner}; fi; '
            'command -v setsid >/dev/null 2>&1 && exec setsid -w bash --norc --noprofile -c {inner}; '
            'exec bash --norc --noprofile -c {inner}')
READ_BYTES = 1 << 20  # per recv: the channel window (2 MiB) bounds what is buffered
# paramiko starts a re-key itself every 512 MiB either way. If the server closes a channel (a command
# ended) while that re-key is in flight, paramiko's transport thread blocks answering the close until
# the re-key ends, which only that thread can finish: after 30 s every call fails with "Key-exchange
# timed out" (measured here on a 1 GiB stream; paramiko issue #822). A re-key the server starts has
# no such window (the server sends nothing else until it ends), so the kit leaves re-keying to the
# server: OpenSSH re-keys by its RekeyLimit (by default every 1 to 4 GiB, depending on the cipher).
NO_CLIENT_REKEY = 1 << 62
# Longest wait for any one SFTP reply (a hung file system or network must not hang the caller forever).
SFTP_TIMEOUT_S = 120.0


class _QuietOpenFailures(logging.Filter):
    """paramiko logs a refused channel open as an ERROR line of its own; the kit raises it as one
    ConnectError naming host and address (``_open_failure``), so that line is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "open FAILED" not in str(record.msg)


logging.getLogger("paramiko.transport").addFilter(_QuietOpenFailures())


class SSHHost(Host):
    """A host reached over SSH (paramiko). Create with :func:`kit.connect`; see its options."""

    def __init__(self, target: str, *, user: str | None = None, port: int | None = None,
                 key_filename: str | list[str] | None = None, known_hosts: str | list[str] | None = None,
                 trust: str = "strict", kit_known_hosts: str | None = None, ssh_config: str | bool | None = None,
                 connect_timeout: float = 15.0, look_for_keys: bool = True, allow_agent: bool = True,
                 passphrase: str | None = None, proxy_jump: str | None = None, keepalive: int = 30) -> None:
        self.target = target
        self.name = target
        self.params = resolve(target, user=user, port=port, key_filename=key_filename, ssh_config=ssh_config,
                              proxy_jump=proxy_jump)
        self._known_hosts = known_hosts
        self._trust = trust
        self._kit_file = kit_known_hosts or default_kit_known_hosts()
        self._ssh_config = ssh_config
        self._key_filename = key_filename
        self._timeout = connect_timeout
        self._look_for_keys = look_for_keys
        self._allow_agent = allow_agent
        self._passphrase = passphrase
        self._keepalive = keepalive
        self._client: paramiko.SSHClient | None = None
        self._jump: SSHHost | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.RLock()
        self.reconnects = 0
        TrustPolicy(self.name, trust, self._kit_file)  # validates ``trust`` now

    # --- connection -------------------------------------------------------------------------
    def open(self) -> "SSHHost":
        """Connect now (otherwise the first command does). Idempotent."""
        with self._lock:
            if not self._active():
                self._connect()
        return self

    def _active(self) -> bool:
        t = self._client.get_transport() if self._client else None
        return bool(t and t.is_active())

    def _connect(self) -> None:
        p = self.params
        self._drop()
        client = paramiko.SSHClient()
        known = load_known_hosts(client, self._known_hosts, self._kit_file, self.name, hostname=p.hostname,
                                 port=p.port, user_files=p.user_known_hosts, global_files=p.global_known_hosts)
        client.set_missing_host_key_policy(TrustPolicy(self.name, self._trust, self._kit_file, known))
        sock = self._make_sock()
        where = f"{p.user}@{p.hostname}:{p.port}"
        try:
            client.connect(p.hostname, p.port, username=p.user, key_filename=p.key_filenames or None,
                           timeout=self._timeout, banner_timeout=self._timeout, auth_timeout=self._timeout,
                           channel_timeout=self._timeout, look_for_keys=self._look_for_keys,
                           allow_agent=self._allow_agent, passphrase=self._passphrase, sock=sock,
                           transport_factory=_aead_first)
        except HostKeyError:
            self._abandon(client)
            raise
        except paramiko.BadHostKeyException as exc:
            self._abandon(client)
            raise changed_key_error(self.name, exc, known_hosts_name(p.hostname, p.port), known) from exc
        except paramiko.AuthenticationException as exc:
            self._abandon(client)
            keys = ", ".join(p.key_filenames) or ("agent/default keys" if self._look_for_keys else "none")
            raise AuthError(f"{self.name}: authentication failed as {where} ({exc}); keys tried: {keys}",
                            host=self.name) from exc
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self._abandon(client)
            raise ConnectError(f"{self.name}: cannot connect to {where}: {exc or type(exc).__name__}",
                               host=self.name) from exc
        transport = client.get_transport()
        raw = transport.sock
        if isinstance(raw, socket.socket):
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._keepalive:
            transport.set_keepalive(self._keepalive)
        # No re-key started by paramiko on volume: the server's (OpenSSH re-keys by its RekeyLimit)
        # still happen and are answered. See NO_CLIENT_REKEY.
        transport.packetizer.REKEY_BYTES = transport.packetizer.REKEY_PACKETS = NO_CLIENT_REKEY
        self._client = client

    def _make_sock(self):
        p = self.params
        if p.proxy_jump:
            hops = [h.strip() for h in p.proxy_jump.split(",") if h.strip()]
            # The last hop is reached through the ones before it (OpenSSH's -J order).
            self._jump = SSHHost(hops[-1], known_hosts=self._known_hosts, trust=self._trust,
                                 kit_known_hosts=self._kit_file, ssh_config=self._ssh_config,
                                 key_filename=None if _has_identity(hops[-1], self._ssh_config) else self._key_filename,
                                 connect_timeout=self._timeout, look_for_keys=self._look_for_keys,
                                 allow_agent=self._allow_agent, proxy_jump=",".join(hops[:-1]) or None)
            self._jump.open()
            jump = self._jump._client.get_transport()
            if not getattr(jump, "_kit_exec_done", False):  # our traffic crosses its sshd: _server_nodelay
                jump._kit_exec_done = True
                _server_nodelay(jump, hops[-1])
            try:
                return self._jump._client.get_transport().open_channel(
                    "direct-tcpip", (p.hostname, p.port), ("127.0.0.1", 0), timeout=self._timeout)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                self._drop()
                raise ConnectError(f"{self.name}: jump host {hops[-1]} could not reach {p.hostname}:{p.port}: "
                                   f"{exc}", host=self.name) from exc
        if p.proxy_command:
            try:
                return paramiko.ProxyCommand(p.proxy_command)
            except Exception as exc:  # noqa: BLE001 - paramiko raises its own or OSError
                raise ConnectError(f"{self.name}: ProxyCommand failed: {exc}", host=self.name) from exc
        try:
            sock = socket.create_connection((p.hostname, p.port), timeout=self._timeout)
        except OSError as exc:
            raise ConnectError(f"{self.name}: cannot connect to {p.hostname}:{p.port}: {exc}",
                               host=self.name) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _abandon(self, client: paramiko.SSHClient) -> None:
        """A connection attempt failed: close it, and the jump host connection opened for it."""
        client.close()
        self._drop()

    def _drop(self) -> None:
        for closer in (self._sftp, self._client, self._jump):
            if closer is not None:
                with contextlib.suppress(Exception):  # best effort on a dead connection
                    closer.close()
        self._sftp = self._client = self._jump = None

    def _ensure(self) -> None:
        """Connected, under the lock: the first call connects, a dead connection is reconnected (logged)."""
        if self._client is None:
            self._connect()
        elif not self._active():
            self._reconnect("transport closed")

    def _reconnect(self, why: str) -> None:
        log.warning("%s: connection lost (%s); reconnecting", self.name, why)
        self._connect()
        self.reconnects += 1
        log.warning("%s: reconnected", self.name)

    def _session(self, command: str | None = None) -> paramiko.Channel:
        """A new session channel (with ``command`` started on it). If the connection died since the
        last call, reconnect once, say so in the log, and retry: nothing ran on the dead connection."""
        with self._lock:
            self._ensure()
            transport = self._client.get_transport()
        try:
            return self._start(transport, command)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            with self._lock:
                if self._client is None or self._client.get_transport() is transport:
                    self._reconnect(str(exc) or type(exc).__name__)
                transport = self._client.get_transport()
            try:
                return self._start(transport, command)
            except (paramiko.SSHException, OSError, EOFError) as exc2:
                raise ConnectError(f"{self.name}: cannot start a session after reconnecting: "
                                   f"{exc2 or type(exc2).__name__}", host=self.name) from exc2

    def _start(self, transport: paramiko.Transport, command: str | None) -> paramiko.Channel:
        chan = transport.open_session(timeout=self._timeout)
        if command is not None:
            try:
                chan.exec_command(command)
            except BaseException:
                chan.close()
                raise
            transport._kit_exec_done = True  # sshd has now set TCP_NODELAY on its side (_server_nodelay)
        return chan

    # --- port forwarding (Host.forward carries connections over these channels) --------------------
    def open_channel(self, dest: tuple[str, int], src: tuple[str, int], timeout: float) -> paramiko.Channel:
        """A ``direct-tcpip`` channel to ``dest``. If the connection died (before or during the open),
        reconnect once (logged, as for commands) and retry. On a live connection a refusal or a
        timeout is not retried: reconnecting would cut every other forwarded connection."""
        what = f"{self.name}: forward to {dest[0]}:{dest[1]}"
        for attempt in (0, 1):
            with self._lock:
                try:
                    self._ensure()
                except ConnectError as exc:
                    raise ConnectError(f"{what}: {exc}", host=self.name) from exc
                transport = self._client.get_transport()
                nagle = not getattr(transport, "_kit_exec_done", False)
                transport._kit_exec_done = True  # one no-op per connection, whatever the number of threads
            if nagle:  # see _server_nodelay
                _server_nodelay(transport, self.name)
            try:
                return transport.open_channel("direct-tcpip", dest, src, timeout=timeout)
            except paramiko.ChannelException as exc:
                raise ConnectError(f"{what}: {_open_failure(exc.code, exc.text)}", host=self.name) from exc
            except (paramiko.SSHException, OSError, EOFError) as exc:
                why = str(exc) or type(exc).__name__
                # an EOF is the connection ending under the open, even while paramiko's reader thread has
                # not yet marked the transport inactive: reconnect as for a closed transport
                if transport.is_active() and not isinstance(exc, EOFError):
                    if "Timeout" in why:
                        why = (f"the SSH server did not answer within {timeout:g} s (it may still be "
                               f"trying to connect: is {dest[0]}:{dest[1]} reachable from the host?)")
                    raise ConnectError(f"{what}: cannot open a channel: {why}", host=self.name) from exc
                if isinstance(exc, EOFError):
                    transport.close()   # it has ended: the next attempt must see it closed and reconnect
                if attempt:
                    raise ConnectError(f"{what}: the SSH connection could not open a channel after "
                                       f"reconnecting ({why})", host=self.name) from exc
        raise AssertionError("unreachable")

    def _transport_active(self) -> bool:
        with self._lock:
            return self._active()

    def close(self) -> None:
        """Close the connection and every forward of this host (a later command reconnects; a closed
        forward never does: it stops listening here at once)."""
        close_forwards(self)
        with self._lock:
            self._drop()

    # --- commands ---------------------------------------------------------------------------
    def start_process(self, script: str, *, cmd: str, stdin: bool) -> "_SSHProcess":
        """Start ``script`` on a channel as the leader of its own process group, reporting that group
        first (the runner's marker line); see :meth:`kit.remote.Host.start_process`."""
        wrapper = _WRAPPER.format(inner=_q(MARK_LINE + script))
        try:
            return _SSHProcess(self, self._session(wrapper))
        except ConnectError as exc:  # name the command too
            raise ConnectError(f"{exc} (starting {clip(cmd)!r})", host=self.name) from exc

    # --- files (SFTP) -----------------------------------------------------------------------
    def _sftp_client(self) -> paramiko.SFTPClient:
        with self._lock:
            if self._sftp is not None and self._active():
                return self._sftp
            self._ensure()
            try:
                self._sftp = self._open_sftp()
            except (paramiko.SSHException, OSError, EOFError) as exc:
                self._reconnect(str(exc) or type(exc).__name__)
                try:
                    self._sftp = self._open_sftp()
                except (paramiko.SSHException, OSError, EOFError) as exc2:
                    raise ConnectError(f"{self.name}: cannot open SFTP: {exc2}", host=self.name) from exc2
            return self._sftp

    def _open_sftp(self) -> paramiko.SFTPClient:
        """``open_sftp`` with timeouts: on opening the channel, and on every reply after it."""
        chan = self._client.get_transport().open_session(timeout=self._timeout)
        try:
            chan.settimeout(SFTP_TIMEOUT_S)
            chan.invoke_subsystem("sftp")
            return paramiko.SFTPClient(chan)
        except BaseException:
            chan.close()
            raise

    @property
    def sftp_timeout(self) -> float:
        """Longest wait for any one reply while moving a file (the module's ``SFTP_TIMEOUT_S``)."""
        return SFTP_TIMEOUT_S

    def sftp_call(self, path: str, fn):
        """``fn(sftp)`` with this host's SFTP session (one reply timeout, reconnect once); failures
        become RemoteFileError naming ``host: path`` (missing, permission, no reply) or ConnectError.
        What transfers (``_transfer_io.py``) build SFTP reads, writes and listings on."""
        try:
            return fn(self._sftp_client())
        except socket.timeout as exc:
            with self._lock:  # its replies are out of step now: the next call opens a fresh SFTP session
                sftp, self._sftp = self._sftp, None
            if sftp is not None:
                sftp.close()
            raise io_.file_error(self, path, f"no SFTP reply within {SFTP_TIMEOUT_S:g} s (host or file system "
                                         f"not responding)") from exc
        except OSError as exc:
            raise io_.file_error(self, path, io_.os_reason(exc)) from exc
        except (paramiko.SSHException, EOFError) as exc:
            raise ConnectError(f"{self.name}: SFTP failed on {path}: {exc}", host=self.name) from exc

    streams = True

    def read_file(self, path: str, sink, offset: int) -> str:
        """SFTP, a bounded window of reads (a host without a POSIX shell); see :meth:`kit.remote.Host.read_file`."""
        io_.sftp_read(self, path, sink, offset)
        return "sftp"

    def write_file(self, local_path: str, remote_path: str, *, resume: bool = True,
                   progress: bool | None = None) -> None:
        """SFTP to ``.kit-<hash>-<size>-<mtime>.part`` beside the target, renamed into place; an unchanged
        target is skipped, a partial upload of the same local version continued."""
        ls = os.stat(local_path)
        d, base = posixpath.split(remote_path)
        h = hashlib.sha1(base.encode("utf-8", "surrogateescape")).hexdigest()[:12]
        tmp = posixpath.join(d, f".kit-{h}-{ls.st_size}-{int(ls.st_mtime)}.part")
        if resume and self._same_file(remote_path, ls):
            return
        offset = (io_.sftp_size(self, tmp) or 0) if resume else 0
        offset = offset if offset <= ls.st_size else 0
        bar = io_.bar(f"{self.name}: put {os.path.basename(local_path)}", ls.st_size, offset, progress)
        try:
            io_.sftp_write(self, local_path, tmp, offset, bar)
            io_.sftp_finish(self, tmp, remote_path, ls.st_size, ls.st_mode, (ls.st_atime, ls.st_mtime))
        finally:
            if bar is not None:
                bar.close()

    def _same_file(self, remote_path: str, ls: os.stat_result) -> bool:
        try:
            rs = self.stat(remote_path)
        except RemoteError:
            return False
        return stat_mod.S_ISREG(rs.mode) and rs.size == ls.st_size and int(rs.mtime) == int(ls.st_mtime)

    def listdir(self, path: str) -> list[str]:
        return io_.sftp_listdir(self, path)

    def stat(self, path: str) -> FileStat:
        """Size, mtime, directory flag and mode of ``path`` (SFTP stat, follows symlinks)."""
        st = self.sftp_call(path, lambda s: s.stat(path))
        return FileStat(path=path, size=int(st.st_size or 0), mtime=float(st.st_mtime or 0),
                        is_dir=stat_mod.S_ISDIR(st.st_mode or 0), mode=int(st.st_mode or 0))


class _SSHProcess(Process):
    """A command on a paramiko channel. Its first stdout line is the runner's marker with its process
    group (``marked``: the runner takes it out). Reads wait on the channel with a timeout (select), never
    spin, and never hold a lock the transport thread needs, so re-keys and keepalives go on."""

    errors = (paramiko.SSHException, OSError, EOFError)
    marked = True

    def __init__(self, host: SSHHost, chan: paramiko.Channel) -> None:
        self._host = host
        self._chan = chan
        self._eof = False
        self.pg = None

    @property
    def eof(self) -> bool:
        return self._eof

    def read(self, wait: float) -> list[tuple[int, bytes]]:
        chan = self._chan
        chunks = self._ready()
        if not chunks and not self._eof:
            select.select([chan], [], [], wait)
            chunks = self._ready()
        return chunks

    def _ready(self) -> list[tuple[int, bytes]]:
        chan = self._chan
        eof = chan.eof_received or chan.closed  # read before the buffers: data can arrive in between
        chunks: list[tuple[int, bytes]] = []
        if chan.recv_ready():
            data = chan.recv(READ_BYTES)
            if data:
                chunks.append((1, data))
        if chan.recv_stderr_ready():
            chunks.append((2, chan.recv_stderr(READ_BYTES)))
        if not chunks and eof and not chan.recv_ready() and not chan.recv_stderr_ready():
            if not chan.eof_received and self._lost():
                raise EOFError("the connection closed before the command's output ended")
            self._eof = True
        return chunks

    def write(self, data: bytes) -> bool:
        try:
            self._chan.sendall(data)
        except (paramiko.SSHException, OSError, EOFError):  # the command ended, or was killed
            return False
        return True

    def close_stdin(self) -> None:
        self._chan.shutdown_write()

    def exit_status(self, wait: float) -> int | None:
        chan = self._chan
        if not chan.status_event.wait(wait):
            if not self._host._transport_active():
                raise EOFError("the connection closed before the command's exit status arrived")
            return None
        if chan.exit_status == -1 and self._lost():
            raise EOFError("the connection closed before the command's exit status arrived")
        return chan.exit_status

    def _lost(self, settle: float = 1.0) -> bool:
        """Whether the connection died. paramiko closes the channels of a dying transport just before
        it marks the transport inactive, so a channel closed without EOF gets ``settle`` s to tell."""
        end = time.monotonic() + settle
        while self._host._transport_active():
            if time.monotonic() >= end:
                return False
            time.sleep(0.02)
        return True

    def signal(self, script: str) -> None:
        """The kill snippet runs over a second channel (paramiko cannot signal a remote process)."""
        ch = self._host._session(script)
        try:
            ch.shutdown_write()
            ch.status_event.wait(30)
        finally:
            ch.close()

    def close(self) -> None:
        self._chan.close()


def _aead_first(*args, **kwargs) -> paramiko.Transport:
    """A Transport that prefers AES-GCM where the server offers it: one pass for cipher and MAC instead of
    AES-CTR plus HMAC, ~25% less client CPU per byte (bench/remote_transfer.py); others as paramiko orders them."""
    t = paramiko.Transport(*args, **kwargs)
    opts = t.get_security_options()
    first = tuple(c for c in ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com") if c in opts.ciphers)
    opts.ciphers = first + tuple(c for c in opts.ciphers if c not in first)
    return t


def _server_nodelay(transport: paramiko.Transport, name: str) -> None:
    """Make sshd turn Nagle off on its side of this connection: start ``:`` on a session and close it.

    OpenSSH's sshd sets TCP_NODELAY on its side of a connection only when the first session starts a
    command (``ssh_packet_set_interactive``). On a connection that carries only forwarded channels, or
    on a ProxyJump bastion's (which carries everything), each small chunk an engine streams after the
    first waits for the client's delayed ACK (measured: TTFT +22 ms, tokens arriving in pairs; through
    a bastion TTFT 67 ms instead of 20). sshd sets the option when it starts the command, before it
    answers the exec request, so nothing is waited for beyond that answer. Best effort: a server that
    refuses sessions (a bastion with ``MaxSessions 0``) only keeps its Nagle."""
    try:
        chan = transport.open_session(timeout=10)
        try:
            chan.settimeout(10)
            chan.exec_command(":")
        finally:
            chan.close()
    except (paramiko.SSHException, OSError, EOFError) as exc:
        log.debug("%s: no session to turn sshd's Nagle off (%s)", name, exc)


def _open_failure(code: int, text: str) -> str:
    """Why the SSH server refused a ``direct-tcpip`` channel (RFC 4254 5.1 reason codes)."""
    if code == 1:  # SSH_OPEN_ADMINISTRATIVELY_PROHIBITED
        return (f"port forwarding refused by the SSH server ({text or 'administratively prohibited'}: "
                "AllowTcpForwarding is off in its sshd_config, or the key's authorized_keys options forbid it)")
    if code == 2:  # SSH_OPEN_CONNECT_FAILED
        return f"nothing accepts connections there on the host ({text or 'connect failed'})"
    return f"the SSH server refused the channel ({text or 'no reason given'}, code {code})"


def _has_identity(alias: str, ssh_config) -> bool:
    try:
        return bool(resolve(alias, ssh_config=ssh_config).key_filenames)
    except RemoteError:
        return False
