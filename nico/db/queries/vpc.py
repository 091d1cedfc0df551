"""The SQL of VPCs that is not plain ORM row access."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, delete, exists, false, func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Instance, LogicalPartition, NvlinkInterface, Subnet, Vpc
from nico.db.queries.common import columns, sites_of_provider, text_search


async def lock_vni_choice(session: AsyncSession, site_id: uuid.UUID) -> None:
    """Serialise VNI choice per site, to the end of the transaction."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"vpc-vni/{site_id}"})


async def next_vni(session: AsyncSession, site_id: uuid.UUID) -> int:
    """One more than the site's highest VNI (1 for the first)."""
    found = await session.scalar(
        select(func.coalesce(func.max(Vpc.vni), 0) + 1).where(Vpc.site_id == site_id)
    )
    return int(found or 1)


async def insert_vpc(session: AsyncSession, values: dict[str, Any]) -> Vpc | None:
    """Insert a VPC; None when its id or (tenant, site, name) is taken."""
    return await session.scalar(insert(Vpc).values(**values).on_conflict_do_nothing().returning(Vpc))


async def vpc_named(
    session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID, name: str | None
) -> uuid.UUID | None:
    return await session.scalar(
        select(Vpc.id).where(Vpc.tenant_id == tenant_id, Vpc.site_id == site_id, Vpc.name == name)
    )


async def partition_for_share(session: AsyncSession, partition_id: uuid.UUID) -> LogicalPartition | None:
    """The logical partition FOR SHARE: a concurrent delete of it waits for this transaction."""
    return await session.scalar(
        select(LogicalPartition).where(LogicalPartition.id == partition_id).with_for_update(read=True)
    )


async def locked_vpc(session: AsyncSession, vpc_id: uuid.UUID) -> Vpc | None:
    return await session.scalar(select(Vpc).where(Vpc.id == vpc_id).with_for_update())


async def partition_used_by_vpc_instances(
    session: AsyncSession, partition_id: uuid.UUID, vpc_id: uuid.UUID
) -> bool:
    """Whether an instance of the VPC has a binding to the partition."""
    return bool(
        await session.scalar(
            select(
                exists().where(
                    NvlinkInterface.logical_partition_id == partition_id,
                    NvlinkInterface.instance_id == Instance.id,
                    Instance.vpc_id == vpc_id,
                )
            )
        )
    )


async def has_subnets(session: AsyncSession, vpc_id: uuid.UUID) -> bool:
    return bool(await session.scalar(select(exists().where(Subnet.vpc_id == vpc_id))))


async def has_instances(session: AsyncSession, vpc_id: uuid.UUID) -> bool:
    return bool(await session.scalar(select(exists().where(Instance.vpc_id == vpc_id))))


async def delete_vpc(session: AsyncSession, vpc_id: uuid.UUID) -> None:
    await session.execute(delete(Vpc).where(Vpc.id == vpc_id))


async def tenant_partition_ids(
    session: AsyncSession, tenant_id: uuid.UUID, partition_ids: Sequence[uuid.UUID]
) -> set[uuid.UUID]:
    """Which of ``partition_ids`` are the tenant's logical partitions."""
    rows = await session.scalars(
        select(LogicalPartition.id).where(
            LogicalPartition.id.in_(partition_ids), LogicalPartition.tenant_id == tenant_id
        )
    )
    return set(rows.all())


def tenant_vpcs_where(
    tenant_id: uuid.UUID,
    *,
    site_ids: Sequence[uuid.UUID] = (),
    statuses: Sequence[str] = (),
    partition_ids: Sequence[uuid.UUID] = (),
    none: bool = False,
    provider_id: uuid.UUID | None = None,
    query: str | None = None,
) -> Select[Any]:
    """The tenant's VPCs passing every given filter (``none``: no VPC passes)."""
    stmt = select(Vpc).where(Vpc.tenant_id == tenant_id)
    if site_ids:
        stmt = stmt.where(Vpc.site_id.in_(site_ids))
    if statuses:
        stmt = stmt.where(Vpc.status.in_(statuses))
    if partition_ids:
        stmt = stmt.where(Vpc.nvlink_logical_partition_id.in_(partition_ids))
    if none:
        stmt = stmt.where(false())
    if provider_id is not None:
        stmt = stmt.where(Vpc.site_id.in_(sites_of_provider(provider_id)))
    if query:
        stmt = stmt.where(text_search(Vpc, query))
    return stmt


VPC_ORDER: dict[str, Any] = columns(Vpc)
