"""The SQL of the tenant topology view: the tenant's NVLink domains (a page of them, in rack order),
every GPU on them with what the tenant may know of its holder, and the site overview's figures of each
domain (counts only, so a page of a 2,000-rack site reads no GPU row out of PostgreSQL)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from itertools import groupby
from typing import Any, NamedTuple

from sqlalchemy import ARRAY, ColumnElement, Select, Uuid, and_, any_, bindparam, case, func, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import NvLinkInterfaceStatus
from nico.db.models import (
    Gpu,
    Instance,
    LogicalPartition,
    Machine,
    NvlinkDomain,
    NvlinkInterface,
    Site,
    TenantSite,
)
from nico.db.raw import driver_connection


def _one_of(column: Any, ids: Sequence[uuid.UUID]) -> ColumnElement[bool]:
    """``column`` among ``ids``, bound as one array: a page's 100 ids bound one by one (``IN``) made a
    statement of over 50 parameters, which psycopg parses anew on every execution (it caches only
    statements of up to 50)."""
    among: ColumnElement[bool] = column == any_(bindparam(None, list(ids), type_=ARRAY(Uuid())))
    return among


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


class DomainChassisRow(NamedTuple):
    """One domain of a topology page: its chassis as the body's JSON (the contents of its ``chassis``
    array, written by PostgreSQL), how many of the tenant's GPUs on it are Pending, and the tenant's
    logical partitions its GPUs are shown in."""

    domain_uuid: uuid.UUID
    chassis_json: str
    pending: int
    partitions: list[uuid.UUID]


# The fields every GPU but the tenant's own writes as null (after deviceInstance and state).
_NOBODY = (
    '"instanceId":null,"instanceName":null,"nvLinkLogicalPartitionId":null,'
    '"nvLinkLogicalPartitionName":null,"status":null,"observed":false'
)

# Every GPU of the domains ``domains`` (an array) with the tenant's (``tenant``) binding on it, written
# as the topology body's JSON (TopologyGpu's fields in its order, text escaped by to_json as pydantic
# escapes it; tests/api/test_topology_body.py holds the page equal to the schema's dump), grouped into
# trays (a machine is one tray), chassis and domains: a page of 100 domains is 7,200 GPUs, and making
# each a Python object and writing it again cost more than the SQL reading it.
#
# A GPU is the tenant's ("mine": its instance is on the machine), another tenant's ("other"), held (its
# machine has GPUs in a partition another fabric manager made) or free; health is shown for free and
# own GPUs only. Of a GPU's bindings the live one is shown (one at most: uq_nvlink_interface_live_gpu),
# else its first Deleting one (the condition is read for Deleting bindings only, so no GPU is sorted to
# drop the ones behind). The instance is looked up by key for the page's machines (OFFSET 0 keeps it a
# lookup: a join would hash every instance of the tenant).
_DOMAIN_CHASSIS = f"""
WITH gpus AS (
  SELECT m.id AS machine, m.domain_uuid, m.chassis_serial, m.tray_index, g.device_id,
         '{{"deviceInstance":' || g.device_id - 1 || CASE
           WHEN i.id IS NOT NULL THEN
             ',"state":"mine","instanceId":"' || i.id || '","instanceName":'
             || coalesce(to_json(i.name)::text, 'null')
             || ',"nvLinkLogicalPartitionId":' || coalesce('"' || lp.id || '"', 'null')
             || ',"nvLinkLogicalPartitionName":' || coalesce(to_json(lp.name)::text, 'null')
             || ',"status":' || coalesce(to_json(n.status)::text, 'null')
             || ',"observed":' || (lp.id IS NOT NULL AND pp.logical_partition_id IS NOT DISTINCT FROM lp.id)
             || coalesce(',"health":' || to_json(g.health), '')
           WHEN m.instance_id IS NOT NULL THEN ',"state":"other",{_NOBODY}'
           WHEN m.foreign_gpus > 0 THEN ',"state":"held",{_NOBODY}'
           ELSE ',"state":"free",{_NOBODY}' || coalesce(',"health":' || to_json(g.health), '')
         END || '}}' AS body,
         n.status = '{NvLinkInterfaceStatus.PENDING}' AS pending, lp.id AS partition_id
  FROM machine m
  JOIN gpu g ON g.machine_id = m.id
  LEFT JOIN LATERAL (
    SELECT id, name FROM instance WHERE id = m.instance_id AND tenant_id = %(tenant)s OFFSET 0
  ) i ON true
  LEFT JOIN nvlink_interface n ON n.instance_id = i.id AND n.device_instance = g.device_id - 1
    AND (n.status <> '{NvLinkInterfaceStatus.DELETING}' OR NOT EXISTS (
      SELECT FROM nvlink_interface o
      WHERE o.instance_id = n.instance_id AND o.device_instance = n.device_instance
        AND (o.status <> '{NvLinkInterfaceStatus.DELETING}' OR o.id < n.id)))
  LEFT JOIN logical_partition lp ON lp.id = n.logical_partition_id
  LEFT JOIN physical_partition pp ON pp.id = g.physical_partition_id
  WHERE m.domain_uuid = ANY(%(domains)s) AND m.tray_index IS NOT NULL
), trays AS (
  SELECT domain_uuid, chassis_serial, tray_index,
         '{{"trayIndex":' || tray_index || ',"gpus":[' || string_agg(body, ',' ORDER BY device_id) || ']}}'
           AS body
  FROM gpus GROUP BY machine, domain_uuid, chassis_serial, tray_index
), chassis AS (
  SELECT domain_uuid, chassis_serial,
         '{{"chassisSerial":' || to_json(chassis_serial)
           || ',"trays":[' || string_agg(body, ',' ORDER BY tray_index) || ']}}' AS body
  FROM trays GROUP BY domain_uuid, chassis_serial
), figures AS (
  SELECT domain_uuid, count(*) FILTER (WHERE pending) AS pending,
         coalesce(array_agg(DISTINCT partition_id) FILTER (WHERE partition_id IS NOT NULL), '{{}}')
           AS partitions
  FROM gpus GROUP BY domain_uuid
), bodies AS (
  SELECT domain_uuid, string_agg(body, ',' ORDER BY chassis_serial) AS body FROM chassis GROUP BY domain_uuid
)
SELECT b.domain_uuid, b.body, f.pending::int, f.partitions FROM bodies b JOIN figures f USING (domain_uuid)
"""


async def domain_chassis(
    session: AsyncSession, tenant_id: uuid.UUID, domains: Sequence[uuid.UUID]
) -> list[DomainChassisRow]:
    """The chassis of each of ``domains`` that has placed trays, as the tenant may see them (see
    ``_DOMAIN_CHASSIS``), read at the driver level (100 rows of ~15 kB)."""
    driver = await driver_connection(session)
    async with driver.cursor() as cursor:
        await cursor.execute(_DOMAIN_CHASSIS, {"tenant": tenant_id, "domains": list(domains)})
        return [DomainChassisRow._make(row) for row in await cursor.fetchall()]


def _reach(tenant_id: uuid.UUID, partitions: Sequence[uuid.UUID]) -> Select[uuid.UUID, uuid.UUID]:
    """(partition, domain) of each of ``partitions`` (the tenant's) and each NVLink domain where it has
    a GPU bound on a placed tray, on any page: read from the partitions' bindings by their index, each
    binding's machine looked up by its instance (OFFSET 0 keeps it a lookup: PostgreSQL would otherwise
    walk every placed machine to merge them), the tenant checked on the binding's own column."""
    placed = (
        select(Machine.domain_uuid)
        .where(
            Machine.instance_id == NvlinkInterface.instance_id,
            Machine.domain_uuid.is_not(None),
            Machine.tray_index.is_not(None),
        )
        .offset(0)
        .lateral("placed")
    )
    return (
        select(NvlinkInterface.logical_partition_id, placed.c.domain_uuid)
        .distinct()
        .join(placed, true())
        .where(
            _one_of(NvlinkInterface.logical_partition_id, partitions), NvlinkInterface.tenant_id == tenant_id
        )
    )


async def partition_domains(
    session: AsyncSession, tenant_id: uuid.UUID, partitions: Sequence[uuid.UUID]
) -> dict[uuid.UUID, set[uuid.UUID]]:
    """The NVLink domains where each of ``partitions`` (the tenant's) has a GPU bound on a placed tray,
    on any page."""
    if not partitions:
        return {}
    found: dict[uuid.UUID, set[uuid.UUID]] = {}
    for partition, domain in (await session.execute(_reach(tenant_id, partitions))).all():
        found.setdefault(partition, set()).add(domain)
    return found


class PartitionLegendRow(NamedTuple):
    partition_id: uuid.UUID
    name: str
    status: str
    domains: list[uuid.UUID]


async def partition_legend(
    session: AsyncSession, tenant_id: uuid.UUID, partitions: Sequence[uuid.UUID]
) -> list[PartitionLegendRow]:
    """Each of ``partitions`` (the tenant's) with its name, status and the NVLink domains where it has a
    GPU bound on a placed tray, on any page, in one statement."""
    if not partitions:
        return []
    reach = _reach(tenant_id, partitions).subquery("reach")
    rows = await session.execute(
        select(
            LogicalPartition.id,
            LogicalPartition.name,
            LogicalPartition.status,
            func.array_agg(reach.c.domain_uuid),
        )
        .join(reach, reach.c.logical_partition_id == LogicalPartition.id)
        .where(_one_of(LogicalPartition.id, partitions))
        .group_by(LogicalPartition.id)
    )
    return [PartitionLegendRow._make(row) for row in rows.all()]


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
        .where(_one_of(Machine.domain_uuid, domains), Machine.tray_index.is_not(None))
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
        .where(_one_of(Machine.domain_uuid, domains), Machine.tray_index.is_not(None))
        .group_by(Machine.domain_uuid, NvlinkInterface.logical_partition_id)
    )
    return [(domain, partition, int(count)) for domain, partition, count in rows.all()]
