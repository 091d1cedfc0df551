"""The SQL of a tenant's limits at a site (nico/db/sql/tenant_limits.sql): the quota checks, the
token bucket of fabric-changing requests, and each tenant's usage for operators."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import psycopg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from nico.db.raw import AtCommit, Statement, send_at_commit

Connection = psycopg.AsyncConnection[Any]

PARTITION_QUOTA = "SELECT nico_check_partition_quota(%(tenant)s, %(site)s, %(limit)s)"
_CHANGES_QUOTA = "SELECT nico_check_nvlink_changes_quota(%(tenant)s, %(site)s, %(limit)s)"
OVER_PARTITIONS, _OVER_CHANGES = "NC004", "NC005"


def over_limit(exc: psycopg.Error, sqlstate: str) -> int | None:
    """The count a quota check refused (its detail "count/limit"), or None: not that refusal."""
    if exc.sqlstate != sqlstate or not exc.diag.message_detail:
        return None
    return int(exc.diag.message_detail.split("/")[0])


def check_nvlink_changes_at_commit(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    site_id: uuid.UUID,
    limit: int,
    refused: Callable[[int], Exception],
) -> None:
    """Have the session's commit count the tenant's instances at the site whose NVLink change is in
    flight (this transaction's included), under the lock of its ``tenant_site`` row, and refuse the
    commit with ``refused(count)`` when they are more than ``limit``."""

    def refusal(exc: psycopg.Error) -> Exception | None:
        count = over_limit(exc, _OVER_CHANGES)
        return None if count is None else refused(count)

    statement = Statement(_CHANGES_QUOTA, {"tenant": tenant_id, "site": site_id, "limit": limit})
    send_at_commit(session, AtCommit(statement, refusal))


async def take_fabric_token(conn: Connection, org: str, rate: float, burst: int) -> float:
    """Take one token of the org's bucket (one statement, on an autocommit connection): 0 when
    taken, else the seconds until one is there (nothing taken)."""
    cursor = await conn.execute(
        "SELECT nico_take_fabric_token(%s, %s, %s)", (org, float(rate), float(burst)), prepare=True
    )
    row = await cursor.fetchone()
    assert row is not None
    return float(row[0])


class Usage(NamedTuple):
    """What one tenant holds at one site: logical partitions, instances with an NVLink change in
    flight."""

    org: str
    site_id: uuid.UUID
    site_name: str
    logical_partitions: int
    nvlink_changes_in_flight: int


_USAGE = """
SELECT t.org, s.id, s.name,
       (SELECT count(*) FROM logical_partition lp WHERE lp.tenant_id = t.id AND lp.site_id = s.id),
       (SELECT count(*) FROM instance i JOIN machine m ON m.instance_id = i.id
         WHERE i.tenant_id = t.id AND i.site_id = s.id AND m.domain_uuid IS NOT NULL
           AND (i.status = 'Terminating'
                OR i.nvlink_applied_version IS DISTINCT FROM i.nvlink_config_version))
FROM tenant_site ts JOIN tenant t ON t.id = ts.tenant_id JOIN site s ON s.id = ts.site_id
WHERE (CAST(:org AS text) IS NULL OR t.org = :org) AND (CAST(:site AS uuid) IS NULL OR s.id = :site)
ORDER BY t.org, s.name, s.id
"""


async def usage(
    conn: AsyncConnection | AsyncSession, *, org: str | None = None, site_id: uuid.UUID | None = None
) -> list[Usage]:
    """Every tenant's usage at every site it may use (or only ``org``'s, only ``site_id``'s)."""
    rows = await conn.execute(text(_USAGE), {"org": org, "site": site_id})
    return [Usage(*row) for row in rows.all()]
