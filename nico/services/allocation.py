"""Allocations: a provider reserves machines of an instance type at a site for a tenant.

Capacity: for an instance type, Σ reserved (all tenants) never exceeds its associated machines; the
instance type row lock (see :mod:`nico.services.instance_type`) serialises every check with its write.
Visibility: the tenant-site link exists exactly while the tenant holds an allocation at the site;
allocation creates and deletes of one tenant are serialised by a lock on the tenant row, so a delete
never removes the link from under a concurrent create.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.base import utcnow
from nico.db.enums import AllocationStatus, ConstraintType, ResourceType
from nico.db.models import (
    Allocation,
    AllocationConstraint,
    Tenant,
)
from nico.db.queries import allocation as q
from nico.services import orgs, status
from nico.services import site as sites
from nico.services.errors import bad_request, conflict, forbidden, not_found
from nico.services.instance_type import (
    InstanceTypeRecord,
    instance_types_by_id,
    machine_count,
    reserved_total,
)
from nico.services.listing import PageRequest, fetch_page
from nico.services.orgs import Viewer
from nico.services.records import copies_of, copy_of
from nico.services.search import search_pattern

ORDER_COLUMNS: dict[str, Any] = q.ORDER_COLUMNS
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
class ConstraintRecord:
    """An allocation constraint's columns as views show them."""

    id: uuid.UUID
    allocation_id: uuid.UUID
    resource_type: str
    resource_type_id: uuid.UUID
    constraint_type: str
    constraint_value: int
    derived_resource_id: uuid.UUID | None
    created: datetime
    updated: datetime


@dataclass(frozen=True)
class ConstraintView:
    """An allocation constraint as responses show it: with its instance type when it has one."""

    constraint: ConstraintRecord
    instance_type: InstanceTypeRecord | None


@dataclass(frozen=True)
class AllocationRecord:
    """An allocation's columns as views show them."""

    id: uuid.UUID
    infrastructure_provider_id: uuid.UUID
    tenant_id: uuid.UUID
    site_id: uuid.UUID
    name: str
    description: str | None
    status: str
    created: datetime
    updated: datetime


@dataclass(frozen=True)
class AllocationView:
    """An allocation as responses show it: its constraints, newest history, and requested relations."""

    allocation: AllocationRecord
    constraints: list[ConstraintView]
    history: list[status.StatusRecord]
    provider: orgs.ProviderRecord | None = None
    tenant: orgs.TenantRecord | None = None
    site: sites.SiteRecord | None = None


async def views(
    session: AsyncSession,
    rows: Sequence[Allocation],
    *,
    relations: AbstractSet[str] = frozenset(),
    history: dict[uuid.UUID | str, list[status.StatusRecord]] | None = None,
) -> list[AllocationView]:
    ids = [row.id for row in rows]
    constraints = await constraints_of(session, ids)
    type_ids = (c.instance_type_id for cs in constraints.values() for c in cs if c.instance_type_id)
    itypes = copies_of(InstanceTypeRecord, await instance_types_by_id(session, type_ids))
    if history is None:
        history = await status.history(session, "allocation_id", ids)
    providers = (
        copies_of(
            orgs.ProviderRecord,
            await orgs.providers_by_id(session, (row.infrastructure_provider_id for row in rows)),
        )
        if "InfrastructureProvider" in relations
        else {}
    )
    tenants = (
        copies_of(orgs.TenantRecord, await orgs.tenants_by_id(session, (row.tenant_id for row in rows)))
        if "Tenant" in relations
        else {}
    )
    at = await sites.site_records(session, (row.site_id for row in rows)) if "Site" in relations else {}
    return [
        AllocationView(
            copy_of(AllocationRecord, row),
            [
                ConstraintView(
                    copy_of(ConstraintRecord, c),
                    itypes.get(c.instance_type_id) if c.instance_type_id else None,
                )
                for c in constraints.get(row.id, [])
            ],
            history.get(row.id, []),
            providers.get(row.infrastructure_provider_id),
            tenants.get(row.tenant_id),
            at.get(row.site_id),
        )
        for row in rows
    ]


def sides(viewer: Viewer) -> tuple[uuid.UUID | None, uuid.UUID | None]:
    """The provider and tenant ids a caller reads allocations of: its provider's and its tenant's own."""
    return (
        viewer.provider.id if viewer.provider is not None else None,
        viewer.tenant.id if viewer.tenant is not None else None,
    )


async def missing_sites(session: AsyncSession, site_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    found = await q.existing_site_ids(session, site_ids)
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
    stmt = q.allocations_visible_to(
        *sides(viewer),
        site_ids=filters.site_ids,
        statuses=filters.statuses,
        ids=filters.ids,
        tenant_ids=filters.tenant_ids if viewer.provider is not None else [],
        constraint_filters=[
            ("resource_type", filters.resource_types),
            ("resource_type_id", filters.resource_type_ids),
            ("constraint_type", filters.constraint_types),
            ("constraint_value", filters.constraint_values),
        ],
        pattern=search_pattern(filters.query),
    )
    return await fetch_page(session, stmt, page, ORDER_COLUMNS, Allocation.id)


async def visible_allocation(
    session: AsyncSession, viewer: Viewer, allocation_id: uuid.UUID, relations: AbstractSet[str] = frozenset()
) -> AllocationView:
    row = await q.allocation_by_id(session, allocation_id)
    if row is None:
        raise not_found("Could not find Allocation with specified ID")
    if not await q.allocation_visible_to(session, allocation_id, *sides(viewer)):
        raise forbidden("Allocation is not associated with org")
    return (await views(session, [row], relations=relations))[0]


async def constraints_of(
    session: AsyncSession, allocation_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[AllocationConstraint]]:
    return await q.constraints_of_allocations(session, allocation_ids)


async def lock_tenant(session: AsyncSession, tenant_id: uuid.UUID) -> Tenant | None:
    """Serialise the allocation changes of one tenant."""
    return await q.tenant_locked(session, tenant_id)


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
    site = await q.site_by_id(session, site_id)
    if site is None:
        raise bad_request("Error retrieving Site in request")
    if site.infrastructure_provider_id != provider.id:
        raise bad_request("Site specified in request doesn't belong to current org's Provider")
    tenant = await lock_tenant(session, tenant_id)
    if tenant is None:
        raise bad_request("Error retrieving Tenant in request")
    clash = await q.allocation_named(session, tenant.id, site.id, name)
    if clash is not None:
        raise conflict("An Allocation with specified name already exists for Tenant", {"id": str(clash)})
    if constraint.resource_type == ResourceType.IP_BLOCK:
        raise bad_request(IPBLOCK_UNSUPPORTED)
    itype = await q.instance_type_locked(session, constraint.resource_type_id)
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
    await q.link_tenant_site(session, tenant.id, site.id)
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
    row = await q.allocation_by_id(session, allocation_id, lock=True)
    if row is None:
        raise not_found("Could not retrieve Allocation to update")
    provider = await orgs.provider_of(session, org)
    if provider is None:
        raise not_found("Error retrieving infrastructureProvider for org")
    if row.infrastructure_provider_id != provider.id:
        raise bad_request("InfrastructureProvider in org does not match InfrastructureProvider in Allocation")
    if name is not None and name != row.name:
        clash = await q.allocation_named(session, row.tenant_id, row.site_id, name, other_than=row.id)
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
    return await q.instance_count(session, tenant_id, site_id, type_id)


async def tenant_reserved(
    session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID, type_id: uuid.UUID
) -> int:
    """Σ the tenant's reservations of an instance type at a site."""
    return await q.tenant_reserved(session, tenant_id, site_id, type_id)


async def delete_allocation(session: AsyncSession, org: str, allocation_id: uuid.UUID) -> None:
    provider = await orgs.provider_of(session, org)
    row = await q.allocation_by_id(session, allocation_id)
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
    await q.unlink_tenant_site_unless_allocated(session, tenant_id, site_id)


async def update_constraint(
    session: AsyncSession, org: str, allocation_id: uuid.UUID, constraint_id: uuid.UUID, value: int
) -> ConstraintView:
    """Change a constraint's value. Returns it, with its instance type when the value changed."""
    provider = await orgs.provider_of(session, org)
    constraint = await q.constraint_by_id(session, constraint_id)
    if constraint is None:
        raise not_found("Could not find Allocation Constraint with ID specified in request")
    if constraint.allocation_id != allocation_id:
        raise bad_request("Allocation Constraint does not belong to Allocation specified in request")
    row = await q.allocation_by_id(session, allocation_id)
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
    itype = await q.instance_type_locked(session, constraint.instance_type_id)
    assert itype is not None  # RESTRICT keeps a reserved instance type
    await session.refresh(constraint, with_for_update=True)
    if value == constraint.constraint_value:
        return ConstraintView(copy_of(ConstraintRecord, constraint), None)
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
    return ConstraintView(copy_of(ConstraintRecord, constraint), copy_of(InstanceTypeRecord, itype))
