"""Operator commands of the reference (spec §6.4, §8): the NMX-C endpoint registry, NMX-M
credentials, a machine's NVLink info shown and read from the fabric."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from typer.testing import CliRunner

from nico.cli import app
from nico.db.models import FabricCredential, Gpu
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from tests.support.sim_site import seed


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_nmxc_endpoint_registry_commands(cli_env: dict[str, str]) -> None:
    base = ("admin", "nvlink-nmxc-endpoints")
    assert run(*base, "create", "--chassis-serial", "S1", "--endpoint", "https://h1:50051") == (
        0,
        "created S1 -> https://h1:50051\n",
    )
    assert run(*base, "create", "--chassis-serial", "S2", "--endpoint", "http://h2:9601")[0] == 0
    code, output = run(*base, "create", "--chassis-serial", "S1", "--endpoint", "https://other")
    assert code == 1 and "already exists" in output
    assert run(*base, "update", "--chassis-serial", "S2", "--endpoint", "http://h3:9601") == (
        0,
        "updated S2 -> http://h3:9601\n",
    )
    code, output = run(*base, "update", "--chassis-serial", "nope", "--endpoint", "http://x")
    assert code == 1 and "nvlink_nmxc_endpoints: no row for chassis_serial" in output
    code, output = run(*base, "show", "--format", "json")
    assert json.loads(output) == [
        {"chassis_serial": "S1", "endpoint": "https://h1:50051"},
        {"chassis_serial": "S2", "endpoint": "http://h3:9601"},
    ]
    code, output = run(*base, "show", "--chassis-serial", "S2")
    assert "S2" in output and "http://h3:9601" in output and "S1" not in output
    assert run(*base, "delete", "--chassis-serial", "S1") == (0, "deleted S1\n")
    code, output = run(*base, "delete", "--chassis-serial", "S1")
    assert code == 1 and "no row for chassis_serial" in output
    code, output = run(*base, "create", "--chassis-serial", " ", "--endpoint", "http://x")
    assert code == 1 and "must not be empty" in output


async def test_nmxm_credentials_are_stored_and_never_printed(
    cli_env: dict[str, str], session: AsyncSession, caplog: pytest.LogCaptureFixture
) -> None:
    result = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["admin", "credential", "add-nmx-m", "--username", "nmx"],
        input="s3cr3t-pw\ns3cr3t-pw\n",
    )
    assert result.exit_code == 0, result.output
    assert "s3cr3t-pw" not in result.output and "s3cr3t-pw" not in caplog.text
    stored = await session.scalar(select(FabricCredential))
    assert stored is not None and (stored.username, stored.password) == ("nmx", "s3cr3t-pw")
    result = await asyncio.to_thread(CliRunner().invoke, app, ["admin", "credential", "delete-nmx-m"])
    assert result.exit_code == 0 and "deleted" in result.output


async def _cli(env: dict[str, str], *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nico.cli",
        *args,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    return process.returncode or 0, output.decode()


@pytest.mark.e2e  # starts `nico` processes
async def test_nvlink_info_show_and_populate_from_the_fabric(
    cli_env: dict[str, str], session: AsyncSession
) -> None:
    fabric = SimFabric(racks=1, seed=21)
    async with NmxcSimulator(fabric) as sim:
        site = await seed(session, fabric, sim.endpoints)
        machine = site.machines[site.domains[0]][3]
        machine_id = machine.id  # expire_all() below expires the object
        expected = sorted(
            (g for g in fabric.gpus(site.domains[0]) if g.tray_index == machine.tray_index),
            key=lambda g: g.device_id,
        )

        code, output = await _cli(cli_env, "admin", "machine", "nvlink-info", "show", machine_id)
        assert code == 0, output
        shown = json.loads(output)
        assert list(shown) == ["domain_uuid", "gpus", "chassis_serial"]
        assert [g["guid"] for g in shown["gpus"]] == [g.gpu_uid for g in expected]

        # The database is wrong about the slots; populate reads the truth from the fabric.
        await session.execute(Gpu.__table__.update().where(Gpu.machine_id == machine_id).values(slot_id=99))
        await session.commit()
        code, output = await _cli(cli_env, "admin", "machine", "nvlink-info", "populate", machine_id)
        assert code == 0, output
        assert output.startswith("\nUse --update-db option to apply the following nvlink-info:")
        read = json.loads(output.split("\n", 2)[2])
        assert list(read) == ["chassis_serial", "domain_uuid", "gpus"]
        assert list(read["gpus"][0]) == ["device_id", "guid", "slot_id", "tray_index"]
        assert [(g["device_id"], g["guid"], g["slot_id"]) for g in read["gpus"]] == [
            (g.device_id, g.gpu_uid, g.slot_id) for g in expected
        ]
        slots = set(await session.scalars(select(Gpu.slot_id).where(Gpu.machine_id == machine_id)))
        assert slots == {99}  # without --update-db nothing changes

        code, output = await _cli(
            cli_env, "admin", "machine", "nvlink-info", "populate", machine_id, "--update-db"
        )
        assert code == 0 and output.startswith("Updated nvlink_info in db with the following nvlink-info:"), (
            output
        )
        session.expire_all()
        slots = set(await session.scalars(select(Gpu.slot_id).where(Gpu.machine_id == machine_id)))
        assert slots == {expected[0].slot_id}

        code, output = await _cli(cli_env, "admin", "machine", "nvlink-info", "show", "no-such-machine")
        assert code == 1 and "not found" in output
