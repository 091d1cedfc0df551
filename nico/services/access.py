"""Who may use what: the tenant-site association behind partition, VPC and instance rules."""

from __future__ import annotations

import uuid

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import TenantSite


async def tenant_uses_site(session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID) -> bool:
    """True when the tenant holds an allocation at the site (the reference's TenantSite row)."""
    found: bool | None = await session.scalar(
        select(exists().where(TenantSite.tenant_id == tenant_id, TenantSite.site_id == site_id))
    )
    return bool(found)
