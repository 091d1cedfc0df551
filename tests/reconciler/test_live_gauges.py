"""The gauges follow every targeted pass, not only the full pass (issue 10, part 4).

A running reconciler with a full-pass interval far longer than the test: after its first full pass,
every change below reaches the gauges through NOTIFY-driven (targeted) passes alone. Each wait has a
deadline; the test also checks that no second full pass ran, so a gauge that only moves on the full
pass fails it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest_asyncio
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncSession

from nico.instance import service as instances
from nico.reconciler.metrics import PREFIX
from nico.reconciler.planner import partition_name
from nico.reconciler.scheduler import Reconciler
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler, running_reconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place
from tests.support.waiting import wait_for

WITHIN = 10.0  # a deadline, far below the full-pass interval
GAUGES = {
    "logical": PREFIX + "num_logical_partitions",
    "physical": PREFIX + "num_physical_partitions",
    "fabric_partitions": PREFIX + "nmxc_partition_count",
    "pending": "nico_nvlink_pending_instances",
    "free": "nico_nvlink_free_machines",
    "stranded": "nico_nvlink_stranded_free_machines",
    "ratio": "nico_nvlink_fragmentation_ratio",
}


def gauges(registry: CollectorRegistry) -> dict[str, float]:
    samples = {
        s.name: float(s.value)
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
        if not s.labels
    }
    return {key: samples[name] for key, name in GAUGES.items() if name in samples}


@pytest_asyncio.fixture
async def running(
    site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> AsyncIterator[tuple[Reconciler, CollectorRegistry]]:
    async with running_reconciler(make_reconciler, backend) as started:
        yield started


async def test_every_gauge_follows_targeted_passes_without_a_full_pass(
    session: AsyncSession, site: SimSite, running: tuple[Reconciler, CollectorRegistry]
) -> None:
    reconciler, registry = running
    d0, d1 = site.domains
    machines = len(site.machines[d0]) + len(site.machines[d1])
    assert gauges(registry) == {
        "logical": 0,
        "physical": 0,
        "fabric_partitions": 2,  # each domain's default partition
        "pending": 0,
        "free": machines,
        "stranded": 0,
        "ratio": 0.0,
    }

    async def shows(**expected: float) -> None:
        def matches() -> bool:
            now = gauges(registry)
            return all(now.get(key) == value for key, value in expected.items())

        await wait_for(matches, within=WITHIN, what=f"gauges {expected} (now {gauges(registry)})")

    # An instance whose domain cannot be reached: pending, its machine taken, the rest of d0 stranded.
    site.fabric.set_faults(d0, down=True)
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    instance = await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp))
    others = len(site.machines[d0]) - 1
    await shows(logical=1, physical=0, pending=1, free=machines - 1, stranded=others)
    assert gauges(registry)["ratio"] == others / (machines - 1)

    # The domain comes back: the retry makes the instance Ready; the partition is recorded.
    site.fabric.set_faults(d0, down=False)
    await shows(logical=1, physical=1, fabric_partitions=3, pending=0)

    # The tenant deletes the instance (as DELETE /instance does): its GPUs leave, its partition goes.
    await instances.delete_instance(session, site.nv.tenant.org, instance.id)
    await session.commit()
    await shows(logical=1, physical=0, fabric_partitions=2, pending=0, free=machines, stranded=0, ratio=0.0)
    assert reconciler.full_passes == 1  # all of it without a full pass


async def test_the_gauges_show_a_change_as_soon_as_the_fabric_holds_it(
    session: AsyncSession, site: SimSite, running: tuple[Reconciler, CollectorRegistry]
) -> None:
    """The lag from the fabric holding a change to the gauges showing it is one write-back, not a
    full-pass interval: sampled together, the gauges catch up while no full pass runs."""
    reconciler, registry = running
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    name = partition_name(uuid.UUID(str(lp.id)))
    await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp))
    loop = asyncio.get_running_loop()
    on_fabric: float | None = None
    shown: float | None = None
    deadline = loop.time() + WITHIN
    while shown is None and loop.time() < deadline:
        held = [p for p in site.fabric.partitions(d0) if p.name == name and len(p.gpu_uids) == 4]
        if on_fabric is None and held:
            on_fabric = loop.time()
        now = gauges(registry)
        if on_fabric is not None and now.get("physical") == 1 and now.get("pending") == 0:
            shown = loop.time()
        await asyncio.sleep(0.005)
    assert on_fabric is not None, "the partition never reached the fabric"
    assert shown is not None, f"the gauges never showed it (now {gauges(registry)})"
    assert reconciler.full_passes == 1
    print(f"gauge lag after the fabric held the change: {(shown - on_fabric) * 1000:.1f} ms")
