"""Subnet SQL: the rows and facts the subnet service decides with."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Select, exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import InstanceInterface, Subnet, TenantSite, Vpc
from nico.db.queries.common import columns, id_named, matches
from nico.db.queries.common import site_by_id as site_by_id

ORDER_COLUMNS: dict[str, Any] = columns(Subnet)


async def vpc_for_subnet_creation(session: AsyncSession, vpc_id: uuid.UUID) -> Vpc | None:
    """The VPC, share-locked so that it cannot be deleted under the new subnet."""
    found: Vpc | None = await session.scalar(select(Vpc).where(Vpc.id == vpc_id).with_for_update(read=True))
    return found


async def vpc_by_id(session: AsyncSession, vpc_id: uuid.UUID) -> Vpc | None:
    return await session.get(Vpc, vpc_id)


async def tenant_holds_site(session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID) -> bool:
    return await session.get(TenantSite, (tenant_id, site_id)) is not None


async def subnet_named(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    site_id: uuid.UUID,
    name: str,
    *,
    other_than: uuid.UUID | None = None,
) -> uuid.UUID | None:
    """The id of the tenant's subnet with this name at the site (other than ``other_than``)."""
    scope = (Subnet.tenant_id == tenant_id, Subnet.site_id == site_id)
    found: uuid.UUID | None = await id_named(session, Subnet, name, *scope, other_than=other_than)
    return found


async def subnet_by_id(
    session: AsyncSession, subnet_id: uuid.UUID, *, lock: str | None = None
) -> Subnet | None:
    """The subnet; ``lock`` is ``"key_share"`` (it is being changed) or ``"update"`` (being deleted)."""
    stmt = select(Subnet).where(Subnet.id == subnet_id)
    if lock == "key_share":
        stmt = stmt.with_for_update(key_share=True)
    elif lock == "update":
        stmt = stmt.with_for_update()
    found: Subnet | None = await session.scalar(stmt)
    return found


def subnets_of_tenant(
    tenant_id: uuid.UUID,
    *,
    site_id: uuid.UUID | None = None,
    vpc_id: uuid.UUID | None = None,
    status: str | None = None,
    pattern: str | None = None,
) -> Select[Subnet]:
    """The tenant's subnets matching the filters (a statement to page)."""
    stmt = select(Subnet).where(Subnet.tenant_id == tenant_id)
    if site_id is not None:
        stmt = stmt.where(Subnet.site_id == site_id)
    if vpc_id is not None:
        stmt = stmt.where(Subnet.vpc_id == vpc_id)
    if status is not None:
        stmt = stmt.where(Subnet.status == status)
    if pattern:
        stmt = stmt.where(matches(pattern, Subnet.name, Subnet.description, Subnet.status))
    return stmt


async def subnet_in_use(session: AsyncSession, subnet_id: uuid.UUID) -> bool:
    """Whether an instance interface is on the subnet."""
    return bool(await session.scalar(select(exists().where(InstanceInterface.subnet_id == subnet_id))))
