"""Two instances trade logical partitions in tray mode (each partition is re-made under its own name):
the reconciler converges, and no GPU is out of every partition for more than one fabric operation —
whether the GPUs' tray partitions are on the fabric to wait in or not (then the swap takes a follow-up
pass, which the reconciler asks for at once)."""

from __future__ import annotations

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, NvLinkInterfaceStatus
from nico.db.models import Instance, LogicalPartition, NvlinkInterface
from nico.reconciler.homes import tray_partition_name
from nico.reconciler.planner import partition_name
from nico.services.nvlink_events import desired_state_changed
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.out_of_partition import OutJournal
from tests.support.sim_site import SimSite, place

PASSES = 3  # the swap itself, a follow-up where a GPU had to go home first, and one to spare


async def rebind(session: AsyncSession, instance: Instance, lp: LogicalPartition) -> None:
    """The instance's GPUs move to ``lp``, as a PATCH of its NVLink interfaces does."""
    await session.execute(
        update(NvlinkInterface)
        .where(NvlinkInterface.instance_id == instance.id)
        .values(status=NvLinkInterfaceStatus.DELETING)
    )
    for device in range(4):
        session.add(
            NvlinkInterface(
                instance_id=instance.id,
                logical_partition_id=lp.id,
                site_id=instance.site_id,
                device_instance=device,
                status=NvLinkInterfaceStatus.PENDING,
            )
        )
    await session.flush()


@pytest.mark.parametrize("homes_on_fabric", [True, False], ids=["trays-present", "trays-gone"])
async def test_two_instances_trading_partitions_keep_every_gpu_at_most_one_operation_out(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
    monkeypatch: pytest.MonkeyPatch,
    homes_on_fabric: bool,
) -> None:
    d0 = site.domains[0]
    reconciler = make_reconciler(backend, default_partition_mode="tray")
    await reconciler.reconcile([d0])
    a = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="a")
    b = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="b")
    first, second = site.machines[d0][0], site.machines[d0][1]
    one = await place(session, site, first, dict.fromkeys(range(4), a))
    two = await place(session, site, second, dict.fromkeys(range(4), b))
    assert (await reconciler.reconcile([d0]))[d0].status == "ok"
    gpus = {p.name: frozenset(p.gpu_uids) for p in site.fabric.partitions(d0)}
    was_a, was_b = gpus[partition_name(a.id)], gpus[partition_name(b.id)]
    assert len(was_a) == len(was_b) == 4
    if not homes_on_fabric:
        # The two trays' partitions, empty while their GPUs are rented, are gone (as when a tray was
        # wholly rented when the domain converted): the swapped GPUs have no home to wait in.
        for partition in site.fabric.partitions(d0):
            if partition.name.startswith("tray_partition_") and not partition.gpu_uids:
                site.fabric.delete_partition(d0, partition.partition_id)
    trays = {p.name for p in site.fabric.partitions(d0) if p.name.startswith("tray_partition_")}
    journal = OutJournal(site.fabric, backend, monkeypatch)

    await rebind(session, one, b)
    await rebind(session, two, a)
    await desired_state_changed(session, instance_ids=[one.id, two.id])
    await session.commit()
    for _ in range(PASSES):
        result = (await reconciler.reconcile([d0]))[d0]
        assert result.status == "ok", result
        if not result.follow_up:
            break
    assert not result.follow_up

    now = {p.name: frozenset(p.gpu_uids) for p in site.fabric.partitions(d0)}
    assert now[partition_name(a.id)] == was_b and now[partition_name(b.id)] == was_a
    for instance in (one, two):
        row = await session.get(Instance, instance.id, populate_existing=True)
        assert row is not None and row.status == InstanceStatus.READY
    assert reconciler.metrics.snapshot.without_home[d0] == 0
    assert journal.calls and journal.longest_out() == 1, journal.events
    # Where a GPU had to go home first, its tray partition was made for it.
    made = {n for n in now if n.startswith("tray_partition_")} - trays
    sim = site.fabric.domain(d0)
    homes = {tray_partition_name(sim.gpus[uid].slot_id) for uid in was_a | was_b}
    assert made <= homes and (bool(made) != homes_on_fabric), made
