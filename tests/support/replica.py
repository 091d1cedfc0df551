"""An API replica on loopback: its own app context (pools, placement listener) and uvicorn server,
sharing the test database with every other replica."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn

from nico.api.app import build_context, create_app
from nico.config import Settings
from nico.serving import EmbeddedServer
from tests.support.net import free_port
from tests.support.waiting import wait_for

DEADLINE = 20.0


@contextlib.asynccontextmanager
async def replica(settings: Settings, database_url: str) -> AsyncIterator[str]:
    """One API process's worth: its own context (pools, listener) and HTTP server."""
    ctx = build_context(settings, database_url)
    port = free_port()
    config = uvicorn.Config(
        create_app(settings, context=ctx),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=1,
    )
    server = EmbeddedServer(config)
    task = asyncio.create_task(server.serve())
    try:
        await wait_for(lambda: server.started or task.done(), within=DEADLINE, what="API replica started")
        if task.done():
            task.result()
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        await ctx.close()
