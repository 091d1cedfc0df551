"""The demo's provider data, seeded through the services: what a first run makes, that a second run
changes nothing (or only the endpoints whose ports moved), that more racks grow the allocation and
fewer are refused; and the fabric snapshot the runner keeps between runs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Machine, MachineCapability, NvlinkDomain, NvlinkNmxcEndpoint, Site
from nico.demo import seeding
from nico.demo.runner import FABRIC_SEED, DemoError, load_fabric, save_fabric
from nico.fabric.backend import DEFAULT_PARTITION_ID, DomainTarget
from nico.reconciler.discovery import group_machines
from nico.services.errors import ServiceError
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend


async def discovery(racks: int, base_port: int = 9601) -> seeding.Discovery:
    """What the NMX-C endpoints of a simulated site report (in process, one endpoint per rack)."""
    fabric = SimFabric(racks, seed=FABRIC_SEED)
    backend = InProcessBackend(fabric)
    machines: seeding.Machines = {}
    endpoints = {}
    for i, domain in enumerate(fabric.domains):
        machines.update(group_machines(domain, await backend.list_gpus(DomainTarget(domain, "sim"))))
        for serial in fabric.domain(domain).chassis_serials:
            endpoints[serial] = f"http://127.0.0.1:{base_port + i}"
    return seeding.Discovery(machines, endpoints)


async def run(session: AsyncSession, found: seeding.Discovery, org: str = "demo") -> seeding.SeededSite:
    seeded = await seeding.seed(session, tenant_org=org, discovery=found)
    await session.commit()
    return seeded


async def test_seeding_makes_the_site_and_a_second_run_changes_nothing_but_moved_endpoints(
    session: AsyncSession,
) -> None:
    first = await run(session, await discovery(2))
    assert (first.machines, first.domains, first.reserved, first.endpoints_changed) == (36, 2, 36, 2)
    assert len(first.registration.created) == 36 and first.registration.created[0] == "SIM-0001-t00"
    site = await session.get(Site, first.site_id)
    assert site is not None and site.nvlink_partition and site.name == seeding.SITE_NAME
    wanted = await session.scalar(
        select(MachineCapability).where(MachineCapability.instance_type_id == first.instance_type_id)
    )
    assert wanted is not None and (wanted.type, wanted.count, wanted.device_type) == ("GPU", 4, "NVLink")
    assert (
        await session.scalar(select(func.count()).where(Machine.instance_type_id == first.instance_type_id))
        == 36
    )

    again = await run(session, await discovery(2))
    assert (again.site_id, again.instance_type_id, again.reserved) == (
        first.site_id,
        first.instance_type_id,
        36,
    )
    assert again.registration.created == again.registration.updated == []
    assert len(again.registration.unchanged) == 36 and again.endpoints_changed == 0

    moved = await run(session, await discovery(2, base_port=40001))
    assert moved.endpoints_changed == 2 and moved.registration.created == []
    rows = await session.scalars(select(NvlinkNmxcEndpoint).order_by(NvlinkNmxcEndpoint.chassis_serial))
    assert [r.endpoint for r in rows] == ["http://127.0.0.1:40001", "http://127.0.0.1:40002"]


async def test_more_racks_grow_the_allocation_fewer_are_refused_and_other_orgs_get_what_is_free(
    session: AsyncSession,
) -> None:
    await run(session, await discovery(1))
    grown = await run(session, await discovery(3))
    assert (grown.reserved, len(grown.registration.created), grown.domains) == (54, 36, 3)
    assert await session.scalar(select(func.count()).select_from(NvlinkDomain)) == 3
    with pytest.raises(ServiceError) as refused:
        await seeding.seed(session, tenant_org="demo", discovery=await discovery(2))
    assert refused.value.status == 409 and "--racks 3" in refused.value.message
    await session.rollback()
    other = await run(session, await discovery(3), org="someone-else")
    assert other.reserved == 0  # every machine is already the demo org's


async def test_the_runner_keeps_the_fabric_between_runs(tmp_path: Path) -> None:
    console = Console(file=io.StringIO())
    path = tmp_path / "demo-fabric-nmxc.json"
    fresh = load_fabric(path, 2, console)
    uids = sorted(fresh.domain("SIM-0001").gpus)[:4]
    fresh.remove_gpus("SIM-0001", DEFAULT_PARTITION_ID, uids)
    fresh.create_partition("SIM-0001", "nico-lp", uids)
    save_fabric(path, fresh)
    assert not path.with_suffix(".json.partial").exists()

    same = load_fabric(path, 2, console)
    assert same.members("SIM-0001") == fresh.members("SIM-0001")
    grown = load_fabric(path, 3, console)
    assert grown.members("SIM-0001") == fresh.members("SIM-0001") and len(grown.domains) == 3
    with pytest.raises(DemoError, match="--racks 2"):
        load_fabric(path, 1, console)
    path.write_text("{not json")
    assert load_fabric(path, 2, console).members("SIM-0001")[DEFAULT_PARTITION_ID] == frozenset(
        fresh.domain("SIM-0001").gpus
    )
    assert "ignoring" in console.file.getvalue()  # type: ignore[attr-defined]
