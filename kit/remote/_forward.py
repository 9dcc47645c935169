"""Forward: reach a port of a host from this machine, through the host's own SSH connection (``ssh -L``).

An engine on a GPU host usually listens on the host's loopback or behind a firewall; the kit already
holds an SSH connection to that host. ``host.forward(port)`` listens on this machine's 127.0.0.1 (a
free port unless one is given) and carries every accepted connection to ``remote_host:remote_port``
as a ``direct-tcpip`` channel of that connection, like ``ssh -L`` or Fabric's ``forward_local``.

- Connections are independent: each has its own channel and two pump threads (one per direction,
  blocking reads, ``TCP_NODELAY`` on the local side), so 64 concurrent streaming requests go through
  at once instead of one after another. Half-closes are passed on (EOF one way keeps the other open).
- ``check`` (default) opens one channel at creation, so a server that refuses forwarding
  (``AllowTcpForwarding no``) or a port where nothing listens on the host is a one-line ConnectError
  naming host and address at once, not a reset connection later. A later failure (the engine died)
  closes that client's connection; the message is kept in ``last_error`` and logged once.
- ``close()`` (or leaving the ``with`` block) stops listening, closes every channel and local
  socket, and joins the threads: nothing is left listening.
- On this machine (``LocalHost``) nothing needs carrying: ``forward`` returns the direct address
  (``direct=True``, ``local_port == remote_port``), so the same code runs on both kinds of host.
"""
from __future__ import annotations

import logging
import socket
import threading

from kit.errors import ConnectError

log = logging.getLogger("kit.remote")

__all__ = ["Forward"]

CHUNK = 64 * 1024
OPEN_TIMEOUT_S = 15.0  # longest wait for the SSH server to answer a channel open (it connects first)


def _url_host(addr: str) -> str:
    if addr in ("", "0.0.0.0", "localhost"):
        return "127.0.0.1"
    if addr == "::":
        return "[::1]"
    return f"[{addr}]" if ":" in addr else addr


class Forward:
    """A local address that reaches ``remote_host:remote_port`` on ``host``. Make one with
    :meth:`kit.remote.Host.forward`. ``url`` (``http://127.0.0.1:<local_port>``), ``local_port``,
    ``address``; ``connections`` counts the connections carried, ``failed`` those whose channel could
    not be opened (``last_error`` says why). ``close()`` is idempotent."""

    def __init__(self, host, remote_port: int, remote_host: str = "127.0.0.1", local_port: int = 0, *,
                 check: bool = True, direct: bool = False) -> None:
        self.host = host
        self.remote_host = remote_host
        self.remote_port = int(remote_port)
        self.direct = direct
        self.connections = 0
        self.failed = 0
        self.last_error = ""
        self.closed = False
        self._lock = threading.Lock()
        self._live: dict[int, tuple[socket.socket, object]] = {}
        self._threads: list[threading.Thread] = []  # carriers, pruned of finished ones as new ones start
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        if not 0 < self.remote_port < 65536:
            raise ConnectError(f"{host.name}: forward: port {remote_port!r} out of range", host=host.name)
        if direct:
            self.local_port = self.remote_port
            self.local_host = _url_host(remote_host)
            if check:
                self._check_direct()
            return
        self.local_host = "127.0.0.1"
        self._listener = self._listen(int(local_port))
        self.local_port = self._listener.getsockname()[1]
        try:
            if check:
                self._open().close()
        except BaseException:
            self._listener.close()
            raise
        self._acceptor = threading.Thread(target=self._accept, name=f"kit-forward-{self.local_port}", daemon=True)
        self._acceptor.start()

    # --- public --------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``http://`` URL of the forwarded port, to use on this machine."""
        return f"http://{self.local_host}:{self.local_port}"

    @property
    def address(self) -> tuple[str, int]:
        return (self.local_host.strip("[]"), self.local_port)

    @property
    def target(self) -> str:
        """``remote_host:remote_port``, as the host sees it."""
        return f"{self.remote_host}:{self.remote_port}"

    @property
    def active(self) -> int:
        """Connections open right now."""
        with self._lock:
            return len(self._live)

    def close(self) -> None:
        """Stop listening, close every carried connection and wait for its threads (idempotent)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            live = list(self._live.values())
        if self._listener is not None:
            _shut(self._listener)
        for sock, chan in live:
            _shut(sock)
            _close_chan(chan)
        if self._acceptor is not None:
            self._acceptor.join(5)
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(5)

    def __enter__(self) -> "Forward":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        how = "direct" if self.direct else f"via SSH to {self.target} on {self.host.name}"
        state = " closed" if self.closed else ""
        return f"Forward({self.url!r}, {how}{state})"

    def _repr_html_(self) -> str:
        from kit.util import html_fields

        return html_fields("Forward", [("url", self.url), ("host", self.host.name), ("to", self.target),
                                       ("direct", self.direct), ("connections", self.connections),
                                       ("closed", self.closed)])

    # --- internals -----------------------------------------------------------------------------
    def _listen(self, port: int) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen(256)
        except OSError as exc:
            s.close()
            raise ConnectError(f"{self.host.name}: cannot listen on 127.0.0.1:{port} here to forward "
                               f"{self.target}: {exc.strerror or exc}", host=self.host.name) from exc
        return s

    def _check_direct(self) -> None:
        try:
            socket.create_connection(self.address, timeout=5).close()
        except OSError as exc:
            raise ConnectError(f"{self.host.name}: nothing accepts connections at {self.target} "
                               f"({exc.strerror or exc})", host=self.host.name) from exc

    def _open(self, peer: tuple[str, int] = ("127.0.0.1", 0)):
        """A direct-tcpip channel to the target; ConnectError naming host and address."""
        return self.host.open_channel((self.remote_host, self.remote_port), peer, OPEN_TIMEOUT_S)

    def _accept(self) -> None:
        lsock = self._listener
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
            t = threading.Thread(target=self._carry, args=(conn, peer), daemon=True,
                                 name=f"kit-forward-{self.local_port}-{peer[1]}")
            with self._lock:
                self._threads = [x for x in self._threads if x.is_alive()]
                self._threads.append(t)
            t.start()

    def _carry(self, conn: socket.socket, peer) -> None:
        me = threading.current_thread()
        chan = None
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                chan = self._open((peer[0], peer[1]))
            except ConnectError as exc:
                self._failed(str(exc))
                return
            with self._lock:
                if self.closed:
                    return
                self.connections += 1
                self._live[id(conn)] = (conn, chan)
            down = threading.Thread(target=_pump_down, args=(chan, conn), daemon=True, name=f"{me.name}-down")
            down.start()
            _pump_up(conn, chan)
            down.join()
        finally:
            with self._lock:
                self._live.pop(id(conn), None)
            if chan is not None:
                _close_chan(chan)
            _shut(conn)

    def _failed(self, msg: str) -> None:
        with self._lock:
            self.failed += 1
            first = msg != self.last_error
            self.last_error = msg
        if first:
            log.warning("%s", msg)


def _pump_up(conn: socket.socket, chan) -> None:
    """Local client -> channel, until the client's EOF (passed on as the channel's EOF)."""
    try:
        while True:
            data = conn.recv(CHUNK)
            if not data:
                chan.shutdown_write()
                return
            chan.sendall(data)
    except Exception:  # noqa: BLE001 - OSError, paramiko's SSHException/EOFError: this connection ends
        _close_chan(chan)


def _pump_down(chan, conn: socket.socket) -> None:
    """Channel -> local client, until the channel's EOF (passed on as the socket's write shutdown)."""
    try:
        while True:
            data = chan.recv(CHUNK)
            if not data:
                conn.shutdown(socket.SHUT_WR)
                return
            conn.sendall(data)
    except Exception:  # noqa: BLE001 - the client went away or the channel broke: end both ways
        _shut(conn)
        _close_chan(chan)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _close_chan(chan) -> None:
    try:
        chan.close()
    except Exception:  # noqa: BLE001 - closing a dead channel
        pass
