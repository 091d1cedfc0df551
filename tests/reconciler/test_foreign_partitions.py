"""A live site: partitions another fabric manager made (through NMX-C gRPC or NMX-M REST, as that
manager would) are kept whole, their trays held; observe mode plans and reports but sends nothing.
Each test checks the fabric itself, not only nico's rows."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import NvLinkConfig
from nico.db.enums import InstanceStatus
from nico.db.models import FabricIntent, Instance, Machine, NvlinkDomain, StatusDetail
from nico.fabric.backend import DEFAULT_PARTITION_ID, FabricBackend
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxm.client import NmxmBackend
from nico.reconciler.planner import partition_name
from nico.reconciler.preview import preview
from nico.reconciler.scheduler import Reconciler
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from nico.sim.nmxm_app import NmxmSimulator
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.foreign_manager import nmxc_release, nmxc_take, nmxm_release, nmxm_take
from tests.support.sim_site import SimSite, place, seed

AUTH = ("nmx", "secret")
FOREIGN = "bcm-job-7"


@dataclass
class LiveSite:
    """A seeded one-rack site on a simulator over loopback, and another manager's hands on it."""

    site: SimSite
    backend: FabricBackend
    settings: dict[str, str]  # the reconciler's backend settings
    take: Callable[[str, list[int]], Awaitable[int]]  # another manager makes a partition
    release: Callable[[int], Awaitable[None]]  # and deletes it

    @property
    def domain(self) -> uuid.UUID:
        return self.site.domains[0]

    def machine(self, tray: int) -> Machine:
        return self.site.machines[self.domain][tray]

    def gpus(self, tray: int) -> list[int]:
        machine = self.machine(tray)
        sim = self.site.fabric.domain(self.domain)
        return sorted(
            g.gpu_uid
            for g in sim.gpus.values()
            if g.chassis_serial == machine.chassis_serial and g.tray_index == machine.tray_index
        )

    def fabric(self) -> dict[tuple[int, str], frozenset[int]]:
        """Every partition of the domain as the fabric holds it: (id, name) -> members."""
        return {
            (p.partition_id, p.name): frozenset(p.gpu_uids) for p in self.site.fabric.partitions(self.domain)
        }


@pytest_asyncio.fixture(params=["nmxc", "nmxm"])
async def live(request: pytest.FixtureRequest, session: AsyncSession) -> AsyncIterator[LiveSite]:
    fabric = SimFabric(racks=1, seed=41)
    backend: FabricBackend
    if request.param == "nmxc":
        async with NmxcSimulator(fabric) as nmxc:
            site = await seed(session, fabric, nmxc.endpoints)
            url = nmxc.url(site.domains[0])
            backend = NmxcBackend(NvLinkConfig(backend="nmxc", fabric_call_timeout="2s"))
            try:
                yield LiveSite(
                    site,
                    backend,
                    {},
                    lambda name, gpus: nmxc_take(url, name, gpus),
                    lambda pid: nmxc_release(url, pid),
                )
            finally:
                await backend.close()
    else:
        async with NmxmSimulator(fabric, username=AUTH[0], password=AUTH[1], operation_delay=0.01) as nmxm:
            site = await seed(session, fabric)
            settings = {"nmx_m_endpoint": nmxm.url, "nmx_m_operation_timeout": "5s"}
            backend = NmxmBackend.from_config(NvLinkConfig(backend="nmxm", **settings), *AUTH)
            try:
                yield LiveSite(
                    site,
                    backend,
                    settings,
                    lambda name, gpus: nmxm_take(nmxm.url, AUTH, name, gpus),
                    lambda pid: nmxm_release(nmxm.url, AUTH, pid),
                )
            finally:
                await backend.close()


def changes_sent(reconciler: Reconciler) -> float:
    """Fabric changes the reconciler has asked for, whatever their outcome."""
    return sum(
        s.value for m in reconciler.metrics.changes.collect() for s in m.samples if s.name.endswith("_total")
    )


async def fresh_instance(session: AsyncSession, instance_id: uuid.UUID) -> Instance:
    found = await session.get(Instance, instance_id, populate_existing=True)
    assert found is not None
    return found


async def held_counts(session: AsyncSession, live: LiveSite) -> dict[str, int]:
    rows = await session.execute(
        select(Machine.id, Machine.foreign_gpus)
        .where(Machine.domain_uuid == live.domain)
        .execution_options(populate_existing=True)
    )
    return {machine: count for machine, count in rows.all() if count}


async def free_count(session: AsyncSession, live: LiveSite) -> int:
    return int(
        await session.scalar(
            text("SELECT free FROM domain_capacity WHERE domain_uuid = :d"), {"d": live.domain}
        )
        or 0
    )


@dataclass(frozen=True)
class Scene:
    foreign_id: int  # the other manager's partition
    lp: uuid.UUID
    free: uuid.UUID  # an instance on tray 2 (free)
    held: uuid.UUID  # an instance on tray 0 (in the other manager's partition)


async def a_tenant_on_a_live_site(session: AsyncSession, live: LiveSite) -> Scene:
    """Another manager holds tray 0 whole and half of tray 1; a tenant's logical partition wants tray
    2's GPUs (free) and tray 0's (held)."""
    pid = await live.take(FOREIGN, live.gpus(0) + live.gpus(1)[:2])
    lp = await f.logical_partition(session, live.site.nv.tenant, live.site.nv.site)
    free = await place(session, live.site, live.machine(2), dict.fromkeys(range(4), lp), name="free")
    held = await place(session, live.site, live.machine(0), dict.fromkeys(range(4), lp), name="held")
    return Scene(pid, lp.id, free.id, held.id)


async def waiting_note(session: AsyncSession, instance_id: uuid.UUID) -> str | None:
    """The latest entry of the instance's status history."""
    return await session.scalar(
        select(StatusDetail.message)
        .where(StatusDetail.instance_id == instance_id)
        .order_by(StatusDetail.created.desc(), StatusDetail.id.desc())
        .limit(1)
    )


async def test_observe_mode_plans_and_reports_but_sends_nothing(
    session: AsyncSession, live: LiveSite, make_reconciler: MakeReconciler
) -> None:
    scene = await a_tenant_on_a_live_site(session, live)
    before = live.fabric()
    registry = CollectorRegistry()
    reconciler = make_reconciler(live.backend, registry=registry, mode="observe", **live.settings)

    for _ in range(2):  # every pass plans again, and still sends nothing
        result = (await reconciler.reconcile([live.domain]))[live.domain]
        assert result.status == "ok" and result.operations == 0 and not result.follow_up

    assert live.fabric() == before, "observe mode changed the fabric"
    assert changes_sent(reconciler) == 0
    assert await session.scalar(select(func.count()).select_from(FabricIntent)) == 0
    # What active mode would do: tray 2 out of the default into the tenant's partition; tray 0 waits.
    planned = reconciler.metrics.snapshot.planned[live.domain]
    assert planned == {"create": 1, "delete": 0, "add": 0, "remove": 1}
    assert reconciler.metrics.snapshot.foreign[live.domain] == 6
    gauge = "nico_nvlink_planned_changes"
    scraped = {kind: registry.get_sample_value(gauge, {"kind": kind}) for kind in planned}
    assert scraped == {"create": 1.0, "delete": 0.0, "add": 0.0, "remove": 1.0}
    assert registry.get_sample_value("nico_nvlink_foreign_gpus", {"domain": str(live.domain)}) == 6.0
    for instance_id in (scene.free, scene.held):
        assert (await fresh_instance(session, instance_id)).status == InstanceStatus.PENDING
    assert "another fabric manager" in (await waiting_note(session, scene.held) or "")
    # The reconciler recorded the hold: trays 0 and 1 are not free, and the domain says how many.
    assert await held_counts(session, live) == {live.machine(0).id: 4, live.machine(1).id: 2}
    domain = await session.get(NvlinkDomain, live.domain, populate_existing=True)
    assert domain is not None and domain.foreign_gpus == 6
    assert await free_count(session, live) == len(live.site.machines[live.domain]) - 3

    (found,) = await preview(reconciler.engine, live.backend, reconciler.config, live.domain)
    assert [(c.kind, c.nmx_partition_id) for c in found.changes] == [
        ("remove", DEFAULT_PARTITION_ID),
        ("create", None),
    ]
    create = found.changes[1]
    assert create.partition == partition_name(scene.lp) and create.gpus == live.gpus(2)
    assert "wants these GPUs" in create.why
    assert {h.gpu_uid for h in found.held} == set(live.gpus(0) + live.gpus(1)[:2])
    assert {h.partition for h in found.held} == {FOREIGN}
    assert {h.instance_id for h in found.held if h.wanted_by == scene.lp} == {scene.held}
    assert found.foreign_gpus == 6

    # Restarted in active mode: the first pass sends what was planned, and nothing else.
    active = make_reconciler(live.backend, **live.settings)
    assert (await active.reconcile([live.domain]))[live.domain].status == "ok"
    assert changes_sent(active) == len(found.changes)
    now = live.fabric()
    theirs = {k: v for k, v in before.items() if k[1] == FOREIGN}
    assert {k: v for k, v in now.items() if k[1] == FOREIGN} == theirs
    assert now[next(k for k in now if k[1] == partition_name(scene.lp))] == frozenset(live.gpus(2))


async def test_active_mode_keeps_a_foreign_partition_whole_and_its_trays_held(
    session: AsyncSession, live: LiveSite, make_reconciler: MakeReconciler
) -> None:
    scene = await a_tenant_on_a_live_site(session, live)
    theirs = {k: v for k, v in live.fabric().items() if k[1] == FOREIGN}
    reconciler = make_reconciler(live.backend, **live.settings)  # active, foreign partitions kept

    for _ in range(2):
        assert (await reconciler.reconcile([live.domain]))[live.domain].status == "ok"

    now = live.fabric()
    assert {k: v for k, v in now.items() if k[1] == FOREIGN} == theirs, "a foreign partition changed"
    assert now[next(k for k in now if k[1] == partition_name(scene.lp))] == frozenset(live.gpus(2))
    default = now[next(k for k in now if k[0] == DEFAULT_PARTITION_ID)]
    assert set(live.gpus(1)[2:]) <= default, "tray 1's other half stays home"
    assert (await fresh_instance(session, scene.free)).status == InstanceStatus.READY
    held = await fresh_instance(session, scene.held)
    assert held.status == InstanceStatus.PENDING, "a GPU in a foreign partition cannot be Ready"
    assert "nico keeps that partition whole" in (await waiting_note(session, scene.held) or "")
    assert reconciler.metrics.snapshot.planned[live.domain] == dict.fromkeys(
        ("create", "delete", "add", "remove"), 0
    )

    # The pick never hands out a held tray: every free machine comes, and no more.
    free = await free_count(session, live)
    assert free == len(live.site.machines[live.domain]) - 3
    site, itype = live.site.nv.site.id, live.site.nv.instance_type.id
    pick = text(
        "SELECT machine_id, short_got FROM nico_lock_free_machines(:s, :t, ARRAY[:d]::uuid[], ARRAY[:n])"
    )
    held_tray = live.machine(1).id
    async with reconciler.engine.connect() as conn:  # its own transaction, rolled back: nothing taken
        rows = (await conn.execute(pick, {"s": site, "t": itype, "d": live.domain, "n": free})).all()
        assert len(rows) == free and held_tray not in {r[0] for r in rows}
        short = (await conn.execute(pick, {"s": site, "t": itype, "d": live.domain, "n": free + 1})).all()
        assert short[0][0] is None, "a held tray was picked"
        await conn.rollback()

    # The other manager lets go: the tenant's GPUs join its partition, tray 1 comes home and is free.
    await live.release(scene.foreign_id)
    for _ in range(2):
        assert (await reconciler.reconcile([live.domain]))[live.domain].status == "ok"
    now = live.fabric()
    mine = now[next(k for k in now if k[1] == partition_name(scene.lp))]
    assert mine == frozenset(live.gpus(0) + live.gpus(2))
    assert set(live.gpus(1)) <= now[next(k for k in now if k[0] == DEFAULT_PARTITION_ID)]
    assert (await fresh_instance(session, scene.held)).status == InstanceStatus.READY
    assert await held_counts(session, live) == {}
    assert await free_count(session, live) == free + 1


async def test_evict_takes_managed_gpus_out_of_a_foreign_partition_as_before(
    session: AsyncSession, live: LiveSite, make_reconciler: MakeReconciler
) -> None:
    scene = await a_tenant_on_a_live_site(session, live)
    reconciler = make_reconciler(live.backend, foreign_partitions="evict", **live.settings)

    for _ in range(2):
        assert (await reconciler.reconcile([live.domain]))[live.domain].status == "ok"

    now = live.fabric()
    assert not [k for k in now if k[1] == FOREIGN], "every GPU of it is nico's: it is deleted"
    assert now[next(k for k in now if k[1] == partition_name(scene.lp))] == frozenset(
        live.gpus(0) + live.gpus(2)
    )
    assert (await fresh_instance(session, scene.held)).status == InstanceStatus.READY
    assert await held_counts(session, live) == {}
