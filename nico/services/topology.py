"""The NVLink topology a tenant may see (nico extension, behind the topology page): the NVLink domains
at the sites where it holds an allocation, each as its chassis, trays and GPUs.

Every GPU is free, the tenant's own (its instance, and when bound its logical partition, binding
status and whether the fabric was seen holding it there), in use by another tenant, with nothing
about that tenant, or held: its tray has GPUs in a partition another fabric manager made, which nico
keeps (the tray is not placed). Domain errors are the reconciler's, with every uuid but the shown
domains' and the tenant's partitions' blanked out, because an error may name another tenant's
partition.

A page of domains at a time, in rack order (site, first chassis serial): three queries, the page's
domains, every GPU of them with its machine, instance and binding (written as the body's JSON by
PostgreSQL: a page of 100 domains is 7,200 GPUs), and the page's partitions with every domain they
reach (so a partition split over pages is still shown split).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import NvlinkDomain
from nico.db.queries import topology as queries
from nico.services.fabric_errors import tenant_error_message
from nico.services.orgs import require_tenant

GpuState = Literal["free", "mine", "other", "held"]
UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
REDACTED = "…"


@dataclass(frozen=True)
class DomainView:
    domain_uuid: uuid.UUID
    site_id: uuid.UUID
    site_name: str
    error: str | None
    error_at: datetime | None
    consecutive_failures: int
    # Its chassis, trays and GPUs as the body's JSON: the contents of the ``chassis`` array, written
    # by PostgreSQL (queries.domain_chassis); empty without placed trays.
    chassis_json: str = ""
    pending: int = 0  # the tenant's GPUs whose binding the fabric does not hold yet
    gpus_without_home: int = 0  # in neither a tenant partition nor their home after the last pass
    foreign_gpus: int = 0  # in partitions nico did not make, after the last pass


@dataclass(frozen=True)
class PartitionLegend:
    """A partition of the tenant's drawn here, and the NVLink domains its drawn GPUs are in (more
    than one: split, its GPUs cannot all share memory)."""

    partition_id: uuid.UUID
    name: str
    status: str
    domains: frozenset[uuid.UUID] = frozenset()

    @property
    def split(self) -> bool:
        return len(self.domains) > 1


@dataclass(frozen=True)
class TopologyView:
    domains: list[DomainView]
    partitions: list[PartitionLegend]


def redact(error: str | None, allowed: set[uuid.UUID]) -> str | None:
    """``error`` with every uuid outside ``allowed`` blanked out."""
    if error is None:
        return None

    def blank(match: re.Match[str]) -> str:
        try:
            return match.group(0) if uuid.UUID(match.group(0)) in allowed else REDACTED
        except ValueError:
            return REDACTED

    return UUID_TEXT.sub(blank, error)


async def tenant_topology(
    session: AsyncSession, org: str, offset: int, limit: int, only: Sequence[uuid.UUID] = ()
) -> tuple[TopologyView, int]:
    """A page of the topology the org's tenant may see (``only``: of those domains), and how many
    domains there are in all (403 without a tenant)."""
    tenant = await require_tenant(session, org, status=403)
    domains, total = await queries.tenant_domains(session, tenant.id, offset, limit, only)
    if not domains:
        return TopologyView([], []), total
    chassis = {
        row.domain_uuid: row
        for row in await queries.domain_chassis(session, tenant.id, [d.uuid for d, _ in domains])
    }
    shown = sorted({p for row in chassis.values() for p in row.partitions})
    legend = [
        PartitionLegend(row.partition_id, row.name, row.status, frozenset(row.domains))
        for row in await queries.partition_legend(session, tenant.id, shown)
    ]
    allowed = {p.partition_id for p in legend} | {d.uuid for d, _ in domains}
    views = [
        _domain_view(domain, site_name, chassis.get(domain.uuid), allowed) for domain, site_name in domains
    ]
    return TopologyView(views, sorted(legend, key=lambda p: (p.name, str(p.partition_id)))), total


def _domain_view(
    domain: NvlinkDomain, site_name: str, chassis: queries.DomainChassisRow | None, allowed: set[uuid.UUID]
) -> DomainView:
    return DomainView(
        domain.uuid,
        domain.site_id,
        site_name,
        redact(tenant_error_message(domain.last_error), allowed),
        domain.last_error_at if domain.last_error else None,
        domain.consecutive_failures,
        chassis.chassis_json if chassis else "",
        chassis.pending if chassis else 0,
        gpus_without_home=domain.gpus_without_home,
        foreign_gpus=domain.foreign_gpus,
    )
