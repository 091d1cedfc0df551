"""The SQL of the tenant topology view: the tenant's NVLink domains (a page of them, in rack order),
every GPU on them with what the tenant may know of its holder, and the site overview's figures of each
domain (counts only, so a page of a 2,000-rack site reads no GPU row out of PostgreSQL)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from itertools import groupby
from typing import NamedTuple

from sqlalchemy import ColumnElement, and_, case, func, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import NvLinkInterfaceStatus
from nico.db.models import (
    Gpu,
    Instance,
    Machine,
    NvlinkDomain,
    NvlinkInterface,
    Site,
    TenantSite,
)
from nico.db.raw import driver_connection


async def tenant_domains(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    offset: int,
    limit: int,
    only: Sequence[uuid.UUID] = (),
) -> tuple[list[tuple[NvlinkDomain, str]], int]:
    """A page of (domain, site name) of the NVLink domains at the tenant's sites (``only``: those of
    them), in rack order: by site name, the domain's first chassis serial (a domain without machines
    first), uuid; and how many there are in all.

    Read site by site: the tenant's sites by name with how many domains each has, then the page's part
    of each site it reaches in ``ix_nvlink_domain_rack_order``'s order (sites of one name together, as
    one sort), so a deep page skips index entries instead of sorting every domain of the site by its
    serial (a collation compare each: ~40 ms a page at 10,000 domains)."""
    kept = NvlinkDomain.uuid.in_(list(only)) if only else true()
    domains = select(func.count()).where(NvlinkDomain.site_id == Site.id, kept).scalar_subquery()
    sites = (
        await session.execute(
            select(Site.id, Site.name, domains)
            .join(TenantSite, and_(TenantSite.site_id == Site.id, TenantSite.tenant_id == tenant_id))
            .order_by(Site.name)
        )
    ).all()
    total = sum(count for _, _, count in sites)
    page: list[tuple[NvlinkDomain, str]] = []
    start = 0
    for name, group in groupby(sites, key=lambda site: site.name):
        named = list(group)
        count = sum(site[2] for site in named)
        if start + count > offset and len(page) < limit:
            ids = [site[0] for site in named]
            where = NvlinkDomain.site_id == ids[0] if len(ids) == 1 else NvlinkDomain.site_id.in_(ids)
            order = (NvlinkDomain.rack_serial.nulls_first(), NvlinkDomain.uuid)
            # The page's keys first, the domains' rows only for them (a deferred join, as list pages do).
            picked = (
                select(NvlinkDomain.uuid)
                .where(where, kept)
                .order_by(*order)
                .offset(max(0, offset - start))
                .limit(limit - len(page))
                .subquery("page_keys")
            )
            found = await session.scalars(
                select(NvlinkDomain).join(picked, picked.c.uuid == NvlinkDomain.uuid).order_by(*order)
            )
            page += [(domain, name) for domain in found]
        start += count
    return page, total


class TopologyGpuRow(NamedTuple):
    """One GPU of a domain, with the tenant's binding on it (instance fields None when the GPU's
    machine is free or holds another tenant's instance)."""

    domain_uuid: uuid.UUID
    chassis_serial: str
    tray_index: int
    device_id: int
    holder: uuid.UUID | None  # the instance on the machine, the tenant's or not
    instance_id: uuid.UUID | None  # the tenant's instance
    instance_name: str | None
    binding_status: str | None
    partition_id: uuid.UUID | None
    partition_name: str | None
    partition_status: str | None
    observed_partition_id: uuid.UUID | None  # the logical partition the fabric holds the GPU in
    health: str | None = None  # the GPU's health as the fabric last reported it
    foreign_gpus: int = 0  # GPUs of its machine in partitions nico did not make (the machine is held)


# Every GPU of the domains ``domains`` (an array) with the tenant's (``tenant``) binding on it: see
# topology_gpus. At the driver level: a page of 100 domains is 7,200 rows, and SQLAlchemy's result
# machinery cost ~3 µs a row more than the rows themselves.
_TOPOLOGY_GPUS = f"""
SELECT m.domain_uuid, m.chassis_serial, m.tray_index, g.device_id, m.instance_id, i.id, i.name, n.status,
       lp.id, lp.name, lp.status, pp.logical_partition_id, g.health, m.foreign_gpus
FROM machine m
JOIN gpu g ON g.machine_id = m.id
LEFT JOIN instance i ON i.id = m.instance_id AND i.tenant_id = %(tenant)s
LEFT JOIN nvlink_interface n ON n.instance_id = i.id AND n.device_instance = g.device_id - 1
LEFT JOIN logical_partition lp ON lp.id = n.logical_partition_id
LEFT JOIN physical_partition pp ON pp.id = g.physical_partition_id
WHERE m.domain_uuid = ANY(%(domains)s) AND m.tray_index IS NOT NULL
ORDER BY m.domain_uuid, m.chassis_serial, m.tray_index, g.device_id,
         n.status = '{NvLinkInterfaceStatus.DELETING}'
"""


async def topology_gpus(
    session: AsyncSession, tenant_id: uuid.UUID, domains: Sequence[uuid.UUID]
) -> list[TopologyGpuRow]:
    """Every GPU on ``domains`` by domain, chassis, tray and device; a GPU with a live binding and
    Deleting ones comes once per binding, the live one first."""
    driver = await driver_connection(session)
    async with driver.cursor() as cursor:
        await cursor.execute(_TOPOLOGY_GPUS, {"tenant": tenant_id, "domains": list(domains)})
        return [TopologyGpuRow._make(row) for row in await cursor.fetchall()]


async def partition_domains(
    session: AsyncSession, tenant_id: uuid.UUID, partitions: Sequence[uuid.UUID]
) -> dict[uuid.UUID, set[uuid.UUID]]:
    """The NVLink domains where each of ``partitions`` (the tenant's) has a GPU bound on a placed tray,
    on any page (read from the partitions' bindings, by their index, not from the site's GPUs)."""
    if not partitions:
        return {}
    rows = await session.execute(
        select(NvlinkInterface.logical_partition_id, Machine.domain_uuid)
        .distinct()
        .join(Instance, and_(Instance.id == NvlinkInterface.instance_id, Instance.tenant_id == tenant_id))
        .join(Machine, Machine.instance_id == Instance.id)
        .where(
            NvlinkInterface.logical_partition_id.in_(list(partitions)),
            Machine.domain_uuid.is_not(None),
            Machine.tray_index.is_not(None),
        )
    )
    found: dict[uuid.UUID, set[uuid.UUID]] = {}
    for partition, domain in rows.all():
        assert domain is not None  # WHERE domain_uuid IS NOT NULL
        found.setdefault(partition, set()).add(domain)
    return found


class DomainFigureRow(NamedTuple):
    """What the site overview counts of one domain's GPUs on placed trays."""

    domain_uuid: uuid.UUID
    chassis: int
    gpus: int
    free: int
    mine: int
    other: int
    held: int  # on trays with GPUs in another fabric manager's partitions
    unhealthy: int  # free or the tenant's, whose NVLink health is not HEALTHY


async def domain_figures(
    session: AsyncSession, tenant_id: uuid.UUID, domains: Sequence[uuid.UUID]
) -> list[DomainFigureRow]:
    """The GPU counts of each of ``domains`` that has placed trays, as the tenant may see them. Each
    tray's GPUs are counted by the GPU key (a lateral lookup per tray), never by a scan of every GPU."""
    sick = and_(Gpu.health.is_not(None), Gpu.health != "HEALTHY")
    per_tray = (
        select(func.count().label("gpus"), func.count().filter(sick).label("sick"))
        .where(Gpu.machine_id == Machine.id)
        .lateral()
    )
    free = and_(Machine.instance_id.is_(None), Machine.foreign_gpus == 0)
    mine = Instance.id.is_not(None)

    def gpus(*where: ColumnElement[bool]) -> ColumnElement[int]:
        return func.coalesce(func.sum(per_tray.c.gpus).filter(*where), 0)

    rows = await session.execute(
        select(
            Machine.domain_uuid,
            func.count(Machine.chassis_serial.distinct()),
            func.coalesce(func.sum(per_tray.c.gpus), 0),
            gpus(free),
            gpus(mine),
            gpus(Machine.instance_id.is_not(None), Instance.id.is_(None)),
            gpus(Machine.instance_id.is_(None), Machine.foreign_gpus > 0),
            func.coalesce(func.sum(per_tray.c.sick).filter(free | mine), 0),  # the health the tenant is shown
        )
        .select_from(Machine)
        .join(per_tray, true())
        .outerjoin(Instance, and_(Instance.id == Machine.instance_id, Instance.tenant_id == tenant_id))
        .where(Machine.domain_uuid.in_(list(domains)), Machine.tray_index.is_not(None))
        .group_by(Machine.domain_uuid)
    )
    return [DomainFigureRow._make(row) for row in rows.all()]


async def binding_figures(
    session: AsyncSession, tenant_id: uuid.UUID, domains: Sequence[uuid.UUID]
) -> list[tuple[uuid.UUID, uuid.UUID, int]]:
    """(domain, logical partition, GPUs Pending) of the tenant's bindings on placed trays of
    ``domains``: which of its partitions each domain holds, and how many of their GPUs wait for the
    fabric."""
    pending = case((NvlinkInterface.status == NvLinkInterfaceStatus.PENDING, 1), else_=0)
    rows = await session.execute(
        select(Machine.domain_uuid, NvlinkInterface.logical_partition_id, func.sum(pending))
        .join(Instance, and_(Instance.id == NvlinkInterface.instance_id, Instance.tenant_id == tenant_id))
        .join(Machine, Machine.instance_id == Instance.id)
        .where(Machine.domain_uuid.in_(list(domains)), Machine.tray_index.is_not(None))
        .group_by(Machine.domain_uuid, NvlinkInterface.logical_partition_id)
    )
    return [(domain, partition, int(count)) for domain, partition, count in rows.all()]
