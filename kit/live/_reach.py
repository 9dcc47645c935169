"""Where this machine reaches a live engine: its address directly, or a forward over the host's SSH connection.

An engine on a GPU host usually listens on the host's loopback (or behind a firewall), so the URL
``http://<host>:<port>`` does not answer from the notebook's machine. After the engine is ready,
:func:`reach` tries that URL (a plain HTTP GET of ``/health`` or ``/v1/models``, 2 s); when it does
not answer (or answers on this machine's loopback while the host's loopback is another one: a
container or VM reached through a local port), or with ``forward=True``, it opens ``host.forward(port)``
(:class:`kit.remote.Forward`, a ``direct-tcpip`` channel per connection) and checks the engine answers
through it. Every client of the server (bench, the profiler's load, ``/start_profile``, the experiment)
then uses that URL. On a ``LocalHost`` the forward is the direct address, so the same code runs on both.
"""
from __future__ import annotations

import http.client
import ipaddress
import json
import os
import urllib.parse

from kit.errors import RemoteError, ServerError

HEALTH_PATHS = ("/health", "/v1/models")


def _request(url: str, method: str, path: str, body: bytes | None, timeout: float) -> tuple[int, str]:
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body is not None else {})
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


def answers(url: str, timeout: float = 2.0) -> bool:
    """True when ``url`` answers HTTP 200 on ``/health`` or ``/v1/models`` from this machine."""
    for path in HEALTH_PATHS:
        try:
            if _request(url, "GET", path, None, timeout)[0] == 200:
                return True
        except (OSError, http.client.HTTPException):
            continue
    return False


def _loopback(url: str) -> bool:
    name = urllib.parse.urlsplit(url).hostname or ""
    try:
        return name == "localhost" or ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _net_id() -> str:
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    return f"{boot} {os.readlink('/proc/self/ns/net')}"


def shares_loopback(host) -> bool:
    """Whether ``host``'s 127.0.0.1 is this machine's: same kernel (boot id) and same network
    namespace. An SSH host reached at localhost (a container or VM behind a local port) usually is not,
    and a server answering on this machine's loopback is then some other server."""
    if host.is_local:
        return True
    try:
        mine = _net_id()
    except OSError:
        return False
    res = host.run("cat /proc/sys/kernel/random/boot_id && readlink /proc/self/ns/net", timeout=30)
    return res.ok and " ".join(res.stdout.split()) == mine


def reach(host, port: int, url: str, forward: bool | None, name: str):
    """``(url to use here, Forward or None)`` for an engine ready on ``host`` at its ``127.0.0.1:port``.

    ``forward``: None forwards only when ``url`` does not answer from here, True always, False never.
    ServerError naming host and port when the forward cannot be opened or the engine does not
    answer through it."""
    if forward is False:
        return url, None
    if forward is None and answers(url) and (not _loopback(url) or shares_loopback(host)):
        return url, None
    try:
        fwd = host.forward(port)
    except RemoteError as exc:
        raise ServerError(f"server {name}: not reachable at {url} from here, and {exc}", host=host.name) from exc
    if not answers(fwd.url, timeout=10.0):
        why = fwd.last_error or "no HTTP 200 on /health or /v1/models"
        fwd.close()
        raise ServerError(f"{host.name}: server {name} is ready on the host but does not answer through the forward "
                          f"to 127.0.0.1:{port} ({why})", host=host.name)
    return fwd.url, fwd


def post(url: str, path: str, body: dict | None, timeout: float = 600.0) -> tuple[int, str]:
    """POST JSON ``body`` to ``url + path`` from this machine: (HTTP status or 0, response text or error)."""
    data = json.dumps(body).encode() if body is not None else b""
    try:
        return _request(url, "POST", path, data, timeout)
    except (OSError, http.client.HTTPException) as exc:
        return 0, f"{type(exc).__name__}: {exc}"
