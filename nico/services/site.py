"""Sites: who sees which, creation, changes and deletion.

nico has no site agent to pair with, so a site is ``Registered`` as soon as it is created (its history
shows the reference's two steps, pending pairing then paired).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import MachineStatus, SiteStatus
from nico.db.models import Site
from nico.db.queries import site as q
from nico.services import status
from nico.services.errors import bad_request, conflict, forbidden, not_found
from nico.services.listing import PageRequest, fetch_page
from nico.services.orgs import ProviderRecord, Viewer, provider_of, provider_record, providers_by_id
from nico.services.records import copy_of
from nico.services.search import search_pattern

ORDER_COLUMNS: dict[str, Any] = q.ORDER_COLUMNS
CAPABILITY_FILTERS = tuple(q.CAPABILITY_COLUMNS)

PENDING_PAIRING = "received site creation request, pending pairing"
PAIRED = "Site has been successfully paired"
NOT_FOUND = "Could not find Site with specified ID"
PATCH_HISTORY_LIMIT = 100
RELATIONS = ("InfrastructureProvider",)
STATUSES = frozenset(SiteStatus)
ONLINE = SiteStatus.REGISTERED  # the status responses call online (``isOnline``)


@dataclass(frozen=True)
class SiteRecord:
    """A site's columns as views show them (what other resources embed with ``includeRelation=Site``)."""

    id: uuid.UUID
    infrastructure_provider_id: uuid.UUID
    name: str
    description: str | None
    status: str
    serial_console_hostname: str | None
    is_serial_console_enabled: bool
    serial_console_idle_timeout: int | None
    serial_console_max_session_length: int | None
    location: dict[str, Any] | None
    contact: dict[str, Any] | None
    native_networking: bool
    network_security_group: bool
    nvlink_partition: bool
    flow: bool
    image_based_operating_system: bool
    site_controller_version: str | None
    site_agent_version: str | None
    created: datetime
    updated: datetime


def site_record(row: Site) -> SiteRecord:
    return copy_of(SiteRecord, row)


@dataclass(frozen=True)
class SiteView:
    """A site as responses show it. ``owner`` is its provider (whose org is always shown);
    ``tenant_view`` is true when the caller sees it as a tenant holding it, not as its provider."""

    site: SiteRecord
    owner: ProviderRecord
    history: list[status.StatusRecord]
    include_provider: bool = False
    tenant_view: bool = False
    machine_stats: dict[str, Any] | None = None


async def views(
    session: AsyncSession,
    viewer: Viewer,
    rows: Sequence[Site],
    *,
    relations: AbstractSet[str] = frozenset(),
    history: dict[uuid.UUID | str, list[status.StatusRecord]] | None = None,
    with_stats: bool = False,
) -> list[SiteView]:
    owners = await providers_by_id(session, (row.infrastructure_provider_id for row in rows))
    if history is None:
        history = await status.history(session, "site_id", [row.id for row in rows])
    stats = await machine_stats(session, [row.id for row in rows]) if with_stats else {}
    return [
        SiteView(
            site_record(row),
            provider_record(owners[row.infrastructure_provider_id]),
            history.get(row.id, []),
            include_provider="InfrastructureProvider" in relations,
            tenant_view=tenant_view(viewer, row),
            machine_stats=stats.get(row.id),
        )
        for row in rows
    ]


@dataclass(frozen=True)
class SiteFilters:
    statuses: list[str] = field(default_factory=list)
    query: str | None = None
    capabilities: dict[str, bool] = field(default_factory=dict)  # CAPABILITY_FILTERS key -> value


@dataclass
class SiteChanges:
    """What a provider's PATCH sets; None leaves a field as it is."""

    name: str | None = None
    description: str | None = None
    serial_console_hostname: str | None = None
    is_serial_console_enabled: bool | None = None
    serial_console_idle_timeout: int | None = None
    serial_console_max_session_length: int | None = None
    location: dict[str, Any] | None = None
    contact: dict[str, Any] | None = None
    capabilities: dict[str, bool] = field(default_factory=dict)  # column -> value

    def touches_serial_console(self) -> bool:
        return any(
            value is not None
            for value in (
                self.serial_console_hostname,
                self.is_serial_console_enabled,
                self.serial_console_idle_timeout,
                self.serial_console_max_session_length,
            )
        )


def sides(viewer: Viewer) -> tuple[uuid.UUID | None, uuid.UUID | None]:
    """Sites a caller may read: its provider's, and those where its tenant holds an allocation."""
    return (
        viewer.provider.id if viewer.provider is not None else None,
        viewer.tenant.id if viewer.tenant is not None else None,
    )


async def list_sites(
    session: AsyncSession,
    viewer: Viewer,
    filters: SiteFilters,
    page: PageRequest,
    *,
    relations: AbstractSet[str] = frozenset(),
    with_stats: bool = False,
) -> tuple[list[SiteView], int]:
    if with_stats and viewer.provider is None:
        raise forbidden("User must have Provider Admin role to request `includeMachineStats`")
    rows, total = await _site_page(session, viewer, filters, page)
    return await views(session, viewer, rows, relations=relations, with_stats=with_stats), total


async def _site_page(
    session: AsyncSession, viewer: Viewer, filters: SiteFilters, page: PageRequest
) -> tuple[Sequence[Site], int]:
    stmt = q.sites_visible_to(
        *sides(viewer),
        statuses=filters.statuses,
        capabilities=filters.capabilities,
        pattern=search_pattern(filters.query),
    )
    return await fetch_page(session, stmt, page, ORDER_COLUMNS, Site.id)


async def _visible_site(session: AsyncSession, viewer: Viewer, site_id: uuid.UUID) -> Site:
    site = await q.site_by_id(session, site_id)
    if site is None:
        raise not_found(NOT_FOUND)
    if not await q.site_visible_to(session, site_id, *sides(viewer)):
        raise forbidden("Site is not associated with org")
    return site


async def get_site(
    session: AsyncSession, viewer: Viewer, site_id: uuid.UUID, relations: AbstractSet[str] = frozenset()
) -> SiteView:
    row = await _visible_site(session, viewer, site_id)
    return (await views(session, viewer, [row], relations=relations))[0]


async def check_visible(session: AsyncSession, viewer: Viewer, site_id: uuid.UUID) -> None:
    """404 for an unknown site, 403 for one the caller may not read."""
    await _visible_site(session, viewer, site_id)


async def status_history(
    session: AsyncSession, site_id: uuid.UUID, page: PageRequest
) -> tuple[list[status.StatusRecord], int]:
    """One page of a site's history (the caller checked it may read the site)."""
    return await status.page(session, "site_id", site_id, page)


def tenant_view(viewer: Viewer, site: Site) -> bool:
    """True when the caller sees the site as a tenant only (not as its provider)."""
    return viewer.provider is None or viewer.provider.id != site.infrastructure_provider_id


async def sites_by_id(session: AsyncSession, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Site]:
    return await q.sites_by_id(session, ids)


async def site_records(session: AsyncSession, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, SiteRecord]:
    """The sites ``ids`` as views embed them."""
    return {site_id: site_record(row) for site_id, row in (await q.sites_by_id(session, ids)).items()}


async def create_site(
    session: AsyncSession,
    org: str,
    *,
    name: str,
    description: str | None,
    serial_console_hostname: str | None,
    location: dict[str, Any] | None,
    contact: dict[str, Any] | None,
    capabilities: dict[str, bool],
) -> SiteView:
    """A new site of the org's provider, Registered at once, with the entries this request wrote."""
    provider = await provider_of(session, org)
    if provider is None:
        raise not_found(f"Org '{org}' does not have an Infrastructure Provider")
    clash = await q.site_named(session, provider.id, name)
    if clash is not None:
        raise conflict(
            "A Site with specified name already exists for Infrastructure Provider", {"id": str(clash)}
        )
    site = Site(
        infrastructure_provider_id=provider.id,
        name=name,
        description=description,
        serial_console_hostname=serial_console_hostname,
        location=location,
        contact=contact,
        status=SiteStatus.REGISTERED,
        **capabilities,
    )
    session.add(site)
    await session.flush()
    entries = [
        await status.record(session, "site_id", site.id, SiteStatus.PENDING, PENDING_PAIRING),
        await status.record(session, "site_id", site.id, SiteStatus.REGISTERED, PAIRED),
    ]
    return SiteView(site_record(site), provider_record(provider), entries)


async def update_site(
    session: AsyncSession, org: str, site_id: uuid.UUID, changes: SiteChanges, *, as_provider: bool
) -> SiteView:
    """Change a site; only its provider may (a tenant holding it is refused: the reference crashes)."""
    provider = await provider_of(session, org) if as_provider else None
    site = await q.site_by_id(session, site_id, lock="key_share")
    if site is None:
        raise not_found("Could not retrieve Site to update")
    if provider is None or site.infrastructure_provider_id != provider.id:
        raise forbidden("Current org is not allowed to modify Site attributes")
    if changes.name is not None and changes.name != site.name:
        clash = await q.site_named(session, provider.id, changes.name, other_than=site.id)
        if clash is not None:
            raise conflict("Another Site with specified name already exists for Provider", {"id": str(clash)})
    if changes.touches_serial_console() and site.status != SiteStatus.REGISTERED:
        raise bad_request("Serial Console attributes can only be updated when Site is in Registered state")
    disables_native = changes.capabilities.get("native_networking") is False and site.native_networking
    if disables_native and await q.site_has_fnn_vpcs(session, site.id):
        raise bad_request(
            "Cannot disable Native Networking while Site has one or more VPCs with virtualization "
            "type set to FNN"
        )
    values: dict[str, Any] = {
        "name": changes.name,
        "description": changes.description,
        "serial_console_hostname": changes.serial_console_hostname,
        "is_serial_console_enabled": changes.is_serial_console_enabled,
        "serial_console_idle_timeout": changes.serial_console_idle_timeout,
        "serial_console_max_session_length": changes.serial_console_max_session_length,
        "location": changes.location,
        "contact": changes.contact,
        **changes.capabilities,
    }
    changed = False
    for column, value in values.items():
        if value is not None and getattr(site, column) != value:
            setattr(site, column, value)
            changed = True
    if changed:
        await session.flush()
    history = await status.history(session, "site_id", [site.id], limit=PATCH_HISTORY_LIMIT)
    return (await views(session, Viewer(provider_record(provider), None), [site], history=history))[0]


async def delete_site(session: AsyncSession, org: str, site_id: uuid.UUID) -> None:
    """Remove a site with its inventory (instance types, machines, NVLink domains).

    Allocations must be deleted first (as in the reference), and so must tenant objects left at the
    site: nico removes the site at once instead of cleaning up behind the response."""
    provider = await provider_of(session, org)
    if provider is None:
        raise forbidden("No Infrastructure Provider found for this org")
    site = await q.site_by_id(session, site_id, lock="update")
    if site is None:
        raise not_found("Could not retrieve Site with ID in URL")
    if site.infrastructure_provider_id != provider.id:
        raise forbidden("Site does not belong to org's Infrastructure Provider")
    if await q.site_has_allocations(session, site.id):
        raise forbidden("Site has Allocations which must be deleted first")
    if await q.site_has_tenant_resources(session, site.id):
        raise bad_request(
            "Site has tenant resources (VPCs, Subnets, Instances or NVLink Logical Partitions) "
            "which must be deleted first"
        )
    await q.delete_site_inventory(session, site.id)
    await session.delete(site)
    await session.flush()


async def machine_stats(session: AsyncSession, site_ids: list[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    """Machine counts per site. nico keeps no machine health, so the health maps are empty; the
    allocation split counts reserved machines (Σ InstanceType constraint values, capped by the site's
    machines) as in use when they hold an instance."""
    if not site_ids:
        return {}
    rows = await q.machines_at_sites(session, site_ids)
    reserved = await q.reserved_at_sites(session, site_ids)
    out: dict[uuid.UUID, dict[str, Any]] = {}
    for site_id in site_ids:
        mine = [row for row in rows if row.site_id == site_id]
        by_status = Counter(
            MachineStatus.IN_USE if row.instance_id and row.status == MachineStatus.READY else row.status
            for row in mine
        )
        in_use = sum(1 for row in mine if row.instance_id is not None)
        allocated = min(reserved.get(site_id, 0), len(mine))
        not_in_use = max(allocated - in_use, 0)
        out[site_id] = {
            "total": len(mine),
            "total_by_status": dict(by_status),
            "total_by_health": {},
            "total_by_status_and_health": {name: {} for name in by_status},
            "total_by_allocation": {
                "allocatedInUse": in_use,
                "allocatedNotInUse": not_in_use,
                "unallocated": max(len(mine) - in_use - not_in_use, 0),
            },
        }
    return out
