"""Work a pass's write-back leaves out or folds together, and the cases where that must not change
what it writes: a machine's count of GPUs in foreign partitions is written only where it differs from
the row as loaded (so a wrong row is put right even when none of its GPUs moved); logical partitions
being deleted are looked for only when the pass dropped a physical partition record (so one whose
last record goes in the pass still finishes in it); the instances observed realised are locked,
checked and settled in one statement (so one the tenant deleted meanwhile is not made Ready); the
domain's pass record and its gauge figures go out as one statement (the figures still those after the
settle)."""

from __future__ import annotations

from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus
from nico.db.models import Instance, LogicalPartition, Machine, PhysicalPartition
from nico.db.queries.reconciler import domain_figures
from nico.reconciler.operations import CreatePartition, Operation
from nico.services.nvlink_events import desired_state_changed
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place


async def foreign_counts(session: AsyncSession, machines: list[str]) -> dict[str, int]:
    rows = await session.execute(
        select(Machine.id, Machine.foreign_gpus)
        .where(Machine.id.in_(machines))
        .execution_options(populate_existing=True)
    )
    return {str(row[0]): int(row[1]) for row in rows.all()}


async def placed(session: AsyncSession, site: SimSite) -> tuple[LogicalPartition, Instance]:
    """A partition and an instance of four GPUs in it on the first domain, not yet passed."""
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    return lp, await place(session, site, site.machines[site.domains[0]][0], dict.fromkeys(range(4), lp))


async def test_a_wrong_foreign_count_is_put_right_though_no_gpu_of_its_machine_moved(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    reconciler = make_reconciler(backend)
    await reconciler.reconcile([d0])  # every GPU observed: the next pass moves none
    machine = site.machines[d0][1]
    await session.execute(update(Machine).where(Machine.id == machine.id).values(foreign_gpus=3))
    await session.commit()

    assert (await reconciler.reconcile([d0]))[d0].status == "ok"

    assert await foreign_counts(session, [machine.id]) == {machine.id: 0}


async def test_a_deleting_partition_whose_last_record_goes_in_a_pass_finishes_in_it(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    instance = await place(session, site, site.machines[d0][0], {0: lp})
    reconciler = make_reconciler(backend)
    await reconciler.reconcile([d0])
    assert await session.scalar(
        select(PhysicalPartition.id).where(PhysicalPartition.logical_partition_id == lp.id)
    )

    # The partition is marked Deleting while its record is still there (its instance going at once).
    await session.execute(
        update(LogicalPartition).where(LogicalPartition.id == lp.id).values(status="Deleting")
    )
    await session.execute(
        update(type(instance)).where(type(instance).id == instance.id).values(status="Terminating")
    )
    await desired_state_changed(session, instance_ids=[instance.id])
    await session.commit()
    await reconciler.reconcile([d0])  # the instance finishes, its binding with it; the record goes

    assert await session.get(LogicalPartition, lp.id, populate_existing=True) is None


async def test_an_instance_terminated_during_the_pass_is_not_made_ready_by_it(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    _, instance = await placed(session, site)
    reconciler = make_reconciler(backend)

    async def tenant_deletes_it(op: Operation) -> None:
        if isinstance(op, CreatePartition):
            async with reconciler.engine.begin() as conn:
                await conn.execute(
                    update(Instance).where(Instance.id == instance.id).values(status="Terminating")
                )

    reconciler.after_call = tenant_deletes_it
    result = (await reconciler.reconcile([d0]))[d0]

    assert instance.id not in (result.report.instances_ready if result.report else [])
    found = await session.get(Instance, instance.id, populate_existing=True)
    assert found is not None and found.status == InstanceStatus.TERMINATING
    assert found.nvlink_applied_version is None


async def test_the_figures_read_with_the_pass_record_are_the_domains_after_the_settle(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    _, instance = await placed(session, site)
    await session.execute(
        text("UPDATE nvlink_domain SET last_pass_at = NULL, fabric_digest = NULL WHERE uuid = :d"), {"d": d0}
    )
    await session.commit()

    reconciler = make_reconciler(backend)
    reconciler.health_reads.store(d0)  # read just now: none with this pass, as in most of the loop's
    result = (await reconciler.reconcile([d0]))[d0]

    assert result.report is not None and instance.id in result.report.instances_ready
    now = await domain_figures(await session.connection(), [d0])
    assert result.report.figures is not None
    assert [tuple(r) for r in result.report.figures] == [tuple(r) for r in now]
    _, physical, pending, _, used, _ = now[0]
    assert (physical, pending) == (1, 0) and used >= 1  # the settle's effects, not the load's
    record = await session.execute(
        text("SELECT last_pass_at IS NOT NULL, fabric_digest IS NOT NULL FROM nvlink_domain WHERE uuid = :d"),
        {"d": d0},
    )
    assert record.one() == (True, True)
