"""``nico demo seed`` against a simulator in another process (as in the compose stack): it registers
the machines and endpoints the simulator reports, again without changes, and fails cleanly when the
fabric does not answer within --wait."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.demo_process import demo_env, free_port

pytestmark = pytest.mark.e2e
DEADLINE = 30.0
POLL = 0.05


def nico(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nico.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_seed_registers_what_the_simulator_serves_and_is_idempotent(tmp_path: Path) -> None:
    env = demo_env(tmp_path / "data")
    sim = subprocess.Popen(
        [sys.executable, "-m", "nico.cli", "sim", "nmxc", "--racks", "2", "--port", "0", "--seed", "72"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    assert sim.stdout is not None
    threading.Thread(target=lambda: lines.extend(sim.stdout or []), daemon=True).start()
    try:
        deadline = time.monotonic() + DEADLINE
        while len(lines) < 2:
            assert sim.poll() is None and time.monotonic() < deadline, "the simulator did not start"
            time.sleep(POLL)
        served = dict(re.findall(r"^(\S+) -> (\S+)", "".join(lines), re.M))
        assert set(served) == {"SIM-0001", "SIM-0002"}
        endpoints = [arg for url in sorted(served.values()) for arg in ("--nmxc-endpoint", url)]

        first = nico(env, "demo", "seed", "--org", "demo", *endpoints)
        assert first.returncode == 0, first.stderr
        assert "2 NVLink domains, 36 machines (36 new)" in first.stdout
        assert "36 machines for tenant org demo" in first.stdout
        again = nico(env, "demo", "seed", "--org", "demo", *endpoints)
        assert again.returncode == 0 and "(0 new)" in again.stdout, again.stderr
        shown = nico(env, "admin", "nvlink-nmxc-endpoints", "show", "--format", "json")
        assert {r["chassis_serial"]: r["endpoint"] for r in json.loads(shown.stdout)} == served
    finally:
        sim.terminate()
        sim.wait(DEADLINE)

    silent = nico(env, "demo", "seed", "--nmxc-endpoint", f"http://127.0.0.1:{free_port()}", "--wait", "0.5")
    assert silent.returncode == 1 and "seed failed" in silent.stderr
    assert "Traceback" not in silent.stderr
