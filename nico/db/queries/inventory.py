"""The SQL of machine inventory: the registration lock, the rows a registration checks and changes,
and the NVLink placement of machines (domains, trays, GPUs)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import delete, select, text, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Gpu, Machine, MachineCapability, NvlinkDomain, Site

# Any constant works: it only has to be the same for every registration ("nico" + 1).
REGISTRATION_LOCK = 0x6E69_636F_0001


async def lock_inventory(session: AsyncSession) -> None:
    """Registrations and NVLink info replacements take turns (to the end of the transaction)."""
    await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": REGISTRATION_LOCK})


async def site_key_shared(session: AsyncSession, site_id: uuid.UUID) -> Site | None:
    """The site, locked against deletion (FOR KEY SHARE)."""
    return await session.scalar(select(Site).where(Site.id == site_id).with_for_update(key_share=True))


async def machines_key_shared(session: AsyncSession, ids: Sequence[str]) -> dict[str, Machine]:
    """The machines of ``ids`` that exist, locked FOR KEY SHARE in id order."""
    rows = await session.scalars(
        select(Machine).where(Machine.id.in_(ids)).order_by(Machine.id).with_for_update(key_share=True)
    )
    return {m.id: m for m in rows}


async def machine_key_shared(session: AsyncSession, machine_id: str) -> Machine | None:
    return await session.scalar(
        select(Machine).where(Machine.id == machine_id).with_for_update(key_share=True)
    )


async def domains_by_uuid(session: AsyncSession, uuids: set[uuid.UUID]) -> list[NvlinkDomain]:
    return list(await session.scalars(select(NvlinkDomain).where(NvlinkDomain.uuid.in_(uuids))))


async def trays_of_other_machines(
    session: AsyncSession, trays: list[tuple[str, int]], except_ids: list[str]
) -> list[tuple[str, str, int | None]]:
    """(machine id, chassis serial, tray) of machines outside ``except_ids`` in the trays."""
    rows = await session.execute(
        select(Machine.id, Machine.chassis_serial, Machine.tray_index).where(
            tuple_(Machine.chassis_serial, Machine.tray_index).in_(trays), Machine.id.not_in(except_ids)
        )
    )
    return [(i, str(serial), tray) for i, serial, tray in rows.all()]


async def gpu_owners_outside(
    session: AsyncSession, gpu_uids: list[int], except_ids: list[str]
) -> list[tuple[int, str]]:
    """(gpu_uid, machine id) of the GPUs registered to machines outside ``except_ids``."""
    rows = await session.execute(
        select(Gpu.gpu_uid, Gpu.machine_id).where(
            Gpu.gpu_uid.in_(gpu_uids), Gpu.machine_id.not_in(except_ids)
        )
    )
    return [(uid, machine_id) for uid, machine_id in rows.all()]


async def gpus_of_machine(session: AsyncSession, machine_id: str) -> list[Gpu]:
    """The machine's GPUs by device id."""
    return list(
        await session.scalars(select(Gpu).where(Gpu.machine_id == machine_id).order_by(Gpu.device_id))
    )


async def delete_gpus(session: AsyncSession, machine_id: str, device_ids: list[int]) -> None:
    await session.execute(delete(Gpu).where(Gpu.machine_id == machine_id, Gpu.device_id.in_(device_ids)))


async def ensure_domains(session: AsyncSession, site_of_domain: dict[uuid.UUID, uuid.UUID]) -> None:
    """Record NVLink domains (uuid -> site) that are not recorded yet."""
    await session.execute(
        insert(NvlinkDomain)
        .values([{"uuid": domain, "site_id": site_id} for domain, site_id in site_of_domain.items()])
        .on_conflict_do_nothing(index_elements=["uuid"])
    )


async def delete_machine_capabilities(session: AsyncSession, machine_id: str) -> None:
    await session.execute(delete(MachineCapability).where(MachineCapability.machine_id == machine_id))


async def instance_type_capabilities(
    session: AsyncSession, instance_type_id: uuid.UUID
) -> list[MachineCapability]:
    """The instance type's capabilities in their order."""
    return list(
        await session.scalars(
            select(MachineCapability)
            .where(MachineCapability.instance_type_id == instance_type_id)
            .order_by(MachineCapability.position, MachineCapability.id)
        )
    )
