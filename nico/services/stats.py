"""The reference's read-only stats (NICo REST, 2026-05): GPUs per GPU name, machine status counts
per instance type (assigned, used, allocated, still allocatable) and per tenant, the site's
assigned/unassigned summary, and the distinct capabilities of a provider's machines. Provider
admins only, for a site of their own. Every figure is counted from the rows as they are now."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import CapabilityType
from nico.db.models import InfrastructureProvider
from nico.db.queries import stats as q
from nico.services import orgs
from nico.services.errors import bad_request, forbidden, not_found
from nico.services.instance_type import CapabilitySpec
from nico.services.listing import PageRequest

NO_PROVIDER = "Infrastructure Provider not found in org"
NO_SITE_ID = "Site ID must be specified in query"
SITE_MISSING = "Could not find Site specified in query"
NOT_YOURS = "Site specified in query doesn't belong to org's Infrastructure provider"
BUCKETS = ("initializing", "ready", "inUse", "error", "maintenance", "unknown", "reserved")
BAD_CAPABILITY_TYPE = "Invalid capability type value in query: {value}"
CAPABILITY_ORDER_FIELDS = frozenset(q.CAPABILITY_ORDER)


@dataclass(frozen=True)
class MachineCounts:
    """Machines by the reference's status buckets; ``total`` is their sum."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BUCKETS, 0))

    def add(self, bucket: str, n: int) -> None:
        self.counts[bucket] += n

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class GpuStat:
    name: str
    gpus: int
    machines: int


@dataclass
class TenantTypeStat:
    """One tenant's share of one instance type (summed up as the rows come)."""

    tenant_id: uuid.UUID
    org: str
    org_display_name: str | None
    instance_type_id: uuid.UUID
    instance_type_name: str
    allocated: int = 0
    used: MachineCounts = field(default_factory=MachineCounts)


@dataclass
class InstanceTypeStat:
    """One instance type's machines and allocations at a site (summed up as the rows come)."""

    id: uuid.UUID
    name: str
    assigned: MachineCounts = field(default_factory=MachineCounts)
    used: MachineCounts = field(default_factory=MachineCounts)
    allocated: int = 0
    tenants: list[TenantTypeStat] = field(default_factory=list)

    @property
    def max_allocatable(self) -> int:
        """Machines of the type no allocation has claimed yet (capacity counts every associated
        machine, whatever its status, as allocation create does)."""
        return max(self.assigned.total - self.allocated, 0)


@dataclass(frozen=True)
class TenantStat:
    id: uuid.UUID
    org: str
    org_display_name: str | None
    instance_types: list[TenantTypeStat] = field(default_factory=list)


async def provider_site(session: AsyncSession, org: str, site_id: uuid.UUID | None) -> InfrastructureProvider:
    """The org's provider, after checking the ``siteId`` query names one of its sites."""
    provider = await orgs.provider_of(session, org)
    if provider is None:
        raise not_found(NO_PROVIDER)
    if site_id is None:
        raise bad_request(NO_SITE_ID)
    site = await q.site_by_id(session, site_id)
    if site is None:
        raise not_found(SITE_MISSING)
    if site.infrastructure_provider_id != provider.id:
        raise forbidden(NOT_YOURS)
    return provider


async def gpu_stats(session: AsyncSession, org: str, site_id: uuid.UUID | None) -> list[GpuStat]:
    await provider_site(session, org, site_id)
    assert site_id is not None
    return [
        GpuStat(name, int(gpus), int(machines))
        for name, gpus, machines in await q.gpu_stats(session, site_id)
    ]


async def _type_stats(session: AsyncSession, site_id: uuid.UUID) -> list[InstanceTypeStat]:
    stats = {tid: InstanceTypeStat(tid, name) for tid, name in await q.instance_types_at(session, site_id)}
    for tid, bucket, machines, _ in await q.machine_buckets_by_type(session, site_id):
        if tid in stats:
            stats[tid].assigned.add(bucket, int(machines))
    shares: dict[tuple[uuid.UUID, uuid.UUID], TenantTypeStat] = {}

    def share(tenant: uuid.UUID, org: str, display: str | None, tid: uuid.UUID) -> TenantTypeStat:
        key = (tenant, tid)
        if key not in shares:
            shares[key] = TenantTypeStat(tenant, org, display, tid, stats[tid].name)
        return shares[key]

    for tenant, org, display, tid, allocated in await q.allocated_by_tenant_and_type(session, site_id):
        if tid in stats:
            share(tenant, org, display, tid).allocated += int(allocated)
            stats[tid].allocated += int(allocated)
    for tenant, org, display, tid, bucket, machines in await q.used_buckets_by_tenant_and_type(
        session, site_id
    ):
        if tid in stats:
            share(tenant, org, display, tid).used.add(bucket, int(machines))
            stats[tid].used.add(bucket, int(machines))
    for (_, tid), item in sorted(shares.items(), key=lambda kv: (kv[1].org, str(kv[0][0]))):
        stats[tid].tenants.append(item)
    return list(stats.values())


async def instance_type_stats(
    session: AsyncSession, org: str, site_id: uuid.UUID | None
) -> list[InstanceTypeStat]:
    await provider_site(session, org, site_id)
    assert site_id is not None
    return await _type_stats(session, site_id)


async def instance_type_summary(
    session: AsyncSession, org: str, site_id: uuid.UUID | None
) -> tuple[MachineCounts, MachineCounts]:
    """(machines with an instance type, machines without) at the site, by bucket."""
    await provider_site(session, org, site_id)
    assert site_id is not None
    assigned, unassigned = MachineCounts(), MachineCounts()
    for tid, bucket, machines, _ in await q.machine_buckets_by_type(session, site_id):
        (assigned if tid is not None else unassigned).add(bucket, int(machines))
    return assigned, unassigned


async def tenant_instance_type_stats(
    session: AsyncSession, org: str, site_id: uuid.UUID | None
) -> list[TenantStat]:
    await provider_site(session, org, site_id)
    assert site_id is not None
    tenants: dict[uuid.UUID, TenantStat] = {}
    for item in await _type_stats(session, site_id):
        for share in item.tenants:
            found = tenants.setdefault(
                share.tenant_id, TenantStat(share.tenant_id, share.org, share.org_display_name)
            )
            found.instance_types.append(share)
    return sorted(tenants.values(), key=lambda t: (t.org, str(t.id)))


@dataclass(frozen=True)
class CapabilityFilter:
    site_id: uuid.UUID | None = None
    has_instance_type: bool | None = None
    type: str | None = None
    name: str | None = None
    frequency: str | None = None
    capacity: str | None = None
    vendor: str | None = None
    count: int | None = None
    device_type: str | None = None
    inactive_devices: list[int] | None = None


async def machine_capabilities(
    session: AsyncSession, org: str, where: CapabilityFilter, page: PageRequest, order: str, descending: bool
) -> tuple[list[CapabilitySpec], int]:
    """Distinct capabilities of the provider's machines."""
    provider = await orgs.provider_of(session, org)
    if provider is None:
        raise not_found(NO_PROVIDER)
    if where.site_id is not None:
        site = await q.site_by_id(session, where.site_id)
        if site is None:
            raise not_found(SITE_MISSING)
        if site.infrastructure_provider_id != provider.id:
            raise forbidden(NOT_YOURS)
    if where.type is not None and where.type not in set(CapabilityType):
        raise bad_request(BAD_CAPABILITY_TYPE.format(value=where.type))
    equal: dict[str, Any] = {
        name: value
        for name, value in (
            ("type", where.type),
            ("name", where.name),
            ("frequency", where.frequency),
            ("capacity", where.capacity),
            ("vendor", where.vendor),
            ("count", where.count),
            ("device_type", where.device_type),
        )
        if value is not None
    }
    stmt = q.distinct_capabilities(
        provider.id,
        site_id=where.site_id,
        has_instance_type=where.has_instance_type,
        equal=equal,
        inactive_devices=where.inactive_devices,
    )
    total = await q.count_rows(session, stmt)
    rows = await q.capability_page(
        session, stmt, q.CAPABILITY_ORDER[order], descending, page.offset, page.size
    )
    columns = [c.key for c in q.CAPABILITY_COLUMNS]
    return [CapabilitySpec(**dict(zip(columns, row, strict=True))) for row in rows], total
