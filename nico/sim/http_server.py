"""An ASGI app served by uvicorn inside the running event loop, on a socket bound first (so a port
in use is a plain OSError before anything starts, and port 0 tells the port it got)."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

import uvicorn

from nico.serving import EmbeddedServer


@dataclass
class Listening:
    """A running server: stop it with :meth:`stop`."""

    server: EmbeddedServer
    task: asyncio.Task[None]
    port: int

    async def stop(self) -> None:
        self.server.should_exit = True
        await self.task


async def listen(app: object, host: str, port: int) -> Listening:
    """Serve ``app`` on ``host:port`` (0: a free port) until :meth:`Listening.stop`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # uvicorn writes a response's head and body separately; without this, Nagle holds the body
    # until the client's delayed ACK, and every request costs ~40 ms.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port} ({exc.strerror})") from exc
    bound = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False)  # type: ignore[arg-type]
    server = EmbeddedServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError(f"the server on {host}:{bound} stopped while starting")
        await asyncio.sleep(0.005)
    return Listening(server, task, bound)
