"""``nico sim nmxc|nmxm`` as an operator runs them: endpoints printed, served, stopped by Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid

import pytest

from nico.config import NvLinkConfig
from nico.fabric.backend import DomainTarget
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxm.client import NmxmBackend
from nico.sim.fabric import SimFabric
from tests.support.net import free_port

pytestmark = pytest.mark.e2e  # starts `nico sim` processes

START = 30.0  # a cold interpreter importing grpc and FastAPI on a busy machine


async def _start(*args: str, lines: int) -> tuple[asyncio.subprocess.Process, list[str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nico.cli",
        "sim",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    printed = []
    for _ in range(lines):
        printed.append((await asyncio.wait_for(proc.stdout.readline(), START)).decode().strip())
    return proc, printed


async def _interrupt(proc: asyncio.subprocess.Process) -> str:
    proc.send_signal(signal.SIGINT)
    _, stderr = await asyncio.wait_for(proc.communicate(), START)
    assert proc.returncode == 0, stderr.decode()
    return stderr.decode()


async def test_nmxc_serves_each_domain_from_the_given_port_upward() -> None:
    base = free_port()
    proc, printed = await _start("nmxc", "--racks", "1", "--nvl36x2", "1", "--port", str(base), lines=3)
    try:
        rows = [line.split() for line in printed]
        assert [(r[0], r[1], r[2]) for r in rows] == [
            ("SIM-0001", "->", f"http://127.0.0.1:{base}"),
            ("SIM-0002", "->", f"http://127.0.0.1:{base + 1}"),
            ("SIM-0003", "->", f"http://127.0.0.1:{base + 1}"),
        ]
        client = NmxcBackend(NvLinkConfig())
        try:
            for serial, _, url, _, domain in rows:
                hello = await client.hello(
                    DomainTarget(domain_uuid=uuid.UUID(domain.rstrip(")")), endpoint=url)
                )
                assert str(hello.domain_uuid) == domain.rstrip(")"), serial
        finally:
            await client.close()
    finally:
        stderr = await _interrupt(proc)
    assert "Traceback" not in stderr


async def test_nmxm_serves_the_site_at_one_base_url() -> None:
    proc, (url,) = await _start(
        "nmxm", "--racks", "2", "--port", "0", "--username", "u", "--password", "p", lines=1
    )
    try:
        assert url.startswith("http://127.0.0.1:")
        client = NmxmBackend(url, "u", "p")
        try:
            # The first rack's domain, as the simulator derives it from its seed.
            domain = next(iter(SimFabric(2).domains))
            listed = await client.list_partitions(DomainTarget(domain_uuid=domain))
            assert [p.partition_id for p in listed] == [32766]
        finally:
            await client.close()
    finally:
        stderr = await _interrupt(proc)
    assert "Traceback" not in stderr
