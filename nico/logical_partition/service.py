"""NVLink logical partitions (spec §3): create, list, get, rename, delete, and what a response shows.

There is no site agent: a partition is Ready as soon as it is created. Deleting one that has
physical partitions on the fabric leaves it ``Deleting`` until the reconciler has removed them
(:func:`nico.reconciler.lifecycle.finish_partition_deletion`); one without is removed at once.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import LogicalPartitionStatus, SiteStatus
from nico.db.models import LogicalPartition, NvlinkInterface, Site, Tenant, Vpc
from nico.db.queries.tenant_limits import OVER_PARTITIONS, over_limit
from nico.db.raw import driver_connection
from nico.logical_partition import queries
from nico.logical_partition.reservation import Partition, Reservation, set_reservation
from nico.logical_partition.views import (
    BindingSummaryView,
    PartitionStats,
    PartitionView,
    ReservationView,
    VpcSummaryView,
)
from nico.services import status
from nico.services.access import tenant_uses_site
from nico.services.errors import ServiceError, bad_request, conflict, forbidden, not_found
from nico.services.listing import PageRequest, fetch_page
from nico.services.nvlink_events import desired_state_changed
from nico.services.orgs import NO_TENANT, require_tenant, tenant_record
from nico.services.site import site_record


def partition_quota_reached(quota: int, site_id: uuid.UUID) -> str:
    """The refusal of a create over the tenant's quota of partitions at the site (``quotas``)."""
    return (
        f"Failed to create NVLink Logical Partition, Tenant has reached its quota of {quota} NVLink "
        f"Logical Partitions at Site: {site_id} (logical partition quota: quotas.logical_partitions)"
    )


ORDER_FIELDS = frozenset({"name", "status", "created", "updated"})
STATUSES = frozenset(LogicalPartitionStatus)
NOT_OWNED = "NVLink Logical Partition is not owned by current org's Tenant"
NAME_TAKEN = "Another NVLink Logical Partition with specified name already exists for Tenant"
FULL_HISTORY = 100
BAD_SITE = "Failed to retrieve Site specified in query param, invalid ID or DB error"
# Multicast groups (NMX PartitionAttr.multicast_groups_limit): a multiple of 4, set when the fabric
# creates a physical partition, drawn from its domain's budget (max_multicast_groups, 1024 on NVL72).
# The default, 16, is the value the reference validated (#1558): NCCL's NVLS needs a few groups per
# communicator, and 1024 / 16 = 64 partitions per rack, more than the 18 trays an NVL72 can be split
# into, so the default never makes the budget the binding constraint.
DEFAULT_MULTICAST_GROUPS_LIMIT = 16
MAX_MULTICAST_GROUPS_LIMIT = 1024


@dataclass(frozen=True)
class Include:
    """``includeRelation`` (Site, Tenant), ``includeInterfaces``, ``includeVpcs``, ``includeStats``."""

    relations: frozenset[str] = frozenset()
    interfaces: bool = False
    vpcs: bool = False
    stats: bool = False


async def create(
    conn: psycopg.AsyncConnection[Any],
    org: str,
    *,
    name: str,
    description: str | None,
    site_id: uuid.UUID,
    created_by: str | None,
    multicast_groups_limit: int | None = None,
    quota: int,
    single_nvlink_domain: bool = False,
    reservation: Reservation | None = None,
) -> PartitionView:
    """Create a Ready logical partition (the reference's check order, spec §3.2); a multicast limit
    no domain of the site could hold even empty is a 409 naming the budget; a tenant holding
    ``quota`` partitions at the site already is refused with 403 naming the limit, nothing created.
    With a ``reservation`` the caller runs this in one transaction: a reservation that cannot be met
    leaves nothing."""
    tenant_id, limit = await _creation_checks(conn, org, site_id, multicast_groups_limit)
    try:
        row = await queries.insert_ready_partition(
            conn,
            tenant_id=tenant_id,
            site_id=site_id,
            name=name,
            description=description,
            created_by=created_by,
            multicast_groups_limit=limit,
            quota=quota,
            single_nvlink_domain=single_nvlink_domain,
        )
    except psycopg.Error as exc:
        if over_limit(exc, OVER_PARTITIONS) is None:
            raise
        raise forbidden(partition_quota_reached(quota, site_id)) from None
    if row is None:
        existing = await queries.partition_id_by_name(conn, tenant_id, name)
        raise conflict(NAME_TAKEN, {"id": str(existing) if existing else None})
    pid, tenant, site, lp_name, lp_description, lp_status, _, created, updated, mc_limit, entries = row
    held = None
    if reservation is not None and reservation.count:
        await set_reservation(conn, Partition(pid, lp_name, tenant, site), reservation)
        held = _reservation_view((await queries.spreads(conn, [pid]))[pid])
    history = tuple(
        status.StatusRecord(
            entry_status, message, datetime.fromisoformat(at), datetime.fromisoformat(changed)
        )
        for entry_status, message, at, changed in entries
    )
    return PartitionView(
        id=pid,
        tenant_id=tenant,
        site_id=site,
        name=lp_name,
        description=lp_description,
        status=lp_status,
        multicast_groups_limit=mc_limit,
        created=created,
        updated=updated,
        history=history,
        single_nvlink_domain=single_nvlink_domain,
        domain_ids=(),
        reservation=held,
    )


async def _creation_checks(
    conn: psycopg.AsyncConnection[Any], org: str, site_id: uuid.UUID, multicast_groups_limit: int | None
) -> tuple[uuid.UUID, int]:
    """The checks before a partition create, in the reference's order: the tenant and the partition's
    multicast limit (the default when none is given)."""
    prefix = "Failed to create NVLink Logical Partition"
    found = await queries.creation_checks(conn, org, site_id)
    if found is None:
        raise bad_request(NO_TENANT)
    tenant_id, found_site, site_status, nvlink_on, allowed = found
    if found_site is None:
        raise not_found(f"{prefix}, Could not find Site with ID: {site_id} ")
    if site_status != SiteStatus.REGISTERED:
        raise bad_request(f"{prefix}, Site: {site_id} specified in request is not in Registered state")
    if not allowed:
        raise forbidden("Tenant is not associated with Site specified in query")
    if not nvlink_on:
        raise bad_request(
            f"Site: {site_id} specified in request data must have NVLink Logical Partition enabled in "
            "order to create NVLink Logical Partition"
        )
    limit = DEFAULT_MULTICAST_GROUPS_LIMIT if multicast_groups_limit is None else multicast_groups_limit
    largest = await queries.largest_multicast_budget(conn, site_id)
    if largest is not None and limit > largest:
        raise conflict(
            f"{prefix}, multicastGroupsLimit {limit} exceeds the multicast budget of every NVLink domain "
            f"at Site (max_multicast_groups: {largest})"
        )
    return tenant_id, limit


async def _owned(
    session: AsyncSession, tenant: Tenant, partition_id: uuid.UUID, missing: str, *, lock: bool = False
) -> LogicalPartition:
    row = await queries.partition_row(session, partition_id, lock=lock)
    if row is None:
        raise not_found(missing)
    if row.tenant_id != tenant.id:
        raise forbidden(NOT_OWNED)
    return row


async def get(session: AsyncSession, org: str, partition_id: uuid.UUID, include: Include) -> PartitionView:
    tenant = await require_tenant(session, org, status=400)
    row = await _owned(
        session, tenant, partition_id, "Could not find NVLink Logical Partition with specified ID"
    )
    (view,) = await views(session, [row], include, tenant)
    return view


async def list_partitions(
    session: AsyncSession,
    org: str,
    *,
    site_id: uuid.UUID | None,
    status_value: str | None,
    query: str | None,
    include: Include,
    page: PageRequest,
) -> tuple[list[PartitionView], int]:
    tenant = await require_tenant(session, org, status=400)
    if site_id is not None:
        site = await session.get(Site, site_id)
        if site is None:
            raise bad_request(BAD_SITE)
        if not await tenant_uses_site(session, tenant.id, site.id):
            raise forbidden("Tenant does not have access to this Site")
    if status_value is not None and status_value not in STATUSES:
        raise bad_request("Invalid Status value in query")
    stmt = queries.tenant_partitions_where(tenant.id, site_id=site_id, status=status_value, query=query)
    rows, total = await fetch_page(session, stmt, page, queries.PARTITION_ORDER, LogicalPartition.id)
    return await views(session, rows, include, tenant), total


async def update(
    session: AsyncSession,
    org: str,
    partition_id: uuid.UUID,
    *,
    name: str | None,
    description: str | None,
    single_nvlink_domain: bool | None = None,
    reservation: Reservation | None = None,
) -> PartitionView:
    """Rename or re-describe; set or clear ``singleNvLinkDomain`` (set only while the partition is in
    at most one NVLink domain, else 409) and its reservation (``reservation``: None leaves it, a count
    of 0 clears it). No status gate; an unchanged body changes nothing."""
    tenant = await require_tenant(session, org, status=400)
    row = await _owned(
        session,
        tenant,
        partition_id,
        "Could not find NVLink Logical Partition with ID specified in URL",
        lock=True,
    )
    new_name = name if name is not None and name != row.name else None
    new_description = description if description is not None and description != row.description else None
    if new_name is not None:
        clash = await queries.partition_named(session, tenant.id, new_name)
        if clash is not None:
            raise conflict(NAME_TAKEN, {"id": str(clash)})
        row.name = new_name
    if new_description is not None:
        row.description = new_description
    if single_nvlink_domain is not None and single_nvlink_domain != row.single_nvlink_domain:
        row.single_nvlink_domain = single_nvlink_domain
    if new_name is not None or new_description is not None or session.is_modified(row):
        await session.flush()
    conn = await driver_connection(session)
    if reservation is not None:
        if reservation.count and row.status != LogicalPartitionStatus.READY:
            raise bad_request("NVLink Logical Partition must be in Ready state to hold a reservation")
        await set_reservation(conn, Partition(row.id, row.name, row.tenant_id, row.site_id), reservation)
    if row.single_nvlink_domain:
        await _check_one_domain(conn, row)
    (view,) = await views(session, [row], Include(), tenant, history_limit=FULL_HISTORY)
    return view


async def _check_one_domain(conn: psycopg.AsyncConnection[Any], row: LogicalPartition) -> None:
    """A 409 when the single-domain partition's GPUs and reserved machines are in several domains
    (its row is locked, and creates that bind to it lock it too: the answer holds to the commit)."""
    spread = (await queries.spreads(conn, [row.id]))[row.id]
    domains = set(spread.gpu_domains) | ({spread.reserved_domain} if spread.reserved_domain else set())
    if len(domains) > 1:
        raise conflict(
            f"NVLink Logical Partition '{row.name}' ({row.id}) is in {len(domains)} NVLink domains "
            f"({', '.join(str(d) for d in sorted(domains))}): singleNvLinkDomain can only be set on a "
            "partition in at most one"
        )


async def delete_partition(session: AsyncSession, org: str, partition_id: uuid.UUID) -> None:
    """Refuse while a VPC defaults to it or an instance binds a GPU to it; else remove it, at once when
    nothing of it is on the fabric, otherwise mark it Deleting for the reconciler."""
    tenant = await require_tenant(session, org, status=400)
    # FOR UPDATE: an instance create that binds to this partition waits (it locks it FOR SHARE).
    row = await _owned(
        session, tenant, partition_id, "Could not retrieve NVLink Logical Partition to delete", lock=True
    )
    vpc_ids = await queries.vpcs_defaulting_to(session, tenant.id, row.id)
    if vpc_ids:
        raise ServiceError(
            400,
            "NVLink Logical Partition is being used by one or more VPCs",
            {"vpcIds": ", ".join(str(v) for v in vpc_ids)},
        )
    instances = await queries.bound_instance_count(session, row.id)
    if instances:
        raise bad_request(
            f"{instances} active Instances are associated with this NVLink Logical Partition, "
            "unable to delete"
        )
    await queries.release_reserved(await driver_connection(session), row.id)
    domains = await queries.partition_domains(session, row.id)
    if not domains:
        await queries.delete_partition(session, row.id)
        return
    row.status = LogicalPartitionStatus.DELETING
    await status.record(
        session,
        "logical_partition_id",
        row.id,
        LogicalPartitionStatus.DELETING,
        "Received request for deletion, pending processing",
    )
    await desired_state_changed(session, domains=domains)


async def views(
    session: AsyncSession,
    rows: Sequence[LogicalPartition],
    include: Include,
    tenant: Tenant,
    *,
    history_limit: int = status.DEFAULT_LIMIT,
) -> list[PartitionView]:
    """Everything the responses of ``rows`` show, in a fixed number of queries (no N+1)."""
    if not rows:
        return []
    ids = [row.id for row in rows]
    histories = await status.history(session, "logical_partition_id", ids, limit=history_limit)
    sites: dict[uuid.UUID, Site] = {}
    if "Site" in include.relations:
        sites = await queries.sites_by_id(session, {r.site_id for r in rows})
    vpcs: dict[uuid.UUID, list[Vpc]] = defaultdict(list)
    if include.vpcs:
        for vpc in await queries.vpcs_defaulting_to_any(session, ids):
            assert vpc.nvlink_logical_partition_id is not None
            vpcs[vpc.nvlink_logical_partition_id].append(vpc)
    bindings: dict[uuid.UUID, list[NvlinkInterface]] = defaultdict(list)
    if include.interfaces or include.stats:
        for binding in await queries.bindings_to(session, ids):
            bindings[binding.logical_partition_id].append(binding)
    healths: dict[uuid.UUID, list[str]] = defaultdict(list)
    for lp_id, health in await queries.physical_partition_healths(session, ids):
        healths[lp_id].append(health)
    spreads = await queries.spreads(await driver_connection(session), ids)
    shown_tenant = tenant_record(tenant) if "Tenant" in include.relations else None
    return [
        PartitionView(
            id=row.id,
            tenant_id=row.tenant_id,
            site_id=row.site_id,
            name=row.name,
            description=row.description,
            status=row.status,
            multicast_groups_limit=row.multicast_groups_limit,
            created=row.created,
            updated=row.updated,
            history=tuple(histories.get(row.id, [])),
            site=site_record(sites[row.site_id]) if sites else None,
            tenant=shown_tenant,
            vpcs=tuple(_vpc_summary(vpc) for vpc in vpcs[row.id]),
            interfaces=tuple(_binding_summary(b) for b in bindings[row.id]) if include.interfaces else (),
            stats=_stats(bindings[row.id], spreads[row.id]) if include.stats else None,
            health=worst_health(healths.get(row.id, [])),
            single_nvlink_domain=row.single_nvlink_domain,
            domain_ids=spreads[row.id].gpu_domains,
            reservation=_reservation_view(spreads[row.id]),
        )
        for row in rows
    ]


def _reservation_view(spread: queries.Spread) -> ReservationView | None:
    if spread.reserved_type is None:
        return None
    return ReservationView(
        spread.reserved_type, spread.reserved, spread.reserved_domain, spread.reserved_free
    )


def _vpc_summary(row: Vpc) -> VpcSummaryView:
    return VpcSummaryView(row.id, row.name, row.network_virtualization_type, row.status)


def _binding_summary(row: NvlinkInterface) -> BindingSummaryView:
    return BindingSummaryView(
        row.id, row.instance_id, row.logical_partition_id, row.device_instance, row.status
    )


def _stats(bindings: Sequence[NvlinkInterface], spread: queries.Spread) -> PartitionStats:
    return PartitionStats(len(bindings), len({b.instance_id for b in bindings}), spread.reserved_free)


# Fabric health words, best first (NMX partition and GPU health); anything else ranks as UNKNOWN.
HEALTH_ORDER = (
    "HEALTHY",
    "UNKNOWN",
    "DEGRADED_BANDWIDTH",
    "DEGRADED_BW",
    "DEGRADED",
    "NO_NVLINK",
    "UNHEALTHY",
)


def worst_health(values: Sequence[str]) -> str | None:
    """The worst of the fabric's health words (None when nothing was observed)."""
    if not values:
        return None
    rank = {word: n for n, word in enumerate(HEALTH_ORDER)}
    return max(values, key=lambda v: rank.get(v, rank["UNKNOWN"]))
