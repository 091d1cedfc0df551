"""Stopping as Kubernetes does: SIGTERM (and Ctrl-C) make `nico reconcile` and `nico serve` let the
pass in flight finish and exit 0 within seconds, instead of dying where they stand."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.support.net import free_port

pytestmark = pytest.mark.e2e
START = 60.0  # a cold interpreter and a migration check on a busy machine
STOP = 10.0  # the process's own bound is 5 s (3 s of grace for passes, then cancellation)


def _until_up(proc: subprocess.Popen[str], url: str) -> None:
    deadline = time.monotonic() + START
    with httpx.Client(timeout=2.0) as client:
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, f"{url} did not answer"
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)


def _stopped(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=STOP)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("command", ["reconcile", "serve"])
def test_a_stop_signal_ends_the_process_cleanly(
    db: str, tmp_path: object, command: str, sig: signal.Signals
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NICO_")}
    env.update({"NICO_DATABASE_URL": db, "NICO_DATA_DIR": str(tmp_path)})
    if command == "reconcile":
        args, url = ["reconcile", "--metrics-port", str(port)], f"http://127.0.0.1:{port}/metrics"
    else:
        args, url = ["serve", "--port", str(port)], f"http://127.0.0.1:{port}/readyz"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nico.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _until_up(proc, url)
        code, out = _stopped(proc, sig)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0, out
    assert "Traceback" not in out
