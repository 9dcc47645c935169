"""Forward: reach a port of a host from this machine, through the host's own SSH connection (``ssh -L``).

``host.forward(port)`` listens on this machine's 127.0.0.1 (a free port unless one is given) and carries
every accepted connection to ``remote_host:remote_port`` as a ``direct-tcpip`` channel of the connection
the kit already holds, like ``ssh -L`` or Fabric's ``forward_local``.

- Each connection has its own channel and two pump threads (blocking reads, ``TCP_NODELAY`` here), so
  64 streaming requests go through at once; half-closes are passed on.
- ``check`` (default) opens one channel at creation, so a refused forward (``AllowTcpForwarding no``)
  or a port where nothing listens is a one-line ConnectError at once. A later failure closes that
  client's connection, kept in ``last_error`` and logged once.
- A channel that ends without the target's EOF (the SSH connection died under it) resets the local
  connection (RST) instead of ending it: a client never takes a cut reply for a whole one.
- ``close()``, leaving the ``with`` block, dropping the object (a finalizer: the threads hold only the
  forward's core) or closing the host stops listening and joins the threads; a closed forward never
  reconnects the host.
- The TCP listener is reachable by **every user of this machine** (as with ``ssh -L``);
  ``unix_socket=PATH`` listens on a Unix socket of mode 0600 instead.
- On this machine (``LocalHost``) nothing needs carrying: the direct address (``direct=True``).
"""
from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import urllib.parse
import weakref

from kit.errors import ConnectError
from kit.remote._result import Closing
from kit.util import html_fields

log = logging.getLogger("kit.remote")

CHUNK = 64 * 1024
OPEN_TIMEOUT_S = 15.0  # longest wait for the SSH server to answer a channel open (it connects first)


class _Core:
    """What the threads of a forward share (the listener, the carried connections, the counters); never
    the :class:`Forward` itself, so that dropping it ends the forward."""

    def __init__(self, host, remote_host: str, remote_port: int) -> None:
        self.host = host
        self.remote_host = remote_host
        self.remote_port = remote_port
        self.connections = self.failed = self.lost = 0
        self.last_error = ""
        self.closed = False
        self.lock = threading.Lock()
        self.live: dict[int, tuple[socket.socket, object]] = {}
        self.threads: list[threading.Thread] = []  # carriers, pruned of finished ones as new ones start
        self.listener: socket.socket | None = None
        self.acceptor: threading.Thread | None = None
        self.where = ""
        self.unix_path: str | None = None

    @property
    def target(self) -> str:
        return f"{self.remote_host}:{self.remote_port}"

    def open(self, peer=("127.0.0.1", 0)):
        """A direct-tcpip channel to the target; ConnectError naming host and address (also once closed:
        a closed forward never reconnects its host)."""
        if self.closed:
            raise ConnectError(f"{self.host.name}: forward to {self.target} is closed", host=self.host.name)
        return self.host.open_channel((self.remote_host, self.remote_port), peer, OPEN_TIMEOUT_S)

    def close(self, why: str = "") -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            live = list(self.live.values())
        if why:
            log.info("%s: forward %s -> %s closed (%s)", self.host.name, self.where, self.target, why)
        if self.listener is not None:
            _shut(self.listener)
            self.unlink()
        for sock, chan in live:
            _shut(sock)
            _close_chan(chan)
        me = threading.current_thread()
        with self.lock:
            threads = list(self.threads)
        for t in ([self.acceptor] if self.acceptor is not None else []) + threads:
            if t is not me:
                t.join(5)

    def unlink(self) -> None:
        """Remove the Unix socket's file (nothing for TCP)."""
        if self.unix_path:
            with contextlib.suppress(OSError):
                os.unlink(self.unix_path)

    def accept(self) -> None:
        lsock = self.listener
        while not self.closed:
            try:
                conn, peer = lsock.accept()
            except OSError:
                if self.closed:
                    return
                continue
            if self.closed:
                conn.close()
                return
            if not isinstance(peer, tuple):  # a Unix socket: no peer address
                peer = ("127.0.0.1", 0)
            t = threading.Thread(target=self.carry, args=(conn, peer), daemon=True,
                                 name=f"{threading.current_thread().name}-{peer[1]}")
            with self.lock:
                self.threads = [x for x in self.threads if x.is_alive()]
                self.threads.append(t)
            t.start()

    def carry(self, conn: socket.socket, peer) -> None:
        me = threading.current_thread()
        chan = None
        try:
            if conn.family != socket.AF_UNIX:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                chan = self.open((peer[0], peer[1]))
            except ConnectError as exc:
                self.note_failure(str(exc))
                return
            with self.lock:
                if self.closed:
                    return
                self.connections += 1
                self.live[id(conn)] = (conn, chan)
            local_broke = threading.Event()  # set when the local client, not the channel, ended first
            down = threading.Thread(target=self.pump_down, args=(chan, conn, local_broke), daemon=True,
                                    name=f"{me.name}-down")
            down.start()
            _pump_up(conn, chan, local_broke)
            down.join()
        finally:
            with self.lock:
                self.live.pop(id(conn), None)
            if chan is not None:
                _close_chan(chan)
            _shut(conn)

    def pump_down(self, chan, conn: socket.socket, local_broke: threading.Event) -> None:
        """Channel -> local client. The channel's own EOF (the target closed its side) is passed on as
        the socket's write shutdown; a channel that ends without one (the SSH connection died under it)
        or breaks resets the local connection (RST), so a client never reads a cut reply as complete."""
        while True:
            try:
                data = chan.recv(CHUNK)
            except Exception:  # noqa: BLE001 - OSError, paramiko's SSHException/EOFError: the channel broke
                break
            if not data and chan.eof_received:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_WR)
                return
            if not data:
                break
            try:
                conn.sendall(data)
            except OSError:  # the local client went away: not a lost SSH connection
                local_broke.set()
                break
        with self.lock:
            closing = self.closed
        if not closing and not local_broke.is_set():
            self.lost += 1
            self.note_failure(f"{self.host.name}: forward {self.where} -> {self.target}: SSH connection lost "
                              f"mid-stream; the local connection was reset, not ended")
        _abort(conn)
        _close_chan(chan)

    def note_failure(self, msg: str) -> None:
        with self.lock:
            self.failed += 1
            first = msg != self.last_error
            self.last_error = msg
        if first:
            log.warning("%s", msg)


class Forward(Closing):
    """A local address that reaches ``remote_host:remote_port`` on ``host`` (see
    :meth:`kit.remote.Host.forward`): ``url``, ``local_port``, ``address``; ``connections`` counts the
    connections carried, ``failed`` those whose channel could not be opened or was lost (``last_error``
    says why; ``lost``: cut by a dead SSH connection). ``close()`` is idempotent."""

    def __init__(self, host, remote_port: int, remote_host: str = "127.0.0.1", local_port: int = 0, *,
                 check: bool = True, direct: bool = False, unix_socket: str | None = None) -> None:
        self.host = host
        self.direct = direct
        self.unix_socket = unix_socket
        self._core = core = _Core(host, remote_host, int(remote_port))
        if not 0 < core.remote_port < 65536:
            raise ConnectError(f"{host.name}: forward: port {remote_port!r} out of range", host=host.name)
        if direct and unix_socket is not None:
            raise ConnectError(f"{host.name}: forward(unix_socket=...) carries an SSH host's port; on this "
                               f"machine the port is reached directly", host=host.name)
        if direct:
            self.local_port = core.remote_port
            wildcard = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "localhost": "127.0.0.1", "::": "[::1]"}
            self.local_host = wildcard.get(remote_host, f"[{remote_host}]" if ":" in remote_host else remote_host)
            try:
                if check:
                    socket.create_connection(self.address, timeout=5).close()
            except OSError as exc:
                raise ConnectError(f"{host.name}: nothing accepts connections at {self.target} "
                                   f"({exc.strerror or exc})", host=host.name) from exc
        else:
            self.local_host = "127.0.0.1"
            core.listener = self._listen(int(local_port), unix_socket)
            core.unix_path = unix_socket
            self.local_port = core.listener.getsockname()[1] if unix_socket is None else 0
            core.where = self.url
            try:
                if check:
                    core.open().close()
            except BaseException:
                _shut(core.listener)
                core.unlink()
                raise
            core.acceptor = threading.Thread(target=core.accept, daemon=True,
                                             name=f"kit-forward-{self.local_port or os.path.basename(unix_socket)}")
            core.acceptor.start()
        why = "" if direct else "its Forward object was garbage-collected"
        self._finalizer = weakref.finalize(self, core.close, why)
        _register(host, self)

    # --- public --------------------------------------------------------------------------------
    remote_host = property(lambda self: self._core.remote_host)
    remote_port = property(lambda self: self._core.remote_port)
    connections = property(lambda self: self._core.connections, doc="connections carried")
    failed = property(lambda self: self._core.failed, doc="connections not opened or lost")
    lost = property(lambda self: self._core.lost, doc="connections cut by a dead SSH connection (reset here)")
    last_error = property(lambda self: self._core.last_error)
    closed = property(lambda self: self._core.closed)
    target = property(lambda self: self._core.target, doc="``remote_host:remote_port``, as the host sees it")

    @property
    def url(self) -> str:
        """``http://`` URL of the forwarded port, to use on this machine (``http+unix://`` for a socket)."""
        if self.unix_socket is not None:
            return "http+unix://" + urllib.parse.quote(self.unix_socket, safe="")
        return f"http://{self.local_host}:{self.local_port}"

    @property
    def address(self):
        """``(host, port)`` to connect to here, or the Unix socket's path."""
        return self.unix_socket if self.unix_socket is not None else (self.local_host.strip("[]"), self.local_port)

    @property
    def active(self) -> int:
        """Connections open right now."""
        with self._core.lock:
            return len(self._core.live)

    def close(self) -> None:
        """Stop listening, close every carried connection and wait for its threads (idempotent)."""
        self._finalizer.detach()
        self._core.close()

    def __repr__(self) -> str:
        how = "direct" if self.direct else f"via SSH to {self.target} on {self.host.name}"
        return f"Forward({self.url!r}, {how}{' closed' if self.closed else ''})"

    def _repr_html_(self) -> str:
        return html_fields("Forward", [("url", self.url), ("host", self.host.name), ("to", self.target),
                                       ("direct", self.direct), ("connections", self.connections),
                                       ("closed", self.closed)])

    # --- internals -----------------------------------------------------------------------------
    def _listen(self, port: int = 0, path: str | None = None) -> socket.socket:
        """127.0.0.1:``port``, or the Unix socket at ``path``, mode 0600 before it listens: only this user
        (and root) connect."""
        s = socket.socket(socket.AF_UNIX if path else socket.AF_INET, socket.SOCK_STREAM)
        where = f"the Unix socket {path}" if path else f"127.0.0.1:{port}"
        try:
            if path:
                s.bind(path)
                os.chmod(path, 0o600)
            else:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
            s.listen(256)
        except OSError as exc:
            s.close()
            raise ConnectError(f"{self.host.name}: cannot listen on {where} here to forward "
                               f"{self.target}: {exc.strerror or exc}", host=self.host.name) from exc
        return s


def _register(host, fwd: Forward) -> None:
    """The host knows its forwards (weakly) so that closing it closes them."""
    with _registry_lock:
        host.__dict__.setdefault("_kit_forwards", weakref.WeakSet()).add(fwd)


def close_forwards(host) -> int:
    """Close every forward of ``host`` (its ``close()`` calls this); the number closed."""
    with _registry_lock:
        fwds = list(host.__dict__.get("_kit_forwards") or ())
    n = 0
    for f in fwds:
        if not f.closed:
            f.close()
            n += 1
    if n:
        log.info("%s: closed with the host: %d forward(s)", host.name, n)
    return n


_registry_lock = threading.Lock()


def _pump_up(conn: socket.socket, chan, local_broke: threading.Event) -> None:
    """Local client -> channel, until the client's EOF (passed on as the channel's EOF)."""
    while True:
        try:
            data = conn.recv(CHUNK)
        except OSError:  # the local client reset, or the socket was closed under us: this connection ends
            local_broke.set()
            _close_chan(chan)
            return
        try:
            if not data:
                chan.shutdown_write()
                return
            chan.sendall(data)
        except Exception:  # noqa: BLE001 - OSError, paramiko's SSHException/EOFError: the channel broke
            _close_chan(chan)
            return


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def _abort(sock: socket.socket) -> None:
    """End a local connection with a reset (RST, ``SO_LINGER`` 0), never a FIN: the client must not
    take what it read for the whole reply. SHUT_RD first wakes the thread reading from it."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RD)
    except OSError:
        pass
    sock.close()


def _close_chan(chan) -> None:
    with contextlib.suppress(Exception):  # closing a dead channel
        chan.close()
