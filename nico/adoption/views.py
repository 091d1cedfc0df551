"""What adoption and import are asked and answer: plain values only."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SeenPartition:
    """A partition as the fabric listed it (the service knows nothing of fabric backends)."""

    nmx_partition_id: int
    ref: str  # the handle to change it: NMX-C's decimal id, NMX-M's entity id
    name: str
    gpu_uids: frozenset[int]
    is_home: bool = False  # the domain default or a tray partition: never anyone's


@dataclass(frozen=True)
class DomainListing:
    """Every partition of one NVLink domain, as listed just now."""

    domain_uuid: uuid.UUID
    partitions: tuple[SeenPartition, ...]

    def partition(self, nmx_partition_id: int) -> SeenPartition | None:
        return next((p for p in self.partitions if p.nmx_partition_id == nmx_partition_id), None)


@dataclass(frozen=True)
class AdoptRequest:
    """``nico admin logical-partition adopt``: which partition, for which org, under which LP."""

    org: str
    domain_uuid: uuid.UUID
    nmx_partition_id: int
    name: str | None = None
    logical_partition_id: uuid.UUID | None = None
    vpc_id: uuid.UUID | None = None


@dataclass(frozen=True)
class AdoptedInstance:
    id: uuid.UUID
    machine_id: str
    device_instances: tuple[int, ...]
    created: bool  # False: the org's instance already on the machine took the bindings


@dataclass(frozen=True)
class Adoption:
    """What an adoption did (``done_before``: the partition was already the LP's, nothing changed)."""

    logical_partition_id: uuid.UUID
    logical_partition_name: str
    domain_uuid: uuid.UUID
    nmx_partition_id: int
    fabric_name: str
    instances: tuple[AdoptedInstance, ...] = ()
    done_before: bool = False


@dataclass(frozen=True)
class SourceInterface:
    id: uuid.UUID
    logical_partition_id: uuid.UUID
    device_instance: int
    gpu_uid: int | None
    domain_uuid: uuid.UUID | None


@dataclass(frozen=True)
class SourcePartition:
    id: uuid.UUID
    name: str
    description: str | None
    site_id: uuid.UUID
    status: str


@dataclass(frozen=True)
class SourceVpc:
    id: uuid.UUID
    name: str
    description: str | None
    site_id: uuid.UUID
    labels: dict[str, str] | None
    network_virtualization_type: str | None
    logical_partition_id: uuid.UUID | None


@dataclass(frozen=True)
class SourceInstance:
    id: uuid.UUID
    name: str
    description: str | None
    site_id: uuid.UUID
    vpc_id: uuid.UUID
    machine_id: str | None
    status: str
    labels: dict[str, str] | None
    interfaces: tuple[SourceInterface, ...] = field(default=())


@dataclass(frozen=True)
class Imported:
    """One object of an import: what became of it and why."""

    kind: str  # logical-partition | vpc | instance
    id: uuid.UUID
    name: str
    outcome: str  # imported | present | skipped
    why: str = ""
