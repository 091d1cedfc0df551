"""The SQL of the tenant topology view: the tenant's NVLink domains and every GPU on them with what
the tenant may know of its holder."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import NvLinkInterfaceStatus
from nico.db.models import (
    Gpu,
    Instance,
    LogicalPartition,
    Machine,
    NvlinkDomain,
    NvlinkInterface,
    PhysicalPartition,
    Site,
    TenantSite,
)


async def tenant_domains(session: AsyncSession, tenant_id: uuid.UUID) -> list[tuple[NvlinkDomain, str]]:
    """(domain, site name) of the NVLink domains at the tenant's sites."""
    rows = await session.execute(
        select(NvlinkDomain, Site.name)
        .join(Site, Site.id == NvlinkDomain.site_id)
        .join(TenantSite, and_(TenantSite.site_id == Site.id, TenantSite.tenant_id == tenant_id))
    )
    return [(domain, name) for domain, name in rows.all()]


class TopologyGpuRow(NamedTuple):
    """One GPU of a domain, with the tenant's binding on it (instance fields None when the GPU's
    machine is free or holds another tenant's instance)."""

    domain_uuid: uuid.UUID
    chassis_serial: str
    tray_index: int
    device_id: int
    holder: uuid.UUID | None  # the instance on the machine, the tenant's or not
    instance_id: uuid.UUID | None  # the tenant's instance
    instance_name: str | None
    binding_status: str | None
    partition_id: uuid.UUID | None
    partition_name: str | None
    partition_status: str | None
    observed_partition_id: uuid.UUID | None  # the logical partition the fabric holds the GPU in
    health: str | None = None  # the GPU's health as the fabric last reported it
    foreign_gpus: int = 0  # GPUs of its machine in partitions nico did not make (the machine is held)


async def topology_gpus(
    session: AsyncSession, tenant_id: uuid.UUID, domains: Sequence[uuid.UUID]
) -> list[TopologyGpuRow]:
    """Every GPU on ``domains`` by domain, chassis, tray and device; a GPU with a live binding and
    Deleting ones comes once per binding, the live one first."""
    mine = and_(Instance.id == Machine.instance_id, Instance.tenant_id == tenant_id)
    rows = await session.execute(
        select(
            Machine.domain_uuid,
            Machine.chassis_serial,
            Machine.tray_index,
            Gpu.device_id,
            Machine.instance_id,
            Instance.id,
            Instance.name,
            NvlinkInterface.status,
            LogicalPartition.id,
            LogicalPartition.name,
            LogicalPartition.status,
            PhysicalPartition.logical_partition_id,
            Gpu.health,
            Machine.foreign_gpus,
        )
        .join(Gpu, Gpu.machine_id == Machine.id)
        .outerjoin(Instance, mine)
        .outerjoin(
            NvlinkInterface,
            and_(
                NvlinkInterface.instance_id == Instance.id,
                NvlinkInterface.device_instance == Gpu.device_id - 1,
            ),
        )
        .outerjoin(LogicalPartition, LogicalPartition.id == NvlinkInterface.logical_partition_id)
        .outerjoin(PhysicalPartition, PhysicalPartition.id == Gpu.physical_partition_id)
        .where(Machine.domain_uuid.in_(list(domains)), Machine.tray_index.is_not(None))
        .order_by(
            Machine.domain_uuid,
            Machine.chassis_serial,
            Machine.tray_index,
            Gpu.device_id,
            NvlinkInterface.status == NvLinkInterfaceStatus.DELETING,
        )
    )
    return [TopologyGpuRow._make(row) for row in rows.all()]
