"""The SQL of NVLink logical partitions. Creation is the hot write path and runs on a raw connection
(:mod:`nico.db.raw`): two statements, no session."""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

import psycopg
from sqlalchemy import Select, delete, distinct, exists, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import LogicalPartition, NvlinkInterface, PhysicalPartition, Site, Vpc
from nico.db.models.capacity import NO_DOMAIN
from nico.db.queries.common import columns, text_search
from nico.db.queries.tenant_limits import PARTITION_QUOTA

Connection = psycopg.AsyncConnection[Any]

# The NVLink domains of a logical partition's GPUs (``{lp}``: the SQL of the partition's id): those of
# the machines of the instances bound to it, settled or not. Placement's single-domain rule and the
# responses' ``nvLinkDomainIds`` read the same words.
GPU_DOMAINS = """ARRAY(
    SELECT DISTINCT m.domain_uuid FROM nvlink_interface n JOIN machine m ON m.instance_id = n.instance_id
    WHERE n.logical_partition_id = {lp} AND m.domain_uuid IS NOT NULL ORDER BY 1)"""
# The NVLink domains of the machines a logical partition's reservation holds.
RESERVED_DOMAINS = """ARRAY(
    SELECT DISTINCT m.domain_uuid FROM machine m WHERE m.reserved_lp_id = {lp} AND m.domain_uuid IS NOT NULL
    ORDER BY 1)"""

# The hot write path runs on a raw connection (nico.db.raw): two statements, no session. The
# checks read tenant, site and association at once; the insert writes the partition and both history
# entries in one statement (atomic by itself), ON CONFLICT keeping the name rule exact under races.
_CREATE_CHECKS = """
SELECT t.id, s.id, s.status, s.nvlink_partition,
       EXISTS (SELECT 1 FROM tenant_site ts WHERE ts.tenant_id = t.id AND ts.site_id = s.id)
FROM tenant t LEFT JOIN site s ON s.id = %(site)s
WHERE t.org = %(org)s
"""
_CREATE_INSERT = """
WITH lp AS (
    INSERT INTO logical_partition
        (id, tenant_id, site_id, name, description, status, created_by, created, updated,
         multicast_groups_limit, single_nvlink_domain)
    VALUES (gen_random_uuid(), %(tenant)s, %(site)s, %(name)s, %(description)s, 'Ready', %(by)s, now(), now(),
            %(mc_limit)s, %(single)s)
    ON CONFLICT (tenant_id, name) DO NOTHING
    RETURNING *
), history AS (
    INSERT INTO status_detail (logical_partition_id, status, message, created, updated)
    SELECT lp.id, v.status, v.message, clock_timestamp(), clock_timestamp()
    FROM lp, (VALUES (1, 'Pending', 'received NVLink Logical Partition creation request, pending'),
                     (2, 'Ready', 'NVLink Logical Partition is ready for use')) AS v(n, status, message)
    ORDER BY v.n
    RETURNING id, status, message, created, updated
)
SELECT lp.id, lp.tenant_id, lp.site_id, lp.name, lp.description, lp.status, lp.created_by, lp.created,
       lp.updated, lp.multicast_groups_limit,
       (SELECT array_agg(ARRAY[h.status, h.message, h.created::text, h.updated::text] ORDER BY h.id)
        FROM history h)
FROM lp
"""


async def creation_checks(conn: Connection, org: str, site_id: uuid.UUID) -> Any:
    """(tenant id, site id, site status, site has NVLink partitions, tenant uses site) for the org's
    tenant and the site (site columns None when it does not exist); None without a tenant."""
    return await (await conn.execute(_CREATE_CHECKS, {"org": org, "site": site_id})).fetchone()


async def insert_ready_partition(
    conn: Connection,
    *,
    tenant_id: uuid.UUID,
    site_id: uuid.UUID,
    name: str,
    description: str | None,
    created_by: str | None,
    multicast_groups_limit: int,
    quota: int,
    single_nvlink_domain: bool = False,
) -> Any:
    """Insert a Ready partition with its two history entries; the row (partition columns, then the
    history as text arrays), or None when the tenant has a partition of that name. The tenant's
    partitions at the site are then counted under the lock of its ``tenant_site`` row, in the same
    transaction and round trip (nico/db/sql/tenant_limits.sql): over ``quota`` raises the check's
    psycopg error (SQLSTATE ``OVER_PARTITIONS``) and nothing is written."""
    params = {
        "tenant": tenant_id,
        "site": site_id,
        "name": name,
        "description": description,
        "by": created_by,
        "mc_limit": multicast_groups_limit,
        "single": single_nvlink_domain,
    }
    # BEGIN, the insert, the check and COMMIT in one pipeline: one round trip, as the insert alone was.
    async with conn.pipeline(), conn.transaction():
        inserted = await conn.execute(_CREATE_INSERT, params)
        await conn.execute(PARTITION_QUOTA, {"tenant": tenant_id, "site": site_id, "limit": quota})
    return await inserted.fetchone()


async def largest_multicast_budget(conn: Connection, site_id: uuid.UUID) -> int | None:
    """The largest multicast budget of the site's NVLink domains (None: no domain's budget known)."""
    row = await (
        await conn.execute(
            "SELECT max(max_multicast_groups) FROM nvlink_domain WHERE site_id = %s", (site_id,)
        )
    ).fetchone()
    return None if row is None else row[0]


async def partition_id_by_name(conn: Connection, tenant_id: uuid.UUID, name: str) -> uuid.UUID | None:
    row = await (
        await conn.execute(
            "SELECT id FROM logical_partition WHERE tenant_id = %s AND name = %s", (tenant_id, name)
        )
    ).fetchone()
    return row[0] if row else None


async def locked_partition(
    session: AsyncSession, partition_id: uuid.UUID, *, refresh: bool = False
) -> LogicalPartition | None:
    """The logical partition FOR UPDATE; ``refresh``: reloaded even if the session holds a copy."""
    stmt = select(LogicalPartition).where(LogicalPartition.id == partition_id).with_for_update()
    if refresh:
        stmt = stmt.execution_options(populate_existing=True)
    return await session.scalar(stmt)


async def partition_referenced(session: AsyncSession, partition_id: uuid.UUID) -> bool:
    """Whether a physical partition or a binding references the logical partition."""
    return bool(
        await session.scalar(
            select(
                exists().where(PhysicalPartition.logical_partition_id == partition_id)
                | exists().where(NvlinkInterface.logical_partition_id == partition_id)
            )
        )
    )


async def delete_partition(session: AsyncSession, partition_id: uuid.UUID) -> None:
    await session.execute(delete(LogicalPartition).where(LogicalPartition.id == partition_id))


async def partition_row(
    session: AsyncSession, partition_id: uuid.UUID, *, lock: bool = False
) -> LogicalPartition | None:
    """The logical partition (FOR UPDATE with ``lock``)."""
    stmt = select(LogicalPartition).where(LogicalPartition.id == partition_id)
    if lock:
        stmt = stmt.with_for_update()
    return await session.scalar(stmt)


def tenant_partitions_where(
    tenant_id: uuid.UUID,
    *,
    site_id: uuid.UUID | None = None,
    status: str | None = None,
    query: str | None = None,
) -> Select[Any]:
    """The tenant's logical partitions passing every given filter (``query``: a case-insensitive
    substring of name, description or status)."""
    stmt = select(LogicalPartition).where(LogicalPartition.tenant_id == tenant_id)
    if site_id is not None:
        stmt = stmt.where(LogicalPartition.site_id == site_id)
    if status is not None:
        stmt = stmt.where(LogicalPartition.status == status)
    if query:
        stmt = stmt.where(text_search(LogicalPartition, query))
    return stmt


PARTITION_ORDER: dict[str, Any] = columns(LogicalPartition)


async def partition_named(session: AsyncSession, tenant_id: uuid.UUID, name: str) -> uuid.UUID | None:
    return await session.scalar(
        select(LogicalPartition.id).where(
            LogicalPartition.tenant_id == tenant_id, LogicalPartition.name == name
        )
    )


async def vpcs_defaulting_to(
    session: AsyncSession, tenant_id: uuid.UUID, partition_id: uuid.UUID
) -> list[uuid.UUID]:
    """The tenant's VPCs whose default partition it is, oldest first."""
    rows = await session.scalars(
        select(Vpc.id)
        .where(Vpc.tenant_id == tenant_id, Vpc.nvlink_logical_partition_id == partition_id)
        .order_by(Vpc.created, Vpc.id)
    )
    return list(rows.all())


async def bound_instance_count(session: AsyncSession, partition_id: uuid.UUID) -> int:
    """Instances with a binding to the partition."""
    count = await session.scalar(
        select(func.count(distinct(NvlinkInterface.instance_id))).where(
            NvlinkInterface.logical_partition_id == partition_id
        )
    )
    return int(count or 0)


async def partition_domains(session: AsyncSession, partition_id: uuid.UUID) -> list[uuid.UUID]:
    """Domains where the partition has a physical partition."""
    rows = await session.scalars(
        select(PhysicalPartition.domain_uuid).where(PhysicalPartition.logical_partition_id == partition_id)
    )
    return list(rows.all())


async def sites_by_id(session: AsyncSession, ids: set[uuid.UUID]) -> dict[uuid.UUID, Site]:
    return {s.id: s for s in await session.scalars(select(Site).where(Site.id.in_(ids)))}


async def vpcs_defaulting_to_any(session: AsyncSession, partition_ids: list[uuid.UUID]) -> list[Vpc]:
    """VPCs whose default partition is one of ``partition_ids``, oldest first."""
    rows = await session.scalars(
        select(Vpc).where(Vpc.nvlink_logical_partition_id.in_(partition_ids)).order_by(Vpc.created, Vpc.id)
    )
    return list(rows)


async def bindings_to(session: AsyncSession, partition_ids: list[uuid.UUID]) -> list[NvlinkInterface]:
    """Bindings to the partitions, oldest first."""
    rows = await session.scalars(
        select(NvlinkInterface)
        .where(NvlinkInterface.logical_partition_id.in_(partition_ids))
        .order_by(NvlinkInterface.created, NvlinkInterface.id)
    )
    return list(rows)


async def physical_partition_healths(
    session: AsyncSession, partition_ids: list[uuid.UUID]
) -> list[tuple[uuid.UUID, str]]:
    """(logical partition, health) of each observed physical partition of the partitions."""
    rows = await session.execute(
        select(PhysicalPartition.logical_partition_id, PhysicalPartition.health).where(
            PhysicalPartition.logical_partition_id.in_(partition_ids), PhysicalPartition.health.is_not(None)
        )
    )
    return [(lp, health) for lp, health in rows.all() if health is not None]


# ---- where a partition is, and its reservation ---------------------------------------------------

_SPREAD = f"""
SELECT lp.id, {GPU_DOMAINS.format(lp="lp.id")}, lp.reservation_instance_type_id,
       (SELECT min(m.domain_uuid::text)::uuid FROM machine m WHERE m.reserved_lp_id = lp.id),
       (SELECT count(*) FROM machine m WHERE m.reserved_lp_id = lp.id),
       (SELECT count(*) FROM machine m WHERE m.reserved_lp_id = lp.id AND m.instance_id IS NULL
          AND m.status = 'Ready' AND NOT m.is_missing_on_site AND m.foreign_gpus = 0
          AND NOT m.held_unhealthy)
FROM logical_partition lp WHERE lp.id = ANY(%(ids)s)
"""


class Spread(NamedTuple):
    """Where a partition is: the domains of its GPUs, and its reservation (type, the domain of its
    machines, how many it holds, how many of them are free)."""

    gpu_domains: tuple[uuid.UUID, ...]
    reserved_type: uuid.UUID | None
    reserved_domain: uuid.UUID | None
    reserved: int
    reserved_free: int


async def spreads(conn: Connection, partition_ids: list[uuid.UUID]) -> dict[uuid.UUID, Spread]:
    """Each partition's :class:`Spread`."""
    rows = await (await conn.execute(_SPREAD, {"ids": partition_ids})).fetchall()
    return {
        lp: Spread(tuple(gpus), rtype, rdomain, held, free) for lp, gpus, rtype, rdomain, held, free in rows
    }


async def free_by_domain(
    conn: Connection, site_id: uuid.UUID, instance_type_id: uuid.UUID
) -> dict[uuid.UUID, int]:
    """Free machines of the type no reservation holds, per domain that has some (``domain_capacity``)."""
    rows = await (
        await conn.execute(
            "SELECT domain_uuid, free FROM domain_capacity "
            "WHERE site_id = %s AND instance_type_id = %s AND free > 0 AND domain_uuid <> %s",
            (site_id, instance_type_id, NO_DOMAIN),
        )
    ).fetchall()
    return dict(rows)


async def instance_type_site(conn: Connection, instance_type_id: uuid.UUID) -> uuid.UUID | None:
    """The site of the instance type (None: no such type)."""
    row = await (
        await conn.execute("SELECT site_id FROM instance_type WHERE id = %s", (instance_type_id,))
    ).fetchone()
    return row[0] if row else None


# Up to ``n`` free machines of the type in the domain that no reservation holds, marked for the
# partition, contiguous trays first; machines other transactions hold are skipped (they may be a
# create's). The pick is a materialized CTE, read once: as ``WHERE id IN (SELECT ... LIMIT n FOR
# UPDATE SKIP LOCKED)`` the planner may put the pick on the inner side of a join and run it again
# for each machine, and a run after the UPDATE marked some skips those (updated by this very
# statement) and picks others: fewer than ``n`` marked with ``n`` free, a false 409, depending on the
# table's statistics.
_RESERVE = """
WITH picked AS MATERIALIZED (
    SELECT m.id FROM machine m
    WHERE m.site_id = %(site)s AND m.instance_type_id = %(type)s AND m.domain_uuid = %(domain)s
      AND m.instance_id IS NULL AND m.status = 'Ready' AND NOT m.is_missing_on_site
      AND m.reserved_lp_id IS NULL AND m.foreign_gpus = 0 AND NOT m.held_unhealthy
    ORDER BY m.chassis_serial, m.tray_index, m.id
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED)
UPDATE machine SET reserved_lp_id = %(lp)s FROM picked WHERE machine.id = picked.id
RETURNING machine.id
"""

# ``n`` of the partition's reserved machines given back, free ones first (NULL: all of them); the
# pick read once, as _RESERVE's.
_RELEASE = """
WITH picked AS MATERIALIZED (
    SELECT m.id FROM machine m WHERE m.reserved_lp_id = %(lp)s
    ORDER BY m.instance_id IS NULL DESC, m.chassis_serial DESC, m.tray_index DESC, m.id DESC
    LIMIT %(n)s
    FOR UPDATE)
UPDATE machine SET reserved_lp_id = NULL FROM picked WHERE machine.id = picked.id
"""


async def reserve_machines(
    conn: Connection,
    *,
    partition_id: uuid.UUID,
    site_id: uuid.UUID,
    instance_type_id: uuid.UUID,
    domain: uuid.UUID,
    count: int,
) -> list[str]:
    """Mark up to ``count`` free machines of the type in ``domain`` as the partition's (``_RESERVE``)."""
    params = {"lp": partition_id, "site": site_id, "type": instance_type_id, "domain": domain, "n": count}
    return [machine_id for (machine_id,) in await (await conn.execute(_RESERVE, params)).fetchall()]


async def unreserve_machines(conn: Connection, machine_ids: list[str]) -> None:
    await conn.execute("UPDATE machine SET reserved_lp_id = NULL WHERE id = ANY(%s)", (machine_ids,))


async def release_reserved(conn: Connection, partition_id: uuid.UUID, count: int | None = None) -> None:
    """Give back ``count`` of the partition's reserved machines, free ones first (None: all)."""
    await conn.execute(_RELEASE, {"lp": partition_id, "n": count})


async def set_reservation_type(
    conn: Connection, partition_id: uuid.UUID, instance_type_id: uuid.UUID | None
) -> None:
    await conn.execute(
        "UPDATE logical_partition SET reservation_instance_type_id = %s WHERE id = %s",
        (instance_type_id, partition_id),
    )


async def check_quota(conn: Connection, tenant_id: uuid.UUID, instance_type_id: uuid.UUID) -> None:
    """``nico_check_quota`` (nico/db/sql/quota.sql): raises its NC002 / NC003 as psycopg errors."""
    await conn.execute("SELECT nico_check_quota(%s, %s)", (tenant_id, instance_type_id))
