"""A TCP relay that delays every byte by a fixed one-way latency: emulates a network path to a real host.

``python bench/_delay_relay.py TARGET_PORT DELAY_MS`` listens on 127.0.0.1 (free port, printed on
stdout), forwards each connection to 127.0.0.1:TARGET_PORT, and delivers every chunk DELAY_MS after
it was read, in order, in both directions (so a round trip costs 2 x DELAY_MS; throughput is not
limited). Used by remote_latency.py because this kernel has no ``netem`` qdisc. Stops on SIGTERM.
"""
from __future__ import annotations

import asyncio
import socket
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is None:
                writer.close()
                return
            writer.write(data)
            await writer.drain()

    task = asyncio.create_task(deliver())
    try:
        while True:
            data = await reader.read(65536)
            await queue.put((loop.time() + delay, data or None))
            if not data:
                break
        await task
    except (ConnectionError, OSError):
        task.cancel()
        writer.close()


async def _serve(target_port: int, delay: float) -> None:
    async def handle(cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            cw.close()
            return
        for w in (cw, uw):
            w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(_pipe(cr, uw, delay), _pipe(ur, cw, delay), return_exceptions=True)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1]), float(sys.argv[2]) / 1000))
