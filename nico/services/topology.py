"""The NVLink topology a tenant may see (nico extension, behind the topology page): the NVLink domains
at the sites where it holds an allocation, each as its chassis, trays and GPUs.

Every GPU is free, the tenant's own (its instance, and when bound its logical partition, binding
status and whether the fabric was seen holding it there), in use by another tenant, with nothing
about that tenant, or held: its tray has GPUs in a partition another fabric manager made, which nico
keeps (the tray is not placed). Domain errors are the reconciler's, with every uuid but the shown
domains' and the tenant's partitions' blanked out, because an error may name another tenant's
partition.

A page of domains at a time, in rack order (site, first chassis serial): three queries, the page's
domains, every GPU of them with its machine, instance and binding, and the other domains the page's
partitions reach (so a partition split over pages is still shown split).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal, NamedTuple

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import NvLinkInterfaceStatus
from nico.db.models import NvlinkDomain
from nico.db.queries import topology as queries
from nico.services.fabric_errors import tenant_error_message
from nico.services.orgs import require_tenant

GpuState = Literal["free", "mine", "other", "held"]
UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
REDACTED = "…"


class GpuView(NamedTuple):
    """One GPU as the tenant may see it (a tuple: a 100-domain page makes 7,200 of them)."""

    device_instance: int
    state: GpuState
    instance_id: uuid.UUID | None = None
    instance_name: str | None = None
    partition_id: uuid.UUID | None = None
    partition_name: str | None = None
    status: str | None = None  # the binding's: Pending, Ready, Deleting
    observed: bool = False  # the fabric was last seen holding this GPU in the partition
    health: str | None = None  # the fabric's word (free and the tenant's GPUs only)


@dataclass(frozen=True)
class TrayView:
    tray_index: int
    gpus: list[GpuView] = field(default_factory=list)


@dataclass(frozen=True)
class ChassisView:
    serial: str
    trays: list[TrayView] = field(default_factory=list)


@dataclass(frozen=True)
class DomainView:
    domain_uuid: uuid.UUID
    site_id: uuid.UUID
    site_name: str
    error: str | None
    error_at: datetime | None
    consecutive_failures: int
    chassis: list[ChassisView] = field(default_factory=list)
    gpus_without_home: int = 0  # in neither a tenant partition nor their home after the last pass
    foreign_gpus: int = 0  # in partitions nico did not make, after the last pass

    @property
    def pending(self) -> int:
        """The tenant's GPUs whose binding the fabric does not hold yet."""
        return sum(
            gpu.status == NvLinkInterfaceStatus.PENDING
            for chassis in self.chassis
            for tray in chassis.trays
            for gpu in tray.gpus
        )


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
    rows = await queries.topology_gpus(session, tenant.id, [d.uuid for d, _ in domains])
    gpus, legend = _gpu_views(rows)
    reach = await queries.partition_domains(session, tenant.id, list(legend))
    for partition_id, found in reach.items():
        legend[partition_id] = replace(legend[partition_id], domains=legend[partition_id].domains | found)
    allowed = set(legend) | {d.uuid for d, _ in domains}
    views = [
        _domain_view(domain, site_name, gpus.get(domain.uuid, {}), allowed) for domain, site_name in domains
    ]
    return TopologyView(views, sorted(legend.values(), key=lambda p: (p.name, str(p.partition_id)))), total


_Gpus = dict[uuid.UUID, dict[str, dict[int, dict[int, GpuView]]]]  # domain -> chassis -> tray -> index


def _gpu_views(rows: list[queries.TopologyGpuRow]) -> tuple[_Gpus, dict[uuid.UUID, PartitionLegend]]:
    """The GPUs as the tenant may see them, and the legend of the tenant's partitions on them."""
    gpus: _Gpus = {}
    named: dict[uuid.UUID, tuple[str, str]] = {}  # partition -> its name and status
    reach: dict[uuid.UUID, set[uuid.UUID]] = {}  # partition -> the domains of its GPUs here
    for row in rows:
        chassis = gpus.get(row.domain_uuid)
        if chassis is None:
            chassis = gpus[row.domain_uuid] = {}
        trays = chassis.get(row.chassis_serial)
        if trays is None:
            trays = chassis[row.chassis_serial] = {}
        tray_gpus = trays.get(row.tray_index)
        if tray_gpus is None:
            tray_gpus = trays[row.tray_index] = {}
        index = row.device_id - 1
        if index in tray_gpus:
            continue  # a Deleting binding behind the live one
        if row.instance_id is None:
            if row.holder is not None:
                gpu = GpuView(index, "other")
            elif row.foreign_gpus:
                gpu = GpuView(index, "held")
            else:
                gpu = GpuView(index, "free", health=row.health)
        else:
            gpu = GpuView(
                index,
                "mine",
                row.instance_id,
                row.instance_name,
                row.partition_id,
                row.partition_name,
                row.binding_status,
                row.partition_id is not None and row.observed_partition_id == row.partition_id,
                row.health,
            )
            if row.partition_id is not None:
                assert row.partition_name is not None and row.partition_status is not None  # joined
                named[row.partition_id] = (row.partition_name, row.partition_status)
                found = reach.get(row.partition_id)
                if found is None:
                    found = reach[row.partition_id] = set()
                found.add(row.domain_uuid)
        tray_gpus[index] = gpu
    legend = {
        partition: PartitionLegend(partition, name, status, frozenset(reach[partition]))
        for partition, (name, status) in named.items()
    }
    return gpus, legend


def _domain_view(
    domain: NvlinkDomain,
    site_name: str,
    chassis: dict[str, dict[int, dict[int, GpuView]]],
    allowed: set[uuid.UUID],
) -> DomainView:
    view = DomainView(
        domain.uuid,
        domain.site_id,
        site_name,
        redact(tenant_error_message(domain.last_error), allowed),
        domain.last_error_at if domain.last_error else None,
        domain.consecutive_failures,
        gpus_without_home=domain.gpus_without_home,
        foreign_gpus=domain.foreign_gpus,
    )
    for serial, trays in chassis.items():
        view.chassis.append(
            ChassisView(
                serial,
                [TrayView(index, [g for _, g in sorted(found.items())]) for index, found in trays.items()],
            )
        )
    return view
