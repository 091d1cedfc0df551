"""The SQL of the reference's read-only stats and sub-resource reads: machine status counts per
instance type and tenant, GPU counts per GPU name, distinct machine capabilities, an instance's
status history and Ethernet interfaces."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Select, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Instance, InstanceInterface, Machine, MachineCapability, Site

# The bucket of a machine in the reference's machine stats: a Ready machine holding an instance is
# in use (nico keeps such machines Ready); Reset, Decommissioned and Unknown count as unknown. A Ready
# machine without an instance that a logical partition's reservation holds is reserved (nico's own
# class: neither free for others nor in use).
BUCKET = """
CASE WHEN m.status = 'Initializing' THEN 'initializing'
     WHEN m.status = 'Error' THEN 'error'
     WHEN m.status = 'Maintenance' THEN 'maintenance'
     WHEN m.status = 'InUse' OR (m.status = 'Ready' AND m.instance_id IS NOT NULL) THEN 'inUse'
     WHEN m.status = 'Ready' AND m.reserved_lp_id IS NOT NULL THEN 'reserved'
     WHEN m.status = 'Ready' THEN 'ready'
     ELSE 'unknown' END
"""


async def site_by_id(session: AsyncSession, site_id: uuid.UUID) -> Site | None:
    return await session.get(Site, site_id)


async def gpu_stats(session: AsyncSession, site_id: uuid.UUID) -> Sequence[Any]:
    """(GPU name, GPUs, machines) over the site's machines, by GPU capability name."""
    rows = await session.execute(
        text(
            "SELECT c.name, COALESCE(sum(COALESCE(c.count, 1)), 0) AS gpus, count(DISTINCT m.id) AS machines "
            "FROM machine m JOIN machine_capability c ON c.machine_id = m.id AND c.type = 'GPU' "
            "WHERE m.site_id = :site GROUP BY c.name ORDER BY c.name"
        ),
        {"site": site_id},
    )
    return rows.all()


async def machine_buckets_by_type(session: AsyncSession, site_id: uuid.UUID) -> Sequence[Any]:
    """(instance type id or None, bucket, machines, machines holding an instance) at the site."""
    rows = await session.execute(
        text(
            f"SELECT m.instance_type_id, {BUCKET} AS bucket, count(*), "
            "count(*) FILTER (WHERE m.instance_id IS NOT NULL) "
            "FROM machine m WHERE m.site_id = :site GROUP BY 1, 2"
        ),
        {"site": site_id},
    )
    return rows.all()


async def instance_types_at(session: AsyncSession, site_id: uuid.UUID) -> Sequence[Any]:
    """(id, name) of the instance types at the site."""
    rows = await session.execute(
        text("SELECT id, name FROM instance_type WHERE site_id = :site ORDER BY name, id"), {"site": site_id}
    )
    return rows.all()


async def allocated_by_tenant_and_type(session: AsyncSession, site_id: uuid.UUID) -> Sequence[Any]:
    """(tenant id, org, org display name, instance type id, allocated) of the site's instance-type
    allocation constraints."""
    rows = await session.execute(
        text(
            "SELECT t.id, t.org, t.org_display_name, c.instance_type_id, sum(c.constraint_value) "
            "FROM allocation a JOIN allocation_constraint c ON c.allocation_id = a.id "
            "JOIN tenant t ON t.id = a.tenant_id "
            "WHERE a.site_id = :site AND c.instance_type_id IS NOT NULL "
            "GROUP BY t.id, t.org, t.org_display_name, c.instance_type_id"
        ),
        {"site": site_id},
    )
    return rows.all()


async def used_buckets_by_tenant_and_type(session: AsyncSession, site_id: uuid.UUID) -> Sequence[Any]:
    """(tenant id, org, org display name, instance type id, bucket, machines) of the machines the
    site's instances hold, and of those the tenants' reservations hold free (bucket ``reserved``)."""
    rows = await session.execute(
        text(
            f"SELECT t.id, t.org, t.org_display_name, m.instance_type_id, {BUCKET} AS bucket, count(*) "
            "FROM machine m JOIN instance i ON i.id = m.instance_id JOIN tenant t ON t.id = i.tenant_id "
            "WHERE m.site_id = :site AND m.instance_type_id IS NOT NULL GROUP BY 1, 2, 3, 4, 5 "
            "UNION ALL "
            "SELECT t.id, t.org, t.org_display_name, m.instance_type_id, 'reserved', count(*) "
            "FROM machine m JOIN logical_partition lp ON lp.id = m.reserved_lp_id "
            "JOIN tenant t ON t.id = lp.tenant_id "
            "WHERE m.site_id = :site AND m.instance_type_id IS NOT NULL AND m.instance_id IS NULL "
            "AND m.status = 'Ready' GROUP BY 1, 2, 3, 4"
        ),
        {"site": site_id},
    )
    return rows.all()


CAPABILITY_COLUMNS = (
    MachineCapability.type,
    MachineCapability.name,
    MachineCapability.frequency,
    MachineCapability.capacity,
    MachineCapability.vendor,
    MachineCapability.cores,
    MachineCapability.threads,
    MachineCapability.inactive_devices,
    MachineCapability.count,
    MachineCapability.device_type,
)
# Distinct rows have no single creation time: created/updated order like type.
CAPABILITY_ORDER = {
    "type": MachineCapability.type,
    "name": MachineCapability.name,
    "created": MachineCapability.type,
    "updated": MachineCapability.type,
}


def distinct_capabilities(
    provider_id: uuid.UUID,
    *,
    site_id: uuid.UUID | None,
    has_instance_type: bool | None,
    equal: dict[str, Any],
    inactive_devices: list[int] | None,
) -> Select[Any]:
    """Distinct capability rows over the provider's machines (``equal``: column name -> value)."""
    stmt = cast(
        "Select[Any]",
        select(*CAPABILITY_COLUMNS)
        .distinct()
        .join(Machine, Machine.id == MachineCapability.machine_id)
        .join(Site, Site.id == Machine.site_id)
        .where(Site.infrastructure_provider_id == provider_id),
    )
    if site_id is not None:
        stmt = stmt.where(Machine.site_id == site_id)
    if has_instance_type is not None:
        column = Machine.instance_type_id
        stmt = stmt.where(column.is_not(None) if has_instance_type else column.is_(None))
    for name, value in equal.items():
        stmt = stmt.where(getattr(MachineCapability, name) == value)
    if inactive_devices is not None:
        stmt = stmt.where(MachineCapability.inactive_devices == inactive_devices)
    return stmt


async def count_rows(session: AsyncSession, stmt: Select[Any]) -> int:
    total = await session.scalar(select(func.count()).select_from(stmt.subquery()))
    return int(total or 0)


async def capability_page(
    session: AsyncSession, stmt: Select[Any], order: Any, descending: bool, offset: int, limit: int
) -> Sequence[Any]:
    keys = [order.desc() if descending else order.asc(), *[c.asc() for c in CAPABILITY_COLUMNS]]
    rows = await session.execute(stmt.order_by(*keys).offset(offset).limit(limit))
    return list(rows.all())


async def instance_tenant(session: AsyncSession, instance_id: uuid.UUID) -> uuid.UUID | None:
    """The tenant of the instance (None: no such instance)."""
    found: uuid.UUID | None = await session.scalar(
        select(Instance.tenant_id).where(Instance.id == instance_id)
    )
    return found


def instance_interfaces(instance_id: uuid.UUID, statuses: Sequence[str]) -> Select[Any]:
    stmt = select(InstanceInterface).where(InstanceInterface.instance_id == instance_id)
    if statuses:
        stmt = stmt.where(InstanceInterface.status.in_(statuses))
    return stmt


INTERFACE_ORDER = {
    "status": InstanceInterface.status,
    "created": InstanceInterface.created,
    "updated": InstanceInterface.updated,
}
