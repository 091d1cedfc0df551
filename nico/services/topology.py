"""The NVLink topology a tenant may see (nico extension, behind the topology page): the NVLink domains
at the sites where it holds an allocation, each as its chassis, trays and GPUs.

Every GPU is free, the tenant's own (its instance, and when bound its logical partition, binding
status and whether the fabric was seen holding it there), or in use by another tenant, with nothing
about that tenant. Domain errors are the reconciler's, with every uuid but the shown domains' and the
tenant's partitions' blanked out, because an error may name another tenant's partition.

Two queries: the domains, then every GPU of them with its machine, instance and binding.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import NvLinkInterfaceStatus
from nico.db.models import (
    Gpu,
    Instance,
    LogicalPartition,
    Machine,
    NvlinkDomain,
    NvlinkInterface,
    PhysicalPartition,
    Site,
    TenantSite,
)
from nico.services.fabric_errors import tenant_error_message
from nico.services.orgs import require_tenant

GpuState = Literal["free", "mine", "other"]
UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
REDACTED = "…"


@dataclass(frozen=True)
class GpuView:
    device_instance: int
    state: GpuState
    instance_id: uuid.UUID | None = None
    instance_name: str | None = None
    partition_id: uuid.UUID | None = None
    partition_name: str | None = None
    status: str | None = None  # the binding's: Pending, Ready, Deleting
    observed: bool = False  # the fabric was last seen holding this GPU in the partition


@dataclass
class TrayView:
    tray_index: int
    gpus: list[GpuView] = field(default_factory=list)


@dataclass
class ChassisView:
    serial: str
    trays: list[TrayView] = field(default_factory=list)


@dataclass
class DomainView:
    domain_uuid: uuid.UUID
    site_id: uuid.UUID
    site_name: str
    error: str | None
    error_at: datetime | None
    consecutive_failures: int
    chassis: list[ChassisView] = field(default_factory=list)

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
    partition_id: uuid.UUID
    name: str
    status: str


@dataclass
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


async def tenant_topology(session: AsyncSession, org: str) -> TopologyView:
    """The topology the org's tenant may see (403 without a tenant)."""
    tenant = await require_tenant(session, org, status=403)
    domains = (
        await session.execute(
            select(NvlinkDomain, Site.name)
            .join(Site, Site.id == NvlinkDomain.site_id)
            .join(TenantSite, and_(TenantSite.site_id == Site.id, TenantSite.tenant_id == tenant.id))
        )
    ).all()
    if not domains:
        return TopologyView([], [])
    mine = and_(Instance.id == Machine.instance_id, Instance.tenant_id == tenant.id)
    rows = (
        await session.execute(
            select(
                Machine.nvlink_domain_uuid,
                Machine.chassis_serial,
                Machine.tray_index,
                Gpu.device_id,
                Machine.instance_id,
                Instance.id,
                Instance.name,
                NvlinkInterface.status,
                LogicalPartition.id,
                LogicalPartition.name,
                LogicalPartition.status,
                PhysicalPartition.logical_partition_id,
            )
            .join(Gpu, Gpu.machine_id == Machine.id)
            .outerjoin(Instance, mine)
            .outerjoin(
                NvlinkInterface,
                and_(
                    NvlinkInterface.instance_id == Instance.id,
                    NvlinkInterface.device_instance == Gpu.device_id - 1,
                ),
            )
            .outerjoin(LogicalPartition, LogicalPartition.id == NvlinkInterface.logical_partition_id)
            .outerjoin(PhysicalPartition, PhysicalPartition.id == Gpu.physical_partition_id)
            .where(
                Machine.nvlink_domain_uuid.in_([d.uuid for d, _ in domains]), Machine.tray_index.is_not(None)
            )
            # A GPU may have a live binding and Deleting ones: the live one sorts first.
            .order_by(
                Machine.nvlink_domain_uuid,
                Machine.chassis_serial,
                Machine.tray_index,
                Gpu.device_id,
                NvlinkInterface.status == NvLinkInterfaceStatus.DELETING,
            )
        )
    ).all()
    gpus: dict[uuid.UUID, dict[str, dict[int, dict[int, GpuView]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    legend: dict[uuid.UUID, PartitionLegend] = {}
    for (
        domain_uuid,
        serial,
        tray,
        device_id,
        holder,
        instance_id,
        instance_name,
        binding_status,
        partition_id,
        partition_name,
        partition_status,
        observed_partition,
    ) in rows:
        assert domain_uuid is not None and serial is not None and tray is not None  # nvlink_info_whole
        tray_gpus = gpus[domain_uuid][serial][tray]
        if device_id - 1 in tray_gpus:
            continue  # a Deleting binding behind the live one
        if instance_id is None:
            gpu = GpuView(device_id - 1, "other" if holder is not None else "free")
        else:
            gpu = GpuView(
                device_id - 1,
                "mine",
                instance_id=instance_id,
                instance_name=instance_name,
                partition_id=partition_id,
                partition_name=partition_name,
                status=binding_status,
                observed=partition_id is not None and observed_partition == partition_id,
            )
            if partition_id is not None:
                legend.setdefault(
                    partition_id, PartitionLegend(partition_id, partition_name, partition_status)
                )
        tray_gpus[device_id - 1] = gpu
    allowed = set(legend) | {d.uuid for d, _ in domains}
    views = []
    for domain, site_name in domains:
        view = DomainView(
            domain.uuid,
            domain.site_id,
            site_name,
            redact(tenant_error_message(domain.last_error), allowed),
            domain.last_error_at if domain.last_error else None,
            domain.consecutive_failures,
        )
        for serial, trays in gpus.get(domain.uuid, {}).items():
            view.chassis.append(
                ChassisView(
                    serial,
                    [
                        TrayView(index, [g for _, g in sorted(found.items())])
                        for index, found in trays.items()
                    ],
                )
            )
        views.append(view)
    views.sort(key=lambda d: (d.site_name, [c.serial for c in d.chassis], str(d.domain_uuid)))
    return TopologyView(views, sorted(legend.values(), key=lambda p: (p.name, str(p.partition_id))))
