"""Site-wide reads for operator commands: NVLink domains with their last error, one machine, every
machine with its GPU count."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Gpu, Machine, NvlinkDomain


async def nvlink_domains(session: AsyncSession) -> list[NvlinkDomain]:
    """Every NVLink domain, by uuid."""
    return list(await session.scalars(select(NvlinkDomain).order_by(NvlinkDomain.uuid)))


async def machine(session: AsyncSession, machine_id: str) -> Machine | None:
    return await session.get(Machine, machine_id)


async def machines(session: AsyncSession, site_id: uuid.UUID | None) -> list[tuple[Machine, int]]:
    """Every machine (or one site's) with how many GPUs it has, by site, chassis, tray and id."""
    gpus = select(func.count()).where(Gpu.machine_id == Machine.id).scalar_subquery()
    stmt: Any = select(Machine, gpus).order_by(
        Machine.site_id, Machine.chassis_serial, Machine.tray_index, Machine.id
    )
    if site_id is not None:
        stmt = stmt.where(Machine.site_id == site_id)
    return [(machine, int(count)) for machine, count in (await session.execute(stmt)).all()]
