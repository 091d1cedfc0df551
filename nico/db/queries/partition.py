"""The SQL of NVLink logical partitions. Creation is the hot write path and runs on a raw connection
(:mod:`nico.db.raw`): two statements, no session."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from sqlalchemy import delete, exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import LogicalPartition, NvlinkInterface, PhysicalPartition

Connection = psycopg.AsyncConnection[Any]

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
        (id, tenant_id, site_id, name, description, status, created_by, created, updated)
    VALUES (gen_random_uuid(), %(tenant)s, %(site)s, %(name)s, %(description)s, 'Ready', %(by)s, now(), now())
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
       lp.updated,
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
) -> Any:
    """Insert a Ready partition with its two history entries; the row (partition columns, then the
    history as text arrays), or None when the tenant has a partition of that name."""
    params = {
        "tenant": tenant_id,
        "site": site_id,
        "name": name,
        "description": description,
        "by": created_by,
    }
    return await (await conn.execute(_CREATE_INSERT, params)).fetchone()


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
