"""VPCs (spec §7): create, list, get, update (with the default NVLink logical partition), delete.

There is no site agent: a VPC goes Provisioning then Ready within its create request, and a delete
removes it at once (nothing of a VPC lives on the NVLink fabric).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import LogicalPartitionStatus, NetworkVirtualizationType, SiteStatus, VpcStatus
from nico.db.models import InfrastructureProvider, LogicalPartition, Site, Tenant, Vpc
from nico.db.queries import vpc as queries
from nico.db.queries.common import rows_by_id
from nico.services import status
from nico.services.access import tenant_uses_site
from nico.services.errors import bad_request, conflict, forbidden, not_found
from nico.services.listing import PageRequest, fetch_page
from nico.services.nvlink_interface import PartitionRecord
from nico.services.orgs import ProviderRecord, TenantRecord, require_tenant, tenant_record
from nico.services.records import copies_of, copy_of
from nico.services.site import SiteRecord, site_record

NETWORK_VIRTUALIZATION_TYPES = frozenset(str(kind) for kind in NetworkVirtualizationType)
ORDER_FIELDS = frozenset({"name", "status", "created", "updated"})
STATUSES = frozenset(VpcStatus)
RELATIONS = frozenset(
    {"InfrastructureProvider", "Site", "Tenant", "NetworkSecurityGroup", "NVLinkLogicalPartition"}
)
NOT_OWNED = "VPC does not belong to current Tenant"
NO_ALLOCATION = "Tenant does not have any Allocations with Site specified in request data"
FULL_HISTORY = 100


class VpcCreate(Protocol):
    """A checked create request (``nico.api.schemas.vpc.VpcCreateRequest`` is one)."""

    name: str | None
    description: str | None
    site_id: str | None
    id: str | None
    network_virtualization_type: str | None
    labels: dict[str, str] | None
    vni: int | None
    routing_profile: str | None
    nv_link_logical_partition_id: str | None


class VpcUpdate(Protocol):
    """A checked update request; ``nv_link_logical_partition_id`` ``""`` clears the default."""

    name: str | None
    description: str | None
    labels: dict[str, str] | None
    nv_link_logical_partition_id: str | None


@dataclass(frozen=True)
class VpcRecord:
    """A VPC's columns as views show them (what other resources embed with ``includeRelation=Vpc``)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    site_id: uuid.UUID
    name: str
    description: str | None
    network_virtualization_type: str
    labels: dict[str, Any] | None
    nvlink_logical_partition_id: uuid.UUID | None
    routing_profile: str | None
    requested_vni: int | None
    vni: int | None
    status: str
    created: datetime
    updated: datetime


def vpc_record(row: Vpc) -> VpcRecord:
    return copy_of(VpcRecord, row)


@dataclass(frozen=True)
class VpcView:
    vpc: VpcRecord
    history: list[status.StatusRecord]
    tenant: TenantRecord
    site: SiteRecord
    relations: frozenset[str] = frozenset()
    provider: ProviderRecord | None = None
    partition: PartitionRecord | None = None


async def create(session: AsyncSession, org: str, body: VpcCreate) -> VpcView:
    assert body.site_id is not None  # checked
    site = await session.get(Site, uuid.UUID(body.site_id))
    if site is None:
        raise bad_request("Could not find Site with ID specified in request data")
    if site.status != SiteStatus.REGISTERED:
        raise bad_request("Site specified in request data must be in Registered state in order to proceed")
    tenant = await require_tenant(session, org, status=403)
    if not await tenant_uses_site(session, tenant.id, site.id):
        raise forbidden(NO_ALLOCATION)
    kind = body.network_virtualization_type or (
        NetworkVirtualizationType.FNN
        if site.native_networking
        else NetworkVirtualizationType.ETHERNET_VIRTUALIZER
    )
    if kind == NetworkVirtualizationType.FNN and not site.native_networking:
        raise bad_request(
            "Site specified in request data must have native networking enabled to create FNN VPC"
        )
    partition_id: uuid.UUID | None = None
    if body.nv_link_logical_partition_id is not None:
        if not site.nvlink_partition:
            raise bad_request(
                "Site specified in request data must have NVLink Partition enabled in order to create VPC "
                "with default NVLink Partition"
            )
        partition_id = (await _default_partition(session, tenant, site, body.nv_link_logical_partition_id)).id
    # Serialise VNI choice per site; ON CONFLICT answers id and name clashes exactly under races.
    await queries.lock_vni_choice(session, site.id)
    vni = body.vni
    if vni is None:
        vni = await queries.next_vni(session, site.id)
    values: dict[str, Any] = {
        "tenant_id": tenant.id,
        "site_id": site.id,
        "name": body.name,
        "description": body.description,
        "network_virtualization_type": kind,
        "labels": body.labels,
        "nvlink_logical_partition_id": partition_id,
        "routing_profile": body.routing_profile,
        "requested_vni": body.vni,
        "vni": vni,
        "status": VpcStatus.READY,
    }
    if body.id:
        values["id"] = uuid.UUID(body.id)
    row = await queries.insert_vpc(session, values)
    if row is None:
        if body.id and await session.get(Vpc, uuid.UUID(body.id)) is not None:
            raise conflict("A Vpc with specified ID already exists")
        clash = await queries.vpc_named(session, tenant.id, site.id, body.name)
        raise conflict("A Vpc with specified name already exists for Tenant", {"id": str(clash)})
    history = [
        await status.record(
            session, "vpc_id", row.id, VpcStatus.PROVISIONING, "VPC provisioning has been initiated on Site"
        ),
        await status.record(session, "vpc_id", row.id, VpcStatus.READY, "VPC is ready for use"),
    ]
    return VpcView(vpc_record(row), history, tenant_record(tenant), site_record(site))


async def _default_partition(session: AsyncSession, tenant: Tenant, site: Site, raw: str) -> LogicalPartition:
    """The partition a VPC may default to (checks of spec §7.2, with 404 for an unknown id where the
    reference answers 500)."""
    try:
        partition_id = uuid.UUID(raw)
    except ValueError:
        raise bad_request("Invalid NVLink Logical Partition ID specified in request data") from None
    # FOR SHARE: a concurrent delete of the partition waits for this transaction.
    partition = await queries.partition_for_share(session, partition_id)
    if partition is None:
        raise not_found("Could not find NVLink Logical Partition with ID specified in request data")
    if partition.site_id != site.id:
        raise forbidden("NVLink Logical Partition with ID specified in request data does not belong to Site")
    if partition.status != LogicalPartitionStatus.READY:
        raise forbidden("NVLink Logical Partition with ID specified in request data is not in Ready state")
    if partition.tenant_id != tenant.id:
        raise forbidden(
            "NVLink Logical Partition with ID specified in request data does not belong to Tenant"
        )
    return partition


async def update(session: AsyncSession, org: str, vpc_id: uuid.UUID, body: VpcUpdate) -> VpcView:
    row = await queries.locked_vpc(session, vpc_id)
    if row is None:
        raise not_found("Could not retrieve VPC to update")
    tenant = await require_tenant(session, org, status=403)
    if row.tenant_id != tenant.id:
        raise forbidden(NOT_OWNED)
    if not await tenant_uses_site(session, tenant.id, row.site_id):
        raise forbidden(NO_ALLOCATION)
    site = await session.get(Site, row.site_id)
    assert site is not None
    if body.name is not None and body.name != row.name:
        clash = await queries.vpc_named(session, tenant.id, row.site_id, body.name)
        if clash is not None:
            raise conflict("Another VPC with specified name already exists for Tenant", {"id": str(clash)})
        row.name = body.name
    if body.description is not None:
        row.description = body.description
    if body.labels is not None:
        row.labels = body.labels
    raw = body.nv_link_logical_partition_id
    if raw is not None:
        if not site.nvlink_partition:
            raise bad_request(
                f"Site: {site.id} specified in request data must have NVLink Partition enabled in order to "
                "update VPC with default NVLink Partition"
            )
        current = row.nvlink_logical_partition_id
        # A VPC without a default has nothing in use (the reference dereferences null here).
        if current is not None and await queries.partition_used_by_vpc_instances(session, current, row.id):
            raise forbidden(
                "Existing default NVLink Logical Partition is already being used by an Instance from the VPC"
            )
        row.nvlink_logical_partition_id = (
            (await _default_partition(session, tenant, site, raw)).id if raw else None
        )
    await session.flush()
    (view,) = await views(session, [row], tenant, frozenset(), history_limit=FULL_HISTORY)
    return view


async def delete_vpc(session: AsyncSession, org: str, vpc_id: uuid.UUID) -> None:
    tenant = await require_tenant(session, org, status=403)
    row = await queries.locked_vpc(session, vpc_id)
    if row is None:
        raise not_found("Could not find VPC with specified ID")
    if row.tenant_id != tenant.id:
        raise bad_request(NOT_OWNED)
    if await queries.has_subnets(session, row.id):
        raise bad_request("Cannot delete VPC, one or more Subnets exist for this VPC")
    if await queries.has_instances(session, row.id):
        raise bad_request("Cannot delete VPC, one or more instances for this VPC")
    await queries.delete_vpc(session, row.id)


async def get(session: AsyncSession, org: str, vpc_id: uuid.UUID, relations: frozenset[str]) -> VpcView:
    tenant = await require_tenant(session, org, status=403)
    row = await session.get(Vpc, vpc_id)
    if row is None:
        raise not_found("Could not find VPC with specified ID")
    if row.tenant_id != tenant.id:
        raise forbidden(NOT_OWNED)
    (view,) = await views(session, [row], tenant, relations)
    return view


@dataclass(frozen=True)
class VpcFilter:
    site_ids: Sequence[uuid.UUID] = ()
    statuses: Sequence[str] = ()
    partition_ids: Sequence[uuid.UUID] = ()
    security_group_ids: Sequence[uuid.UUID] = ()
    provider_id: uuid.UUID | None = None
    query: str | None = None


async def list_vpcs(
    session: AsyncSession, org: str, where: VpcFilter, relations: frozenset[str], page: PageRequest
) -> tuple[list[VpcView], int]:
    tenant = await require_tenant(session, org, status=403)
    for site_id in where.site_ids:
        if not await tenant_uses_site(session, tenant.id, site_id):
            raise forbidden("Tenant is not associated with one or more of the Sites specified in query")
    for value in where.statuses:
        if value not in STATUSES:
            raise bad_request("Invalid Status value in query")
    if where.partition_ids:
        owned = await queries.tenant_partition_ids(session, tenant.id, where.partition_ids)
        for partition_id in where.partition_ids:
            if partition_id not in owned:
                raise bad_request(
                    f"NVLink Logical Partition ID: {partition_id} specified in query does not exist "
                    "for current Tenant"
                )
    stmt = queries.tenant_vpcs_where(
        tenant.id,
        site_ids=where.site_ids,
        statuses=where.statuses,
        partition_ids=where.partition_ids,
        none=bool(where.security_group_ids),  # nico has no network security groups: no VPC uses one
        provider_id=where.provider_id,
        query=where.query,
    )
    rows, total = await fetch_page(session, stmt, page, queries.VPC_ORDER, Vpc.id)
    return await views(session, rows, tenant, relations), total


async def views(
    session: AsyncSession,
    rows: Sequence[Vpc],
    tenant: Tenant,
    relations: frozenset[str],
    *,
    history_limit: int = status.DEFAULT_LIMIT,
) -> list[VpcView]:
    """Everything the responses of ``rows`` show, in a fixed number of queries."""
    if not rows:
        return []
    histories = await status.history(session, "vpc_id", [r.id for r in rows], limit=history_limit)
    sites = copies_of(SiteRecord, await rows_by_id(session, Site, {r.site_id for r in rows}))
    providers: dict[uuid.UUID, ProviderRecord] = {}
    if "InfrastructureProvider" in relations:
        owners = {s.infrastructure_provider_id for s in sites.values()}
        providers = copies_of(ProviderRecord, await rows_by_id(session, InfrastructureProvider, owners))
    partitions: dict[uuid.UUID | None, PartitionRecord] = {}
    wanted = {r.nvlink_logical_partition_id for r in rows} - {None}
    if "NVLinkLogicalPartition" in relations and wanted:
        partitions = copies_of(PartitionRecord, await rows_by_id(session, LogicalPartition, wanted))
    owner = tenant_record(tenant)
    return [
        VpcView(
            vpc_record(row),
            histories.get(row.id, []),
            owner,
            sites[row.site_id],
            relations,
            providers.get(sites[row.site_id].infrastructure_provider_id),
            partitions.get(row.nvlink_logical_partition_id),
        )
        for row in rows
    ]


async def vpc_records(session: AsyncSession, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, VpcRecord]:
    """VPCs by id as views embed them (``includeRelation=Vpc`` on other resources)."""
    wanted = set(ids)
    if not wanted:
        return {}
    return {vpc_id: vpc_record(row) for vpc_id, row in (await rows_by_id(session, Vpc, wanted)).items()}
