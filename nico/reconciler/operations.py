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
