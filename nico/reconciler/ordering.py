"""Pure: the order of a plan's operations (the planner's paired order, :mod:`nico.reconciler.planner`).

Removals are split per destination, each right before the addition that takes its GPUs; removals of
GPUs that go nowhere come first; GPUs that would wait across other operations for their partition's
name to be free wait in their home (``parking``) instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from nico.fabric.backend import FabricPartition
from nico.reconciler.operations import (
    AddGpus,
    CreatePartition,
    DeletePartition,
    Operation,
    RemoveGpus,
    op_gpus,
)

Removal = RemoveGpus | DeletePartition
Feeds = list[tuple[Operation, frozenset[int]]]  # a removal, and the GPUs it frees for one addition


def paired(
    removals: list[Operation],
    additions: list[Operation],
    parking: Mapping[int, FabricPartition],
    stranded: set[int],
) -> list[Operation]:
    """The operations in paired order (module docstring); ``stranded`` receives the GPUs left out of
    every partition across a re-made partition's delete and create with no home to wait in."""
    consumed: set[int] = set()
    for addition in additions:
        consumed |= op_gpus(addition)
    head, pending = _split(removals, consumed)
    feeding = _Feeding(pending, parking, stranded, consumed)
    body: list[Operation] = []
    for addition in _ordered(additions, pending):
        _emit(addition, feeding.feeds(addition), body)
    return head + body + list(feeding.pending)


def _split(removals: list[Operation], consumed: set[int]) -> tuple[list[Operation], list[Removal]]:
    """The removals of GPUs that go nowhere (first in the plan), and those feeding additions."""
    head: list[Operation] = []
    pending: list[Removal] = []
    for removal in removals:
        assert isinstance(removal, RemoveGpus | DeletePartition)
        gpus = op_gpus(removal)
        nowhere = gpus - consumed
        if isinstance(removal, DeletePartition):
            # GPUs going nowhere leave with the partition's deletion (no extra call to take them out
            # first: they have no partition to wait for).
            (head if nowhere == gpus else pending).append(removal)
            continue
        if nowhere:
            head.append(RemoveGpus(removal.partition, nowhere, removal.role, removal.lp))
        if gpus - nowhere:
            pending.append(RemoveGpus(removal.partition, gpus - nowhere, removal.role, removal.lp))
    return head, pending


def _ordered(additions: list[Operation], pending: list[Removal]) -> list[Operation]:
    """The additions in the order they are made. A create that reuses the name of a partition being
    deleted goes after the additions taking that partition's GPUs, so they are not kept waiting across
    the create. Capacity (the domain's partition count and multicast budget): existing partitions gain
    GPUs first, then the creates a deletion feeds (the deletion right before, freeing what they take),
    then the other creates, after every deletion."""
    deleted = {r.partition.name: op_gpus(r) for r in pending if isinstance(r, DeletePartition)}
    ordered: list[Operation] = []
    visiting: list[Operation] = []

    def place(addition: Operation) -> None:
        if any(addition is o for o in ordered) or any(addition is o for o in visiting):
            return
        visiting.append(addition)
        if isinstance(addition, CreatePartition) and addition.name in deleted:
            for b in additions:
                if b is not addition and op_gpus(b) & deleted[addition.name]:
                    place(b)
        ordered.append(addition)

    freed_by_delete = frozenset().union(*(op_gpus(r) for r in pending if isinstance(r, DeletePartition)))

    def rank(addition: Operation) -> int:
        if not isinstance(addition, CreatePartition):
            return 0
        return 1 if op_gpus(addition) & freed_by_delete else 2

    for addition in sorted(additions, key=rank):
        place(addition)
    return ordered


@dataclass
class _Feeding:
    """The removals still to place, taken one addition at a time (:meth:`feeds`)."""

    pending: list[Removal]
    parking: Mapping[int, FabricPartition]
    stranded: set[int]
    consumed: set[int]
    _left: list[Removal] = field(default_factory=list)

    def feeds(self, addition: Operation) -> Feeds:
        """The removals that free ``addition``'s GPUs (taken from those pending), one per source."""
        need = op_gpus(addition)
        name = addition.name if isinstance(addition, CreatePartition) else None
        self._left = []
        feeds: Feeds = []
        for removal in self.pending:
            if isinstance(removal, DeletePartition) and name is not None and removal.partition.name == name:
                feeds[0:0] = self._name_freed(removal, need)
            else:
                feeds += self._feed(removal, need)
        self.pending = self._left
        return _merged(feeds)

    def _name_freed(self, removal: DeletePartition, need: frozenset[int]) -> Feeds:
        """The name must be free before the create. GPUs of the deleted partition that a later
        addition takes (a swap between re-made partitions) go home first and wait there."""
        gpus = op_gpus(removal)
        self.stranded.update(gpus - need - self.parking.keys())
        parked = _park(removal.partition, (gpus - need) & self.parking.keys(), self.parking)
        self._left.extend(RemoveGpus(p.partition, p.gpu_uids, p.role, None) for p in parked)
        return [(o, frozenset()) for o in _parked_delete(removal, parked)]

    def _feed(self, removal: Removal, need: frozenset[int]) -> Feeds:
        """What of ``removal`` frees GPUs ``need``s (the rest stays pending)."""
        gpus = op_gpus(removal)
        freed = gpus & need
        if not freed:
            self._left.append(removal)
            return []
        rest = gpus - freed
        if isinstance(removal, DeletePartition):
            if not rest & self.consumed:
                return [(removal, freed)]
            # Others still wait for GPUs of it: the deletion waits too.
            self._left.append(
                DeletePartition(replace(removal.partition, gpu_uids=rest), removal.role, removal.lp)
            )
        elif rest:
            self._left.append(RemoveGpus(removal.partition, rest, removal.role, removal.lp))
        return [(RemoveGpus(removal.partition, freed, removal.role, removal.lp), freed)]


def _emit(addition: Operation, feeds: Feeds, body: list[Operation]) -> None:
    """The addition with the removals feeding it, right before it."""
    if isinstance(addition, AddGpus) and len(feeds) > 1:
        # One addition per source: each freed GPU is placed by the very next operation.
        fed = frozenset().union(*(freed for _, freed in feeds))
        if waiting := op_gpus(addition) - fed:  # GPUs already out of every partition
            body.append(replace(addition, gpu_uids=waiting))
        for removal, freed in feeds:
            body.append(removal)
            if freed:
                body.append(replace(addition, gpu_uids=freed))
        return
    body.extend(removal for removal, _ in feeds)
    body.append(addition)


def _merged(feeds: list[tuple[Operation, frozenset[int]]]) -> list[tuple[Operation, frozenset[int]]]:
    """The removals feeding one addition, one per source partition: GPUs that waited in their home
    and GPUs that lived there leave it in one call."""
    merged: list[tuple[Operation, frozenset[int]]] = []
    at: dict[int, int] = {}  # partition id -> index in ``merged`` of its removal
    for op, freed in feeds:
        key = op.partition.nmx_partition_id if isinstance(op, RemoveGpus) and freed else None
        if key is None or key not in at:
            if key is not None:
                at[key] = len(merged)
            merged.append((op, freed))
            continue
        first, gpus = merged[at[key]]
        assert isinstance(first, RemoveGpus)
        merged[at[key]] = (replace(first, gpu_uids=first.gpu_uids | op_gpus(op)), gpus | freed)
    return merged


def _park(
    partition: FabricPartition, gpus: frozenset[int], parking: Mapping[int, FabricPartition]
) -> list[AddGpus]:
    """The additions taking ``gpus`` (leaving ``partition``) to their homes, one per home."""
    by_home: dict[int, set[int]] = {}
    for gpu in gpus:
        by_home.setdefault(parking[gpu].nmx_partition_id, set()).add(gpu)
    homes = {p.nmx_partition_id: p for p in parking.values()}
    return [
        AddGpus(homes[pid], frozenset(uids), "default" if homes[pid].is_default else "home", None)
        for pid, uids in sorted(by_home.items())
    ]


def _parked_delete(removal: DeletePartition, parked: list[AddGpus]) -> list[Operation]:
    """The deletion of a partition whose ``parked`` GPUs go home first, each group placed by the very
    next operation: a removal and its home's addition per group, the last group freed by the deletion
    itself when nothing else is left in the partition."""
    ops: list[Operation] = []
    rest = op_gpus(removal)
    for i, park in enumerate(parked):
        rest = rest - park.gpu_uids
        if i == len(parked) - 1 and not rest:
            # What is left of the partition is this group: the deletion says so (its intent too).
            last = DeletePartition(
                replace(removal.partition, gpu_uids=park.gpu_uids), removal.role, removal.lp
            )
            ops += [last, park]
            return ops
        ops += [RemoveGpus(removal.partition, park.gpu_uids, removal.role, removal.lp), park]
    left = DeletePartition(replace(removal.partition, gpu_uids=rest), removal.role, removal.lp)
    return [*ops, left]
