"""The SQL of VPCs that is not plain ORM row access."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession


async def lock_vni_choice(session: AsyncSession, site_id: uuid.UUID) -> None:
    """Serialise VNI choice per site, to the end of the transaction."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"vpc-vni/{site_id}"})
