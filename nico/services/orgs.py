"""Tenants and the infrastructure provider of an org: lookup and lazy creation on ``/current``."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.base import utcnow
from nico.db.models import InfrastructureProvider, Tenant
from nico.services.errors import ServiceError, bad_request
from nico.services.records import copy_of

NO_TENANT = "Org does not have a Tenant associated"
ROLE_WITHOUT_PROVIDER = (
    "User has Provider role but org doesn't have an Infrastructure Provider associated, "
    "retrieve current Infrastructure Provider for org and try again"
)
ROLE_WITHOUT_TENANT = (
    "User has Tenant role but org doesn't have a Tenant associated, retrieve current Tenant for org "
    "and try again"
)


@dataclass(frozen=True)
class ProviderRecord:
    """An infrastructure provider as views show it."""

    id: uuid.UUID
    org: str
    org_display_name: str | None
    created: datetime
    updated: datetime


@dataclass(frozen=True)
class TenantRecord(ProviderRecord):
    """A tenant as views show it."""

    targeted_instance_creation: bool


def provider_record(row: InfrastructureProvider) -> ProviderRecord:
    return copy_of(ProviderRecord, row)


def tenant_record(row: Tenant) -> TenantRecord:
    return copy_of(TenantRecord, row)


@dataclass(frozen=True)
class Viewer:
    """The sides a caller reads with: the org's provider, its tenant, or both (the union of views)."""

    provider: ProviderRecord | None
    tenant: TenantRecord | None


async def viewer(session: AsyncSession, org: str, *, provider_role: bool, tenant_role: bool) -> Viewer:
    """Resolve the "provider or tenant" sides of a caller holding the given roles.

    A role whose org row is missing is dropped; when no side remains the request fails with 400 and
    the reference's messages for every dropped role."""
    provider = await provider_of(session, org) if provider_role else None
    tenant = await tenant_of(session, org) if tenant_role else None
    if provider is None and tenant is None:
        missing = [ROLE_WITHOUT_PROVIDER] if provider_role else []
        missing += [ROLE_WITHOUT_TENANT] if tenant_role else []
        raise bad_request(". ".join(missing))
    return Viewer(
        provider_record(provider) if provider is not None else None,
        tenant_record(tenant) if tenant is not None else None,
    )


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


async def current_tenant(session: AsyncSession, org: str, display_name: str | None) -> TenantRecord:
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
    return tenant_record(tenant)


async def current_provider(session: AsyncSession, org: str, display_name: str | None) -> ProviderRecord:
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
    return provider_record(provider)


async def providers_by_id(
    session: AsyncSession, ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, InfrastructureProvider]:
    wanted = set(ids)
    if not wanted:
        return {}
    rows = await session.scalars(select(InfrastructureProvider).where(InfrastructureProvider.id.in_(wanted)))
    return {row.id: row for row in rows}


async def tenants_by_id(session: AsyncSession, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Tenant]:
    wanted = set(ids)
    if not wanted:
        return {}
    rows = await session.scalars(select(Tenant).where(Tenant.id.in_(wanted)))
    return {row.id: row for row in rows}
