"""The fabric call pattern under load (issue 15): the last read-back stands in for the list before a
change, paired moves run as waves (additions at once, each right after the removal feeding it), the
echoes of a pass's own calls bring no pass, health is read beside the pass, and NMX-M credentials
stored while the reconciler runs are used from the next pass."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.context import AppContext
from nico.db.enums import InstanceStatus
from nico.db.models import FabricIntent, Gpu, Instance
from nico.fabric.backend import DEFAULT_PARTITION_ID, DomainTarget, FabricGpu, FabricPartition, PartitionEvent
from nico.fabric.nmxm.client import NmxmBackend
from nico.reconciler import state as statemod
from nico.reconciler.domain_pass import lock_key
from nico.reconciler.planner import partition_name
from nico.services import fabric_registry
from nico.sim.inprocess import InProcessBackend
from nico.sim.nmxm_app import NmxmSimulator
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.out_of_partition import OutJournal
from tests.support.sim_site import SimSite, place
from tests.support.waiting import wait_for


class Counting(InProcessBackend):
    """The in-process backend, counting listings and the most calls in flight at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listings = 0
        self.in_flight = 0
        self.most_in_flight = 0

    async def list_partitions(self, target: DomainTarget) -> list[FabricPartition]:
        self.listings += 1
        return await super().list_partitions(target)

    async def create_partition(
        self, target: DomainTarget, name: str, gpu_uids: frozenset[int], **kw: Any
    ) -> Any:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)  # let every other addition of the pass start
            return await super().create_partition(target, name, gpu_uids, **kw)
        finally:
            self.in_flight -= 1


async def status_of(session: AsyncSession, instance_id: uuid.UUID) -> str:
    found = await session.get(Instance, instance_id, populate_existing=True)
    assert found is not None
    return str(found.status)


async def test_a_fresh_read_back_replaces_the_list_before_a_change(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler
) -> None:
    backend = Counting(site.fabric, call_timeout=1.0)
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    reconciler = make_reconciler(backend)
    first = await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp), name="one")
    await reconciler.reconcile([d0])
    assert await status_of(session, first.id) == InstanceStatus.READY
    second = await place(session, site, site.machines[d0][1], dict.fromkeys(range(4), lp), name="two")
    backend.listings = 0

    await reconciler.reconcile([d0])

    assert backend.listings == 1  # the read-back after the change, no listing before it
    assert await status_of(session, second.id) == InstanceStatus.READY
    await backend.close()


async def test_a_stale_read_back_costs_a_pass_never_a_false_ready(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler
) -> None:
    backend = Counting(site.fabric, call_timeout=1.0)
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    reconciler = make_reconciler(backend)
    await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp), name="one")
    await reconciler.reconcile([d0])
    # Behind nico's back (no partition event from the in-process fabric): the partition goes.
    (made,) = [p for p in site.fabric.partitions(d0) if p.name == partition_name(lp.id)]
    site.fabric.delete_partition(d0, made.partition_id)
    second = await place(session, site, site.machines[d0][1], dict.fromkeys(range(4), lp), name="two")

    def held() -> frozenset[int]:
        found = {p.name: p.gpu_uids for p in site.fabric.partitions(d0)}
        return frozenset(found.get(partition_name(lp.id), frozenset()))

    await reconciler.reconcile([d0])  # planned from a read-back the fabric no longer matches

    if await status_of(session, second.id) == InstanceStatus.READY:  # only if the fabric shows it
        assert len(held()) == 8
    await reconciler.reconcile([d0])  # lists afresh, recreates
    assert await status_of(session, second.id) == InstanceStatus.READY
    assert len(held()) == 8
    await backend.close()


async def test_additions_no_removal_feeds_run_at_once(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler
) -> None:
    """Additions whose GPUs are in no partition (a pass cut short after their removal from the default
    left them there) run at once. (Additions that a removal feeds run right after it, the pairs of a
    pass at once, so that no GPU is out of every partition for more than one operation: the next
    test.)"""
    backend = Counting(site.fabric, call_timeout=1.0)
    d0 = site.domains[0]
    instances = []
    for n in range(3):
        lp = await f.logical_partition(session, site.nv.tenant, site.nv.site, name=f"lp{n}")
        instances.append(await place(session, site, site.machines[d0][n], dict.fromkeys(range(4), lp)))
    ids = [m.id for m in site.machines[d0][:3]]
    uids = [
        int(u) for u in (await session.execute(select(Gpu.gpu_uid).where(Gpu.machine_id.in_(ids)))).scalars()
    ]
    assert len(uids) == 12
    site.fabric.remove_gpus(d0, DEFAULT_PARTITION_ID, uids)

    result = (await make_reconciler(backend).reconcile([d0]))[d0]

    assert result.status == "ok"
    assert backend.most_in_flight == 3
    for instance in instances:
        assert await status_of(session, instance.id) == InstanceStatus.READY
    await backend.close()


async def test_gpus_leaving_the_default_are_out_of_every_partition_for_one_operation(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Domain mode pairs each removal with the addition it feeds (issue 12, #6644), and the executor
    makes the pairs of one pass as a wave: three instances placed from the default partition leave it
    in one removal, then their three partitions are created at once. Each tray is out of every
    partition only while its own create is made: one operation."""
    backend = Counting(site.fabric, call_timeout=1.0)
    d0 = site.domains[0]
    instances = []
    for n in range(3):
        lp = await f.logical_partition(session, site.nv.tenant, site.nv.site, name=f"lp{n}")
        instances.append(await place(session, site, site.machines[d0][n], dict.fromkeys(range(4), lp)))
    journal = OutJournal(site.fabric, backend, monkeypatch)

    result = (await make_reconciler(backend).reconcile([d0]))[d0]

    assert result.status == "ok"
    assert journal.calls == 4 and journal.longest_out() == 1, journal.events
    assert backend.most_in_flight == 3
    for instance in instances:
        assert await status_of(session, instance.id) == InstanceStatus.READY
    await backend.close()


async def test_the_journal_counts_calls_made_one_after_another_not_calls_made_at_once(
    site: SimSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measure above can fail: two trays leaving the default one by one and then created one by
    one leave the first out while the second's removal is made too (two operations); leaving in one
    removal and created at once, each is out for one."""
    for domain, made_at_once, expected in ((site.domains[0], False, 2), (site.domains[1], True, 1)):
        sim = site.fabric.domain(domain)
        trays = [frozenset(u for u, g in sim.gpus.items() if g.slot_id == slot) for slot in (1, 2)]
        backend = InProcessBackend(site.fabric, call_timeout=1.0)
        target = DomainTarget(domain, None)
        default = next(p for p in await backend.list_partitions(target) if p.is_default)
        journal = OutJournal(site.fabric, backend, monkeypatch)
        if made_at_once:
            await backend.remove_gpus(target, default, trays[0] | trays[1])
            await asyncio.gather(*(backend.create_partition(target, f"t{n}", t) for n, t in enumerate(trays)))
        else:
            for tray in trays:
                await backend.remove_gpus(target, default, tray)
                default = next(p for p in await backend.list_partitions(target) if p.is_default)
            for n, tray in enumerate(trays):
                await backend.create_partition(target, f"t{n}", tray)
        assert len(trays[0]) == len(trays[1]) == 4
        assert journal.longest_out() == expected, journal.events
        await backend.close()


async def test_nmx_m_credentials_stored_while_running_are_used_from_the_next_pass(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    async with NmxmSimulator(site.fabric, username="operator", password="s3cret") as sim:
        backend = NmxmBackend(sim.url, None, None, poll_interval=0.01)  # started before any were stored
        reconciler = make_reconciler(backend, nmx_m_endpoint=sim.url)
        lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
        inst = await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp))
        assert (await reconciler.reconcile([d0]))[d0].status == "error"  # 401 without credentials

        await fabric_registry.set_nmxm_credentials(session, "operator", "s3cret")
        await session.commit()
        result = (await reconciler.reconcile([d0]))[d0]

        assert result.status == "ok", result.error
        assert await status_of(session, inst.id) == InstanceStatus.READY
        await backend.close()


class HealthCounting(InProcessBackend):
    """The in-process backend, counting health reads (the GPU inventory with its health); each read
    waits for ``gate`` (open unless a test closes it), and ``waiting`` counts the reads held there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.health_reads = 0
        self.waiting = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def list_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        self.health_reads += 1
        self.waiting += 1
        await self.gate.wait()
        self.waiting -= 1
        return await super().list_gpus(target)


async def test_a_pass_reads_health_only_when_the_last_read_is_old(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler
) -> None:
    backend = HealthCounting(site.fabric, call_timeout=1.0)
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    reconciler = make_reconciler(backend)
    await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp), name="one")
    await reconciler.reconcile([d0])
    assert backend.health_reads == 1  # never read before
    second = await place(session, site, site.machines[d0][1], dict.fromkeys(range(4), lp), name="two")

    await reconciler.reconcile([d0])  # a change: the domain is free for the next one sooner

    assert await status_of(session, second.id) == InstanceStatus.READY
    assert backend.health_reads == 1
    await reconciler.reconcile([d0])  # nothing to change (as after a partition event): not read again
    assert backend.health_reads == 1
    reconciler.health_reads.forget(d0)  # a health event: the last read is old
    await reconciler.reconcile([d0])
    assert backend.health_reads == 2
    reconciler.health_reads.max_age = 0.0  # old at once
    await place(session, site, site.machines[d0][2], dict.fromkeys(range(4), lp), name="three")
    await reconciler.reconcile([d0])
    assert backend.health_reads == 3
    await reconciler.close()
    await backend.close()


async def test_the_loop_s_pass_reads_health_after_it_ends_without_holding_the_domain(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler
) -> None:
    backend = HealthCounting(site.fabric, call_timeout=5.0)
    backend.gate.clear()
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    reconciler = make_reconciler(backend)
    try:
        first = await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp), name="one")
        reconciler._running[d0] = asyncio.current_task()  # type: ignore[assignment]
        async with asyncio.timeout(10):  # a pass that read health itself would wait for the gate
            await reconciler._pass(d0)  # as the loop runs it

        assert await status_of(session, first.id) == InstanceStatus.READY
        assert d0 not in reconciler._running  # free, while its health is read beside it:
        await wait_for(lambda: backend.waiting == 1, within=10, what="the health read under way")
        second = await place(session, site, site.machines[d0][1], dict.fromkeys(range(4), lp), name="two")
        assert (await reconciler.reconcile([d0]))[d0].status == "ok"  # the next pass does not wait
        assert await status_of(session, second.id) == InstanceStatus.READY
        assert backend.waiting == 1  # and reads no health of its own meanwhile

        backend.gate.set()
        await wait_for(lambda: not reconciler._health_tasks, within=10, what="the health read")
        async with reconciler.engine.connect() as conn:
            recorded = await conn.scalar(
                select(func.count())
                .select_from(Gpu)
                .where(Gpu.health.is_not(None), Gpu.machine_id.in_([m.id for m in site.machines[d0]]))
            )
        assert recorded == 4 * len(site.machines[d0])
    finally:
        await reconciler.close()
        await backend.close()


class EventsFirst(InProcessBackend):
    """The in-process backend whose read-back after a change waits (when ``hold``) until the change's
    partition events have been handled by the reconciler watching them, and whose partition events
    wait for ``gate`` (open unless a test closes it) before they reach the watcher."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hold = False
        self.handling = 0
        self.listings = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def partition_events(self, target: DomainTarget) -> AsyncIterator[PartitionEvent]:
        async for event in super().partition_events(target):
            self.handling += 1
            await self.gate.wait()
            yield event
            self.handling -= 1  # the consumer asks for the next one: this one is handled

    def quiet(self, domain: uuid.UUID) -> bool:
        """Every partition event of the domain sent so far has been handled by its watcher."""
        return self.handling == 0 and all(q.empty() for q in self.fabric.domain(domain).subscribers)

    async def list_partitions(self, target: DomainTarget) -> list[FabricPartition]:
        if self.hold:
            self.hold = False
            await wait_for(
                lambda: self.quiet(target.domain_uuid), within=10, what="the change's events handled"
            )
        self.listings += 1
        return await super().list_partitions(target)


async def test_the_partition_events_of_a_pass_s_own_change_bring_no_second_pass(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler
) -> None:
    backend = EventsFirst(site.fabric, call_timeout=1.0)
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    reconciler = make_reconciler(backend)
    try:
        await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp), name="one")
        await reconciler.reconcile([d0])  # subscribes to the domain's events
        await wait_for(
            lambda: site.fabric.subscriber_count(d0) == 1, within=10, what="the reconciler subscribed"
        )
        await wait_for(lambda: backend.quiet(d0), within=10, what="the first pass's events handled")
        reconciler.due.clear()
        second = await place(session, site, site.machines[d0][1], dict.fromkeys(range(4), lp))
        backend.hold, backend.listings = True, 0
        # As the monitor's loop runs a pass: the domain is running while its events arrive.
        reconciler._running[d0] = asyncio.current_task()  # type: ignore[assignment]
        await reconciler._pass(d0)

        assert not backend.hold and backend.listings == 1  # the read-back came after the events
        assert await status_of(session, second.id) == InstanceStatus.READY
        assert d0 not in reconciler.due  # its read-back holds the change: no pass for the events
    finally:
        await reconciler.close()
        await backend.close()


async def test_a_partition_event_after_the_read_back_began_brings_another_pass(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler
) -> None:
    backend = EventsFirst(site.fabric, call_timeout=1.0)
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    reconciler = make_reconciler(backend)
    try:
        await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp), name="one")
        await reconciler.reconcile([d0])  # subscribes to the domain's events; lists it
        await wait_for(
            lambda: site.fabric.subscriber_count(d0) == 1, within=10, what="the reconciler subscribed"
        )
        reconciler._running[d0] = asyncio.current_task()  # type: ignore[assignment]
        # A change behind nico's back, reported while a pass runs, after its read-back began.
        site.fabric.delete_partition(d0, next(p.partition_id for p in site.fabric.partitions(d0)))

        await wait_for(lambda: d0 in reconciler._events_in_pass, within=10, what="the event handled")
        reconciler._running.pop(d0)
        reconciler._after_events(d0)

        assert d0 in reconciler.due  # the fabric changed after the last listing began: look again
        assert not reconciler.read_backs.listed_since(d0, 0.0)  # and list before changing anything
    finally:
        await reconciler.close()
        await backend.close()


async def test_the_echoes_of_a_pass_s_own_calls_after_it_ended_bring_no_pass_and_a_later_change_does(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler
) -> None:
    """NMX-C announces nico's own changes too, often after the pass that made them has ended: one
    event per call of the pass is its echo (no pass); a change behind nico's back to the very partition
    it just changed, within the echo window, still brings one."""
    backend = EventsFirst(site.fabric, call_timeout=1.0)
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    reconciler = make_reconciler(backend)
    try:
        await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp), name="one")
        await reconciler.reconcile([d0])  # subscribes to the domain's events
        await wait_for(
            lambda: site.fabric.subscriber_count(d0) == 1, within=10, what="the reconciler subscribed"
        )
        # The stream has delivered an event (echoes are owed only for calls made after one): a
        # health change, in case the first pass's calls came before the stream opened.
        gpu = next(iter(site.fabric.domain(d0).gpus))
        site.fabric.set_gpu_health(gpu, "DEGRADED")
        await wait_for(lambda: reconciler.echoes.live(d0), within=10, what="an event delivered")
        await wait_for(lambda: backend.quiet(d0), within=10, what="the first pass's events handled")
        reconciler.due.clear()
        second = await place(session, site, site.machines[d0][1], dict.fromkeys(range(4), lp))
        backend.gate.clear()  # the pass's own events reach the watcher after the pass
        reconciler._running[d0] = asyncio.current_task()  # type: ignore[assignment]
        await reconciler._pass(d0)
        assert await status_of(session, second.id) == InstanceStatus.READY

        backend.gate.set()
        await wait_for(lambda: backend.quiet(d0), within=10, what="the pass's events handled")
        assert d0 not in reconciler.due  # two calls, two echoes: nothing to look at again
        mine = next(p.partition_id for p in site.fabric.partitions(d0) if p.name == partition_name(lp.id))
        site.fabric.delete_partition(d0, mine)
        await wait_for(
            lambda: d0 in reconciler.due, within=10, what="a pass for the change behind nico's back"
        )
        assert not reconciler.read_backs.listed_since(d0, 0.0)  # listed afresh before any change
    finally:
        await reconciler.close()
        await backend.close()


async def test_a_pass_loads_its_domain_in_one_round_trip_as_the_bulk_load_does(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler, app_context: AppContext
) -> None:
    d0, d1 = site.domains[0], site.domains[1]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    lp.multicast_groups_limit = 8
    other = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="other")
    backend = InProcessBackend(site.fabric, call_timeout=1.0)
    reconciler = make_reconciler(backend)
    await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp), name="settled")
    await reconciler.reconcile([d0])  # a recorded physical partition, observed GPUs
    await place(session, site, site.machines[d0][1], {0: lp, 1: other}, name="unsettled")
    await place(session, site, site.machines[d1][0], dict.fromkeys(range(4), other), name="elsewhere")
    await fabric_registry.set_nmxm_credentials(session, "operator", "s3cret")
    # An NMX-M operation still open and a multicast budget read: every kind of the domain's rows.
    session.add(
        FabricIntent(
            domain_uuid=d0,
            logical_partition_id=lp.id,
            operation="create",
            partition_name="open",
            gpu_uids=[],
            state="timedout",
            operation_id="op-7",
        )
    )
    await session.execute(
        text("UPDATE nvlink_domain SET max_multicast_groups = 24 WHERE uuid = :d"), {"d": d0}
    )
    await session.commit()

    async with app_context.engine.connect() as conn:
        bulk = (await statemod.load(conn, [d0]))[d0]
        one, registry, _ = await statemod.load_one(conn, d0)
        missing, _, _ = await statemod.load_one(conn, uuid.uuid4())
        endpoints = await statemod.endpoints(conn)
        # What a backend has no use for is not read: NMX-C signs in with no stored credentials,
        # NMX-M has one site-wide endpoint; the domain's rows are the same either way.
        nmxc, for_nmxc, _ = await statemod.load_one(conn, d0, credentials=False)
        nmxm, for_nmxm, _ = await statemod.load_one(conn, d0, endpoints=False)

    assert one == bulk
    assert one is not None and one.intents and one.multicast_budget == 24 and one.site_id is not None
    assert (
        one is not None
        and one.partitions
        and one.unsettled
        and one.multicast_limits == {lp.id: 8, other.id: 16}
    )
    # The registry rows of the domain's own chassis, not the whole site's (that grew every pass with it).
    own = {serial: url for serial, url in endpoints.items() if serial in one.chassis_serials}
    assert own and len(own) < len(endpoints)
    assert registry.endpoints == own and registry.nmxm_credentials == ("operator", "s3cret")
    assert registry.covers is not None and one.chassis_serials <= registry.covers
    assert missing is None
    assert nmxc == one and for_nmxc.endpoints == own and for_nmxc.nmxm_credentials is None
    assert nmxm == one and for_nmxm.endpoints == {} and for_nmxm.nmxm_credentials == ("operator", "s3cret")
    await reconciler.close()
    await backend.close()


async def test_the_domain_lock_goes_out_with_the_load_and_a_held_lock_is_reported(
    site: SimSite, app_context: AppContext
) -> None:
    d0 = site.domains[0]
    key = lock_key(d0)
    engine = app_context.engine
    async with engine.connect() as first, engine.connect() as second:
        state, _, locked = await statemod.load_one(first, d0, lock=key)
        assert locked and state is not None and state.gpus
        await first.commit()  # the lock is the session's: it outlives the load's transaction
        _, _, also = await statemod.load_one(second, d0, lock=key)
        assert not also  # held by the first session: a pass there reports the domain busy
        await second.commit()
        assert await first.scalar(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
        _, _, now = await statemod.load_one(second, d0, lock=key)
        assert now
        assert await second.scalar(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
