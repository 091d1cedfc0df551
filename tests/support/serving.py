"""An app served by uvicorn on a loopback port in a thread of the test process, for the browser tests
(the page and Swagger UI read nico over real HTTP)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import FastAPI

from nico.serving import EmbeddedServer
from tests.support.browser import until
from tests.support.net import free_port


@contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """``app`` listening on 127.0.0.1 while the block runs: its base URL."""
    import uvicorn

    port = free_port()
    server = EmbeddedServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    until("nico listening", lambda: server.started)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
