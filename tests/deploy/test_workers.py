"""``nico serve --workers N``: N API processes behind one port (uvicorn's app factory
``nico.serving:app_factory``), and the reconciler once, in the parent, with its own /metrics."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.net import free_port

pytestmark = pytest.mark.e2e
DEADLINE = 60.0
POLL = 0.1
WORKERS = 2


def api_workers(parent: int) -> list[int]:
    """The parent's children that are uvicorn worker processes (multiprocessing's spawn)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    found = []
    for child in map(int, children):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
        except FileNotFoundError:
            continue
        if b"spawn_main" in cmdline:
            found.append(child)
    return found


def test_serve_runs_the_api_in_workers_and_one_reconciler(tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NICO_")}
    env["NICO_DATA_DIR"] = str(tmp_path / "data")
    server = subprocess.Popen(
        [sys.executable, "-m", "nico.cli", "serve", "--port", str(port), "--workers", str(WORKERS),
         "--metrics-port", str(metrics_port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + DEADLINE
        ready, reconciler = 0, ""
        with httpx.Client(timeout=5.0) as client:
            while ready != 200 or "nico_nvlink_partition_monitor" not in reconciler:
                assert server.poll() is None, server.stdout.read() if server.stdout else ""
                assert time.monotonic() < deadline, "nico serve --workers did not become ready"
                try:
                    ready = client.get(f"http://127.0.0.1:{port}/readyz").status_code
                    reconciler = client.get(f"http://127.0.0.1:{metrics_port}/metrics").text
                except httpx.TransportError:
                    pass
                time.sleep(POLL)
        assert len(api_workers(server.pid)) == WORKERS
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
