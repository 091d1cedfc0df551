"""One reconcile pass over a domain against the in-process simulator: the fabric ends as desired, the
database tells the truth about it, and nothing is touched that is not nico's."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from prometheus_client import CollectorRegistry
from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, LogicalPartitionStatus, NvLinkInterfaceStatus
from nico.db.models import (
    FabricIntent,
    Gpu,
    Instance,
    LogicalPartition,
    Machine,
    NvlinkInterface,
    PhysicalPartition,
)
from nico.fabric.backend import DEFAULT_PARTITION_ID
from nico.reconciler.operations import CreatePartition, Operation
from nico.reconciler.planner import partition_name
from nico.services.nvlink_events import desired_state_changed
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place


def uids(machine: Machine, site: SimSite) -> set[int]:
    domain = site.fabric.domain(machine.chassis_serial or "")
    return {
        g.gpu_uid
        for g in domain.gpus.values()
        if g.chassis_serial == machine.chassis_serial and g.tray_index == machine.tray_index
    }


def partition_named(site: SimSite, domain: uuid.UUID, name: str) -> frozenset[int] | None:
    found = [p for p in site.fabric.partitions(domain) if p.name == name]
    return frozenset(found[0].gpu_uids) if found else None


def default_members(site: SimSite, domain: uuid.UUID) -> frozenset[int]:
    return site.fabric.members(domain)[DEFAULT_PARTITION_ID]


async def fresh(session: AsyncSession, model: type, ident: object) -> object:
    return await session.get(model, ident, populate_existing=True)


async def test_instance_with_a_partition_becomes_ready_with_domain_and_guid(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    machine = site.machines[d0][0]
    inst = await place(session, site, machine, dict.fromkeys(range(4), lp))
    gpus = uids(machine, site)

    results = await make_reconciler(backend).reconcile([d0])

    assert results[d0].status == "ok" and results[d0].operations == 2  # out of default, then create
    assert partition_named(site, d0, partition_name(lp.id)) == gpus
    assert not gpus & default_members(site, d0)
    instance = await fresh(session, Instance, inst.id)
    assert isinstance(instance, Instance)
    assert instance.status == InstanceStatus.READY
    assert instance.nvlink_applied_version == instance.nvlink_config_version
    bindings = list(
        await session.scalars(select(NvlinkInterface).where(NvlinkInterface.instance_id == inst.id))
    )
    assert {b.status for b in bindings} == {NvLinkInterfaceStatus.READY}
    assert {b.domain_uuid for b in bindings} == {d0}
    assert {b.gpu_uid for b in bindings} == gpus
    pp = await session.scalar(
        select(PhysicalPartition).where(PhysicalPartition.logical_partition_id == lp.id)
    )
    assert pp is not None and pp.domain_uuid == d0 and pp.name == partition_name(lp.id)
    observed = await session.scalars(select(Gpu.physical_partition_id).where(Gpu.machine_id == machine.id))
    assert set(observed) == {pp.id}
    intents = list(await session.scalars(select(FabricIntent.state)))
    assert sorted(intents) == ["completed", "completed"]


async def test_status_is_not_ready_when_the_version_moved_during_the_pass(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    """The tenant changes the config while the reconciler works: the stale observation must not
    mark the instance Ready."""
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    inst = await place(session, site, site.machines[d0][0], {0: lp})
    reconciler = make_reconciler(backend)

    async def tenant_changes_mind(op: Operation) -> None:
        if isinstance(op, CreatePartition):
            async with reconciler.engine.begin() as conn:
                await conn.execute(
                    update(Instance)
                    .where(Instance.id == inst.id)
                    .values(nvlink_config_version=Instance.nvlink_config_version + 1)
                )

    reconciler.after_call = tenant_changes_mind
    await reconciler.reconcile([d0])
    instance = await fresh(session, Instance, inst.id)
    assert isinstance(instance, Instance)
    assert instance.status == InstanceStatus.PENDING
    assert instance.nvlink_applied_version is None
    # The next pass confirms the (unchanged) membership for the new version.
    reconciler.after_call = None
    await reconciler.reconcile([d0])
    instance = await fresh(session, Instance, inst.id)
    assert isinstance(instance, Instance) and instance.status == InstanceStatus.READY


async def test_patch_moves_gpus_between_partitions_in_one_pass(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    a = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="a")
    b = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="b")
    first, second = site.machines[d0][0], site.machines[d0][1]
    i1 = await place(session, site, first, dict.fromkeys(range(4), a), name="one")
    await place(session, site, second, dict.fromkeys(range(4), b), name="two")
    reconciler = make_reconciler(backend)
    await reconciler.reconcile([d0])

    # PATCH: GPUs 0 and 1 of the first instance move from a to b (old rows Deleting, new Pending).
    await session.execute(
        update(NvlinkInterface).where(NvlinkInterface.instance_id == i1.id).values(status="Deleting")
    )
    for device, lp in ((0, b), (1, b), (2, a), (3, a)):
        session.add(
            NvlinkInterface(
                instance_id=i1.id, logical_partition_id=lp.id, site_id=site.nv.site.id, device_instance=device
            )
        )
    await session.execute(update(Instance).where(Instance.id == i1.id).values(status="Configuring"))
    await desired_state_changed(session, instance_ids=[i1.id])
    await session.commit()

    result = (await reconciler.reconcile([d0]))[d0]
    assert result.status == "ok" and result.operations == 2  # remove from a, add to b: one pass
    moved = {
        g.gpu_uid for g in site.fabric.gpus(d0) if g.tray_index == first.tray_index and g.device_id in (1, 2)
    }
    assert moved <= partition_named(site, d0, partition_name(b.id))  # type: ignore[operator]
    assert not moved & partition_named(site, d0, partition_name(a.id))  # type: ignore[operator]
    instance = await fresh(session, Instance, i1.id)
    assert isinstance(instance, Instance) and instance.status == InstanceStatus.READY
    rows = list(await session.scalars(select(NvlinkInterface).where(NvlinkInterface.instance_id == i1.id)))
    assert len(rows) == 4 and {r.status for r in rows} == {NvLinkInterfaceStatus.READY}


async def test_deleting_an_instance_returns_its_gpus_to_the_default_partition(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    machine = site.machines[d0][0]
    inst = await place(session, site, machine, dict.fromkeys(range(4), lp))
    reconciler = make_reconciler(backend)
    await reconciler.reconcile([d0])

    await session.execute(update(Instance).where(Instance.id == inst.id).values(status="Terminating"))
    await desired_state_changed(session, instance_ids=[inst.id])
    await session.commit()
    result = (await reconciler.reconcile([d0]))[d0]

    assert result.status == "ok"
    assert uids(machine, site) <= default_members(site, d0)
    assert partition_named(site, d0, partition_name(lp.id)) is None  # emptied, so deleted
    assert await fresh(session, Instance, inst.id) is None
    freed = await fresh(session, Machine, machine.id)
    assert isinstance(freed, Machine) and freed.instance_id is None
    assert await session.scalar(select(func.count()).select_from(PhysicalPartition)) == 0


async def test_a_deleting_partition_vanishes_once_its_physical_partitions_are_gone(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0, d1 = site.domains
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    i0 = await place(session, site, site.machines[d0][0], {0: lp}, name="zero")
    i1 = await place(session, site, site.machines[d1][0], {0: lp}, name="one")
    reconciler = make_reconciler(backend)
    await reconciler.reconcile([d0, d1])
    assert await session.scalar(select(func.count()).select_from(PhysicalPartition)) == 2

    await session.execute(
        update(Instance).where(Instance.id.in_([i0.id, i1.id])).values(status="Terminating")
    )
    await desired_state_changed(session, instance_ids=[i0.id, i1.id])
    await session.commit()
    await reconciler.reconcile([d0])
    assert await fresh(session, LogicalPartition, lp.id) is not None  # not yet: d1 still holds one

    await session.execute(
        update(LogicalPartition)
        .where(LogicalPartition.id == lp.id)
        .values(status=LogicalPartitionStatus.DELETING)
    )
    await session.commit()
    await reconciler.reconcile([d1])
    assert await fresh(session, LogicalPartition, lp.id) is None
    assert partition_named(site, d1, partition_name(lp.id)) is None


async def test_gpus_of_machines_nico_does_not_know_are_never_touched(
    session: AsyncSession, make_reconciler: MakeReconciler
) -> None:
    from nico.sim.fabric import SimFabric
    from tests.support.sim_site import seed

    fabric = SimFabric(racks=1, seed=3)
    partial = await seed(session, fabric, machines_per_domain=4)  # trays 4..17 are not nico's
    d0 = partial.domains[0]
    foreign = [g.gpu_uid for g in fabric.gpus(d0) if g.tray_index >= 10]
    fabric.remove_gpus(d0, DEFAULT_PARTITION_ID, foreign[:8])
    fabric.create_partition(d0, "someone-else", foreign[:8])
    before = {g: fabric.partition_of(g) for g in foreign}
    lp = await f.logical_partition(session, partial.nv.tenant, partial.nv.site)
    await place(session, partial, partial.machines[d0][0], {0: lp, 1: lp})

    result = (await make_reconciler(InProcessBackend(fabric)).reconcile([d0]))[d0]

    assert result.status == "ok"
    assert {g: fabric.partition_of(g) for g in foreign} == before
    assert partition_named(partial, d0, "someone-else") == frozenset(foreign[:8])


async def test_an_unreachable_domain_does_not_stop_the_others_and_is_reported(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0, d1 = site.domains
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    i0 = await place(session, site, site.machines[d0][0], {0: lp}, name="zero")
    i1 = await place(session, site, site.machines[d1][0], {0: lp}, name="one")
    site.fabric.set_faults(d1, hang=True)
    reconciler = make_reconciler(backend, fabric_call_timeout="300ms")

    results = await reconciler.reconcile([d0, d1])

    assert results[d0].status == "ok" and results[d1].status == "error"
    ready = await fresh(session, Instance, i0.id)
    pending = await fresh(session, Instance, i1.id)
    assert isinstance(ready, Instance) and ready.status == InstanceStatus.READY
    assert isinstance(pending, Instance) and pending.status == InstanceStatus.PENDING
    error = await session.scalar(text("SELECT last_error FROM nvlink_domain WHERE uuid = :d"), {"d": d1})
    assert error and "NMX-C" in error
    assert reconciler.metrics.snapshot.errors[d1].startswith("Failed to reach NMX-C")
    assert d1 in reconciler.due  # retried with backoff

    site.fabric.set_faults(d1, hang=False)
    assert (await reconciler.reconcile([d1]))[d1].status == "ok"
    back = await fresh(session, Instance, i1.id)
    assert isinstance(back, Instance) and back.status == InstanceStatus.READY
    assert d1 not in reconciler.metrics.snapshot.errors


async def test_crash_between_fabric_call_and_write_back_leaves_no_ghost_or_duplicate(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    inst = await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp))
    doomed = make_reconciler(backend)

    class Crash(BaseException):
        pass

    async def die_after_create(op: Operation) -> None:
        if isinstance(op, CreatePartition):
            raise Crash

    doomed.after_call = die_after_create
    with contextlib.suppress(Crash):
        await doomed.reconcile_domain(d0)
    # The partition exists on the fabric; the database never heard of it, except through the intent.
    assert partition_named(site, d0, partition_name(lp.id)) is not None
    assert await session.scalar(select(func.count()).select_from(PhysicalPartition)) == 0

    successor = make_reconciler(backend)
    result = (await successor.reconcile([d0]))[d0]

    assert result.status == "ok" and result.operations == 0  # adopted, not torn down and rebuilt
    named = [p for p in site.fabric.partitions(d0) if p.name == partition_name(lp.id)]
    assert len(named) == 1
    pp = await session.scalar(
        select(PhysicalPartition).where(PhysicalPartition.logical_partition_id == lp.id)
    )
    assert pp is not None and pp.nmx_partition_id == named[0].partition_id
    instance = await fresh(session, Instance, inst.id)
    assert isinstance(instance, Instance) and instance.status == InstanceStatus.READY
    states = sorted(await session.scalars(select(FabricIntent.state)))
    assert "pending" not in states and "adopted" in states


async def test_two_reconcilers_at_once_do_not_duplicate_operations(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    for domain in site.domains:
        for machine in site.machines[domain][:3]:
            await place(session, site, machine, dict.fromkeys(range(4), lp))
    registry_a, registry_b = CollectorRegistry(), CollectorRegistry()
    a = make_reconciler(backend, registry=registry_a)
    b = make_reconciler(backend, registry=registry_b)
    site.fabric.set_faults(site.domains[0], latency=0.02)  # keep the lock held while the other tries

    await asyncio.gather(a.reconcile(site.domains), b.reconcile(site.domains), a.full_pass(), b.full_pass())
    for _ in range(3):  # the losers retry after the winners release the locks
        await asyncio.gather(a.reconcile(site.domains), b.reconcile(site.domains))

    def total(registry: CollectorRegistry) -> float:
        value = 0.0
        for family in registry.collect():
            if family.name.endswith("changes_applied"):
                value += sum(s.value for s in family.samples if s.name.endswith("_total"))
        return value

    # Per domain: take 12 GPUs out of the default partition, create the LP's partition — 2 each.
    assert total(registry_a) + total(registry_b) == 2 * len(site.domains)
    for domain in site.domains:
        assert len([p for p in site.fabric.partitions(domain) if p.name == partition_name(lp.id)]) == 1
    assert await session.scalar(select(func.count()).select_from(PhysicalPartition)) == len(site.domains)
    statuses = set(await session.scalars(select(Instance.status)))
    assert statuses == {InstanceStatus.READY}


async def test_drift_is_repaired_by_the_full_pass(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    machine = site.machines[d0][0]
    await place(session, site, machine, dict.fromkeys(range(4), lp))
    reconciler = make_reconciler(backend)
    await reconciler.reconcile([d0])
    pid = next(p.partition_id for p in site.fabric.partitions(d0) if p.name == partition_name(lp.id))
    site.fabric.delete_partition(d0, pid)  # behind nico's back: the GPUs are now in no partition

    report = await reconciler.full_pass()

    assert report.results[d0].status == "ok"
    assert partition_named(site, d0, partition_name(lp.id)) == uids(machine, site)
    assert reconciler.metrics.snapshot.stale_partitions_deleted == 1
    assert await session.scalar(select(func.count()).select_from(PhysicalPartition)) == 1
    # A second full pass finds nothing to do and writes nothing.
    again = await reconciler.full_pass()
    assert again.results == {}


async def test_quick_full_passes_skip_quiet_domains_and_still_catch_drift(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    machine = site.machines[d0][0]
    await place(session, site, machine, dict.fromkeys(range(4), lp))
    reconciler = make_reconciler(backend)
    first = await reconciler.full_pass()
    assert first.deep and set(first.results) == set(site.domains)  # the first pass sees everything

    quiet = await reconciler.full_pass()
    assert not quiet.deep and quiet.results == {}  # settled domains with unchanged fabric are skipped

    pid = next(p.partition_id for p in site.fabric.partitions(d0) if p.name == partition_name(lp.id))
    gpu = sorted(uids(machine, site))[0]
    site.fabric.remove_gpus(d0, pid, [gpu])  # behind nico's back
    repaired = await reconciler.full_pass()
    assert not repaired.deep and set(repaired.results) == {d0}
    assert gpu in partition_named(site, d0, partition_name(lp.id))  # type: ignore[operator]
    assert (await reconciler.full_pass()).results == {}


async def test_a_stop_during_a_pass_lets_it_finish_and_leaves_no_open_intent(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    """A rolling restart stops the reconciler (SIGTERM -> cancellation) while a pass is between two
    fabric calls: the pass finishes within the grace, so no intent is left for a later pass."""
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    inst = await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp))
    reconciler = make_reconciler(backend)
    running = asyncio.create_task(reconciler.run())
    calls: list[Operation] = []

    async def stop_after_the_first_call(op: Operation) -> None:
        calls.append(op)
        if len(calls) == 1:
            running.cancel()  # what `nico reconcile` does on SIGTERM

    reconciler.after_call = stop_after_the_first_call
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(running, timeout=30.0)
    assert len(calls) == 2  # out of the default partition, then the create
    assert partition_named(site, d0, partition_name(lp.id)) == uids(site.machines[d0][0], site)
    states = sorted(await session.scalars(select(FabricIntent.state)))
    assert states == ["completed", "completed"]
    instance = await fresh(session, Instance, inst.id)
    assert isinstance(instance, Instance) and instance.status == InstanceStatus.READY
