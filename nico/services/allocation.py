"""Allocations: a provider reserves machines of an instance type at a site for a tenant.

Capacity: for an instance type, Σ reserved (all tenants) never exceeds its associated machines; the
instance type row lock (see :mod:`nico.services.instance_type`) serialises every check with its write.
Visibility: the tenant-site link exists exactly while the tenant holds an allocation at the site;
allocation creates and deletes of one tenant are serialised by a lock on the tenant row, so a delete
never removes the link from under a concurrent create.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, String, cast, delete, exists, false, func, null, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.base import utcnow
from nico.db.enums import AllocationStatus, ConstraintType, ResourceType
from nico.db.models import (
    Allocation,
    AllocationConstraint,
    InfrastructureProvider,
    Instance,
    InstanceType,
    Site,
    StatusDetail,
    Tenant,
    TenantSite,
)
from nico.services import orgs, status
from nico.services import site as sites
from nico.services.errors import bad_request, conflict, forbidden, not_found
from nico.services.instance_type import instance_types_by_id, machine_count, reserved_total
from nico.services.listing import PageRequest, fetch_page
from nico.services.orgs import Viewer
from nico.services.search import search_pattern

ORDER_COLUMNS: dict[str, Any] = {
    "name": Allocation.name,
    "status": Allocation.status,
    "created": Allocation.created,
    "updated": Allocation.updated,
    "site_name": select(Site.name).where(Site.id == Allocation.site_id).scalar_subquery(),
    "tenant_org_display_name": select(Tenant.org_display_name)
    .where(Tenant.id == Allocation.tenant_id)
    .scalar_subquery(),
    "instance_type_name": select(InstanceType.name)
    .join(AllocationConstraint, AllocationConstraint.instance_type_id == InstanceType.id)
    .where(AllocationConstraint.allocation_id == Allocation.id)
    .scalar_subquery(),
    # nico keeps no IP blocks: every allocation sorts as having none.
    "ip_block_name": cast(null(), String),
    "constraint_value": select(AllocationConstraint.constraint_value)
    .where(AllocationConstraint.allocation_id == Allocation.id)
    .scalar_subquery(),
}
RELATIONS = ("InfrastructureProvider", "Tenant", "Site")
STATUSES = frozenset(AllocationStatus)
RESOURCE_TYPES = frozenset(ResourceType)
CONSTRAINT_TYPES = frozenset(ConstraintType)
REGISTERED_MESSAGE = "received allocation creation request, registered"
IPBLOCK_UNSUPPORTED = "IPBlock Allocation Constraints are not supported: nico does no IP address management"


@dataclass(frozen=True)
class ConstraintSpec:
    resource_type: str
    resource_type_id: uuid.UUID
    constraint_type: str
    constraint_value: int


@dataclass(frozen=True)
class AllocationFilters:
    site_ids: list[uuid.UUID] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    resource_types: list[str] = field(default_factory=list)
    resource_type_ids: list[uuid.UUID] = field(default_factory=list)
    constraint_types: list[str] = field(default_factory=list)
    constraint_values: list[int] = field(default_factory=list)
    ids: list[uuid.UUID] = field(default_factory=list)
    tenant_ids: list[uuid.UUID] = field(default_factory=list)
    query: str | None = None


@dataclass(frozen=True)
class ConstraintView:
    """An allocation constraint as responses show it: with its instance type when it has one."""

    constraint: AllocationConstraint
    instance_type: InstanceType | None


@dataclass(frozen=True)
class AllocationView:
    """An allocation as responses show it: its constraints, newest history, and requested relations."""

    allocation: Allocation
    constraints: list[ConstraintView]
    history: list[StatusDetail]
    provider: InfrastructureProvider | None = None
    tenant: Tenant | None = None
    site: Site | None = None


async def views(
    session: AsyncSession,
    rows: Sequence[Allocation],
    *,
    relations: AbstractSet[str] = frozenset(),
    history: dict[uuid.UUID | str, list[StatusDetail]] | None = None,
) -> list[AllocationView]:
    ids = [row.id for row in rows]
    constraints = await constraints_of(session, ids)
    itypes = await instance_types_by_id(
        session, (c.instance_type_id for cs in constraints.values() for c in cs if c.instance_type_id)
    )
    if history is None:
        history = await status.history(session, "allocation_id", ids)
    providers = (
        await orgs.providers_by_id(session, (row.infrastructure_provider_id for row in rows))
        if "InfrastructureProvider" in relations
        else {}
    )
    tenants = (
        await orgs.tenants_by_id(session, (row.tenant_id for row in rows)) if "Tenant" in relations else {}
    )
    site_rows = await sites.sites_by_id(session, (row.site_id for row in rows)) if "Site" in relations else {}
    return [
        AllocationView(
            row,
            [
                ConstraintView(c, itypes.get(c.instance_type_id) if c.instance_type_id else None)
                for c in constraints.get(row.id, [])
            ],
            history.get(row.id, []),
            providers.get(row.infrastructure_provider_id),
            tenants.get(row.tenant_id),
            site_rows.get(row.site_id),
        )
        for row in rows
    ]


def visible(viewer: Viewer) -> ColumnElement[bool]:
    """Allocations a caller may read: its provider's and its tenant's own."""
    clauses: list[ColumnElement[bool]] = []
    if viewer.provider is not None:
        clauses.append(Allocation.infrastructure_provider_id == viewer.provider.id)
    if viewer.tenant is not None:
        clauses.append(Allocation.tenant_id == viewer.tenant.id)
    return or_(*clauses) if clauses else false()


async def missing_sites(session: AsyncSession, site_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    found = set(await session.scalars(select(Site.id).where(Site.id.in_(list(site_ids)))))
    return [site_id for site_id in site_ids if site_id not in found]


async def list_allocations(
    session: AsyncSession,
    viewer: Viewer,
    filters: AllocationFilters,
    page: PageRequest,
    relations: AbstractSet[str] = frozenset(),
) -> tuple[list[AllocationView], int]:
    """A page of the allocations the caller may read."""
    rows, total = await _allocation_page(session, viewer, filters, page)
    return await views(session, rows, relations=relations), total


async def _allocation_page(
    session: AsyncSession, viewer: Viewer, filters: AllocationFilters, page: PageRequest
) -> tuple[Sequence[Allocation], int]:
    stmt = select(Allocation).where(visible(viewer))
    if filters.site_ids:
        stmt = stmt.where(Allocation.site_id.in_(filters.site_ids))
    if filters.statuses:
        stmt = stmt.where(Allocation.status.in_(filters.statuses))
    if filters.ids:
        stmt = stmt.where(Allocation.id.in_(filters.ids))
    if filters.tenant_ids and viewer.provider is not None:
        stmt = stmt.where(Allocation.tenant_id.in_(filters.tenant_ids))
    constraint_filters: list[tuple[Any, Sequence[Any]]] = [
        (AllocationConstraint.resource_type, filters.resource_types),
        (AllocationConstraint.resource_type_id, filters.resource_type_ids),
        (AllocationConstraint.constraint_type, filters.constraint_types),
        (AllocationConstraint.constraint_value, filters.constraint_values),
    ]
    for column, values in constraint_filters:
        if values:
            stmt = stmt.where(
                Allocation.id.in_(select(AllocationConstraint.allocation_id).where(column.in_(values)))
            )
    pattern = search_pattern(filters.query)
    if pattern:
        stmt = stmt.where(
            or_(
                Allocation.name.ilike(pattern),
                Allocation.description.ilike(pattern),
                Allocation.status.ilike(pattern),
            )
        )
    return await fetch_page(session, stmt, page, ORDER_COLUMNS, Allocation.id)


async def visible_allocation(
    session: AsyncSession, viewer: Viewer, allocation_id: uuid.UUID, relations: AbstractSet[str] = frozenset()
) -> AllocationView:
    row = await session.get(Allocation, allocation_id)
    if row is None:
        raise not_found("Could not find Allocation with specified ID")
    if not await session.scalar(select(exists().where(Allocation.id == allocation_id, visible(viewer)))):
        raise forbidden("Allocation is not associated with org")
    return (await views(session, [row], relations=relations))[0]


async def constraints_of(
    session: AsyncSession, allocation_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[AllocationConstraint]]:
    out: dict[uuid.UUID, list[AllocationConstraint]] = defaultdict(list)
    if allocation_ids:
        rows = await session.scalars(
            select(AllocationConstraint).where(AllocationConstraint.allocation_id.in_(list(allocation_ids)))
        )
        for row in rows:
            out[row.allocation_id].append(row)
    return out


async def lock_tenant(session: AsyncSession, tenant_id: uuid.UUID) -> Tenant | None:
    """Serialise the allocation changes of one tenant (FOR NO KEY UPDATE: inserts referencing the
    tenant row are not blocked)."""
    found: Tenant | None = await session.scalar(
        select(Tenant).where(Tenant.id == tenant_id).with_for_update(key_share=True)
    )
    return found


async def create_allocation(
    session: AsyncSession,
    org: str,
    *,
    name: str,
    description: str | None,
    tenant_id: uuid.UUID,
    site_id: uuid.UUID,
    constraint: ConstraintSpec,
) -> AllocationView:
    provider = await orgs.provider_of(session, org)
    if provider is None:
        raise bad_request("Failed to retrieve Infrastructure Provider for org")
    site = await session.get(Site, site_id)
    if site is None:
        raise bad_request("Error retrieving Site in request")
    if site.infrastructure_provider_id != provider.id:
        raise bad_request("Site specified in request doesn't belong to current org's Provider")
    tenant = await lock_tenant(session, tenant_id)
    if tenant is None:
        raise bad_request("Error retrieving Tenant in request")
    clash = await session.scalar(
        select(Allocation.id).where(
            Allocation.tenant_id == tenant.id, Allocation.site_id == site.id, Allocation.name == name
        )
    )
    if clash is not None:
        raise conflict("An Allocation with specified name already exists for Tenant", {"id": str(clash)})
    if constraint.resource_type == ResourceType.IP_BLOCK:
        raise bad_request(IPBLOCK_UNSUPPORTED)
    itype = await session.scalar(
        select(InstanceType)
        .where(InstanceType.id == constraint.resource_type_id)
        .with_for_update(key_share=True)
    )
    if itype is None:
        raise bad_request("Error retrieving Instance Type in Allocation Constraint in request")
    if itype.site_id != site.id:
        raise bad_request(
            f"Instance Type: {itype.id} in Allocation Constraint does not belong to Site specified in request"
        )
    if itype.infrastructure_provider_id != provider.id:
        raise bad_request(
            f"Instance Type: {itype.id} in Allocation Constraint does not belong to current Provider"
        )
    if constraint.constraint_type != ConstraintType.RESERVED:
        raise bad_request("Only Constraint Type: Reserved is supported at this time")
    reserved = await reserved_total(session, itype.id)
    if reserved + constraint.constraint_value > await machine_count(session, itype.id):
        raise conflict(
            f"Allocation Constraint with Instance Type: {itype.name} cannot be satisfied due to machine "
            "availability"
        )
    row = Allocation(
        infrastructure_provider_id=provider.id,
        tenant_id=tenant.id,
        site_id=site.id,
        name=name,
        description=description,
        status=AllocationStatus.REGISTERED,
    )
    session.add(row)
    await session.flush()
    made = AllocationConstraint(
        allocation_id=row.id,
        resource_type=ResourceType.INSTANCE_TYPE,
        resource_type_id=itype.id,
        instance_type_id=itype.id,
        constraint_type=constraint.constraint_type,
        constraint_value=constraint.constraint_value,
    )
    session.add(made)
    await session.execute(
        insert(TenantSite).values(tenant_id=tenant.id, site_id=site.id).on_conflict_do_nothing()
    )
    entry = await status.record(
        session, "allocation_id", row.id, AllocationStatus.REGISTERED, REGISTERED_MESSAGE
    )
    return (await views(session, [row], history={row.id: [entry]}))[0]


async def update_allocation(
    session: AsyncSession,
    org: str,
    allocation_id: uuid.UUID,
    *,
    name: str | None,
    description: str | None,
) -> AllocationView:
    row = await session.scalar(
        select(Allocation).where(Allocation.id == allocation_id).with_for_update(key_share=True)
    )
    if row is None:
        raise not_found("Could not retrieve Allocation to update")
    provider = await orgs.provider_of(session, org)
    if provider is None:
        raise not_found("Error retrieving infrastructureProvider for org")
    if row.infrastructure_provider_id != provider.id:
        raise bad_request("InfrastructureProvider in org does not match InfrastructureProvider in Allocation")
    if name is not None and name != row.name:
        clash = await session.scalar(
            select(Allocation.id).where(
                Allocation.tenant_id == row.tenant_id,
                Allocation.site_id == row.site_id,
                Allocation.name == name,
                Allocation.id != row.id,
            )
        )
        if clash is not None:
            raise conflict(
                "Another Allocation with specified name already exists for Tenant", {"id": str(clash)}
            )
    changed = False
    for column, value in (("name", name), ("description", description)):
        if value is not None and getattr(row, column) != value:
            setattr(row, column, value)
            changed = True
    if changed:
        await session.flush()
    return (await views(session, [row]))[0]


async def active_instances(
    session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID, type_id: uuid.UUID
) -> int:
    """The tenant's instances of an instance type at a site (every one holds a reserved machine)."""
    return int(
        await session.scalar(
            select(func.count()).where(
                Instance.tenant_id == tenant_id,
                Instance.site_id == site_id,
                Instance.instance_type_id == type_id,
            )
        )
        or 0
    )


async def tenant_reserved(
    session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID, type_id: uuid.UUID
) -> int:
    """Σ the tenant's reservations of an instance type at a site."""
    return int(
        await session.scalar(
            select(func.coalesce(func.sum(AllocationConstraint.constraint_value), 0))
            .join(Allocation, Allocation.id == AllocationConstraint.allocation_id)
            .where(
                Allocation.tenant_id == tenant_id,
                Allocation.site_id == site_id,
                AllocationConstraint.instance_type_id == type_id,
            )
        )
        or 0
    )


async def delete_allocation(session: AsyncSession, org: str, allocation_id: uuid.UUID) -> None:
    provider = await orgs.provider_of(session, org)
    row = await session.get(Allocation, allocation_id)
    if row is None:
        raise not_found("Allocation specified does not exist, or has been deleted")
    if provider is None or row.infrastructure_provider_id != provider.id:
        raise bad_request("Allocation does not belong to current Infrastructure Provider")
    await lock_tenant(session, row.tenant_id)
    for constraint in (await constraints_of(session, [row.id])).get(row.id, []):
        if constraint.instance_type_id is None:
            continue
        left = await tenant_reserved(session, row.tenant_id, row.site_id, constraint.instance_type_id)
        left -= constraint.constraint_value
        used = await active_instances(session, row.tenant_id, row.site_id, constraint.instance_type_id)
        if used > left:
            raise bad_request(
                f"Deleting this Allocation as specified would result in {left} total Machines for Instance "
                f"Type ID: {constraint.instance_type_id} allocated to Tenant, less than Tenant's active "
                f"Instance count: {used} for the Instance Type"
            )
    tenant_id, site_id = row.tenant_id, row.site_id
    await session.delete(row)
    await session.flush()
    await session.execute(
        delete(TenantSite).where(
            TenantSite.tenant_id == tenant_id,
            TenantSite.site_id == site_id,
            ~exists().where(Allocation.tenant_id == tenant_id, Allocation.site_id == site_id),
        )
    )


async def update_constraint(
    session: AsyncSession, org: str, allocation_id: uuid.UUID, constraint_id: uuid.UUID, value: int
) -> ConstraintView:
    """Change a constraint's value. Returns it, with its instance type when the value changed."""
    provider = await orgs.provider_of(session, org)
    constraint = await session.get(AllocationConstraint, constraint_id)
    if constraint is None:
        raise not_found("Could not find Allocation Constraint with ID specified in request")
    if constraint.allocation_id != allocation_id:
        raise bad_request("Allocation Constraint does not belong to Allocation specified in request")
    row = await session.get(Allocation, allocation_id)
    if row is None:
        raise not_found("Could not find Allocation with ID specified in request")
    if provider is None:
        raise bad_request(
            "Org does not have Infrastructure Provider initialized, fetch current Infrastructure "
            "Provider for org and try again"
        )
    if row.infrastructure_provider_id != provider.id:
        raise bad_request(
            "Allocation does not belong to org's Infrastructure Provider, unable to update Allocation "
            "Constraint"
        )
    if constraint.instance_type_id is None:
        raise bad_request(IPBLOCK_UNSUPPORTED)
    itype = await session.scalar(
        select(InstanceType)
        .where(InstanceType.id == constraint.instance_type_id)
        .with_for_update(key_share=True)
    )
    assert itype is not None  # RESTRICT keeps a reserved instance type
    await session.refresh(constraint, with_for_update=True)
    if value == constraint.constraint_value:
        return ConstraintView(constraint, None)
    if value < constraint.constraint_value:
        left = await tenant_reserved(session, row.tenant_id, row.site_id, itype.id)
        left += value - constraint.constraint_value
        used = await active_instances(session, row.tenant_id, row.site_id, itype.id)
        if used > left:
            raise bad_request(
                f"Updating this Allocation Constraint as specified would result in {left} total Machines for "
                f"Instance Type: {itype.name} allocated to Tenant, less than Tenant's active Instance count: "
                f"{used} for the Instance Type"
            )
    else:
        reserved = await reserved_total(session, itype.id)
        if reserved - constraint.constraint_value + value > await machine_count(session, itype.id):
            raise bad_request("New constraint value cannot be satisfied due to Machine availability")
    constraint.constraint_value = value
    constraint.updated = utcnow()
    await session.flush()
    return ConstraintView(constraint, itype)
