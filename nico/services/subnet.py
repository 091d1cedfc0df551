"""Thin subnets: a tenant's named segment of a VPC. nico does no IP address management, so a subnet is
Ready as soon as it is created (its history shows the reference's pending step first)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import NetworkVirtualizationType, SiteStatus, SubnetStatus, VpcStatus
from nico.db.models import Subnet
from nico.db.queries import subnet as q
from nico.services import orgs, status
from nico.services import site as sites
from nico.services.errors import bad_request, conflict, forbidden, not_found
from nico.services.listing import PageRequest, fetch_page
from nico.services.records import copy_of
from nico.services.search import search_pattern
from nico.services.vpc import VpcRecord, vpc_records

ORDER_COLUMNS: dict[str, Any] = q.ORDER_COLUMNS
PENDING_MESSAGE = "received subnet creation request, pending"
READY_MESSAGE = "Subnet is ready for use"
NOT_FOUND = "Could not retrieve Subnet to update"  # (sic) the reference's GET text too
NO_TENANT = "Error retrieving Tenant from org"
# Only Site and Vpc are shown: nico keeps no IP blocks, and Tenant shows nothing in the reference either.
RELATIONS = ("Site", "Vpc", "Tenant", "IPv4Block", "IPv6Block")
STATUSES = frozenset(SubnetStatus)
PATCH_HISTORY_LIMIT = 100
OrgTenant: TypeAlias = orgs.TenantRecord


@dataclass(frozen=True)
class SubnetRecord:
    """A subnet's columns as views show them."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    site_id: uuid.UUID
    vpc_id: uuid.UUID
    name: str
    description: str | None
    ipv4_prefix: str | None
    ipv4_block_id: uuid.UUID | None
    ipv4_gateway: str | None
    prefix_length: int | None
    routing_type: str | None
    mtu: int | None
    status: str
    created: datetime
    updated: datetime


@dataclass(frozen=True)
class SubnetView:
    """A subnet as responses show it: its newest history and the requested relations."""

    subnet: SubnetRecord
    history: list[status.StatusRecord]
    site: sites.SiteRecord | None = None
    vpc: VpcRecord | None = None


async def views(
    session: AsyncSession,
    rows: Sequence[Subnet],
    *,
    relations: AbstractSet[str] = frozenset(),
    history: dict[uuid.UUID | str, list[status.StatusRecord]] | None = None,
) -> list[SubnetView]:
    if history is None:
        history = await status.history(session, "subnet_id", [row.id for row in rows])
    at = await sites.site_records(session, (row.site_id for row in rows)) if "Site" in relations else {}
    vpcs = await vpc_records(session, (r.vpc_id for r in rows)) if "Vpc" in relations else {}
    return [
        SubnetView(
            copy_of(SubnetRecord, row), history.get(row.id, []), at.get(row.site_id), vpcs.get(row.vpc_id)
        )
        for row in rows
    ]


async def tenant_of(session: AsyncSession, org: str) -> OrgTenant:
    """The org's tenant, which owns its subnets (400 when the org has none)."""
    tenant = await orgs.tenant_of(session, org)
    if tenant is None:
        raise bad_request(NO_TENANT)
    return orgs.tenant_record(tenant)


@dataclass(frozen=True)
class SubnetFilters:
    site_id: uuid.UUID | None = None
    vpc_id: uuid.UUID | None = None
    status: str | None = None
    query: str | None = None


async def create_subnet(
    session: AsyncSession,
    org: str,
    *,
    name: str,
    description: str | None,
    vpc_id: uuid.UUID,
    ipv4_block_id: uuid.UUID | None,
    prefix_length: int | None,
) -> SubnetView:
    tenant = await tenant_of(session, org)
    vpc = await q.vpc_for_subnet_creation(session, vpc_id)
    if vpc is None:
        raise bad_request("Could not find VPC specified in request")
    if vpc.tenant_id != tenant.id:
        raise bad_request("Tenant for VPC in request does not match tenant in org")
    if vpc.network_virtualization_type != NetworkVirtualizationType.ETHERNET_VIRTUALIZER:
        raise bad_request(
            f"VPC: {vpc.id} specified in request must have Ethernet network virtualization type in order to "
            "create Subnets"
        )
    if vpc.status != VpcStatus.READY:
        raise bad_request("VPC specified in request data must be in Ready state in order to create Subnet")
    site = await q.site_by_id(session, vpc.site_id)
    if site is None or site.status != SiteStatus.REGISTERED:
        raise bad_request(
            "The Site where the Subnet is being created must be in Registered state in order to proceed"
        )
    clash = await q.subnet_named(session, tenant.id, site.id, name)
    if clash is not None:
        raise conflict(
            "A Subnet with specified name already exists for Tenant at this Site", {"id": str(clash)}
        )
    row = Subnet(
        tenant_id=tenant.id,
        site_id=site.id,
        vpc_id=vpc.id,
        name=name,
        description=description,
        ipv4_block_id=ipv4_block_id,
        prefix_length=prefix_length,
        status=SubnetStatus.READY,
    )
    session.add(row)
    await session.flush()
    entries = [
        await status.record(session, "subnet_id", row.id, SubnetStatus.PENDING, PENDING_MESSAGE),
        await status.record(session, "subnet_id", row.id, SubnetStatus.READY, READY_MESSAGE),
    ]
    return SubnetView(copy_of(SubnetRecord, row), entries)


async def list_subnets(
    session: AsyncSession,
    tenant: OrgTenant,
    filters: SubnetFilters,
    page: PageRequest,
    relations: AbstractSet[str] = frozenset(),
) -> tuple[list[SubnetView], int]:
    rows, total = await _subnet_page(session, tenant, filters, page)
    return await views(session, rows, relations=relations), total


async def _subnet_page(
    session: AsyncSession, tenant: OrgTenant, filters: SubnetFilters, page: PageRequest
) -> tuple[Sequence[Subnet], int]:
    if filters.site_id is not None:
        if await q.site_by_id(session, filters.site_id) is None:
            raise bad_request("Failed to retrieve Site specified in query param, invalid ID or DB error")
        if not await q.tenant_holds_site(session, tenant.id, filters.site_id):
            raise forbidden("Tenant does not have access to this Site")
    if filters.vpc_id is not None:
        vpc = await q.vpc_by_id(session, filters.vpc_id)
        if vpc is None:
            raise not_found("Could not find VPC specified in request")
        if vpc.tenant_id != tenant.id:
            raise bad_request("Tenant for VPC in request does not match tenant in org")
    stmt = q.subnets_of_tenant(
        tenant.id,
        site_id=filters.site_id,
        vpc_id=filters.vpc_id,
        status=filters.status,
        pattern=search_pattern(filters.query),
    )
    return await fetch_page(session, stmt, page, ORDER_COLUMNS, Subnet.id)


async def own_subnet(
    session: AsyncSession, tenant: OrgTenant, subnet_id: uuid.UUID, *, lock: bool = False
) -> Subnet:
    row = await q.subnet_by_id(session, subnet_id, lock="key_share" if lock else None)
    if row is None:
        raise not_found(NOT_FOUND)
    if row.tenant_id != tenant.id:
        raise bad_request("Tenant for subnet in request does not match tenant in org")
    return row


async def get_subnet(
    session: AsyncSession, org: str, subnet_id: uuid.UUID, relations: AbstractSet[str] = frozenset()
) -> SubnetView:
    row = await own_subnet(session, await tenant_of(session, org), subnet_id)
    return (await views(session, [row], relations=relations))[0]


async def update_subnet(
    session: AsyncSession, org: str, subnet_id: uuid.UUID, *, name: str | None, description: str | None
) -> SubnetView:
    tenant = await tenant_of(session, org)
    row = await own_subnet(session, tenant, subnet_id, lock=True)
    if name is not None and name != row.name:
        clash = await q.subnet_named(session, tenant.id, row.site_id, name, other_than=row.id)
        if clash is not None:
            raise conflict("Another Subnet with specified name already exists for Tenant", {"id": str(clash)})
    changed = False
    for column, value in (("name", name), ("description", description)):
        if value is not None and getattr(row, column) != value:
            setattr(row, column, value)
            changed = True
    if changed:
        await session.flush()
    history = await status.history(session, "subnet_id", [row.id], limit=PATCH_HISTORY_LIMIT)
    return (await views(session, [row], history=history))[0]


async def delete_subnet(session: AsyncSession, org: str, subnet_id: uuid.UUID) -> None:
    """Delete at once (there is no site to wait for); a subnet with instance interfaces stays."""
    tenant = await tenant_of(session, org)
    row = await q.subnet_by_id(session, subnet_id, lock="update")
    if row is None:
        raise not_found("Could not find Subnet to delete")
    if row.tenant_id != tenant.id:
        raise bad_request("Org specified in request does not match org of Tenant associated with Subnet")
    site = await q.site_by_id(session, row.site_id)
    if site is None or site.status != SiteStatus.REGISTERED:
        raise bad_request("Site associated with Subnet must be in Registered state in order to proceed")
    if await q.subnet_in_use(session, row.id):
        raise bad_request("Subnet is being used by one or more Instances and cannot be deleted")
    await session.delete(row)
    await session.flush()
