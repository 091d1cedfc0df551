"""Allocation SQL: the rows and facts the allocation service decides with."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, String, cast, delete, exists, false, func, null, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Allocation, AllocationConstraint, Instance, InstanceType, Site, Tenant, TenantSite
from nico.db.queries.common import columns, id_named, matches, row_locked
from nico.db.queries.common import site_by_id as site_by_id

ORDER_COLUMNS: dict[str, Any] = {
    **columns(Allocation),
    "site_name": select(Site.name).where(Site.id == Allocation.site_id).scalar_subquery(),
    "tenant_org_display_name": select(Tenant.org_display_name)
    .where(Tenant.id == Allocation.tenant_id)
    .scalar_subquery(),
    "instance_type_name": select(InstanceType.name)
    .join(AllocationConstraint, AllocationConstraint.instance_type_id == InstanceType.id)
    .where(AllocationConstraint.allocation_id == Allocation.id)
    .scalar_subquery(),
    # nico keeps no IP blocks: every allocation sorts as having none.
    "ip_block_name": cast(null(), String),
    "constraint_value": select(AllocationConstraint.constraint_value)
    .where(AllocationConstraint.allocation_id == Allocation.id)
    .scalar_subquery(),
}


def visible_to(provider_id: uuid.UUID | None, tenant_id: uuid.UUID | None) -> ColumnElement[bool]:
    """Allocations of the provider and of the tenant (either may be absent)."""
    clauses: list[ColumnElement[bool]] = []
    if provider_id is not None:
        clauses.append(Allocation.infrastructure_provider_id == provider_id)
    if tenant_id is not None:
        clauses.append(Allocation.tenant_id == tenant_id)
    return or_(*clauses) if clauses else false()


async def existing_site_ids(session: AsyncSession, site_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    return set(await session.scalars(select(Site.id).where(Site.id.in_(list(site_ids)))))


def allocations_visible_to(
    provider_id: uuid.UUID | None,
    tenant_id: uuid.UUID | None,
    *,
    site_ids: Sequence[uuid.UUID] = (),
    statuses: Sequence[str] = (),
    ids: Sequence[uuid.UUID] = (),
    tenant_ids: Sequence[uuid.UUID] = (),
    constraint_filters: Sequence[tuple[str, Sequence[Any]]] = (),
    pattern: str | None = None,
) -> Select[Allocation]:
    """The allocations the sides may read, matching the filters (a statement to page).
    ``constraint_filters`` pairs a constraint column name with the values one constraint must have."""
    stmt = select(Allocation).where(visible_to(provider_id, tenant_id))
    if site_ids:
        stmt = stmt.where(Allocation.site_id.in_(site_ids))
    if statuses:
        stmt = stmt.where(Allocation.status.in_(statuses))
    if ids:
        stmt = stmt.where(Allocation.id.in_(ids))
    if tenant_ids:
        stmt = stmt.where(Allocation.tenant_id.in_(tenant_ids))
    for column, values in constraint_filters:
        if values:
            wanted = getattr(AllocationConstraint, column).in_(values)
            stmt = stmt.where(Allocation.id.in_(select(AllocationConstraint.allocation_id).where(wanted)))
    if pattern:
        stmt = stmt.where(matches(pattern, Allocation.name, Allocation.description, Allocation.status))
    return stmt


async def allocation_by_id(
    session: AsyncSession, allocation_id: uuid.UUID, *, lock: bool = False
) -> Allocation | None:
    """The allocation; with ``lock`` held FOR NO KEY UPDATE (it is being changed)."""
    if not lock:
        return await session.get(Allocation, allocation_id)
    found: Allocation | None = await row_locked(session, Allocation, allocation_id)
    return found


async def allocation_visible_to(
    session: AsyncSession,
    allocation_id: uuid.UUID,
    provider_id: uuid.UUID | None,
    tenant_id: uuid.UUID | None,
) -> bool:
    return bool(
        await session.scalar(
            select(exists().where(Allocation.id == allocation_id, visible_to(provider_id, tenant_id)))
        )
    )


async def constraints_of_allocations(
    session: AsyncSession, allocation_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[AllocationConstraint]]:
    out: dict[uuid.UUID, list[AllocationConstraint]] = defaultdict(list)
    if allocation_ids:
        rows = await session.scalars(
            select(AllocationConstraint).where(AllocationConstraint.allocation_id.in_(list(allocation_ids)))
        )
        for row in rows:
            out[row.allocation_id].append(row)
    return out


async def constraint_by_id(session: AsyncSession, constraint_id: uuid.UUID) -> AllocationConstraint | None:
    return await session.get(AllocationConstraint, constraint_id)


async def tenant_locked(session: AsyncSession, tenant_id: uuid.UUID) -> Tenant | None:
    """The tenant row FOR NO KEY UPDATE (inserts referencing it are not blocked)."""
    found: Tenant | None = await row_locked(session, Tenant, tenant_id)
    return found


async def instance_type_locked(session: AsyncSession, type_id: uuid.UUID) -> InstanceType | None:
    """The instance type FOR NO KEY UPDATE: the lock every capacity check and its write hold."""
    found: InstanceType | None = await row_locked(session, InstanceType, type_id)
    return found


async def allocation_named(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    site_id: uuid.UUID,
    name: str,
    *,
    other_than: uuid.UUID | None = None,
) -> uuid.UUID | None:
    """The id of the tenant's allocation with this name at the site (other than ``other_than``)."""
    scope = (Allocation.tenant_id == tenant_id, Allocation.site_id == site_id)
    found: uuid.UUID | None = await id_named(session, Allocation, name, *scope, other_than=other_than)
    return found


async def link_tenant_site(session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID) -> None:
    await session.execute(
        insert(TenantSite).values(tenant_id=tenant_id, site_id=site_id).on_conflict_do_nothing()
    )


async def unlink_tenant_site_unless_allocated(
    session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID
) -> None:
    """Drop the tenant-site link when the tenant holds no allocation at the site any more."""
    await session.execute(
        delete(TenantSite).where(
            TenantSite.tenant_id == tenant_id,
            TenantSite.site_id == site_id,
            ~exists().where(Allocation.tenant_id == tenant_id, Allocation.site_id == site_id),
        )
    )


async def instance_count(
    session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID, type_id: uuid.UUID
) -> int:
    """The tenant's instances of an instance type at a site."""
    return int(
        await session.scalar(
            select(func.count()).where(
                Instance.tenant_id == tenant_id,
                Instance.site_id == site_id,
                Instance.instance_type_id == type_id,
            )
        )
        or 0
    )


async def tenant_reserved(
    session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID, type_id: uuid.UUID
) -> int:
    """Σ the tenant's reservations of an instance type at a site."""
    return int(
        await session.scalar(
            select(func.coalesce(func.sum(AllocationConstraint.constraint_value), 0))
            .join(Allocation, Allocation.id == AllocationConstraint.allocation_id)
            .where(
                Allocation.tenant_id == tenant_id,
                Allocation.site_id == site_id,
                AllocationConstraint.instance_type_id == type_id,
            )
        )
        or 0
    )
