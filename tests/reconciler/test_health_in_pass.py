"""A pass that is not the loop's (the full pass's, and a direct ``reconcile``) reads its domain's
health with the pass and stores it with the write-back: each GPU's health in the statement that stores
its observation (only the rows that change in either are written, a GPU's observation time moves only
when its observation does), the machines' holds, the partitions' health and the multicast budget in the
write-back's last round trip, before the domain's gauge figures. A health read that fails leaves the
pass's results standing and is made again by the next pass; one that a health event made old while it
ran is not kept as fresh."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Gpu, Machine, NvlinkDomain
from nico.db.queries.reconciler import domain_figures
from nico.fabric.backend import DomainTarget, FabricGpu, FabricUnavailable
from nico.reconciler.last_reads import HealthReads
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.reconciler.test_domain_pass import uids
from tests.reconciler.test_health import placed_with_a_sick_gpu
from tests.support import factories as f
from tests.support.sim_site import SimSite, place


async def gpu_rows(
    session: AsyncSession, domain: uuid.UUID
) -> dict[int, tuple[Any, str | None, datetime | None]]:
    """GPU GUID -> (observed physical partition, health, observed at) of the domain's GPUs, as stored."""
    rows = await session.execute(
        select(Gpu.gpu_uid, Gpu.physical_partition_id, Gpu.health, Gpu.observed_at)
        .join(Machine, Machine.id == Gpu.machine_id)
        .where(Machine.domain_uuid == domain)
        .execution_options(populate_existing=True)
    )
    return {int(uid): (pp, health, at) for uid, pp, health, at in rows.all()}


async def held(session: AsyncSession, machine_id: str) -> bool:
    found = await session.scalar(
        select(Machine.held_unhealthy)
        .where(Machine.id == machine_id)
        .execution_options(populate_existing=True)
    )
    return bool(found)


async def test_health_is_stored_with_the_observations_and_only_changed_rows_are_written(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    placed, idle = site.machines[d0][0], site.machines[d0][1]
    reconciler = make_reconciler(backend)
    assert (await reconciler.reconcile([d0]))[d0].status == "ok"  # observations and health stored
    before = await gpu_rows(session, d0)
    assert {h for _, h, _ in before.values()} == {"HEALTHY"}
    assert all(at is not None for _, _, at in before.values())

    # One machine's GPUs move into a tenant partition; another's GPU falls sick but stays where it is.
    await place(session, site, placed, dict.fromkeys(range(4), lp))
    sick = min(uids(idle, site))
    site.fabric.set_gpu_health(sick, "NO_NVLINK")
    reconciler.health_reads.forget(d0)  # the health is due again
    result = (await reconciler.reconcile([d0]))[d0]
    assert result.status == "ok"

    after = await gpu_rows(session, d0)
    moved = uids(placed, site)
    for uid, (pp, health, at) in after.items():
        was_pp, _, was_at = before[uid]
        assert health == ("NO_NVLINK" if uid == sick else "HEALTHY")
        if uid in moved:  # observed anew: in the tenant's physical partition, seen now
            assert pp is not None and pp != was_pp and at is not None and was_at is not None and at > was_at
        else:  # its observation did not change, nor its time (the sick one's health did)
            assert (pp, at) == (was_pp, was_at)
    assert await held(session, idle.id) and not await held(session, placed.id)
    # The pass's gauge figures, read in its write-back's last round trip, are read after the holds:
    # the sick GPU's machine is counted used, not free, as a read now counts it.
    assert result.report is not None and result.report.figures is not None
    now = await domain_figures(await session.connection(), [d0])
    assert [tuple(r) for r in result.report.figures] == [tuple(r) for r in now]


class HealthDown(InProcessBackend):
    """The in-process backend whose health reads fail while ``down``."""

    down = True

    async def health_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        if self.down:
            raise FabricUnavailable("health endpoint down")
        return await super().health_gpus(target)


async def test_a_failed_health_read_leaves_the_pass_standing_and_the_next_pass_reads_it(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    _, machine, sick = await placed_with_a_sick_gpu(session, site)
    backend = HealthDown(site.fabric, call_timeout=1.0)
    reconciler = make_reconciler(backend)
    try:
        assert (await reconciler.reconcile([d0]))[d0].status == "ok"
        rows = await gpu_rows(session, d0)
        assert all(pp is not None for uid, (pp, _, _) in rows.items() if uid in uids(machine, site))
        assert rows[sick][1] is None and not reconciler.health_reads.fresh(d0)
        budget = await session.scalar(
            select(NvlinkDomain.max_multicast_groups)
            .where(NvlinkDomain.uuid == d0)
            .execution_options(populate_existing=True)
        )
        assert budget is None

        backend.down = False
        assert (await reconciler.reconcile([d0]))[d0].status == "ok"  # nothing to change: health only
        rows = await gpu_rows(session, d0)
        assert rows[sick][1] == "NO_NVLINK" and reconciler.health_reads.fresh(d0)
        assert await held(session, machine.id)
        budget = await session.scalar(
            select(NvlinkDomain.max_multicast_groups)
            .where(NvlinkDomain.uuid == d0)
            .execution_options(populate_existing=True)
        )
        assert budget == site.fabric.domain(d0).max_multicast_groups
    finally:
        await backend.close()


def test_a_health_read_made_old_while_it_ran_is_not_kept_as_fresh() -> None:
    # A health event during a pass's health read forgets the domain's last read; the read, which may
    # predate what the event announces, must not then be kept as fresh (the pass the event brings
    # would skip reading it, and the change would wait for the next read).
    reads, domain = HealthReads(), uuid.uuid4()
    began = time.monotonic()
    reads.forget(domain)  # the event, while the read ran
    reads.store(domain, began)
    assert not reads.fresh(domain)
    reads.store(domain, time.monotonic())  # a read begun after the event
    assert reads.fresh(domain)
