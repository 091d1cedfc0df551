"""``nico sim nmxc|nmxm`` as an operator runs them: endpoints printed, served, stopped by Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid

import httpx
import pytest

from nico.config import NvLinkConfig
from nico.fabric.backend import DomainTarget, FabricUnavailable
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxm.client import NmxmBackend
from nico.sim.fabric import SimFabric
from tests.support.net import free_port_run
from tests.support.waiting import wait_for

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
    base = free_port_run(2)
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


async def test_nmxc_serves_each_domain_of_a_gb300_minipod_on_its_own_endpoint() -> None:
    base = free_port_run(3)
    proc, printed = await _start(
        "nmxc",
        "--racks",
        "0",
        "--minipods",
        "1",
        "--minipod-domains",
        "3",
        "--gpu",
        "gb300",
        "--port",
        str(base),
        lines=3,
    )
    try:
        rows = [line.split() for line in printed]
        assert [(r[0], r[2]) for r in rows] == [
            ("SIM-0001", f"http://127.0.0.1:{base + k}") for k in range(3)
        ]
        expected = list(SimFabric(0, minipods=1, minipod_domains=3).domains)
        assert [uuid.UUID(r[4].rstrip(")")) for r in rows] == expected
        client = NmxcBackend(NvLinkConfig())
        try:
            for _, _, url, _, domain in rows:
                gpus = await client.gpu_topology(DomainTarget(uuid.UUID(domain.rstrip(")")), url))
                assert len(gpus) == 24 and {g.description for g in gpus} == {"NVIDIA GB300"}
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
            assert [p.nmx_partition_id for p in listed] == [32766]
        finally:
            await client.close()
    finally:
        stderr = await _interrupt(proc)
    assert "Traceback" not in stderr


async def test_an_outage_rehearsed_from_outside_through_the_control_port() -> None:
    control_port = free_port_run(1)
    proc, (line, printed) = await _start("nmxc", "--port", "0", "--control-port", str(control_port), lines=2)
    try:
        control = f"http://127.0.0.1:{control_port}/control"
        assert printed == f"control -> {control}"
        serial, _, url, *_ = line.split()
        target = DomainTarget(domain_uuid=next(iter(SimFabric(1).domains)), endpoint=url)
        client = NmxcBackend(NvLinkConfig())
        try:
            async with httpx.AsyncClient() as http:
                await http.post(f"{control}/fault", json={"chassisSerial": serial, "kind": "down"})
                with pytest.raises(FabricUnavailable):
                    await client.list_partitions(target)
                await http.delete(f"{control}/fault", params={"chassisSerial": serial})
                swapped = (
                    await http.post(f"{control}/replace-tray", json={"chassisSerial": serial, "trayIndex": 0})
                ).json()
            gpus: set[int] = set()

            async def listed() -> bool:
                try:
                    gpus.update(g.gpu_uid for g in await client.list_gpus(target))
                except FabricUnavailable:
                    return False
                return True

            await wait_for(listed, what="the endpoint answering after the outage")
            assert {int(g) for g in swapped["newGuids"]} <= gpus and not {
                int(g) for g in swapped["oldGuids"]
            } & gpus
        finally:
            await client.close()
    finally:
        stderr = await _interrupt(proc)
    assert "Traceback" not in stderr


async def test_nmxc_starts_with_the_health_knobs_given() -> None:
    sick = sorted(SimFabric(1).domain("SIM-0001").gpus)[0]
    proc, (line,) = await _start(
        "nmxc", "--racks", "1", "--port", "0", "--gpu-health", f"{sick}=no_nvlink",
        "--node-health", "SIM-0001:3=UNHEALTHY", "--switch-health", "SIM-0001:2=MISSING_NVLINK",
        lines=1,
    )  # fmt: skip
    try:
        _, _, url, _, domain = line.split()
        client = NmxcBackend(NvLinkConfig())
        try:
            health = await client.domain_health(DomainTarget(uuid.UUID(domain.rstrip(")")), url))
        finally:
            await client.close()
        assert health.gpus == {"HEALTHY": 71, "NO_NVLINK": 1}
        assert health.compute_nodes == {"DEGRADED": 1, "HEALTHY": 16, "UNHEALTHY": 1}
        assert health.switch_nodes == {"HEALTHY": 8, "MISSING_NVLINK": 1}
    finally:
        await _interrupt(proc)


def test_nmxc_refuses_a_malformed_health_knob() -> None:
    from typer.testing import CliRunner

    from nico.cli import app

    for bad in (
        ["--gpu-health", "12"],
        ["--node-health", "SIM-0001:99=UNHEALTHY"],
        ["--switch-health", "x=1"],
    ):
        result = CliRunner().invoke(app, ["sim", "nmxc", "--port", "0", *bad])
        assert result.exit_code == 2, (bad, result.output)


@pytest.mark.parametrize("kind", ["nmxc", "nmxm"])
def test_a_port_in_use_is_one_clear_error_not_a_traceback(kind: str) -> None:
    import socket

    from typer.testing import CliRunner

    from nico.cli import app

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["sim", kind, "--port", str(port)])
    assert result.exit_code == 1, result.output
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
