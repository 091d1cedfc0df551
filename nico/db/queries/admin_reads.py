"""Site-wide reads for operator commands: NVLink domains with their last error, one machine."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Machine, NvlinkDomain


async def nvlink_domains(session: AsyncSession) -> list[NvlinkDomain]:
    """Every NVLink domain, by uuid."""
    return list(await session.scalars(select(NvlinkDomain).order_by(NvlinkDomain.uuid)))


async def machine(session: AsyncSession, machine_id: str) -> Machine | None:
    return await session.get(Machine, machine_id)
