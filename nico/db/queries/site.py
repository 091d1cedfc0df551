"""Site SQL: the rows and facts the site service decides with."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Row, Select, Text, cast, delete, exists, false, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import NetworkVirtualizationType, ResourceType
from nico.db.models import (
    Allocation,
    AllocationConstraint,
    Instance,
    InstanceType,
    LogicalPartition,
    Machine,
    NvlinkDomain,
    Site,
    Subnet,
    TenantSite,
    Vpc,
)
from nico.db.queries.common import columns, id_named, matches, rows_by_id

ORDER_COLUMNS: dict[str, Any] = {
    **columns(Site),
    "description": Site.description,
    "location": cast(Site.location, Text),
    "contact": cast(Site.contact, Text),
}
CAPABILITY_COLUMNS: dict[str, Any] = {
    "isNativeNetworkingEnabled": Site.native_networking,
    "isNetworkSecurityGroupEnabled": Site.network_security_group,
    "isNVLinkPartitionEnabled": Site.nvlink_partition,
    "isFlowEnabled": Site.flow,
}


def visible_to(provider_id: uuid.UUID | None, tenant_id: uuid.UUID | None) -> ColumnElement[bool]:
    """The provider's sites and those where the tenant holds an allocation (either may be absent)."""
    clauses: list[ColumnElement[bool]] = []
    if provider_id is not None:
        clauses.append(Site.infrastructure_provider_id == provider_id)
    if tenant_id is not None:
        clauses.append(Site.id.in_(select(TenantSite.site_id).where(TenantSite.tenant_id == tenant_id)))
    return or_(*clauses) if clauses else false()


def sites_visible_to(
    provider_id: uuid.UUID | None,
    tenant_id: uuid.UUID | None,
    *,
    statuses: Sequence[str] = (),
    capabilities: Mapping[str, bool] | None = None,
    pattern: str | None = None,
) -> Select[Site]:
    """The sites the sides may read, matching the filters (a statement to page)."""
    stmt = select(Site).where(visible_to(provider_id, tenant_id))
    if statuses:
        stmt = stmt.where(Site.status.in_(statuses))
    for name, value in (capabilities or {}).items():
        stmt = stmt.where(CAPABILITY_COLUMNS[name] == value)
    if pattern:
        stmt = stmt.where(
            matches(
                pattern,
                Site.name,
                Site.description,
                Site.status,
                cast(Site.location, Text),
                cast(Site.contact, Text),
            )
        )
    return stmt


async def site_by_id(session: AsyncSession, site_id: uuid.UUID, *, lock: str | None = None) -> Site | None:
    """The site; ``lock`` is ``"key_share"`` (it is being changed) or ``"update"`` (being deleted)."""
    if lock is None:
        return await session.get(Site, site_id)
    stmt = select(Site).where(Site.id == site_id)
    stmt = stmt.with_for_update(key_share=True) if lock == "key_share" else stmt.with_for_update()
    found: Site | None = await session.scalar(stmt)
    return found


async def site_visible_to(
    session: AsyncSession, site_id: uuid.UUID, provider_id: uuid.UUID | None, tenant_id: uuid.UUID | None
) -> bool:
    return bool(
        await session.scalar(select(exists().where(Site.id == site_id, visible_to(provider_id, tenant_id))))
    )


async def sites_by_id(session: AsyncSession, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Site]:
    return await rows_by_id(session, Site, set(ids))


async def site_named(
    session: AsyncSession, provider_id: uuid.UUID, name: str, *, other_than: uuid.UUID | None = None
) -> uuid.UUID | None:
    """The id of the provider's site with this name (other than ``other_than``)."""
    scope = Site.infrastructure_provider_id == provider_id
    found: uuid.UUID | None = await id_named(session, Site, name, scope, other_than=other_than)
    return found


async def site_has_fnn_vpcs(session: AsyncSession, site_id: uuid.UUID) -> bool:
    return bool(
        await session.scalar(
            select(
                exists().where(
                    Vpc.site_id == site_id, Vpc.network_virtualization_type == NetworkVirtualizationType.FNN
                )
            )
        )
    )


async def site_has_allocations(session: AsyncSession, site_id: uuid.UUID) -> bool:
    return bool(await session.scalar(select(exists().where(Allocation.site_id == site_id))))


async def site_has_tenant_resources(session: AsyncSession, site_id: uuid.UUID) -> bool:
    """Whether a VPC, subnet, instance or NVLink logical partition is left at the site."""
    for model in (Instance, Subnet, Vpc, LogicalPartition):
        if await session.scalar(select(exists().where(model.site_id == site_id))):
            return True
    return False


async def delete_site_inventory(session: AsyncSession, site_id: uuid.UUID) -> None:
    """Remove the site's machines, NVLink domains and instance types."""
    await session.execute(delete(Machine).where(Machine.site_id == site_id))
    await session.execute(delete(NvlinkDomain).where(NvlinkDomain.site_id == site_id))
    await session.execute(delete(InstanceType).where(InstanceType.site_id == site_id))


async def machines_at_sites(
    session: AsyncSession, site_ids: Sequence[uuid.UUID]
) -> Sequence[Row[uuid.UUID, str, uuid.UUID | None]]:
    """(site_id, status, instance_id) of every machine at the sites."""
    result = await session.execute(
        select(Machine.site_id, Machine.status, Machine.instance_id).where(Machine.site_id.in_(site_ids))
    )
    return result.all()


async def reserved_at_sites(session: AsyncSession, site_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, int]:
    """Σ instance type reservations per site."""
    rows = await session.execute(
        select(Allocation.site_id, func.coalesce(func.sum(AllocationConstraint.constraint_value), 0))
        .join(AllocationConstraint, AllocationConstraint.allocation_id == Allocation.id)
        .where(
            Allocation.site_id.in_(site_ids),
            AllocationConstraint.resource_type == ResourceType.INSTANCE_TYPE,
        )
        .group_by(Allocation.site_id)
    )
    return {site_id: int(total) for site_id, total in rows.all()}
