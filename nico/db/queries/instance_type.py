"""Instance type SQL: the rows and facts the instance type service decides with."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, Text, cast, delete, exists, false, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import MachineStatus
from nico.db.models import (
    Allocation,
    AllocationConstraint,
    Instance,
    InstanceType,
    Machine,
    MachineCapability,
    TenantSite,
)
from nico.db.queries.common import columns, id_named, matches, row_locked, rows_by_id, sites_of_provider
from nico.db.queries.common import site_by_id as site_by_id

ORDER_COLUMNS: dict[str, Any] = columns(InstanceType)
ASSOCIATION_ORDER_COLUMNS: dict[str, Any] = {"created": Machine.updated, "updated": Machine.updated}


def visible_to(
    provider_id: uuid.UUID | None, tenant_id: uuid.UUID | None, *, exclude_unallocated: bool = False
) -> ColumnElement[bool]:
    """The provider's instance types, and all types at sites where the tenant holds an allocation (only
    those it holds a constraint on, with ``exclude_unallocated``)."""
    clauses: list[ColumnElement[bool]] = []
    if provider_id is not None:
        clauses.append(InstanceType.infrastructure_provider_id == provider_id)
    if tenant_id is not None:
        if exclude_unallocated:
            clauses.append(
                InstanceType.id.in_(
                    select(AllocationConstraint.instance_type_id)
                    .join(Allocation, Allocation.id == AllocationConstraint.allocation_id)
                    .where(Allocation.tenant_id == tenant_id, AllocationConstraint.constraint_value > 0)
                )
            )
        else:
            clauses.append(
                InstanceType.site_id.in_(select(TenantSite.site_id).where(TenantSite.tenant_id == tenant_id))
            )
    return or_(*clauses) if clauses else false()


def instance_types_where(
    where: ColumnElement[bool], *, site_id: uuid.UUID | None, status: str | None, pattern: str | None
) -> Select[InstanceType]:
    """The instance types meeting ``where`` and the filters (a statement to page)."""
    stmt = select(InstanceType).where(where)
    if site_id is not None:
        stmt = stmt.where(InstanceType.site_id == site_id)
    if status is not None:
        stmt = stmt.where(InstanceType.status == status)
    if pattern:
        stmt = stmt.where(
            matches(
                pattern,
                InstanceType.name,
                InstanceType.description,
                InstanceType.status,
                cast(InstanceType.labels, Text),
            )
        )
    return stmt


async def instance_type_by_id(
    session: AsyncSession, type_id: uuid.UUID, *, lock: bool = False
) -> InstanceType | None:
    """The instance type; with ``lock`` FOR NO KEY UPDATE (the lock capacity checks serialise on)."""
    if not lock:
        return await session.get(InstanceType, type_id)
    found: InstanceType | None = await row_locked(session, InstanceType, type_id)
    return found


async def instance_type_visible(
    session: AsyncSession, type_id: uuid.UUID, where: ColumnElement[bool]
) -> bool:
    return bool(await session.scalar(select(exists().where(InstanceType.id == type_id, where))))


async def instance_types_by_id(
    session: AsyncSession, ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, InstanceType]:
    return await rows_by_id(session, InstanceType, set(ids))


async def instance_type_named(
    session: AsyncSession, site_id: uuid.UUID, name: str, *, other_than: uuid.UUID | None = None
) -> uuid.UUID | None:
    """The id of the site's instance type with this name (other than ``other_than``)."""
    scope = InstanceType.site_id == site_id
    found: uuid.UUID | None = await id_named(session, InstanceType, name, scope, other_than=other_than)
    return found


async def _capabilities_by(
    session: AsyncSession, owner: str, owners: Sequence[Any]
) -> dict[Any, list[MachineCapability]]:
    """Capabilities grouped by their ``owner`` column (``instance_type_id`` or ``machine_id``), in order."""
    out: dict[Any, list[MachineCapability]] = defaultdict(list)
    if owners:
        column = getattr(MachineCapability, owner)
        rows = await session.scalars(
            select(MachineCapability)
            .where(column.in_(list(owners)))
            .order_by(MachineCapability.position, MachineCapability.id)
        )
        for row in rows:
            key = getattr(row, owner)
            assert key is not None
            out[key].append(row)
    return out


async def capabilities_of_types(
    session: AsyncSession, type_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[MachineCapability]]:
    return await _capabilities_by(session, "instance_type_id", type_ids)


async def capabilities_of_machines(
    session: AsyncSession, machine_ids: Sequence[str]
) -> dict[str, list[MachineCapability]]:
    return await _capabilities_by(session, "machine_id", machine_ids)


async def delete_type_capabilities(session: AsyncSession, type_id: uuid.UUID) -> None:
    await session.execute(delete(MachineCapability).where(MachineCapability.instance_type_id == type_id))


async def type_has_machines(session: AsyncSession, type_id: uuid.UUID) -> bool:
    return bool(await session.scalar(select(exists().where(Machine.instance_type_id == type_id))))


async def type_has_instances(session: AsyncSession, type_id: uuid.UUID) -> bool:
    return bool(await session.scalar(select(exists().where(Instance.instance_type_id == type_id))))


async def type_has_allocations(session: AsyncSession, type_id: uuid.UUID) -> bool:
    return bool(
        await session.scalar(select(exists().where(AllocationConstraint.instance_type_id == type_id)))
    )


async def reserved_total(
    session: AsyncSession, type_id: uuid.UUID, *, tenant_id: uuid.UUID | None = None
) -> int:
    """Σ constraint values reserving this instance type (of one tenant when given)."""
    stmt = select(func.coalesce(func.sum(AllocationConstraint.constraint_value), 0)).where(
        AllocationConstraint.instance_type_id == type_id
    )
    if tenant_id is not None:
        stmt = stmt.join(Allocation, Allocation.id == AllocationConstraint.allocation_id).where(
            Allocation.tenant_id == tenant_id
        )
    return int(await session.scalar(stmt) or 0)


async def machine_count(session: AsyncSession, type_id: uuid.UUID) -> int:
    return int(await session.scalar(select(func.count()).where(Machine.instance_type_id == type_id)) or 0)


async def instance_count(
    session: AsyncSession, type_id: uuid.UUID, *, tenant_id: uuid.UUID | None = None
) -> int:
    """The instances of this type (of one tenant when given)."""
    stmt = select(func.count()).where(Instance.instance_type_id == type_id)
    if tenant_id is not None:
        stmt = stmt.where(Instance.tenant_id == tenant_id)
    return int(await session.scalar(stmt) or 0)


async def free_machine_count(session: AsyncSession, type_id: uuid.UUID) -> int:
    """Ready machines of this type that hold no instance, none of whose GPUs is in a partition nico did
    not make (a held machine cannot be given to an instance)."""
    return int(
        await session.scalar(
            select(func.count()).where(
                Machine.instance_type_id == type_id,
                Machine.status == MachineStatus.READY,
                Machine.instance_id.is_(None),
                Machine.foreign_gpus == 0,
            )
        )
        or 0
    )


async def machines_of_types(session: AsyncSession, type_ids: Sequence[uuid.UUID]) -> Sequence[Machine]:
    """The machines of these instance types, oldest change first."""
    if not type_ids:
        return []
    found = await session.scalars(
        select(Machine)
        .where(Machine.instance_type_id.in_(list(type_ids)))
        .order_by(Machine.updated, Machine.id)
    )
    return found.all()


def machines_of_type(type_id: uuid.UUID) -> Select[Machine]:
    """The machines of this instance type (a statement to page)."""
    return select(Machine).where(Machine.instance_type_id == type_id)


async def machines_locked(session: AsyncSession, machine_ids: Sequence[str]) -> dict[str, Machine]:
    """The machines FOR NO KEY UPDATE, locked in id order."""
    found = await session.scalars(
        select(Machine)
        .where(Machine.id.in_(machine_ids))
        .order_by(Machine.id)
        .with_for_update(key_share=True)
    )
    return {m.id: m for m in found}


async def provider_site_ids(session: AsyncSession, provider_id: uuid.UUID) -> set[uuid.UUID]:
    return set(await session.scalars(sites_of_provider(provider_id)))


async def machine_by_id(session: AsyncSession, machine_id: str) -> Machine | None:
    return await session.get(Machine, machine_id)
