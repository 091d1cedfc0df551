"""The planner: desired state + observed fabric of one NVLink domain -> ordered fabric operations.

Pure: plain data in, plain data out, no I/O. The rules:

* A managed GPU (one of a machine nico knows) wants either a logical partition ``lp`` or ``None``,
  meaning "in no tenant partition" — it belongs in the domain's default partition (id 32766).
* Each logical partition has at most one physical partition per domain, named deterministically
  (:func:`partition_name`), so names — unique per domain on the fabric — identify nico's partitions.
  A partition is nico's when its name belongs to a physical partition nico recorded, or to an intent
  nico recorded before a create whose outcome it never learned (crash, late NMX-M completion): that
  partition is adopted, not rebuilt. Anything else is unknown: only the managed GPUs are taken out of
  it; GPUs of machines nico does not know are never touched.
* Removals come first (take GPUs out, delete partitions left empty), then additions (add to existing
  partitions, create missing ones), merged per partition: a GPU moves between partitions in one pass.
* The default partition is never deleted (the reference deletes it when every GPU is claimed, after
  which released GPUs have nowhere to go).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from nico.fabric.backend import FabricPartition

PARTITION_NAME_PREFIX = "nico-"
Role = Literal["owned", "default", "unknown"]


def partition_name(lp: uuid.UUID) -> str:
    """The fabric name of ``lp``'s physical partition in any domain (unique per domain)."""
    return f"{PARTITION_NAME_PREFIX}{lp}"


def lp_of_name(name: str) -> uuid.UUID | None:
    """The logical partition a nico partition name stands for, or None for any other name."""
    if not name.startswith(PARTITION_NAME_PREFIX):
        return None
    try:
        return uuid.UUID(name[len(PARTITION_NAME_PREFIX) :])
    except ValueError:
        return None


@dataclass(frozen=True)
class DomainDesire:
    """What nico wants of one domain.

    ``gpus`` maps every managed GPU to its logical partition (None: the default partition).
    ``owned_names`` are the names of partitions nico owns here: its recorded physical partitions plus
    open create intents.
    """

    domain: uuid.UUID
    gpus: Mapping[int, uuid.UUID | None]
    owned_names: frozenset[str] = frozenset()
    multicast_limits: Mapping[uuid.UUID, int] = field(default_factory=dict)  # lp -> multicast groups


@dataclass(frozen=True)
class RemoveGpus:
    partition: FabricPartition
    gpu_uids: frozenset[int]
    role: Role
    lp: uuid.UUID | None = None


@dataclass(frozen=True)
class DeletePartition:
    partition: FabricPartition
    role: Role
    lp: uuid.UUID | None = None


@dataclass(frozen=True)
class AddGpus:
    partition: FabricPartition
    gpu_uids: frozenset[int]
    role: Role
    lp: uuid.UUID | None = None


@dataclass(frozen=True)
class CreatePartition:
    name: str
    lp: uuid.UUID
    gpu_uids: frozenset[int]
    multicast_groups_limit: int | None = None  # sent in PartitionAttr (None: the manager's default)


Operation = RemoveGpus | DeletePartition | AddGpus | CreatePartition


def metric_operation(op: Operation) -> str:
    """The reference's ``operation`` label for this operation."""
    if isinstance(op, CreatePartition):
        return "create"
    if isinstance(op, DeletePartition):
        return "remove" if op.role == "owned" else "remove_default_partition"
    return "update"


def op_gpus(op: Operation) -> frozenset[int]:
    return op.partition.gpu_uids if isinstance(op, DeletePartition) else op.gpu_uids


@dataclass(frozen=True)
class Classified:
    """The observed partitions of a domain, sorted by who they belong to."""

    default: FabricPartition | None
    owned: dict[uuid.UUID, FabricPartition]  # lp -> nico's partition of it
    unknown: list[FabricPartition]
    location: dict[int, FabricPartition] = field(default_factory=dict)  # gpu_uid -> partition holding it


def classify(partitions: Iterable[FabricPartition], owned_names: frozenset[str]) -> Classified:
    default: FabricPartition | None = None
    owned: dict[uuid.UUID, FabricPartition] = {}
    unknown: list[FabricPartition] = []
    location: dict[int, FabricPartition] = {}
    for partition in sorted(partitions, key=lambda p: p.partition_id):
        for gpu in partition.gpu_uids:
            location[gpu] = partition
        if partition.is_default:
            default = partition
            continue
        lp = lp_of_name(partition.name) if partition.name in owned_names else None
        if lp is not None and lp not in owned:
            owned[lp] = partition
        else:
            unknown.append(partition)
    return Classified(default, owned, unknown, location)


@dataclass(frozen=True)
class Plan:
    """Ordered operations, and the logical partitions that cannot be placed in this domain now
    (with why), so the reconciler can say so instead of leaving instances silently Pending."""

    operations: list[Operation]
    blocked: dict[uuid.UUID, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.operations)


def plan(desire: DomainDesire, observed: Iterable[FabricPartition]) -> Plan:
    """The operations that make the domain's fabric hold exactly what ``desire`` says."""
    seen = classify(observed, desire.owned_names)
    managed = desire.gpus
    wanted: dict[uuid.UUID, set[int]] = {}
    to_default: set[int] = set()
    for gpu, lp in managed.items():
        if lp is None:
            to_default.add(gpu)
        else:
            wanted.setdefault(lp, set()).add(gpu)

    removals: list[Operation] = []
    additions: list[Operation] = []
    recreate: set[uuid.UUID] = set()
    # GPUs nico no longer manages (force-deleted machines) found in nico's own partitions: nico put
    # them there, so nico takes them out and returns them to the default partition.
    evicted: set[int] = set()

    for lp, partition in seen.owned.items():
        keep = wanted.get(lp, set())
        leaving = partition.gpu_uids - keep
        if not partition.gpu_uids & keep and (leaving or lp not in wanted):
            removals.append(DeletePartition(partition, "owned", lp))
            recreate.add(lp)
        elif leaving:
            removals.append(RemoveGpus(partition, frozenset(leaving), "owned", lp))
        evicted.update(g for g in leaving if g not in managed)

    if seen.default is not None:
        leaving = frozenset(g for g in seen.default.gpu_uids if g in managed and g not in to_default)
        if leaving:  # the default partition may end empty, but it is never deleted
            removals.append(RemoveGpus(seen.default, leaving, "default", None))

    names_in_use: set[str] = set()
    for partition in seen.unknown:
        leaving = frozenset(g for g in partition.gpu_uids if g in managed)
        if partition.gpu_uids and leaving == partition.gpu_uids:
            removals.append(DeletePartition(partition, "unknown", None))
        elif not partition.gpu_uids and lp_of_name(partition.name) is not None:
            removals.append(DeletePartition(partition, "unknown", None))  # an empty ghost named by nico
        else:
            if leaving:
                removals.append(RemoveGpus(partition, leaving, "unknown", None))
            names_in_use.add(partition.name)

    blocked: dict[uuid.UUID, str] = {}
    for lp in sorted(wanted):
        gpus = frozenset(wanted[lp])
        existing = seen.owned.get(lp)
        if existing is None or lp in recreate:
            name = partition_name(lp)
            if name in names_in_use:
                blocked[lp] = (
                    f"partition name {name} is held by a partition nico did not record, which holds GPUs "
                    "of machines nico does not manage"
                )
                continue
            additions.append(CreatePartition(name, lp, gpus, desire.multicast_limits.get(lp)))
        elif missing := gpus - existing.gpu_uids:
            additions.append(AddGpus(existing, missing, "owned", lp))
    if seen.default is not None and (missing := frozenset((to_default | evicted) - seen.default.gpu_uids)):
        additions.append(AddGpus(seen.default, missing, "default", None))
    return Plan(removals + additions, blocked)


def satisfied(gpu: int, lp: uuid.UUID | None, seen: Classified) -> bool:
    """Whether the fabric, as classified, holds ``gpu`` where nico wants it (a GPU of a blocked logical
    partition is never satisfied)."""
    holder = seen.location.get(gpu)
    if lp is None:
        # Out of every tenant partition: in the default partition, or in none when there is no
        # default partition to return it to.
        return holder is seen.default if seen.default is not None else holder is None
    return holder is not None and seen.owned.get(lp) is holder
