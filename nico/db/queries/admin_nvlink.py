"""Site-wide reads of NVLink partitions for operator commands (across every tenant)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import LogicalPartition, PhysicalPartition, Site, Tenant, TenantSite


async def physical_partitions(
    session: AsyncSession,
    *,
    partition_id: uuid.UUID | None = None,
    logical_partition_id: uuid.UUID | None = None,
    domain_uuid: uuid.UUID | None = None,
    org: str | None = None,
    name: str | None = None,
) -> list[dict[str, Any]]:
    """Physical partitions (id, name, logical partition, fabric partition id, domain), by name; ``org``:
    those of the tenant's logical partitions."""
    stmt = select(PhysicalPartition).order_by(PhysicalPartition.domain_uuid, PhysicalPartition.name)
    if org is not None:
        stmt = (
            stmt.join(LogicalPartition, LogicalPartition.id == PhysicalPartition.logical_partition_id)
            .join(Tenant, Tenant.id == LogicalPartition.tenant_id)
            .where(Tenant.org == org)
        )
    if name is not None:
        stmt = stmt.where(PhysicalPartition.name == name)
    if partition_id is not None:
        stmt = stmt.where(PhysicalPartition.id == partition_id)
    if logical_partition_id is not None:
        stmt = stmt.where(PhysicalPartition.logical_partition_id == logical_partition_id)
    if domain_uuid is not None:
        stmt = stmt.where(PhysicalPartition.domain_uuid == domain_uuid)
    return [
        {
            "id": str(row.id),
            "name": row.name,
            "logical_partition_id": str(row.logical_partition_id),
            "nmx_c_partition_id": row.nmx_partition_id,
            "domain_uuid": str(row.domain_uuid),
        }
        for row in await session.scalars(stmt)
    ]


async def logical_partitions(
    session: AsyncSession,
    *,
    partition_id: uuid.UUID | None = None,
    org: str | None = None,
    site_id: uuid.UUID | None = None,
    name: str | None = None,
) -> list[dict[str, Any]]:
    """Logical partitions of every tenant (or one org / site / name) with their physical partition
    count."""
    physical = (
        select(func.count(PhysicalPartition.id))
        .where(PhysicalPartition.logical_partition_id == LogicalPartition.id)
        .scalar_subquery()
    )
    stmt = (
        select(LogicalPartition, Tenant.org, physical)
        .join(Tenant, Tenant.id == LogicalPartition.tenant_id)
        .order_by(Tenant.org, LogicalPartition.name)
    )
    if partition_id is not None:
        stmt = stmt.where(LogicalPartition.id == partition_id)
    if org is not None:
        stmt = stmt.where(Tenant.org == org)
    if site_id is not None:
        stmt = stmt.where(LogicalPartition.site_id == site_id)
    if name is not None:
        stmt = stmt.where(LogicalPartition.name == name)
    return [
        {
            "id": str(lp.id),
            "name": lp.name,
            "org": tenant_org,
            "site_id": str(lp.site_id),
            "status": lp.status,
            "physical_partitions": int(count),
            "description": lp.description,
            "single_nvlink_domain": lp.single_nvlink_domain,
        }
        for lp, tenant_org, count in (await session.execute(stmt)).all()
    ]


async def org_of_logical_partition(session: AsyncSession, partition_id: uuid.UUID) -> str | None:
    return await session.scalar(
        select(Tenant.org)
        .join(LogicalPartition, LogicalPartition.tenant_id == Tenant.id)
        .where(LogicalPartition.id == partition_id)
    )


async def org_of_instance(session: AsyncSession, instance_id: uuid.UUID) -> str | None:
    from nico.db.models import Instance

    return await session.scalar(
        select(Tenant.org).join(Instance, Instance.tenant_id == Tenant.id).where(Instance.id == instance_id)
    )


async def nvlink_sites_of_org(session: AsyncSession, org: str) -> list[uuid.UUID]:
    """The sites with NVLink partitioning that the org's tenant is associated with, by id."""
    return list(
        await session.scalars(
            select(Site.id)
            .join(TenantSite, TenantSite.site_id == Site.id)
            .join(Tenant, Tenant.id == TenantSite.tenant_id)
            .where(Tenant.org == org, Site.nvlink_partition.is_(True))
            .order_by(Site.id)
        )
    )
