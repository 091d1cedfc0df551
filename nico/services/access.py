"""Who may use what: the tenant-site association behind partition, VPC and instance rules."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Exists, exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import TenantSite


def uses_site(tenant_id: Any, site_id: Any) -> Exists:
    """SQL: the tenant holds an allocation at the site (the reference's TenantSite row); the ids may
    be values or columns, so a query can check it alongside other lookups."""
    return exists().where(TenantSite.tenant_id == tenant_id, TenantSite.site_id == site_id)


async def tenant_uses_site(session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID) -> bool:
    """True when the tenant holds an allocation at the site."""
    found: bool | None = await session.scalar(select(uses_site(tenant_id, site_id)))
    return bool(found)
