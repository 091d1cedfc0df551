"""Bodies of the reference's stats reads (machine GPU stats, instance-type stats and summary, tenant
instance-type stats)."""

from __future__ import annotations

import uuid

from pydantic import Field

from nico.api.schemas.common import ResponseModel, omit_if_empty
from nico.services.stats import GpuStat, InstanceTypeStat, MachineCounts, TenantStat, TenantTypeStat


class MachineStatusStats(ResponseModel):
    total: int
    initializing: int
    ready: int
    in_use: int
    error: int
    maintenance: int
    unknown: int
    # nico extension: Ready machines without an instance that a reservation holds; absent when none
    reserved: int = Field(default=0, exclude_if=omit_if_empty)

    @classmethod
    def of(cls, counts: MachineCounts) -> MachineStatusStats:
        c = counts.counts
        return cls(
            total=counts.total,
            initializing=c["initializing"],
            ready=c["ready"],
            in_use=c["inUse"],
            error=c["error"],
            maintenance=c["maintenance"],
            unknown=c["unknown"],
            reserved=c["reserved"],
        )


class MachineGpuStats(ResponseModel):
    name: str
    gpus: int
    machines: int

    @classmethod
    def of(cls, stat: GpuStat) -> MachineGpuStats:
        return cls(name=stat.name, gpus=stat.gpus, machines=stat.machines)


class TenantInstanceTypeShare(ResponseModel):
    """One tenant's share of an instance type (an item of ``tenants`` / ``instanceTypes``)."""

    id: uuid.UUID
    org: str
    org_display_name: str | None
    instance_type_id: uuid.UUID
    instance_type_name: str
    allocated: int
    used_machine_stats: MachineStatusStats

    @classmethod
    def of(cls, share: TenantTypeStat) -> TenantInstanceTypeShare:
        return cls(
            id=share.tenant_id,
            org=share.org,
            org_display_name=share.org_display_name,
            instance_type_id=share.instance_type_id,
            instance_type_name=share.instance_type_name,
            allocated=share.allocated,
            used_machine_stats=MachineStatusStats.of(share.used),
        )


class MachineInstanceTypeStats(ResponseModel):
    id: uuid.UUID
    name: str
    assigned_machine_stats: MachineStatusStats
    allocated: int
    max_allocatable: int
    used_machine_stats: MachineStatusStats
    tenants: list[TenantInstanceTypeShare]

    @classmethod
    def of(cls, stat: InstanceTypeStat) -> MachineInstanceTypeStats:
        return cls(
            id=stat.id,
            name=stat.name,
            assigned_machine_stats=MachineStatusStats.of(stat.assigned),
            allocated=stat.allocated,
            max_allocatable=stat.max_allocatable,
            used_machine_stats=MachineStatusStats.of(stat.used),
            tenants=[TenantInstanceTypeShare.of(t) for t in stat.tenants],
        )


class MachineInstanceTypeSummary(ResponseModel):
    assigned: MachineStatusStats
    unassigned: MachineStatusStats


class TenantInstanceTypeStats(ResponseModel):
    id: uuid.UUID
    org: str
    org_display_name: str | None
    instance_types: list[TenantInstanceTypeShare]

    @classmethod
    def of(cls, stat: TenantStat) -> TenantInstanceTypeStats:
        return cls(
            id=stat.id,
            org=stat.org,
            org_display_name=stat.org_display_name,
            instance_types=[TenantInstanceTypeShare.of(s) for s in stat.instance_types],
        )
