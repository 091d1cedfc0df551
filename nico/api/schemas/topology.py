"""The NVLink topology bodies (nico extension): domains, chassis, trays and GPUs as a tenant sees them,
and the site overview's cells (one per domain, counts only)."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import Field, TypeAdapter

from nico.api.schemas.common import ResponseModel, omit_if_none
from nico.services.topology import DomainView, GpuState, PartitionLegend, TopologyView
from nico.services.topology_overview import DomainCell


class TopologyGpu(ResponseModel):
    device_instance: int = Field(description="GPU index on the tray (device id - 1)")
    state: GpuState = Field(
        description="free, mine (the caller's instance), other (another tenant's) or held (its tray has "
        "GPUs in a partition another fabric manager made, which nico keeps: not available)"
    )
    instance_id: uuid.UUID | None = None
    instance_name: str | None = None
    nv_link_logical_partition_id: uuid.UUID | None = None
    nv_link_logical_partition_name: str | None = None
    status: str | None = Field(None, description="the NVLink interface's status: Pending, Ready, Deleting")
    observed: bool = Field(False, description="the fabric was last seen holding the GPU in the partition")
    health: str | None = Field(
        None,
        description="the GPU's NVLink health as the fabric last reported it (free and own GPUs)",
        exclude_if=omit_if_none,
    )


class TopologyTray(ResponseModel):
    tray_index: int
    gpus: list[TopologyGpu]


class TopologyChassis(ResponseModel):
    chassis_serial: str
    trays: list[TopologyTray]


class TopologyDomain(ResponseModel):
    id: uuid.UUID = Field(description="NVLink domain uuid")
    site_id: uuid.UUID
    site_name: str
    error: str | None = Field(description="the reconciler's latest error for the domain, if it is failing")
    error_since: datetime | None
    consecutive_failures: int
    pending: int = Field(description="the caller's GPUs whose NVLink interface is Pending")
    gpus_without_home: int = Field(
        default=0,
        description="GPUs of the domain in neither a tenant partition nor their home partition after "
        "the reconciler's last pass (it puts them back)",
    )
    foreign_gpus: int = Field(
        default=0,
        description="GPUs of the domain in partitions nico did not make (another fabric manager's), "
        "after the reconciler's last pass; nico keeps those partitions whole and does not place their trays",
    )
    chassis: list[TopologyChassis]

    @classmethod
    def head(cls, domain: DomainView) -> TopologyDomain:
        """The domain without its chassis (``chassis`` empty)."""
        return cls(
            id=domain.domain_uuid,
            site_id=domain.site_id,
            site_name=domain.site_name,
            error=domain.error,
            error_since=domain.error_at,
            consecutive_failures=domain.consecutive_failures if domain.error else 0,
            pending=domain.pending,
            gpus_without_home=domain.gpus_without_home,
            foreign_gpus=domain.foreign_gpus,
            chassis=[],
        )


class TopologyPartition(ResponseModel):
    id: uuid.UUID
    name: str
    status: str
    nv_link_domain_ids: list[uuid.UUID] = Field(description="the NVLink domains its GPUs drawn here are in")
    split: bool = Field(
        description="its GPUs are in more than one NVLink domain: they cannot all share memory"
    )

    @classmethod
    def of(cls, partition: PartitionLegend) -> TopologyPartition:
        return cls(
            id=partition.partition_id,
            name=partition.name,
            status=partition.status,
            nv_link_domain_ids=sorted(partition.domains, key=str),
            split=partition.split,
        )


class NVLinkTopology(ResponseModel):
    domains: list[TopologyDomain]
    nv_link_logical_partitions: list[TopologyPartition] = Field(
        description="the caller's logical partitions that hold GPUs drawn here"
    )


def topology_body(view: TopologyView) -> bytes:
    """An ``NVLinkTopology`` body: each domain dumped by its model with no chassis (the last field),
    its chassis written after it as PostgreSQL wrote them (queries.domain_chassis), the legend by its
    models. tests/api/test_topology_body.py holds a page byte for byte equal to the schema's dump of
    it."""
    domains = []
    for domain in view.domains:
        head = TopologyDomain.head(domain).model_dump_json()
        assert head.endswith('"chassis":[]}')
        domains.append(f"{head[:-3]}[{domain.chassis_json}]}}")
    partitions = _PARTITIONS.dump_json([TopologyPartition.of(p) for p in view.partitions]).decode()
    return f'{{"domains":[{",".join(domains)}],"nvLinkLogicalPartitions":{partitions}}}'.encode()


_PARTITIONS: TypeAdapter[list[TopologyPartition]] = TypeAdapter(list[TopologyPartition])


class TopologyDomainCell(ResponseModel):
    """One NVLink domain of the site overview: counts only."""

    id: uuid.UUID = Field(description="NVLink domain uuid")
    site_id: uuid.UUID
    site_name: str
    chassis: int = Field(description="chassis of the domain with placed trays")
    gpus: int = Field(description="GPUs on the domain's placed trays")
    free: int
    mine: int = Field(description="the caller's GPUs")
    other: int = Field(description="GPUs in use by another tenant")
    held: int = Field(description="GPUs on trays with GPUs in another fabric manager's partitions")
    unhealthy: int = Field(description="free or own GPUs whose NVLink health is not HEALTHY")
    pending: int = Field(description="the caller's GPUs whose NVLink interface is Pending")
    nv_link_logical_partitions: int = Field(description="the caller's logical partitions with GPUs here")
    split_nv_link_logical_partitions: int = Field(
        description="of those, the ones with GPUs in other NVLink domains too (they cannot all share memory)"
    )
    foreign_gpus: int = Field(description="GPUs in partitions nico did not make, after the last pass")
    gpus_without_home: int = Field(
        description="GPUs in neither a tenant partition nor their home partition after the last pass"
    )
    error: str | None = Field(description="the reconciler's latest error for the domain, if it is failing")
    error_since: datetime | None
    consecutive_failures: int

    @classmethod
    def of(cls, cell: DomainCell) -> TopologyDomainCell:
        return cls(
            id=cell.domain_uuid,
            site_id=cell.site_id,
            site_name=cell.site_name,
            chassis=cell.chassis,
            gpus=cell.gpus,
            free=cell.free,
            mine=cell.mine,
            other=cell.other,
            held=cell.held,
            unhealthy=cell.unhealthy,
            pending=cell.pending,
            nv_link_logical_partitions=cell.partitions,
            split_nv_link_logical_partitions=cell.split_partitions,
            foreign_gpus=cell.foreign_gpus,
            gpus_without_home=cell.gpus_without_home,
            error=cell.error,
            error_since=cell.error_at,
            consecutive_failures=cell.consecutive_failures,
        )
