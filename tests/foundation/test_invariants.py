"""Each invariant lives in the database: every unique, check and foreign-key rule rejects what it
should, and every ON DELETE does what it says."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import delete, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import (
    Gpu,
    Instance,
    LogicalPartition,
    Machine,
    NvlinkInterface,
    PhysicalPartition,
    Site,
    StatusDetail,
    Tenant,
)
from tests.support import factories as f


async def rejects(session: AsyncSession, change: Callable[[], Awaitable[Any]], constraint: str) -> None:
    """The change fails on the named constraint and leaves the session usable."""
    with pytest.raises((IntegrityError, DBAPIError)) as caught:
        async with session.begin_nested():
            await change()
            await session.flush()
    assert constraint in str(caught.value), str(caught.value)


async def instance(session: AsyncSession, s: f.NvlinkSite, name: str, **extra: Any) -> Instance:
    row = Instance(
        tenant_id=s.tenant.id,
        site_id=s.site.id,
        vpc_id=s.vpc.id,
        instance_type_id=s.instance_type.id,
        name=name,
        **extra,
    )
    session.add(row)
    await session.flush()
    return row


async def test_logical_partition_name_unique_per_tenant_across_sites(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=1)
    other_site = await f.site(session, s.provider, name="site-2")
    await f.logical_partition(session, s.tenant, s.site, name="shared")

    async def same_name_other_site() -> None:
        session.add(LogicalPartition(tenant_id=s.tenant.id, site_id=other_site.id, name="shared"))

    await rejects(session, same_name_other_site, "uq_logical_partition_tenant_id_name")
    other = await f.tenant(session, "other-org")
    await f.logical_partition(session, other, s.site, name="shared")  # another tenant may reuse it


async def test_instance_name_unique_per_tenant_and_site(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=1)
    await instance(session, s, "worker")
    await rejects(session, lambda: instance(session, s, "worker"), "uq_instance_tenant_id_site_id_name")


async def test_one_physical_partition_per_logical_partition_and_domain(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=2, trays=1)
    lp = await f.logical_partition(session, s.tenant, s.site)
    session.add(
        PhysicalPartition(
            logical_partition_id=lp.id,
            domain_uuid=s.domains[0],
            nmx_partition_id=1,
            fabric_ref="1",
            name="a",
        )
    )
    await session.flush()

    async def second_in_same_domain() -> None:
        session.add(
            PhysicalPartition(
                logical_partition_id=lp.id,
                domain_uuid=s.domains[0],
                nmx_partition_id=2,
                fabric_ref="2",
                name="b",
            )
        )

    await rejects(session, second_in_same_domain, "uq_physical_partition_logical_partition_id_domain_uuid")
    session.add(
        PhysicalPartition(
            logical_partition_id=lp.id,
            domain_uuid=s.domains[1],
            nmx_partition_id=1,
            fabric_ref="1",
            name="a",
        )
    )
    await session.flush()  # the same LP in another domain is a different physical partition

    async def fabric_id_reused_in_domain() -> None:
        other = await f.logical_partition(session, s.tenant, s.site, name="lp-2")
        session.add(
            PhysicalPartition(
                logical_partition_id=other.id,
                domain_uuid=s.domains[0],
                nmx_partition_id=1,
                fabric_ref="1",
                name="c",
            )
        )

    await rejects(session, fabric_id_reused_in_domain, "uq_physical_partition_domain_uuid_nmx_partition_id")


async def test_machine_holds_at_most_one_instance_and_instance_one_machine(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=2)
    first, second = s.machines
    a = await instance(session, s, "a")
    first.instance_id = a.id
    await session.flush()

    async def same_instance_on_second_machine() -> None:
        second.instance_id = a.id

    await rejects(session, same_instance_on_second_machine, "uq_machine_instance_id")
    await session.refresh(second)
    assert second.instance_id is None


async def test_deleting_an_instance_frees_its_machine_and_drops_its_bindings(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=1)
    lp = await f.logical_partition(session, s.tenant, s.site)
    a = await instance(session, s, "a")
    s.machines[0].instance_id = a.id
    session.add(
        NvlinkInterface(instance_id=a.id, logical_partition_id=lp.id, site_id=s.site.id, device_instance=0)
    )
    session.add(StatusDetail(instance_id=a.id, status="Pending", message="x"))
    await session.flush()
    await session.execute(delete(Instance).where(Instance.id == a.id))
    machine = await session.scalar(
        select(Machine).where(Machine.id == s.machines[0].id).execution_options(populate_existing=True)
    )
    assert machine is not None and machine.instance_id is None
    assert (await session.scalar(select(NvlinkInterface).where(NvlinkInterface.instance_id == a.id))) is None
    assert (await session.scalar(select(StatusDetail).where(StatusDetail.instance_id == a.id))) is None


async def test_gpu_uid_is_unsigned_64_bit_and_unique(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=2)
    top = 2**64 - 1
    session.add(Gpu(machine_id=s.machines[0].id, device_id=9, gpu_uid=top))
    await session.flush()
    stored = await session.scalar(select(Gpu.gpu_uid).where(Gpu.device_id == 9))
    assert stored == top

    async def duplicate_uid() -> None:
        session.add(Gpu(machine_id=s.machines[1].id, device_id=9, gpu_uid=top))

    await rejects(session, duplicate_uid, "uq_gpu_gpu_uid")

    async def beyond_u64() -> None:
        await session.execute(
            text("INSERT INTO gpu (machine_id, device_id, gpu_uid) VALUES (:m, 10, 18446744073709551616)"),
            {"m": s.machines[1].id},
        )

    await rejects(session, beyond_u64, "ck_gpu_gpu_uid_u64")

    async def negative() -> None:
        await session.execute(
            text("INSERT INTO gpu (machine_id, device_id, gpu_uid) VALUES (:m, 11, -1)"),
            {"m": s.machines[1].id},
        )

    await rejects(session, negative, "ck_gpu_gpu_uid_u64")


async def test_gpu_is_in_at_most_one_physical_partition(session: AsyncSession) -> None:
    """A GPU row has one ``physical_partition_id``; it must name an existing partition, and it is cleared
    (not dangling) when the partition row goes."""
    s = await f.nvlink_site(session, racks=1, trays=1)
    lp = await f.logical_partition(session, s.tenant, s.site)
    pp = PhysicalPartition(
        logical_partition_id=lp.id, domain_uuid=s.domains[0], nmx_partition_id=7, fabric_ref="7", name="p"
    )
    session.add(pp)
    await session.flush()
    gpu = await session.scalar(select(Gpu).where(Gpu.machine_id == s.machines[0].id, Gpu.device_id == 1))
    assert gpu is not None
    gpu.physical_partition_id = pp.id
    await session.flush()

    async def unknown_partition() -> None:
        gpu.physical_partition_id = uuid.uuid4()

    await rejects(session, unknown_partition, "fk_gpu_physical_partition_id_physical_partition")
    await session.refresh(gpu)
    await session.execute(delete(PhysicalPartition).where(PhysicalPartition.id == pp.id))
    await session.refresh(gpu)
    assert gpu.physical_partition_id is None


async def test_one_live_binding_per_gpu(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=1)
    lp = await f.logical_partition(session, s.tenant, s.site)
    a = await instance(session, s, "a")
    session.add(
        NvlinkInterface(instance_id=a.id, logical_partition_id=lp.id, site_id=s.site.id, device_instance=0)
    )
    await session.flush()

    async def second_live_binding() -> None:
        session.add(
            NvlinkInterface(
                instance_id=a.id, logical_partition_id=lp.id, site_id=s.site.id, device_instance=0
            )
        )

    await rejects(session, second_live_binding, "uq_nvlink_interface_live_gpu")
    session.add(
        NvlinkInterface(
            instance_id=a.id,
            logical_partition_id=lp.id,
            site_id=s.site.id,
            device_instance=0,
            status="Deleting",
        )
    )
    await session.flush()  # a binding on its way out does not block its replacement


async def test_logical_partition_cannot_vanish_while_referenced(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=1)
    as_default = await f.logical_partition(session, s.tenant, s.site, name="default")
    s.vpc.nvlink_logical_partition_id = as_default.id
    await session.flush()
    await rejects(
        session,
        lambda: session.execute(delete(LogicalPartition).where(LogicalPartition.id == as_default.id)),
        "fk_vpc_nvlink_logical_partition_id_logical_partition",
    )

    with_physical = await f.logical_partition(session, s.tenant, s.site, name="placed")
    session.add(
        PhysicalPartition(
            logical_partition_id=with_physical.id,
            domain_uuid=s.domains[0],
            nmx_partition_id=3,
            fabric_ref="3",
            name="p",
        )
    )
    await session.flush()
    await rejects(
        session,
        lambda: session.execute(delete(LogicalPartition).where(LogicalPartition.id == with_physical.id)),
        "fk_physical_partition_logical_partition_id_logical_partition",
    )

    bound = await f.logical_partition(session, s.tenant, s.site, name="bound")
    a = await instance(session, s, "a")
    session.add(
        NvlinkInterface(
            instance_id=a.id,
            logical_partition_id=bound.id,
            site_id=s.site.id,
            device_instance=0,
            status="Deleting",
        )
    )
    await session.flush()
    await rejects(
        session,
        lambda: session.execute(delete(LogicalPartition).where(LogicalPartition.id == bound.id)),
        "fk_nvlink_interface_logical_partition_id_logical_partition",
    )


async def test_sites_and_tenants_in_use_cannot_be_deleted(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=1)
    await rejects(session, lambda: session.execute(delete(Site).where(Site.id == s.site.id)), "fk_")
    await rejects(session, lambda: session.execute(delete(Tenant).where(Tenant.id == s.tenant.id)), "fk_")


async def test_machine_delete_cascades_gpus_and_domain_is_kept_while_used(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=1)
    await rejects(
        session,
        lambda: session.execute(text("DELETE FROM nvlink_domain WHERE uuid = :d"), {"d": s.domains[0]}),
        "fk_machine_domain_uuid_nvlink_domain",
    )
    await session.execute(delete(Machine).where(Machine.id == s.machines[0].id))
    assert (await session.scalar(select(Gpu).where(Gpu.machine_id == s.machines[0].id))) is None


async def test_tray_is_unique_per_chassis_and_nvlink_info_is_whole(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=1)
    taken = s.machines[0]

    async def same_tray() -> None:
        session.add(
            Machine(
                id="dup",
                site_id=s.site.id,
                domain_uuid=taken.domain_uuid,
                chassis_serial=taken.chassis_serial,
                tray_index=taken.tray_index,
            )
        )

    await rejects(session, same_tray, "uq_machine_chassis_serial_tray_index")

    async def half_info() -> None:
        session.add(Machine(id="half", site_id=s.site.id, domain_uuid=taken.domain_uuid))

    await rejects(session, half_info, "ck_machine_nvlink_info_whole")


async def test_status_history_has_exactly_one_owner(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=1)

    async def two_owners() -> None:
        session.add(StatusDetail(site_id=s.site.id, vpc_id=s.vpc.id, status="Ready"))

    await rejects(session, two_owners, "ck_status_detail_one_owner")

    async def no_owner() -> None:
        session.add(StatusDetail(status="Ready"))

    await rejects(session, no_owner, "ck_status_detail_one_owner")


async def test_status_checks_reject_unknown_values(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=1)

    async def bad_status() -> None:
        session.add(LogicalPartition(tenant_id=s.tenant.id, site_id=s.site.id, name="x", status="Synced"))

    await rejects(session, bad_status, "ck_logical_partition_status")
