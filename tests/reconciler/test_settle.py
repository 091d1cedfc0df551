"""Settling many instances at once (issue 15): one pass's write-back locks every instance its
read-back shows realised and changes them in one statement, with the guarantees of settling one:
a stale report changes nothing, Terminating instances and instances at another version are left
alone, and a repeat is harmless."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, NvLinkInterfaceStatus
from nico.db.models import Instance, NvlinkInterface, StatusDetail
from nico.reconciler.lifecycle import Observation, apply_nvlink_observations
from nico.reconciler.operations import CreatePartition, Operation
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place

READY_MESSAGE = "Instance is ready for use"


async def ready_entries(session: AsyncSession, instance_id: uuid.UUID) -> int:
    found = await session.scalar(
        select(func.count()).where(
            StatusDetail.instance_id == instance_id,
            StatusDetail.status == InstanceStatus.READY,
            StatusDetail.message == READY_MESSAGE,
        )
    )
    return int(found or 0)


async def state_of(session: AsyncSession, instance_id: uuid.UUID) -> tuple[str, int | None, int]:
    row = (
        await session.execute(
            select(Instance.status, Instance.nvlink_applied_version, Instance.nvlink_config_version)
            .where(Instance.id == instance_id)
            .execution_options(populate_existing=True)
        )
    ).one()
    return row[0], row[1], row[2]


async def rows_of(session: AsyncSession, ids: list[uuid.UUID]) -> list[str]:
    """The instances' rows, their bindings' and their history's, as text (committed state)."""
    found = await session.execute(
        text(
            "SELECT t::text FROM instance t WHERE id = ANY(:ids) UNION ALL "
            "SELECT t::text FROM nvlink_interface t WHERE instance_id = ANY(:ids) UNION ALL "
            "SELECT t::text FROM status_detail t WHERE instance_id = ANY(:ids) ORDER BY 1"
        ),
        {"ids": ids},
    )
    return [row for (row,) in found.all()]


async def binding_states(session: AsyncSession, instance_id: uuid.UUID) -> set[tuple[str, uuid.UUID | None]]:
    rows = await session.execute(
        select(NvlinkInterface.status, NvlinkInterface.domain_uuid).where(
            NvlinkInterface.instance_id == instance_id
        )
    )
    return {(status, domain) for status, domain in rows.all()}


async def test_a_pass_settles_many_instances_and_leaves_the_one_whose_version_moved(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    machines = site.machines[d0][:4]
    partitions = [
        await f.logical_partition(session, site.nv.tenant, site.nv.site, name=f"lp-{i}")
        for i in range(len(machines))
    ]
    instances = [
        await place(session, site, m, dict.fromkeys(range(4), lp), name=f"many-{i}")
        for i, (m, lp) in enumerate(zip(machines, partitions, strict=True))
    ]
    moved = instances[1]
    reconciler = make_reconciler(backend)

    async def tenant_changes_mind(op: Operation) -> None:
        # While the pass works, the tenant changes the second instance's NVLink config.
        if isinstance(op, CreatePartition) and op.lp == partitions[-1].id:
            async with reconciler.engine.begin() as conn:
                await conn.execute(
                    update(Instance)
                    .where(Instance.id == moved.id)
                    .values(nvlink_config_version=Instance.nvlink_config_version + 1)
                )

    reconciler.after_call = tenant_changes_mind
    result = (await reconciler.reconcile([d0]))[d0]

    assert result.report is not None
    assert sorted(result.report.instances_ready) == sorted(i.id for i in instances if i is not moved)
    for instance in instances:
        status, applied, version = await state_of(session, instance.id)
        if instance is moved:
            assert (status, applied) == (InstanceStatus.PENDING, None)
            assert await binding_states(session, instance.id) == {(NvLinkInterfaceStatus.PENDING, None)}
            assert await ready_entries(session, instance.id) == 0
        else:
            assert (status, applied) == (InstanceStatus.READY, version)
            assert await binding_states(session, instance.id) == {(NvLinkInterfaceStatus.READY, d0)}
            assert await ready_entries(session, instance.id) == 1

    # The next pass confirms the unchanged membership for the new version; the others stay as they are.
    reconciler.after_call = None
    again = (await reconciler.reconcile([d0]))[d0]
    assert again.report is not None and again.report.instances_ready == [moved.id]
    assert (await state_of(session, moved.id))[0] == InstanceStatus.READY
    for instance in instances:
        assert await ready_entries(session, instance.id) == 1


async def test_observations_apply_only_where_current_and_a_repeat_changes_nothing(
    session: AsyncSession, site: SimSite
) -> None:
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    current, stale, terminating, applied_twice = [
        await place(session, site, m, {0: lp, 1: lp}, name=f"obs-{i}")
        for i, m in enumerate(site.machines[d0][:4])
    ]
    await session.execute(
        update(Instance).where(Instance.id == terminating.id).values(status=InstanceStatus.TERMINATING)
    )
    await session.commit()
    gpus = {0: (d0, 2**63 + 1), 1: (d0, 2**63 + 2)}

    def seen(instance: Instance, version: int) -> Observation:
        return Observation(instance.id, version, gpus)

    versions = {
        i.id: (await state_of(session, i.id))[2] for i in (current, stale, terminating, applied_twice)
    }
    assert await apply_nvlink_observations(session, [seen(applied_twice, versions[applied_twice.id])]) == [
        applied_twice.id
    ]
    await session.commit()
    untouched_before = await rows_of(session, [stale.id, terminating.id, applied_twice.id])

    found = await apply_nvlink_observations(
        session,
        [
            seen(stale, versions[stale.id] - 1),
            seen(current, versions[current.id]),
            seen(terminating, versions[terminating.id]),
            Observation(uuid.uuid4(), 1, gpus),  # gone
            seen(applied_twice, versions[applied_twice.id]),
        ],
    )
    await session.commit()

    assert found == [current.id, applied_twice.id]  # in the order observed; the repeat still applies
    assert await state_of(session, current.id) == (
        InstanceStatus.READY,
        versions[current.id],
        versions[current.id],
    )
    assert await state_of(session, stale.id) == (InstanceStatus.PENDING, None, versions[stale.id])
    assert await state_of(session, terminating.id) == (
        InstanceStatus.TERMINATING,
        None,
        versions[terminating.id],
    )
    assert await ready_entries(session, applied_twice.id) == 1  # no second history entry
    # The others' rows are exactly as they were (not even their ``updated``).
    assert await rows_of(session, [stale.id, terminating.id, applied_twice.id]) == untouched_before
    assert await binding_states(session, stale.id) == {(NvLinkInterfaceStatus.PENDING, None)}
    assert await binding_states(session, terminating.id) == {(NvLinkInterfaceStatus.PENDING, None)}
    assert await binding_states(session, applied_twice.id) == {(NvLinkInterfaceStatus.READY, d0)}


async def test_deleting_bindings_go_when_the_new_version_is_seen(
    session: AsyncSession, site: SimSite
) -> None:
    d0 = site.domains[0]
    old = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="old")
    new = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="new")
    instance = await place(session, site, site.machines[d0][0], {0: old})
    await session.execute(
        update(NvlinkInterface)
        .where(NvlinkInterface.instance_id == instance.id)
        .values(status=NvLinkInterfaceStatus.DELETING)
    )
    session.add(
        NvlinkInterface(
            instance_id=instance.id, logical_partition_id=new.id, site_id=site.nv.site.id, device_instance=0
        )
    )
    await session.commit()
    version = (await state_of(session, instance.id))[2]

    assert await apply_nvlink_observations(session, [Observation(instance.id, version, {0: (d0, 7)})]) == [
        instance.id
    ]
    await session.commit()
    rows = (
        await session.execute(
            select(
                NvlinkInterface.logical_partition_id, NvlinkInterface.status, NvlinkInterface.gpu_uid
            ).where(NvlinkInterface.instance_id == instance.id)
        )
    ).all()
    assert [tuple(r) for r in rows] == [(new.id, NvLinkInterfaceStatus.READY, 7)]
