"""What the benchmarks share: a scratch embedded PostgreSQL, a free loopback port and the environment
of the ``nico serve`` they start.

The benchmarks run as scripts (``python benchmarks/<name>.py``), so this folder is first on their path.
Importing this module puts the checkout the benchmark belongs to before it, and ``server_env`` hands
it to the servers they start (``PYTHONPATH``): a benchmark measures the code beside it, also when
another checkout is the one installed (an editable install's finder comes after the path), so two
checkouts' figures can be compared run by run.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import httpx

CHECKOUT = Path(__file__).resolve().parents[1]
# The checkout's root, when this folder sits in one (not in an installed copy of the benchmarks).
CHECKOUT_PATH = [str(CHECKOUT)] if (CHECKOUT / "nico").is_dir() else []
sys.path[:0] = CHECKOUT_PATH


def scratch_postgres(prefix: str, database: str) -> tuple[Path, str]:
    """An embedded PostgreSQL in a new temporary directory, and the URL of ``database`` there: the
    server is stopped and its files deleted when the benchmark exits (the directory is removed after
    the server's own clean-up, which runs first: atexit is LIFO), so no postmaster outlives a run."""
    from nico.db.embedded import start_embedded_postgres

    data = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, data, ignore_errors=True)
    return data, start_embedded_postgres(data, database, delete_on_exit=True)


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
        "PYTHONPATH": os.pathsep.join(CHECKOUT_PATH + [p for p in [os.environ.get("PYTHONPATH")] if p]),
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
