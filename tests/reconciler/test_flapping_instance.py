"""A tenant moving one instance back and forth cannot make its domain's fabric work unbounded: once a
pass has moved the same instance twice within ``instance_change_interval``, the domain's next pass
waits out the interval, the changes made meanwhile coalesce into it, and an instance that is back
where the fabric has it costs no fabric call at all (the reconciler's loop, LISTEN and all, over the
in-process fabric)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest_asyncio
from prometheus_client import CollectorRegistry
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Instance, LogicalPartition
from nico.instance import service as instances
from nico.reconciler.scheduler import Reconciler
from nico.services.nvlink_interface import Binding
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler, running_reconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place
from tests.support.waiting import wait_for

WITHIN = 20.0
# The hold: long enough that the flood below (18 moves, a commit each) lands inside it on a loaded
# machine (at 2 s, a load of 5 on two cores once stretched the flood past it).
INTERVAL = "5s"


def fabric_changes(registry: CollectorRegistry) -> float:
    """Every change call the reconciler has made, whatever its outcome."""
    return sum(
        sample.value
        for family in registry.collect()
        if family.name.endswith("_changes_applied")
        for sample in family.samples
        if sample.name.endswith("_total")
    )


async def settled(session: AsyncSession, instance_id: uuid.UUID) -> bool:
    row = (
        await session.execute(
            select(Instance.nvlink_applied_version, Instance.nvlink_config_version)
            .where(Instance.id == instance_id)
            .execution_options(populate_existing=True)
        )
    ).one()
    await session.commit()  # the next read sees the reconciler's later commits
    return bool(row[0] == row[1])


async def move(session: AsyncSession, site: SimSite, instance_id: uuid.UUID, to: LogicalPartition) -> None:
    """The instance's four GPUs bound to ``to``, as PATCH /instance does (version bump, NOTIFY)."""
    bindings = [Binding(to.id, device) for device in range(4)]
    await instances.update_instance(session, site.nv.tenant.org, instance_id, {}, bindings, None)
    await session.commit()


@pytest_asyncio.fixture
async def running(
    site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> AsyncIterator[tuple[Reconciler, CollectorRegistry]]:
    async with running_reconciler(make_reconciler, backend, instance_change_interval=INTERVAL) as started:
        yield started


async def test_a_flapping_instance_costs_its_domain_one_pass_per_interval(
    session: AsyncSession, site: SimSite, running: tuple[Reconciler, CollectorRegistry]
) -> None:
    reconciler, registry = running
    domain = site.domains[0]
    a = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="lp-a")
    b = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="lp-b")
    instance = await place(session, site, site.machines[domain][0], dict.fromkeys(range(4), a))
    await wait_for(lambda: settled(session, instance.id), within=WITHIN, what="the instance Ready in A")
    await move(session, site, instance.id, b)
    await wait_for(lambda: settled(session, instance.id), within=WITHIN, what="the first move")
    await move(session, site, instance.id, a)  # moved again at once: the domain is held from here
    await wait_for(lambda: settled(session, instance.id), within=WITHIN, what="the second move")
    await wait_for(
        lambda: reconciler.flapping.held_until(domain, time.monotonic()) is not None,
        within=WITHIN,
        what="the domain held",
    )
    before = fabric_changes(registry)
    for n in range(18):  # a flood, ending where the fabric has it (A)
        await move(session, site, instance.id, b if n % 2 == 0 else a)
    await wait_for(lambda: settled(session, instance.id), within=WITHIN, what="the flood coalesced")
    assert fabric_changes(registry) == before  # B, A, B, ... A between two passes: nothing to send
    # Settled: the read-back holds the instance in A at the flood's last version. A later move is made.
    await move(session, site, instance.id, b)
    await wait_for(lambda: settled(session, instance.id), within=WITHIN, what="a move after the flood")
    assert fabric_changes(registry) > before
