"""The SQL of machine inventory: the rows and facts the machine service decides with, the registration
lock, the rows a registration checks and changes, and the location of machines on the NVLink fabric
(domains, trays, GPUs)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, any_, case, delete, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, MachineStatus, NvLinkInterfaceStatus
from nico.db.models import (
    Gpu,
    Instance,
    InstanceType,
    Machine,
    MachineCapability,
    NvlinkDomain,
    NvlinkInterface,
    Site,
    TenantSite,
)
from nico.db.queries.common import matches, provider_site_ids
from nico.db.queries.common import site_by_id as site_by_id

# A Ready machine holding an instance is shown (and sorted, and filtered) as InUse.
SHOWN_STATUS: ColumnElement[str] = case(
    (
        and_(Machine.status == MachineStatus.READY, Machine.instance_id.is_not(None)),
        MachineStatus.IN_USE.value,
    ),
    else_=Machine.status,
)
ORDER_COLUMNS: dict[str, Any] = {
    "id": Machine.id,
    "status": SHOWN_STATUS,
    "created": Machine.created,
    "updated": Machine.updated,
}


async def tenant_holds_site(session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID) -> bool:
    return await session.get(TenantSite, (tenant_id, site_id)) is not None


async def existing_instance_type_ids(session: AsyncSession, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    return set(await session.scalars(select(InstanceType.id).where(InstanceType.id.in_(ids))))


def _owning(condition: ColumnElement[bool]) -> Select[str | None]:
    """Ids of the machines with a capability meeting ``condition``."""
    return select(MachineCapability.machine_id).where(condition)


def machines_matching(
    *,
    provider_id: uuid.UUID | None,
    site_id: uuid.UUID | None,
    instance_type_ids: Sequence[uuid.UUID] = (),
    has_instance_type: bool | None = None,
    has_instance: bool | None = None,
    statuses: Sequence[str] = (),
    ids: Sequence[str] = (),
    instance_tenant_ids: Sequence[uuid.UUID] = (),
    capability_types: Sequence[str] = (),
    capability_names: Sequence[str] = (),
    hw_sku_device_types: Sequence[str] = (),
    is_missing_on_site: bool | None = None,
    pattern: str | None = None,
) -> Select[Machine]:
    """The machines at the provider's sites (every machine without ``provider_id``) matching the filters
    (a statement to page)."""
    stmt = select(Machine)
    if provider_id is not None:
        stmt = stmt.where(Machine.site_id == any_(provider_site_ids(provider_id)))
    if site_id is not None:
        stmt = stmt.where(Machine.site_id == site_id)
    if instance_type_ids:
        stmt = stmt.where(Machine.instance_type_id.in_(instance_type_ids))
    if has_instance_type is not None:
        column = Machine.instance_type_id
        stmt = stmt.where(column.is_not(None) if has_instance_type else column.is_(None))
    if has_instance is not None:
        column = Machine.instance_id
        stmt = stmt.where(column.is_not(None) if has_instance else column.is_(None))
    if statuses:
        stmt = stmt.where(SHOWN_STATUS.in_(statuses))
    if ids:
        stmt = stmt.where(Machine.id.in_(ids))
    if instance_tenant_ids:
        stmt = stmt.where(
            Machine.instance_id.in_(select(Instance.id).where(Instance.tenant_id.in_(instance_tenant_ids)))
        )
    if capability_types:
        stmt = stmt.where(Machine.id.in_(_owning(MachineCapability.type.in_(capability_types))))
    if capability_names:
        stmt = stmt.where(Machine.id.in_(_owning(MachineCapability.name.in_(capability_names))))
    if hw_sku_device_types:
        stmt = stmt.where(Machine.hw_sku_device_type.in_(hw_sku_device_types))
    if is_missing_on_site is not None:
        stmt = stmt.where(Machine.is_missing_on_site == is_missing_on_site)
    if pattern:
        stmt = stmt.where(
            matches(
                pattern,
                Machine.id,
                Machine.hostname,
                Machine.serial_number,
                Machine.vendor,
                Machine.product_name,
                SHOWN_STATUS,
            )
        )
    return stmt


async def site_providers(session: AsyncSession, site_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, uuid.UUID]:
    """Site id -> its provider id."""
    ids = set(site_ids)
    if not ids:
        return {}
    rows = await session.execute(select(Site.id, Site.infrastructure_provider_id).where(Site.id.in_(ids)))
    return {row[0]: row[1] for row in rows.all()}


async def instance_tenants(
    session: AsyncSession, instance_ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, uuid.UUID]:
    """Instance id -> its tenant id."""
    ids = set(instance_ids)
    if not ids:
        return {}
    rows = await session.execute(select(Instance.id, Instance.tenant_id).where(Instance.id.in_(ids)))
    return {row[0]: row[1] for row in rows.all()}


async def gpus_of(session: AsyncSession, machine_ids: Sequence[str]) -> dict[str, list[Gpu]]:
    out: dict[str, list[Gpu]] = {}
    if machine_ids:
        rows = await session.scalars(
            select(Gpu).where(Gpu.machine_id.in_(list(machine_ids))).order_by(Gpu.machine_id, Gpu.device_id)
        )
        for gpu in rows:
            out.setdefault(gpu.machine_id, []).append(gpu)
    return out


async def machine_by_id(session: AsyncSession, machine_id: str) -> Machine | None:
    return await session.get(Machine, machine_id)


async def relock_machine(session: AsyncSession, machine: Machine) -> None:
    """Reload the machine FOR UPDATE (after the instance type locks: types before machines)."""
    await session.refresh(machine, with_for_update=True)


async def delete_machine_row(session: AsyncSession, machine_id: str) -> None:
    """Remove the machine (its GPUs, capabilities and history cascade)."""
    await session.execute(delete(Machine).where(Machine.id == machine_id))


async def instance_types_locked(
    session: AsyncSession, ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, InstanceType]:
    """The instance types FOR NO KEY UPDATE, locked in id order."""
    rows = await session.scalars(
        select(InstanceType)
        .where(InstanceType.id.in_(sorted(set(ids))))
        .order_by(InstanceType.id)
        .with_for_update(key_share=True)
    )
    return {row.id: row for row in rows}


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


async def reconfigure_instance(session: AsyncSession, instance_id: uuid.UUID) -> bool:
    """An instance's Ready NVLink interfaces back to Pending and a Ready instance to Configuring (its
    GPUs changed under it); whether the instance's status changed."""
    await session.execute(
        update(NvlinkInterface)
        .where(
            NvlinkInterface.instance_id == instance_id, NvlinkInterface.status == NvLinkInterfaceStatus.READY
        )
        .values(status=NvLinkInterfaceStatus.PENDING)
        .execution_options(synchronize_session=False)
    )
    changed = await session.execute(
        update(Instance)
        .where(Instance.id == instance_id, Instance.status == InstanceStatus.READY)
        .values(status=InstanceStatus.CONFIGURING)
        .returning(Instance.id)
        .execution_options(synchronize_session=False)
    )
    return changed.first() is not None
