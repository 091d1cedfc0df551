"""The fabric call pattern under load (issue 15): the last read-back stands in for the list before a
change, additions no removal feeds run at once (the others right after the removal feeding them), and
NMX-M credentials stored while the reconciler runs are used from the next pass."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus
from nico.db.models import Gpu, Instance
from nico.fabric.backend import DEFAULT_PARTITION_ID, DomainTarget, FabricPartition
from nico.fabric.nmxm.client import NmxmBackend
from nico.reconciler.planner import partition_name
from nico.services import fabric_registry
from nico.sim.inprocess import InProcessBackend
from nico.sim.nmxm_app import NmxmSimulator
from tests.reconciler.conftest import MakeReconciler
from tests.reconciler.test_swap import longest_out, record_out
from tests.support import factories as f
from tests.support.sim_site import SimSite, place


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
    left them there) run at once. (Additions that a removal feeds run right after it, one by one, so
    that no GPU is out of every partition for more than one operation: the next test.)"""
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
    """Domain mode pairs each removal with the addition it feeds (issue 12, #6644): three instances
    placed from the default partition, each tray out of every partition for one fabric change."""
    backend = Counting(site.fabric, call_timeout=1.0)
    d0 = site.domains[0]
    instances = []
    for n in range(3):
        lp = await f.logical_partition(session, site.nv.tenant, site.nv.site, name=f"lp{n}")
        instances.append(await place(session, site, site.machines[d0][n], dict.fromkeys(range(4), lp)))
    log = record_out(site, monkeypatch)

    result = (await make_reconciler(backend).reconcile([d0]))[d0]

    assert result.status == "ok"
    assert len(log) == 6 and longest_out(log) == 1, log
    for instance in instances:
        assert await status_of(session, instance.id) == InstanceStatus.READY
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
