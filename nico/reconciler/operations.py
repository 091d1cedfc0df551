"""The fabric operations a plan is made of (pure data), and what each touches."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from nico.fabric.backend import FabricPartition

Role = Literal["owned", "default", "unknown", "home"]


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
    lp: uuid.UUID | None  # None: a tray's home partition
    gpu_uids: frozenset[int]
    multicast_groups_limit: int | None = None  # sent in PartitionAttr (None: the manager's default)


Operation = RemoveGpus | DeletePartition | AddGpus | CreatePartition
CHANGE_KINDS = ("create", "delete", "add", "remove")  # what `nico admin nvlink-plan` and the gauge say


def change_kind(op: Operation) -> str:
    """The kind of fabric change ``op`` is: create, delete (a partition), add or remove (GPUs)."""
    if isinstance(op, CreatePartition):
        return "create"
    if isinstance(op, DeletePartition):
        return "delete"
    return "add" if isinstance(op, AddGpus) else "remove"


def change_counts(ops: list[Operation]) -> dict[str, int]:
    """How many operations of each kind ``ops`` holds (every kind, zeros included)."""
    counts = dict.fromkeys(CHANGE_KINDS, 0)
    for op in ops:
        counts[change_kind(op)] += 1
    return counts


def metric_operation(op: Operation) -> str:
    """The reference's ``operation`` label for this operation."""
    if isinstance(op, CreatePartition):
        return "create"
    if isinstance(op, DeletePartition):
        return "remove" if op.role == "owned" else "remove_default_partition"
    return "update"


def op_gpus(op: Operation) -> frozenset[int]:
    return op.partition.gpu_uids if isinstance(op, DeletePartition) else op.gpu_uids


def reason(op: Operation) -> str:
    """Why the planner asks for ``op``, in an operator's words (from the role it gave the operation)."""
    lp = f"logical partition {op.lp}" if op.lp is not None else ""
    if isinstance(op, CreatePartition):
        if op.lp is None:
            return "GPUs in no tenant partition go home to their tray partition, which is not on the fabric"
        return f"{lp} wants these GPUs and has no partition in this domain"
    return _REASONS[(type(op).__name__, op.role)].format(lp=lp)


_REASONS = {
    ("AddGpus", "owned"): "{lp} wants these GPUs",
    ("AddGpus", "default"): "GPUs in no tenant partition go home to the domain default partition",
    ("AddGpus", "home"): "GPUs in no tenant partition go home to their tray partition",
    ("AddGpus", "unknown"): "GPUs go back to a partition nico did not make",
    ("RemoveGpus", "owned"): "{lp} no longer wants these GPUs here",
    ("RemoveGpus", "default"): "GPUs leave the domain default partition for a tenant partition or their tray",
    ("RemoveGpus", "home"): "GPUs leave their tray partition for a tenant partition or another home",
    ("RemoveGpus", "unknown"): "GPUs nico manages leave a partition nico did not make "
    "(foreign_partitions = evict)",
    ("DeletePartition", "owned"): "{lp} wants no GPU of this partition (gone, or made again)",
    ("DeletePartition", "default"): "tray mode: every GPU in the domain default partition has a tray home",
    ("DeletePartition", "home"): "domain mode: a tray partition no GPU calls home",
    ("DeletePartition", "unknown"): "a partition nico did not make holds only GPUs nico manages "
    "(foreign_partitions = evict), or is an empty one named by nico",
}
