"""What the logical partition service returns: plain frozen dataclasses, no ORM rows."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from nico.services.orgs import TenantRecord
from nico.services.site import SiteRecord
from nico.services.status import StatusRecord


@dataclass(frozen=True)
class VpcSummaryView:
    """A VPC whose default partition it is (``includeVpcs``)."""

    id: uuid.UUID
    name: str
    network_virtualization_type: str
    status: str


@dataclass(frozen=True)
class BindingSummaryView:
    """A GPU of an instance bound to the partition (``includeInterfaces``)."""

    id: uuid.UUID
    instance_id: uuid.UUID
    logical_partition_id: uuid.UUID
    device_instance: int
    status: str


@dataclass(frozen=True)
class PartitionStats:
    """``includeStats``: GPUs bound to the partition and the instances they belong to, and the machines
    its reservation holds free."""

    total_gpus: int
    total_distinct_instances: int
    total_reserved_machines: int = 0


@dataclass(frozen=True)
class ReservationView:
    """The machines a partition holds for its future instances: ``count`` of the type in one domain,
    ``available`` of them free (the others run its instances)."""

    instance_type_id: uuid.UUID
    count: int
    domain_uuid: uuid.UUID | None
    available: int


@dataclass(frozen=True)
class PartitionView:
    """A partition and what its response shows beside it (``health``: the worst fabric health of its
    physical partitions, None when not observed; ``domain_ids``: the NVLink domains its GPUs are in)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    site_id: uuid.UUID
    name: str
    description: str | None
    status: str
    multicast_groups_limit: int
    created: datetime
    updated: datetime
    history: tuple[StatusRecord, ...]
    site: SiteRecord | None = None
    tenant: TenantRecord | None = None
    vpcs: tuple[VpcSummaryView, ...] = ()
    interfaces: tuple[BindingSummaryView, ...] = ()
    stats: PartitionStats | None = None
    health: str | None = None
    single_nvlink_domain: bool = False
    domain_ids: tuple[uuid.UUID, ...] = ()
    reservation: ReservationView | None = None
