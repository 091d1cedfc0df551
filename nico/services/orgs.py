"""Tenants and the infrastructure provider of an org: lookup and lazy creation on ``/current``."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.base import utcnow
from nico.db.models import InfrastructureProvider, Tenant
from nico.services.errors import ServiceError

NO_TENANT = "Org does not have a Tenant associated"


async def tenant_of(session: AsyncSession, org: str) -> Tenant | None:
    result: Tenant | None = await session.scalar(select(Tenant).where(Tenant.org == org))
    return result


async def require_tenant(session: AsyncSession, org: str, *, status: int = 400) -> Tenant:
    """The org's tenant, or ``status`` with the reference's text (400 on create paths, 403 elsewhere)."""
    found = await tenant_of(session, org)
    if found is None:
        raise ServiceError(status, NO_TENANT)
    return found


async def provider_of(session: AsyncSession, org: str) -> InfrastructureProvider | None:
    result: InfrastructureProvider | None = await session.scalar(
        select(InfrastructureProvider).where(InfrastructureProvider.org == org)
    )
    return result


async def current_tenant(session: AsyncSession, org: str, display_name: str | None) -> Tenant:
    """The org's tenant, created on first call; the display name follows the caller's token."""
    await session.execute(
        insert(Tenant)
        .values(org=org, org_display_name=display_name)
        .on_conflict_do_nothing(index_elements=["org"])
    )
    tenant = await session.scalar(
        select(Tenant).where(Tenant.org == org).execution_options(populate_existing=True)
    )
    assert tenant is not None
    if display_name and tenant.org_display_name != display_name:
        tenant.org_display_name = display_name
        tenant.updated = utcnow()
        await session.flush()
    return tenant


async def current_provider(
    session: AsyncSession, org: str, display_name: str | None
) -> InfrastructureProvider:
    """The org's infrastructure provider, created on first call."""
    await session.execute(
        insert(InfrastructureProvider)
        .values(org=org, org_display_name=display_name)
        .on_conflict_do_nothing(index_elements=["org"])
    )
    provider = await session.scalar(
        select(InfrastructureProvider)
        .where(InfrastructureProvider.org == org)
        .execution_options(populate_existing=True)
    )
    assert provider is not None
    if display_name and provider.org_display_name != display_name:
        provider.org_display_name = display_name
        provider.updated = utcnow()
        await session.flush()
    return provider
