"""A tenant's quotas at a site (``[quotas]``): the check of NVLink changes in flight that goes out with
a request's commit, and every tenant's usage against its limits for operators (``nico admin quota``,
the ``nico_tenant_quota_*`` gauges). The logical partition quota is checked by partition creation
(:func:`nico.logical_partition.service.create`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from nico.config import QuotaConfig
from nico.db.queries import tenant_limits as queries
from nico.services.errors import conflict


def changes_quota_reached(count: int, limit: int, site_id: uuid.UUID) -> str:
    return (
        f"Tenant would have {count} Instances with NVLink changes in flight at Site: {site_id}, over its "
        f"quota of {limit} (NVLink changes in flight quota: quotas.nvlink_changes_in_flight); retry when "
        "its Instances are Ready"
    )


def check_changes_in_flight(
    session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID, limit: int
) -> None:
    """Have the request's commit refuse (409, nothing committed) when the tenant's instances at the site
    whose NVLink change the fabric has not settled, this request's included, are more than ``limit``:
    counted under the lock of the tenant's ``tenant_site`` row, so requests on several API replicas
    take turns at the count."""
    queries.check_nvlink_changes_at_commit(
        session,
        tenant_id,
        site_id,
        limit,
        lambda count: conflict(changes_quota_reached(count, limit, site_id)),
    )


@dataclass(frozen=True)
class QuotaUsage:
    """One tenant at one site: what it holds and what it may."""

    org: str
    site_id: uuid.UUID
    site_name: str
    logical_partitions: int
    logical_partitions_limit: int
    nvlink_changes_in_flight: int
    nvlink_changes_in_flight_limit: int


async def usage(
    conn: AsyncConnection | AsyncSession,
    quotas: QuotaConfig,
    *,
    org: str | None = None,
    site_id: uuid.UUID | None = None,
) -> list[QuotaUsage]:
    """Every tenant's usage at every site it may use, with its limits (or only ``org``'s, ``site_id``'s)."""
    return [
        QuotaUsage(
            org=row.org,
            site_id=row.site_id,
            site_name=row.site_name,
            logical_partitions=row.logical_partitions,
            logical_partitions_limit=quotas.partitions_for(row.org),
            nvlink_changes_in_flight=row.nvlink_changes_in_flight,
            nvlink_changes_in_flight_limit=quotas.changes_for(row.org),
        )
        for row in await queries.usage(conn, org=org, site_id=site_id)
    ]
