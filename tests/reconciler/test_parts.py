"""The full pass passes the domains that have work a part at a time (one lock statement, one load,
one intents transaction, one write-back for the part), over NMX-C simulators on loopback gRPC: a part
converges on the fabric; a domain whose manager fails is recorded as failed while the others' write-
back lands; a domain another reconciler holds is left to it and passed later; a part stopped between
its intents and its write-back leaves intents the next pass adopts; a tenant's change on a domain of a
part under way waits for the part and then converges."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import psycopg
import pytest
import pytest_asyncio
from sqlalchemy import func, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.context import AppContext
from nico.config import NvLinkConfig
from nico.db.enums import InstanceStatus, LogicalPartitionStatus
from nico.db.models import FabricIntent, Instance, LogicalPartition, PhysicalPartition
from nico.fabric.backend import DomainTarget, FabricPartition
from nico.fabric.nmxc.client import NmxcBackend
from nico.reconciler.domain_pass import lock_key
from nico.reconciler.operations import CreatePartition, Operation, op_gpus
from nico.reconciler.pass_context import DomainResult
from nico.reconciler.planner import partition_name
from nico.reconciler.writeback import finish_deleted_partitions
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place, seed
from tests.support.waiting import stop_within, wait_for

RACKS = 4  # one part: PART_SIZE is larger


@dataclass
class Site:
    sim: SimSite
    backend: NmxcBackend
    lp: LogicalPartition
    instances: dict[uuid.UUID, Instance]  # domain -> its instance (tray 0, four GPUs bound)

    @property
    def domains(self) -> list[uuid.UUID]:
        return self.sim.domains


@pytest_asyncio.fixture
async def part_site(session: AsyncSession) -> AsyncIterator[Site]:
    """Four racks behind NMX-C simulators on loopback, an instance to place on each domain."""
    fabric = SimFabric(racks=RACKS, seed=23)
    async with NmxcSimulator(fabric) as nmxc:
        sim = await seed(session, fabric, nmxc.endpoints)
        lp = await f.logical_partition(session, sim.nv.tenant, sim.nv.site)
        instances = {
            d: await place(session, sim, sim.machines[d][0], dict.fromkeys(range(4), lp)) for d in sim.domains
        }
        backend = NmxcBackend(NvLinkConfig(backend="nmxc", fabric_call_timeout="2s"))
        try:
            yield Site(sim, backend, lp, instances)
        finally:
            await backend.close()


def gpus_of(site: Site, domain: uuid.UUID, tray: int = 0) -> frozenset[int]:
    """The GPU GUIDs of a tray as the fabric has them."""
    machine = site.sim.machines[domain][tray]
    return frozenset(
        g.gpu_uid
        for g in site.sim.fabric.domain(domain).gpus.values()
        if g.chassis_serial == machine.chassis_serial and g.tray_index == machine.tray_index
    )


def tenant_members(site: Site, domain: uuid.UUID) -> list[frozenset[int]]:
    """The members of each partition of the tenant's logical partition on the domain's fabric."""
    name = partition_name(site.lp.id)
    return [frozenset(p.gpu_uids) for p in site.sim.fabric.partitions(domain) if p.name == name]


async def status(session: AsyncSession, instance_id: uuid.UUID) -> InstanceStatus:
    found = await session.get(Instance, instance_id, populate_existing=True)
    assert found is not None
    return InstanceStatus(found.status)


async def converged(session: AsyncSession, site: Site, domain: uuid.UUID) -> None:
    """The domain's instance is Ready, its GPUs in one tenant partition on the fabric, that partition
    recorded with the fabric's id."""
    (members,) = tenant_members(site, domain)
    assert members == gpus_of(site, domain)
    assert await status(session, site.instances[domain].id) == InstanceStatus.READY
    (fabric_id,) = [
        p.partition_id for p in site.sim.fabric.partitions(domain) if p.name == partition_name(site.lp.id)
    ]
    recorded = (
        await session.execute(
            select(PhysicalPartition.id, PhysicalPartition.nmx_partition_id).where(
                PhysicalPartition.domain_uuid == domain
            )
        )
    ).one()
    assert recorded.nmx_partition_id == fabric_id
    # Each GPU's observation is the fabric's, its partition's record found by the domain and name.
    rows = await session.execute(
        text("SELECT gpu_uid, physical_partition_id, nmx_partition_id FROM gpu WHERE gpu_uid = ANY(:u)"),
        {"u": sorted(members)},
    )
    assert {(int(u), pp, pid) for u, pp, pid in rows} == {(u, recorded.id, fabric_id) for u in members}
    settled = await session.scalar(text("SELECT settled FROM nvlink_domain WHERE uuid = :d"), {"d": domain})
    assert settled is True


async def domain_error(session: AsyncSession, domain: uuid.UUID) -> tuple[str | None, int]:
    row = (
        await session.execute(
            text("SELECT last_error, consecutive_failures FROM nvlink_domain WHERE uuid = :d"), {"d": domain}
        )
    ).one()
    return row[0], int(row[1])


async def test_a_part_of_domains_converges_on_the_fabric(
    session: AsyncSession, part_site: Site, make_reconciler: MakeReconciler
) -> None:
    reconciler = make_reconciler(part_site.backend)
    report = await reconciler.full_pass()

    assert sorted(report.results, key=str) == sorted(part_site.domains, key=str)
    assert {r.status for r in report.results.values()} == {"ok"}
    assert all(r.operations > 0 for r in report.results.values())
    for domain in part_site.domains:
        await converged(session, part_site, domain)
        # Its changes' events are expected (no pass for them), its gauges read with the write-back.
        assert reconciler.metrics.snapshot.planned[domain] == {
            "create": 0,
            "delete": 0,
            "add": 0,
            "remove": 0,
        }
        # Its health was read with the pass: the multicast budget the fabric reports is stored.
        budget = await session.scalar(
            text("SELECT max_multicast_groups FROM nvlink_domain WHERE uuid = :d"), {"d": domain}
        )
        assert budget == part_site.sim.fabric.domain(domain).max_multicast_groups
    intents = list(await session.scalars(select(FabricIntent.state)))
    assert intents and set(intents) == {"completed"}
    # Settled: the next (routine) full pass finds nothing to do anywhere.
    again = await reconciler.full_pass()
    assert not again.results


async def test_a_part_stores_its_domains_gpu_health_machine_holds_and_partition_health(
    session: AsyncSession, part_site: Site, make_reconciler: MakeReconciler
) -> None:
    """A GPU of each domain's instance unhealthy on the fabric: after a part's pass every such GPU's
    health is stored, its machine held out of placement and its partition degraded."""
    sick = {d: min(gpus_of(part_site, d)) for d in part_site.domains}
    for uid in sick.values():
        part_site.sim.fabric.set_gpu_health(uid, "NO_NVLINK")
    reconciler = make_reconciler(part_site.backend)
    report = await reconciler.full_pass()
    assert {r.status for r in report.results.values()} == {"ok"}

    for domain, uid in sick.items():
        row = (
            await session.execute(
                text(
                    "SELECT g.health, m.held_unhealthy, p.health FROM gpu g "
                    "JOIN machine m ON m.id = g.machine_id "
                    "JOIN physical_partition p ON p.id = g.physical_partition_id WHERE g.gpu_uid = :u"
                ),
                {"u": uid},
            )
        ).one()
        assert tuple(row) == ("NO_NVLINK", True, "DEGRADED"), domain
    others = await session.scalar(
        text("SELECT count(*) FROM machine WHERE held_unhealthy AND NOT id = ANY(:ids)"),
        {"ids": [part_site.sim.machines[d][0].id for d in part_site.domains]},
    )
    assert others == 0


async def test_a_domain_whose_manager_fails_is_recorded_failed_and_the_others_land(
    session: AsyncSession, part_site: Site, make_reconciler: MakeReconciler
) -> None:
    bad, *good = part_site.domains
    reconciler = make_reconciler(part_site.backend)
    calls = 0

    async def down_after_its_first_call(op: Operation) -> None:
        nonlocal calls
        if set(op_gpus(op)) & gpus_of(part_site, bad):
            calls += 1
            part_site.sim.fabric.set_faults(bad, down=True)  # its read-back fails, its calls are made

    reconciler.after_call = down_after_its_first_call
    report = await reconciler.full_pass()

    assert calls >= 1
    failed = report.results[bad]
    assert failed.status == "error" and failed.operations > 0 and "NMX-C" in (failed.error or "")
    error, failures = await domain_error(session, bad)
    assert error is not None and "Failed to reach NMX-C" in error and failures == 1
    assert await status(session, part_site.instances[bad].id) == InstanceStatus.PENDING
    for domain in good:
        assert report.results[domain].status == "ok"
        await converged(session, part_site, domain)
        assert await domain_error(session, domain) == (None, 0)
    assert bad in reconciler.due  # retried with backoff

    part_site.sim.fabric.set_faults(bad, down=False)
    reconciler.after_call = None
    assert (await reconciler.reconcile([bad]))[bad].status == "ok"
    await converged(session, part_site, bad)
    assert len(tenant_members(part_site, bad)) == 1  # what the failed pass made was adopted, not made again


async def test_a_domain_another_reconciler_holds_is_left_to_it_and_passed_later(
    session: AsyncSession, part_site: Site, make_reconciler: MakeReconciler, app_context: AppContext
) -> None:
    held, *others = part_site.domains
    reconciler = make_reconciler(part_site.backend)
    async with app_context.engine.connect() as other:
        assert await other.scalar(text("SELECT pg_try_advisory_lock(:k)"), {"k": lock_key(held)})
        report = await reconciler.full_pass()
        assert report.results[held].status == "busy"
        assert not tenant_members(part_site, held), "a domain another reconciler holds was changed"
        assert await status(session, part_site.instances[held].id) == InstanceStatus.PENDING
        for domain in others:
            await converged(session, part_site, domain)
        assert held in reconciler.due  # looked at again soon
        await other.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock_key(held)})
    results = await reconciler.reconcile([d for d, at in reconciler.due.items()])
    assert results[held].status == "ok"
    await converged(session, part_site, held)


async def test_a_part_stopped_after_its_intents_leaves_intents_the_next_pass_adopts(
    session: AsyncSession, part_site: Site, make_reconciler: MakeReconciler
) -> None:
    doomed = make_reconciler(part_site.backend)
    running: asyncio.Task[object] | None = None

    async def stop_after_a_create(op: Operation) -> None:
        assert running is not None
        if isinstance(op, CreatePartition):
            running.cancel()  # a stop (or a crash) between the calls and the write-back

    doomed.after_call = stop_after_a_create
    running = asyncio.create_task(doomed.full_pass())
    await asyncio.gather(running, return_exceptions=True)
    assert running.cancelled()
    # Every intent of the part was committed before its first call; nothing was written back.
    pending = list(await session.scalars(select(FabricIntent.state)))
    assert pending and set(pending) == {"pending"}
    assert set(await session.scalars(select(FabricIntent.domain_uuid))) == set(part_site.domains)
    assert await session.scalar(select(func.count()).select_from(PhysicalPartition)) == 0
    made = [d for d in part_site.domains if tenant_members(part_site, d)]
    assert made, "no partition was made before the stop"

    successor = make_reconciler(part_site.backend)
    report = await successor.full_pass()
    assert {r.status for r in report.results.values()} == {"ok"}
    for domain in part_site.domains:
        await converged(session, part_site, domain)
        assert len(tenant_members(part_site, domain)) == 1  # adopted, not made twice
    states = list(await session.scalars(select(FabricIntent.state)))
    assert "pending" not in states and "adopted" in states


class HeldCreate(NmxcBackend):
    """Creating a partition on one domain waits until released: a part that cannot end before."""

    def __init__(self, config: NvLinkConfig, held: uuid.UUID) -> None:
        super().__init__(config)
        self.held, self.release, self.waiting = held, asyncio.Event(), asyncio.Event()

    async def create_partition(
        self, target: DomainTarget, name: str, gpu_uids: frozenset[int], **options: str | int | None
    ) -> FabricPartition:
        if target.domain_uuid == self.held:
            self.waiting.set()
            await self.release.wait()
        return await super().create_partition(target, name, gpu_uids, **options)  # type: ignore[arg-type]


async def test_a_tenants_change_on_a_domain_of_a_part_under_way_waits_and_converges(
    session: AsyncSession, part_site: Site, make_reconciler: MakeReconciler
) -> None:
    slow, tenant, *_ = part_site.domains
    backend = HeldCreate(NvLinkConfig(backend="nmxc", fabric_call_timeout="10s"), slow)
    reconciler = make_reconciler(backend, fabric_call_timeout="10s", monitor_run_interval="1h")
    loop_passes: list[uuid.UUID] = []
    passing = reconciler.reconcile_domain

    async def counted(domain: uuid.UUID) -> DomainResult:
        loop_passes.append(domain)
        return await passing(domain)

    setattr(reconciler, "reconcile_domain", counted)  # noqa: B010
    task = asyncio.create_task(reconciler.run())
    try:
        await asyncio.wait_for(backend.waiting.wait(), 10)  # the part holds both domains now
        await wait_for(lambda: tenant in reconciler._full_domains, within=5, what="the part")
        late = await place(
            session, part_site.sim, part_site.sim.machines[tenant][1], dict.fromkeys(range(4), part_site.lp)
        )

        def left_waiting() -> bool:
            # The loop went through the request (it clears its wake-up before it waits again) and
            # left the domain due: a loop that passed it beside the part would have taken it off.
            return tenant in reconciler.due and not reconciler.wake.is_set()

        await wait_for(left_waiting, within=5, what="the tenant's change heard and left waiting")
        assert tenant not in loop_passes, "a pass of a domain the part holds started beside it"
        assert await status(session, late.id) == InstanceStatus.PENDING
        backend.release.set()

        async def late_ready() -> bool:
            return await status(session, late.id) == InstanceStatus.READY

        await wait_for(late_ready, within=10, what="the tenant's instance Ready")
        assert loop_passes.count(tenant) >= 1
        assert gpus_of(part_site, tenant, 1) <= next(iter(tenant_members(part_site, tenant)))
        await converged(session, part_site, slow)
    finally:
        backend.release.set()
        task.cancel()
        await stop_within("the reconciler", asyncio.gather(task, return_exceptions=True))
        await backend.close()


async def test_a_part_passes_with_one_domain_at_a_time_allowed(
    session: AsyncSession, part_site: Site, make_reconciler: MakeReconciler
) -> None:
    """``reconcile_concurrency`` 1: the part holds the full pass's one slot while its domains' steps
    go one at a time on a limit of their own (on the same slot, they would wait for the part forever)."""
    reconciler = make_reconciler(part_site.backend, reconcile_concurrency=1)
    report = await asyncio.wait_for(reconciler.full_pass(), 30)
    assert {r.status for r in report.results.values()} == {"ok"}
    for domain in part_site.domains:
        await converged(session, part_site, domain)


async def test_a_parts_write_back_that_drops_no_record_locks_no_partition_being_deleted(
    session: AsyncSession, part_site: Site, make_reconciler: MakeReconciler, app_context: AppContext
) -> None:
    """A logical partition being deleted with no physical partition left is finished by a write-back
    that dropped one of its records (or by the full pass's end), under its row lock. A part's write-
    back that dropped none leaves it alone: each one (every part of every reconciler) locked every such
    partition of the site, so the write-backs queued behind each other on its row, holding their
    domains, and two locking several of them in different orders could deadlock."""
    nv = part_site.sim.nv
    deleting = await f.logical_partition(session, nv.tenant, nv.site, name="going", status="Deleting")
    await session.commit()
    reconciler = make_reconciler(part_site.backend)
    async with app_context.engine.connect() as other:  # as another write-back finishing it would
        await other.execute(
            text("SELECT 1 FROM logical_partition WHERE id = :i FOR UPDATE"), {"i": deleting.id}
        )
        passing = reconciler.reconcile(part_site.domains, figures=False, full=True)
        try:
            results = await asyncio.wait_for(passing, timeout=10)  # a deadline: it waits for the lock
        except TimeoutError:
            raise AssertionError(
                "the part's write-back waited for a partition it dropped nothing of"
            ) from None
        finally:
            await other.rollback()
    assert {r.status for r in results.values()} == {"ok"}
    for domain in part_site.domains:
        await converged(session, part_site, domain)
    await reconciler.full_pass()  # its end finishes the partition (no record of it was ever dropped)
    assert await session.get(LogicalPartition, deleting.id, populate_existing=True) is None


async def test_partitions_being_deleted_are_finished_in_id_order(
    session: AsyncSession, part_site: Site, app_context: AppContext
) -> None:
    """Two write-backs (two reconcilers') that finish some of the same logical partitions being deleted
    lock them in one order, their ids', whatever order the rows are stored in: in two orders they could
    each hold one the other waits for (a deadlock, one write-back rolled back). Stored larger id first,
    locked elsewhere: the finishing write-back holds the smaller one while it waits for the larger, read
    in whatever order the database's plan gives."""
    nv = part_site.sim.nv
    larger, smaller = uuid.UUID(int=(1 << 122) - 1), uuid.UUID(int=1)
    for lp_id, name in ((larger, "going-2"), (smaller, "going-1")):  # stored in this order
        deleting = LogicalPartitionStatus.DELETING
        session.add(
            LogicalPartition(id=lp_id, tenant_id=nv.tenant.id, site_id=nv.site.id, name=name, status=deleting)
        )
        await session.flush()
    await session.commit()
    async with app_context.engine.connect() as holder, app_context.engine.connect() as looker:
        await holder.execute(text("SELECT 1 FROM logical_partition WHERE id = :i FOR UPDATE"), {"i": larger})
        finishing = asyncio.create_task(finish(app_context))

        async def waits_for_a_lock() -> bool:
            found = await looker.scalar(
                text(  # this database's (a shared server holds other workers' waits)
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
            )
            await looker.rollback()
            return bool(found)

        try:
            await wait_for(waits_for_a_lock, within=10, what="the write-back waiting for the larger id")
            # The smaller one is the write-back's already (deleted, not committed): not to be had now.
            with pytest.raises(DBAPIError) as held:
                await looker.execute(
                    text("SELECT 1 FROM logical_partition WHERE id = :i FOR UPDATE NOWAIT"), {"i": smaller}
                )
            assert isinstance(held.value.orig, psycopg.errors.LockNotAvailable)
            await looker.rollback()
        finally:
            await holder.rollback()
            await stop_within("the finishing write-back", finishing)
    assert await finishing == 2


async def finish(app_context: AppContext) -> int:
    """The logical partitions being deleted with nothing left finished, as a write-back does, read
    without indexes (a site with many being deleted): in the order stored, unless the statement asks
    for one (the partial index on them reads them in id order)."""
    async with AsyncSession(app_context.engine, expire_on_commit=False) as session:
        for setting in ("enable_indexscan", "enable_indexonlyscan", "enable_bitmapscan"):
            await session.execute(text(f"SET LOCAL {setting} = off"))
        removed = await finish_deleted_partitions(session)
        await session.commit()
        return removed
