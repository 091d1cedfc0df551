"""What the benchmarks share: a free loopback port and the environment of the ``nico serve`` they start.

The benchmarks run as scripts (``python benchmarks/<name>.py``), so this folder is first on their path.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from pathlib import Path

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def server_env(database_url: str, data_dir: Path, secret: str, **extra: str) -> dict[str, str]:
    """This process's environment plus what a benchmarked ``nico serve`` needs (quiet logs)."""
    return {
        **os.environ,
        "NICO_DATABASE_URL": database_url,
        "NICO_DATA_DIR": str(data_dir),
        "NICO_AUTH__HS256_SECRET": secret,
        "NICO_LOG_LEVEL": "WARNING",
        **extra,
    }


async def until_ready(client: httpx.AsyncClient, within: float = 60.0) -> None:
    """Wait until the benchmarked server answers /readyz with 200 (exit after ``within`` seconds)."""
    deadline = time.monotonic() + within
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if (await client.get("/readyz")).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise SystemExit("nico serve did not become ready")
        await asyncio.sleep(0.1)
