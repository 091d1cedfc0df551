"""The SQL of where the fabric managers are: the NMX-C endpoint registry and NMX-M credentials."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.base import utcnow
from nico.db.models import FabricCredential, NvlinkNmxcEndpoint


async def endpoints(session: AsyncSession, chassis_serial: str | None = None) -> list[NvlinkNmxcEndpoint]:
    """Registered endpoints by chassis serial (only ``chassis_serial``'s when given)."""
    query = select(NvlinkNmxcEndpoint).order_by(NvlinkNmxcEndpoint.chassis_serial)
    if chassis_serial is not None:
        query = query.where(NvlinkNmxcEndpoint.chassis_serial == chassis_serial)
    return list(await session.scalars(query))


async def insert_endpoint(session: AsyncSession, chassis_serial: str, endpoint: str) -> bool:
    """Register an endpoint; False when the chassis has one already."""
    inserted = await session.execute(
        insert(NvlinkNmxcEndpoint)
        .values(chassis_serial=chassis_serial, endpoint=endpoint)
        .on_conflict_do_nothing(index_elements=["chassis_serial"])
        .returning(NvlinkNmxcEndpoint.chassis_serial)
    )
    return inserted.scalar() is not None


async def delete_endpoint(session: AsyncSession, chassis_serial: str) -> int:
    """Remove the chassis's endpoint; returns the rows removed."""
    result = await session.execute(
        delete(NvlinkNmxcEndpoint).where(NvlinkNmxcEndpoint.chassis_serial == chassis_serial)
    )
    return int(getattr(result, "rowcount", 0) or 0)


async def upsert_credential(session: AsyncSession, name: str, username: str, password: str) -> None:
    """Store basic-auth credentials under ``name``, replacing any."""
    await session.execute(
        insert(FabricCredential)
        .values(name=name, kind="basic", username=username, password=password)
        .on_conflict_do_update(
            index_elements=["name"], set_={"username": username, "password": password, "updated": utcnow()}
        )
    )


async def delete_credential(session: AsyncSession, name: str) -> int:
    result = await session.execute(delete(FabricCredential).where(FabricCredential.name == name))
    return int(getattr(result, "rowcount", 0) or 0)
