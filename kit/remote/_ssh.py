"""SSHHost: the Host API over one persistent paramiko connection: start, read and signal a command on a
channel (the loop is ``_runner.py``'s), and files over SFTP. Measured pitfalls it answers:

- ``TCP_NODELAY`` on the socket: without it Nagle + delayed ACK cost ~40 ms per command. sshd turns
  Nagle off on its side only once a command started on the connection, so forwards and a ProxyJump
  bastion's connection start a no-op first (``_server_nodelay``; +22 ms TTFT without it).
- paramiko cannot signal a remote process, and closing a channel leaves a PTY-less command running, so
  every command leads its own process group and reports it first (the runner's marker); a second
  channel kills that group.
- One connection per host, reused; if it died between calls it is reopened once and that is logged.
- paramiko's own volume-triggered re-key is off (``NO_CLIENT_REKEY``); the server's go on.

The host account's login shell must be POSIX-like (bash, dash, zsh: not fish/csh); commands run in bash.
"""
from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import select
import socket
import stat as stat_mod
import threading
import time

import paramiko
from paramiko.sftp import CMD_DATA, CMD_READ, CMD_STATUS, int64

from kit.errors import AuthError, ConnectError, RemoteError
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
# paramiko starts a re-key itself every 512 MiB. If the server closes a channel while that re-key is in
# flight, paramiko's transport thread blocks until the re-key ends, which only that thread can finish:
# after 30 s every call fails with "Key-exchange timed out" (measured on a 1 GiB stream; paramiko issue
# #822). A re-key the server starts has no such window, so the kit leaves re-keying to the server (OpenSSH
# re-keys by its RekeyLimit, every 1 to 4 GiB by default).
NO_CLIENT_REKEY = 1 << 62
KEEPALIVE_S = 30  # an SSH keepalive this often keeps NAT and firewalls from dropping an idle connection
SFTP_TIMEOUT_S = 120.0  # longest wait for any one SFTP reply (a hung file system must not hang the caller)
SFTP_REQUEST = 255 * 1024
_ERRORS = (paramiko.SSHException, OSError, EOFError)  # what paramiko raises when a connection or channel fails


# paramiko logs a refused channel open as an ERROR line of its own; the kit raises it as one ConnectError
# naming host and address (``_open_failure``), so that line is dropped.
logging.getLogger("paramiko.transport").addFilter(lambda record: "open FAILED" not in str(record.msg))


class SSHHost(Host):
    """A host reached over SSH (paramiko). Create with :func:`kit.connect`; see its options."""

    def __init__(self, target: str, *, user: str | None = None, port: int | None = None,
                 key_filename: str | list[str] | None = None, known_hosts: str | list[str] | None = None,
                 trust: str = "strict", kit_known_hosts: str | None = None, ssh_config: str | bool | None = None,
                 connect_timeout: float = 15.0, look_for_keys: bool = True, allow_agent: bool = True,
                 passphrase: str | None = None, proxy_jump: str | None = None) -> None:
        self.target = self.name = target
        self.params = resolve(target, user=user, port=port, key_filename=key_filename, ssh_config=ssh_config,
                              proxy_jump=proxy_jump)
        self._kit_file = kit_known_hosts or default_kit_known_hosts()
        TrustPolicy(self.name, trust, self._kit_file)  # validates ``trust`` now
        # the options a jump host is opened with too
        self._opts = dict(known_hosts=known_hosts, trust=trust, kit_known_hosts=self._kit_file, ssh_config=ssh_config,
                          connect_timeout=connect_timeout, look_for_keys=look_for_keys, allow_agent=allow_agent)
        self._key_filename = key_filename
        self._passphrase = passphrase
        self._timeout = connect_timeout
        self._client: paramiko.SSHClient | None = None
        self._jump: SSHHost | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.RLock()
        self.reconnects = 0

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
        known = load_known_hosts(client, self._opts["known_hosts"], self._kit_file, self.name, hostname=p.hostname,
                                 port=p.port, user_files=p.user_known_hosts, global_files=p.global_known_hosts)
        client.set_missing_host_key_policy(TrustPolicy(self.name, self._opts["trust"], self._kit_file, known))
        sock = self._make_sock()
        where = f"{p.user}@{p.hostname}:{p.port}"
        try:
            client.connect(p.hostname, p.port, username=p.user, key_filename=p.key_filenames or None,
                           timeout=self._timeout, banner_timeout=self._timeout, auth_timeout=self._timeout,
                           channel_timeout=self._timeout, look_for_keys=self._opts["look_for_keys"],
                           allow_agent=self._opts["allow_agent"], passphrase=self._passphrase, sock=sock,
                           transport_factory=_aead_first)
        except Exception as exc:
            client.close()  # and the jump host connection opened for it
            self._drop()
            if isinstance(exc, paramiko.BadHostKeyException):
                raise changed_key_error(self.name, exc, known_hosts_name(p.hostname, p.port), known) from exc
            if isinstance(exc, paramiko.AuthenticationException):
                keys = ", ".join(p.key_filenames) or ("agent/default keys" if self._opts["look_for_keys"] else "none")
                raise AuthError(f"{self.name}: authentication failed as {where} ({exc}); keys tried: {keys}",
                                host=self.name) from exc
            if isinstance(exc, _ERRORS):
                raise ConnectError(f"{self.name}: cannot connect to {where}: {exc or type(exc).__name__}",
                                   host=self.name) from exc
            raise
        transport = client.get_transport()  # its socket has TCP_NODELAY already (_make_sock)
        transport.set_keepalive(KEEPALIVE_S)
        transport.packetizer.REKEY_BYTES = transport.packetizer.REKEY_PACKETS = NO_CLIENT_REKEY
        self._client = client

    def _make_sock(self):
        p = self.params
        if p.proxy_jump:
            hops = [h.strip() for h in p.proxy_jump.split(",") if h.strip()]
            # The last hop is reached through the ones before it (OpenSSH's -J order); it uses this
            # host's key unless its own config names one.
            try:
                own_key = bool(resolve(hops[-1], ssh_config=self._opts["ssh_config"]).key_filenames)
            except RemoteError:
                own_key = False
            self._jump = SSHHost(hops[-1], key_filename=None if own_key else self._key_filename,
                                 proxy_jump=",".join(hops[:-1]) or None, **self._opts)
            self._jump.open()
            jump = self._jump._client.get_transport()
            if not getattr(jump, "_kit_exec_done", False):  # our traffic crosses its sshd: _server_nodelay
                jump._kit_exec_done = True
                _server_nodelay(jump, hops[-1])
            try:
                return jump.open_channel("direct-tcpip", (p.hostname, p.port), ("127.0.0.1", 0),
                                         timeout=self._timeout)
            except _ERRORS as exc:
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

    def _retrying(self, fn, what: str):
        """``fn(transport)``. If the connection died since the last call, reconnect once, say so in the log,
        and retry (nothing ran on the dead connection); ConnectError naming ``what`` if that fails too."""
        with self._lock:
            self._ensure()
            transport = self._client.get_transport()
        try:
            return fn(transport)
        except _ERRORS as exc:
            with self._lock:
                if self._client is None or self._client.get_transport() is transport:
                    self._reconnect(str(exc) or type(exc).__name__)
                transport = self._client.get_transport()
            try:
                return fn(transport)
            except _ERRORS as exc2:
                raise ConnectError(f"{self.name}: cannot {what} after reconnecting: {exc2 or type(exc2).__name__}",
                                   host=self.name) from exc2

    def _session(self, command: str) -> paramiko.Channel:
        """A new session channel with ``command`` started on it."""
        def start(transport: paramiko.Transport) -> paramiko.Channel:
            chan = transport.open_session(timeout=self._timeout)
            try:
                chan.exec_command(command)
            except BaseException:
                chan.close()
                raise
            transport._kit_exec_done = True  # sshd has now set TCP_NODELAY on its side (_server_nodelay)
            return chan

        return self._retrying(start, "start a session")

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
            except _ERRORS as exc:
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

    def start_process(self, script: str, *, cmd: str, stdin: bool) -> "_SSHProcess":
        """Start ``script`` on a channel as the leader of its own process group, reporting that group
        first (the runner's marker line); see :meth:`kit.remote.Host.start_process`."""
        wrapper = _WRAPPER.format(inner=_q(MARK_LINE + script))
        try:
            return _SSHProcess(self, self._session(wrapper))
        except ConnectError as exc:  # name the command too
            raise ConnectError(f"{exc} (starting {clip(cmd)!r})", host=self.name) from exc

    # --- files (SFTP) -----------------------------------------------------------------------
    streams = True

    def _sftp_client(self) -> paramiko.SFTPClient:
        with self._lock:
            if self._sftp is None or not self._active():
                self._sftp = self._retrying(self._open_sftp, "open SFTP")
            return self._sftp

    def _open_sftp(self, transport: paramiko.Transport) -> paramiko.SFTPClient:
        """``open_sftp`` with timeouts: on opening the channel, and on every reply after it."""
        chan = transport.open_session(timeout=self._timeout)
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
        become RemoteFileError naming ``host: path`` (missing, permission, no reply) or ConnectError."""
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

    def read_file(self, path: str, sink, offset: int, request: int = SFTP_REQUEST, window: int = 32) -> str:
        """SFTP with a bounded ``window`` of concurrent reads (a host without a POSIX shell); see
        :meth:`kit.remote.Host.read_file`."""
        def read(sftp: paramiko.SFTPClient) -> None:
            with sftp.open(path, "rb") as fh:
                got = _Replies()
                pending: list = []
                off, eof = offset, False
                while pending or not eof:
                    while not eof and len(pending) < window:
                        pending.append(sftp._async_request(got, CMD_READ, fh.handle, int64(off), int(request)))
                        off += request
                    num = pending.pop(0)
                    while num not in got:
                        sftp._read_response()
                    t, msg = got.pop(num)
                    if t == CMD_STATUS:
                        try:
                            sftp._convert_status(msg)
                        except EOFError:
                            eof = True
                            continue
                    if t != CMD_DATA:
                        raise OSError(f"unexpected SFTP reply {t}")
                    data = msg.get_string()
                    sink.feed(data)
                    if len(data) < request:  # short read: the end of the file; drop the rest
                        eof = True
                        for n in pending:
                            while n not in got:
                                sftp._read_response()
                            got.pop(n)
                        pending = []

        self.sftp_call(path, read)
        return "sftp"

    def write_file(self, local_path: str, remote_path: str, *, resume: bool = True,
                   progress: bool | None = None) -> None:
        """SFTP with pipelined 255 KiB writes to ``.kit-<hash>-<size>-<mtime>.part`` beside the target, renamed
        into place; an unchanged target is skipped, a partial upload of the same local version continued."""
        ls = os.stat(local_path)
        d, base = posixpath.split(remote_path)
        tmp = posixpath.join(d, io_.part_name(base, ls.st_size, ls.st_mtime))
        rs = self._stat_or_none(remote_path) if resume else None
        if rs is not None and stat_mod.S_ISREG(rs.mode) and rs.size == ls.st_size and int(rs.mtime) == int(ls.st_mtime):
            return
        part = self._stat_or_none(tmp) if resume else None
        offset = part.size if part is not None and stat_mod.S_ISREG(part.mode) and part.size <= ls.st_size else 0

        def upload(sftp: paramiko.SFTPClient) -> None:
            with open(local_path, "rb") as src, sftp.open(tmp, "r+b" if offset else "wb") as dst:
                dst.MAX_REQUEST_SIZE = SFTP_REQUEST
                dst.set_pipelined(True)
                src.seek(offset)
                dst.seek(offset)
                for data in iter(lambda: src.read(io_.CHUNK), b""):
                    dst.write(data)
                    bar.update(len(data))

        def finish(sftp: paramiko.SFTPClient) -> None:
            if sftp.stat(tmp).st_size != ls.st_size:
                raise OSError(f"size mismatch after upload (local {ls.st_size:,} bytes)")
            sftp.chmod(tmp, ls.st_mode & 0o777)
            sftp.utime(tmp, (ls.st_atime, ls.st_mtime))
            sftp.posix_rename(tmp, remote_path)

        with io_.bar(f"{self.name}: put {os.path.basename(local_path)}", ls.st_size, progress) as bar:
            bar.update(offset)
            self.sftp_call(tmp, upload)
            self.sftp_call(remote_path, finish)

    def _stat_or_none(self, path: str) -> FileStat | None:
        try:
            return self.stat(path)
        except RemoteError:
            return None

    def listdir(self, path: str) -> list[str]:
        return self.sftp_call(path, lambda s: s.listdir(path))

    def stat(self, path: str) -> FileStat:
        """Size, mtime, directory flag and mode of ``path`` (SFTP stat, follows symlinks)."""
        st = self.sftp_call(path, lambda s: s.stat(path))
        return FileStat(path=path, size=int(st.st_size or 0), mtime=float(st.st_mtime or 0),
                        is_dir=stat_mod.S_ISDIR(st.st_mode or 0), mode=int(st.st_mode or 0))


class _Replies(dict):
    """paramiko's SFTP reply target for the windowed reader: the replies by request number."""

    def _async_response(self, t, msg, num) -> None:
        self[num] = (t, msg)


class _SSHProcess(Process):
    """A command on a paramiko channel. Its first stdout line is the runner's marker with its process
    group (``marked``: the runner takes it out). Reads wait on the channel with a timeout (select), never
    spin, and never hold a lock the transport thread needs, so re-keys and keepalives go on."""

    errors = _ERRORS
    marked = True
    eof = False

    def __init__(self, host: SSHHost, chan: paramiko.Channel) -> None:
        self._host = host
        self._chan = chan

    def read(self, wait: float) -> list[tuple[int, bytes]]:
        chunks = self._ready()
        if not chunks and not self.eof:
            select.select([self._chan], [], [], wait)
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
            self.eof = True
        return chunks

    def write(self, data: bytes) -> None:
        self._chan.sendall(data)

    def close_stdin(self) -> None:
        self._chan.shutdown_write()

    def exit_status(self, wait: float) -> int | None:
        chan = self._chan
        if not chan.status_event.wait(wait):
            if self._host._transport_active():
                return None
        elif chan.exit_status != -1 or not self._lost():
            return chan.exit_status
        raise EOFError("the connection closed before the command's exit status arrived")

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

    OpenSSH's sshd sets TCP_NODELAY only when the first session starts a command
    (``ssh_packet_set_interactive``). On a connection that carries only forwarded channels, or on a
    ProxyJump bastion's, each small chunk an engine streams waits for the client's delayed ACK
    (measured: TTFT +22 ms, tokens in pairs; through a bastion 67 ms instead of 20). Best effort: a
    server that refuses sessions (``MaxSessions 0``) only keeps its Nagle."""
    try:
        chan = transport.open_session(timeout=10)
        try:
            chan.settimeout(10)
            chan.exec_command(":")
        finally:
            chan.close()
    except _ERRORS as exc:
        log.debug("%s: no session to turn sshd's Nagle off (%s)", name, exc)


def _open_failure(code: int, text: str) -> str:
    """Why the SSH server refused a ``direct-tcpip`` channel (RFC 4254 5.1 reason codes)."""
    if code == 1:  # SSH_OPEN_ADMINISTRATIVELY_PROHIBITED
        return (f"port forwarding refused by the SSH server ({text or 'administratively prohibited'}: "
                "AllowTcpForwarding is off in its sshd_config, or the key's authorized_keys options forbid it)")
    if code == 2:  # SSH_OPEN_CONNECT_FAILED
        return f"nothing accepts connections there on the host ({text or 'connect failed'})"
    return f"the SSH server refused the channel ({text or 'no reason given'}, code {code})"
