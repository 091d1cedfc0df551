"""A compute tray swapped under nico (new GPU GUIDs at a machine's place) is found by the
reconciler without any command: the machine's GPUs are recorded anew, the new GPUs go where the
machine's instance wants them, and its interfaces are Ready again, on the fabric as in the rows."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, NvLinkInterfaceStatus
from nico.db.models import FeedEvent, Gpu, Instance, Machine, NvlinkInterface, StatusDetail
from nico.inventory.location import TRAY_SWAPPED
from nico.reconciler.planner import partition_name
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place
from tests.support.waiting import wait_for


async def gpus_of(session: AsyncSession, machine: Machine) -> set[int]:
    rows = await session.scalars(
        select(Gpu.gpu_uid).where(Gpu.machine_id == machine.id).execution_options(populate_existing=True)
    )
    return set(rows)


def partition_members(site: SimSite, machine: Machine, name: str) -> frozenset[int]:
    found = [p for p in site.fabric.partitions(machine.chassis_serial or "") if p.name == name]
    return frozenset(found[0].gpu_uids) if found else frozenset()


async def test_a_swapped_tray_rejoins_its_instances_partition_at_the_next_deep_pass(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    machine, idle = site.machines[d0][0], site.machines[d0][1]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    inst = await place(session, site, machine, dict.fromkeys(range(4), lp))
    registry = CollectorRegistry()
    reconciler = make_reconciler(backend, registry=registry)
    await reconciler.reconcile([d0])
    before = await gpus_of(session, machine)
    assert partition_members(site, machine, partition_name(lp.id)) == before

    old, new = site.fabric.replace_tray(machine.chassis_serial or "", machine.tray_index or 0)
    site.fabric.replace_tray(idle.chassis_serial or "", idle.tray_index or 0)
    assert set(old) == before
    assert not partition_members(site, machine, partition_name(lp.id))  # the swap took them out

    report = await reconciler.full_pass()  # the first full pass is a deep one: it lists the GPUs
    assert report.deep
    assert await gpus_of(session, machine) == set(new)
    assert len(await gpus_of(session, idle)) == 4 and not (await gpus_of(session, idle)) & before
    assert partition_members(site, machine, partition_name(lp.id)) == set(new)
    instance = await session.get(Instance, inst.id, populate_existing=True)
    assert instance is not None and instance.status == InstanceStatus.READY
    bindings = list(
        await session.scalars(
            select(NvlinkInterface)
            .where(NvlinkInterface.instance_id == inst.id)
            .execution_options(populate_existing=True)
        )
    )
    assert {b.status for b in bindings} == {NvLinkInterfaceStatus.READY}
    assert {b.gpu_uid for b in bindings} == set(new)
    history = list(
        await session.scalars(select(StatusDetail.message).where(StatusDetail.instance_id == inst.id))
    )
    assert TRAY_SWAPPED in history
    kinds = list(
        await session.scalars(
            select(FeedEvent.kind)
            .where(FeedEvent.instance_id == inst.id)
            .order_by(FeedEvent.txid, FeedEvent.id)
        )
    )
    # One event per interface: the tenant's stream saw the four leave (Pending) and come back (Ready).
    assert kinds[-8:] == ["Pending"] * 4 + ["Ready"] * 4
    assert registry.get_sample_value("nico_nvlink_tray_replacements_total") == 2
    assert not (await reconciler.full_pass()).results  # nothing left to do


async def test_a_topology_change_is_enough_without_waiting_for_a_deep_pass(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    machine = site.machines[d0][2]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    inst = await place(session, site, machine, dict.fromkeys(range(4), lp))
    reconciler = make_reconciler(backend, monitor_run_interval="600s")
    running = asyncio.create_task(reconciler.run())
    try:

        async def ready() -> bool:
            row = await session.get(Instance, inst.id, populate_existing=True)
            await session.commit()
            return row is not None and row.status == InstanceStatus.READY

        await wait_for(ready, within=20.0, what="the instance Ready")
        _, new = site.fabric.replace_tray(machine.chassis_serial or "", machine.tray_index or 0)

        async def rejoined() -> bool:
            ok = await gpus_of(session, machine) == set(new) and await ready()
            return ok and partition_members(site, machine, partition_name(lp.id)) == set(new)

        await wait_for(rejoined, within=20.0, what="the new GPUs in the instance's partition")
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
