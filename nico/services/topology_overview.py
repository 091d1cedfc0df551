"""The site overview (nico extension, the topology page's first view): one cell per NVLink domain at
the tenant's sites with counts only (GPUs free, the tenant's, another tenant's, held, NVLink not
healthy, Pending; the tenant's partitions there and how many of them are split over domains; the
domain's foreign GPUs and its reconciler error), a page of domains at a time in the topology's rack
order. Its queries count in PostgreSQL, so a page costs the same at 20 racks as at 2,000.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.queries import topology as queries
from nico.services.fabric_errors import tenant_error_message
from nico.services.orgs import require_tenant
from nico.services.topology import redact


@dataclass(frozen=True)
class DomainCell:
    domain_uuid: uuid.UUID
    site_id: uuid.UUID
    site_name: str
    chassis: int
    gpus: int
    free: int
    mine: int
    other: int
    held: int
    unhealthy: int
    pending: int
    partitions: int  # the tenant's logical partitions with GPUs here
    split_partitions: int  # of those, the ones with GPUs in other NVLink domains too
    foreign_gpus: int
    gpus_without_home: int
    error: str | None
    error_at: datetime | None
    consecutive_failures: int


async def tenant_overview(
    session: AsyncSession, org: str, offset: int, limit: int
) -> tuple[list[DomainCell], int]:
    """A page of the org's tenant's site overview, and how many domains there are in all (403 without
    a tenant)."""
    tenant = await require_tenant(session, org, status=403)
    domains, total = await queries.tenant_domains(session, tenant.id, offset, limit)
    if not domains:
        return [], total
    ids = [d.uuid for d, _ in domains]
    figures = {row.domain_uuid: row for row in await queries.domain_figures(session, tenant.id, ids)}
    bindings = await queries.binding_figures(session, tenant.id, ids)
    reach = await queries.partition_domains(session, tenant.id, list({p for _, p, _ in bindings}))
    pending: dict[uuid.UUID, int] = {}
    here: dict[uuid.UUID, set[uuid.UUID]] = {}
    for domain_id, partition, waiting in bindings:
        pending[domain_id] = pending.get(domain_id, 0) + waiting
        here.setdefault(domain_id, set()).add(partition)
    cells = []
    for domain, site_name in domains:
        counts = figures.get(domain.uuid) or queries.DomainFigureRow(domain.uuid, 0, 0, 0, 0, 0, 0, 0)
        partitions = here.get(domain.uuid, set())
        allowed = partitions | {domain.uuid}
        cells.append(
            DomainCell(
                domain.uuid,
                domain.site_id,
                site_name,
                counts.chassis,
                counts.gpus,
                counts.free,
                counts.mine,
                counts.other,
                counts.held,
                counts.unhealthy,
                pending.get(domain.uuid, 0),
                len(partitions),
                sum(len(reach.get(p, ())) > 1 for p in partitions),
                domain.foreign_gpus,
                domain.gpus_without_home,
                redact(tenant_error_message(domain.last_error), allowed),
                domain.last_error_at if domain.last_error else None,
                domain.consecutive_failures if domain.last_error else 0,
            )
        )
    return cells, total
