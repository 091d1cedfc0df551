"""Fabric health and multicast limits through the reconciler (issue 13 parts 1 and 2), driven by the
simulator's knobs: a pass reads health (stored on GPUs and physical partitions, exported as gauges
per domain and health state), stores the domain's multicast budget, and creates partitions with each
logical partition's multicast groups limit; a health notification alone brings a pass."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Gpu, LogicalPartition, Machine, NvlinkDomain, PhysicalPartition
from nico.reconciler.planner import partition_name
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.reconciler.test_domain_pass import uids
from tests.support import factories as f
from tests.support.sim_site import SimSite, place
from tests.support.waiting import wait_for

GPU_GAUGE = "nico_nvlink_partition_monitor_gpu_health_count"


async def test_partitions_are_created_with_their_multicast_limit_and_the_budget_is_stored(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    wide = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="wide")
    plain = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="plain")
    await session.execute(
        update(LogicalPartition).where(LogicalPartition.id == wide.id).values(multicast_groups_limit=32)
    )
    await session.commit()
    await place(session, site, site.machines[d0][0], {0: wide})
    await place(session, site, site.machines[d0][1], {0: plain})
    registry = CollectorRegistry()

    results = await make_reconciler(backend, registry=registry).reconcile([d0])

    assert results[d0].status == "ok"
    limits = {p.name: p.multicast_groups_limit for p in site.fabric.partitions(d0)}
    assert limits[partition_name(wide.id)] == 32
    assert limits[partition_name(plain.id)] == 16  # the default
    budget = await session.scalar(
        select(NvlinkDomain.max_multicast_groups)
        .where(NvlinkDomain.uuid == d0)
        .execution_options(populate_existing=True)
    )
    assert budget == site.fabric.domain(d0).max_multicast_groups == 1024
    labels = {"domain": str(d0)}
    assert registry.get_sample_value("nico_nvlink_multicast_groups_budget", labels) == 1024
    assert registry.get_sample_value("nico_nvlink_multicast_groups_available", labels) == 1024 - 48


async def placed_with_a_sick_gpu(
    session: AsyncSession, site: SimSite
) -> tuple[LogicalPartition, Machine, int]:
    """A logical partition holding the first machine of the first domain, and that machine's first GPU
    made NO_NVLINK on the fabric."""
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    machine = site.machines[site.domains[0]][0]
    await place(session, site, machine, dict.fromkeys(range(4), lp))
    sick = min(uids(machine, site))
    site.fabric.set_gpu_health(sick, "NO_NVLINK")
    return lp, machine, sick


async def test_an_unhealthy_gpu_is_stored_shown_and_counted(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    lp, machine, sick = await placed_with_a_sick_gpu(session, site)
    registry = CollectorRegistry()
    reconciler = make_reconciler(backend, registry=registry)

    await reconciler.reconcile([d0])

    rows = await session.execute(
        select(Gpu.gpu_uid, Gpu.health)
        .where(Gpu.machine_id == machine.id)
        .execution_options(populate_existing=True)
    )
    healths = {row[0]: row[1] for row in rows.all()}
    assert healths[sick] == "NO_NVLINK" and {h for u, h in healths.items() if u != sick} == {"HEALTHY"}
    pp_health = await session.scalar(
        select(PhysicalPartition.health)
        .where(PhysicalPartition.logical_partition_id == lp.id)
        .execution_options(populate_existing=True)
    )
    assert pp_health == "DEGRADED"
    gpus = len(site.fabric.domain(d0).gpus)
    domain = str(d0)
    assert registry.get_sample_value(GPU_GAUGE, {"domain": domain, "health": "NO_NVLINK"}) == 1
    assert registry.get_sample_value(GPU_GAUGE, {"domain": domain, "health": "HEALTHY"}) == gpus - 1
    node_gauge = "nico_nvlink_partition_monitor_compute_node_health_count"
    assert registry.get_sample_value(node_gauge, {"domain": domain, "health": "DEGRADED"}) == 1
    part_gauge = "nico_nvlink_partition_monitor_partition_health_count"
    assert registry.get_sample_value(part_gauge, {"domain": domain, "health": "DEGRADED"}) == 1

    site.fabric.set_gpu_health(sick, "HEALTHY")  # recovered: the next pass says so
    await reconciler.reconcile([d0])
    assert registry.get_sample_value(GPU_GAUGE, {"domain": domain, "health": "NO_NVLINK"}) is None
    assert registry.get_sample_value(GPU_GAUGE, {"domain": domain, "health": "HEALTHY"}) == gpus


async def test_a_health_notification_alone_brings_a_pass(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    machine = site.machines[d0][0]
    gpu = min(uids(machine, site))
    reconciler = make_reconciler(backend, monitor_run_interval="1h")  # no full pass will come by itself

    async def stored_health() -> str | None:
        return await session.scalar(
            select(Gpu.health).where(Gpu.gpu_uid == gpu).execution_options(populate_existing=True)
        )

    async def health_becomes(health: str) -> None:
        async def stored() -> bool:
            return await stored_health() == health

        await wait_for(stored, within=20, what=f"GPU health {health}")

    task = asyncio.create_task(reconciler.run())
    try:
        await health_becomes("HEALTHY")  # the start-up pass
        site.fabric.set_gpu_health(gpu, "DEGRADED_BW")
        await health_becomes("DEGRADED_BW")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
