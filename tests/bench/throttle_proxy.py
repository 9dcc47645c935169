"""A real HTTP proxy in front of a streaming server that forwards each server-sent event after a fixed
pause, one event at a time (a slow hop: a proxy, a gateway, a client that reads slowly).

``python -m tests.bench.throttle_proxy UPSTREAM_PORT PAUSE_MS`` listens on a free 127.0.0.1 port
(printed on stdout), sends each connection's request bytes upstream as they come, and passes the
reply of an event stream on event by event (``\\n\\n``-separated), sleeping PAUSE_MS before each (other
replies pass as they come). Stops on SIGTERM.
"""
from __future__ import annotations

import socket
import sys
import threading
import time


def _pipe_up(client: socket.socket, upstream: socket.socket) -> None:
    try:
        while data := client.recv(65536):
            upstream.sendall(data)
    except OSError:
        pass


def _serve(client: socket.socket, port: int, pause: float) -> None:
    upstream = socket.create_connection(("127.0.0.1", port))
    threading.Thread(target=_pipe_up, args=(client, upstream), daemon=True).start()
    buf = b""
    stream = None   # unknown until the reply's headers are in; only event streams are paced
    try:
        while data := upstream.recv(65536):
            buf += data
            if stream is None and b"\r\n\r\n" in buf:
                stream = b"text/event-stream" in buf.split(b"\r\n\r\n", 1)[0]
            if stream is False:
                client.sendall(buf)
                buf = b""
                continue
            while stream and (end := buf.find(b"\n\n")) >= 0:
                event, buf = buf[: end + 2], buf[end + 2:]
                time.sleep(pause)
                client.sendall(event)
        if buf:
            client.sendall(buf)
    except OSError:
        pass
    finally:
        client.close()
        upstream.close()


def main() -> None:
    port, pause = int(sys.argv[1]), float(sys.argv[2]) / 1000.0
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    print(srv.getsockname()[1], flush=True)
    while True:
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_serve, args=(conn, port, pause), daemon=True).start()


if __name__ == "__main__":
    main()
