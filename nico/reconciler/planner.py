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
* Removals and additions are merged per partition: a GPU moves between partitions in one pass.
* Home partitions (:mod:`nico.reconciler.homes`): a GPU in no tenant partition lives in its home —
  the domain default in ``domain`` mode, its tray's ``tray_partition_<slot>`` in ``tray`` mode (created
  when missing). In domain mode the default partition is never deleted (the reference deletes it when
  every GPU is claimed, after which released GPUs have nowhere to go); in tray mode it is deleted once
  every GPU in it is managed and has a tray home.
* In both modes the operations are paired (issue 12, #6644: every GPU is always in its tenant
  partition or its home): the removal that frees GPUs comes right before the addition that takes them
  (split per source for an addition to an existing partition), so a GPU is out of every partition for
  one operation — at most the operations feeding one create, which must take all its GPUs at once.
  Removals of GPUs that go nowhere come first. Capacity (the domain's partition count and multicast
  budget): existing partitions gain GPUs first, then the creates a deletion feeds (right after it),
  then the other creates, after every deletion. A partition deleted so that its name can be re-made
  holds GPUs a later addition takes when two re-made partitions trade GPUs (a swap): those go to their
  home first (where it is on the fabric and stays through the plan) and leave it right before the
  addition that takes them, instead of waiting out of every partition across the cycle. Where that
  home is not on the fabric (a tray wholly in tenant partitions never had its tray partition) they go
  home in this pass, which creates it, and reach their tenant partition in the next one (the
  reconciler looks again at once when a pass leaves work). Only a GPU with no home at all (slot
  unknown, domain default gone) can still wait. The order is the contract with the executor, which
  makes consecutive independent pairs at once (:mod:`nico.reconciler.executor`): "one operation" is
  one call of the GPU's own, not one change of the whole domain.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from nico.fabric.backend import FabricPartition
from nico.reconciler.homes import DEFAULT_HOME, Mode, home_target, is_tray_partition_name

PARTITION_NAME_PREFIX = "nico-"
Role = Literal["owned", "default", "unknown", "home"]


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

    ``gpus`` maps every managed GPU to its logical partition (None: its home partition).
    ``owned_names`` are the names of partitions nico owns here: its recorded physical partitions plus
    open create intents. ``mode`` is the default partition mode; ``homes`` maps a GPU to its tray
    partition's name (GPUs of unknown slot have none).
    """

    domain: uuid.UUID
    gpus: Mapping[int, uuid.UUID | None]
    owned_names: frozenset[str] = frozenset()
    mode: Mode = "domain"
    homes: Mapping[int, str] = field(default_factory=dict)
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
    lp: uuid.UUID | None  # None: a tray's home partition
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
    homes: dict[str, FabricPartition] = field(default_factory=dict)  # tray partitions, by name


def classify(partitions: Iterable[FabricPartition], owned_names: frozenset[str]) -> Classified:
    default: FabricPartition | None = None
    owned: dict[uuid.UUID, FabricPartition] = {}
    unknown: list[FabricPartition] = []
    location: dict[int, FabricPartition] = {}
    homes: dict[str, FabricPartition] = {}
    for partition in sorted(partitions, key=lambda p: p.nmx_partition_id):
        for gpu in partition.gpu_uids:
            location[gpu] = partition
        if partition.is_default:
            default = partition
            continue
        if is_tray_partition_name(partition.name) and partition.name not in homes:
            homes[partition.name] = partition
            continue
        lp = lp_of_name(partition.name) if partition.name in owned_names else None
        if lp is not None and lp not in owned:
            owned[lp] = partition
        else:
            unknown.append(partition)
    return Classified(default, owned, unknown, location, homes)


@dataclass(frozen=True)
class Plan:
    """Ordered operations, and the logical partitions that cannot be placed in this domain now
    (with why), so the reconciler can say so instead of leaving instances silently Pending."""

    operations: list[Operation]
    blocked: dict[uuid.UUID, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.operations)


def plan(desire: DomainDesire, observed: Iterable[FabricPartition]) -> Plan:
    """The operations that make the domain's fabric hold exactly what ``desire`` says (in paired
    order, GPUs of a swap that have no home partition on the fabric to wait in are sent home first
    and reach their tenant partition by the next pass: module docstring)."""
    observed = list(observed)
    stranded: set[int] = set()
    result = _plan(desire, observed, stranded)
    deferred: set[int] = set()
    default_present = any(p.is_default for p in observed)
    while stranded - deferred:
        home = {
            g
            for g in stranded - deferred
            if home_target(g, desire.mode, desire.homes, default_present) is not None
        }
        if not home:
            break
        deferred |= home
        stranded = set()
        result = _plan(replace(desire, gpus={**desire.gpus, **dict.fromkeys(deferred)}), observed, stranded)
    return result


def _plan(desire: DomainDesire, observed: list[FabricPartition], stranded: set[int]) -> Plan:
    """:func:`plan`, once; ``stranded`` receives the GPUs the paired order leaves out of every
    partition across a re-made partition's delete and create (no home to wait in)."""
    seen = classify(observed, desire.owned_names)
    managed = desire.gpus
    wanted: dict[uuid.UUID, set[int]] = {}
    home_of: dict[int, str | None] = {}  # GPUs in no tenant partition -> their home
    for gpu, lp in managed.items():
        if lp is None:
            home_of[gpu] = home_target(gpu, desire.mode, desire.homes, seen.default is not None)
        else:
            wanted.setdefault(lp, set()).add(gpu)

    removals: list[Operation] = []
    additions: list[Operation] = []
    recreate: set[uuid.UUID] = set()
    # GPUs nico no longer manages (force-deleted machines) found in nico's own partitions: nico put
    # them there, so nico takes them out and returns them to the default partition (if there is one).
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

    default = seen.default
    to_default: set[int] = set()
    if default is not None:
        to_default = {g for g, home in home_of.items() if home == DEFAULT_HOME} | evicted
        leaving = frozenset(g for g in default.gpu_uids if g in managed and g not in to_default)
        everyone_housed = all(g in desire.homes for g in managed)
        if desire.mode == "tray" and everyone_housed and not to_default and leaving == default.gpu_uids:
            # Every GPU of the default is nico's, and every GPU nico manages has a tray home: the
            # domain default goes.
            removals.append(DeletePartition(default, "default", None))
            default = None
        elif leaving:  # in domain mode the default may end empty, but it is never deleted
            removals.append(RemoveGpus(default, leaving, "default", None))

    for name, partition in seen.homes.items():
        leaving = frozenset(g for g in partition.gpu_uids if g in managed and home_of.get(g) != name)
        is_home = any(home == name for home in home_of.values())
        back = desire.mode == "domain" and seen.default is not None and not is_home
        if back and leaving == partition.gpu_uids:
            removals.append(DeletePartition(partition, "home", None))  # back to the domain model
        elif leaving:
            removals.append(RemoveGpus(partition, leaving, "home", None))

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
    if default is not None and (missing := frozenset(to_default - default.gpu_uids)):
        additions.append(AddGpus(default, missing, "default", None))
    trays: dict[str, set[int]] = {}
    for gpu, home in sorted(home_of.items()):
        if home is None or home == DEFAULT_HOME:
            continue
        present = seen.homes.get(home)
        if present is None or gpu not in present.gpu_uids:
            trays.setdefault(home, set()).add(gpu)
    for name in sorted(trays):
        present = seen.homes.get(name)
        if present is None:
            additions.append(CreatePartition(name, None, frozenset(trays[name])))
        else:
            additions.append(AddGpus(present, frozenset(trays[name]), "home", None))
    parking = _parking(desire, seen, default, removals)
    return Plan(_paired(removals, additions, parking, stranded), blocked)


def _parking(
    desire: DomainDesire, seen: Classified, default: FabricPartition | None, removals: list[Operation]
) -> dict[int, FabricPartition]:
    """Each managed GPU's home partition where it is on the fabric and stays there through the plan:
    where a GPU can wait (module docstring)."""
    deleted = {op.partition.nmx_partition_id for op in removals if isinstance(op, DeletePartition)}
    parking: dict[int, FabricPartition] = {}
    for gpu in desire.gpus:
        home = home_target(gpu, desire.mode, desire.homes, default is not None)
        holder = default if home == DEFAULT_HOME else seen.homes.get(home) if home is not None else None
        if holder is not None and holder.nmx_partition_id not in deleted:
            parking[gpu] = holder
    return parking


def _paired(
    removals: list[Operation],
    additions: list[Operation],
    parking: Mapping[int, FabricPartition],
    stranded: set[int],
) -> list[Operation]:
    """Removals split per destination, each right before the addition that takes its GPUs; removals
    of GPUs that go nowhere come first; GPUs that would wait across other operations for their
    partition's name to be free wait in their home (``parking``) instead (module docstring)."""
    consumed: set[int] = set()
    for addition in additions:
        consumed |= op_gpus(addition)
    head: list[Operation] = []
    pending: list[RemoveGpus | DeletePartition] = []
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
    # A create that reuses the name of a partition being deleted goes after the additions taking that
    # partition's GPUs, so they are not kept waiting across the create.
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

    # Capacity (the domain's partition count and multicast budget): existing partitions gain GPUs
    # first, then the creates a deletion feeds (the deletion right before, freeing what they take),
    # then the other creates, after every deletion.
    freed_by_delete = frozenset().union(*(op_gpus(r) for r in pending if isinstance(r, DeletePartition)))

    def rank(addition: Operation) -> int:
        if not isinstance(addition, CreatePartition):
            return 0
        return 1 if op_gpus(addition) & freed_by_delete else 2

    for addition in sorted(additions, key=rank):
        place(addition)
    body: list[Operation] = []
    for addition in ordered:
        need = op_gpus(addition)
        name = addition.name if isinstance(addition, CreatePartition) else None
        left: list[RemoveGpus | DeletePartition] = []
        feeds: list[tuple[Operation, frozenset[int]]] = []  # a removal, and the GPUs it frees for this
        for removal in pending:
            gpus = op_gpus(removal)
            freed = gpus & need
            if isinstance(removal, DeletePartition) and name is not None and removal.partition.name == name:
                # The name must be free before the create. GPUs of the deleted partition that a later
                # addition takes (a swap between re-made partitions) go home first and wait there.
                stranded.update(gpus - need - parking.keys())
                parked = _park(removal.partition, (gpus - need) & parking.keys(), parking)
                left.extend(RemoveGpus(p.partition, p.gpu_uids, p.role, None) for p in parked)
                feeds[0:0] = [(o, frozenset()) for o in _parked_delete(removal, parked)]
                continue
            if not freed:
                left.append(removal)
                continue
            rest = gpus - freed
            if isinstance(removal, DeletePartition):
                if rest & consumed:  # others still wait for GPUs of it: the deletion waits too
                    feeds.append((RemoveGpus(removal.partition, freed, removal.role, removal.lp), freed))
                    left.append(
                        DeletePartition(replace(removal.partition, gpu_uids=rest), removal.role, removal.lp)
                    )
                else:
                    feeds.append((removal, freed))
            else:
                feeds.append((RemoveGpus(removal.partition, freed, removal.role, removal.lp), freed))
                if rest:
                    left.append(RemoveGpus(removal.partition, rest, removal.role, removal.lp))
        pending = left
        feeds = _merged(feeds)
        if isinstance(addition, AddGpus) and len(feeds) > 1:
            # One addition per source: each freed GPU is placed by the very next operation.
            fed = frozenset().union(*(freed for _, freed in feeds))
            if waiting := need - fed:  # GPUs already out of every partition
                body.append(replace(addition, gpu_uids=waiting))
            for removal, freed in feeds:
                body.append(removal)
                if freed:
                    body.append(replace(addition, gpu_uids=freed))
            continue
        body.extend(removal for removal, _ in feeds)
        body.append(addition)
    return head + body + list(pending)


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


def satisfied(gpu: int, lp: uuid.UUID | None, seen: Classified, desire: DomainDesire | None = None) -> bool:
    """Whether the fabric, as classified, holds ``gpu`` where nico wants it (a GPU of a blocked logical
    partition is never satisfied). ``desire`` gives the home rules (without it: the domain default)."""
    holder = seen.location.get(gpu)
    if lp is not None:
        return holder is not None and seen.owned.get(lp) is holder
    if desire is None:
        # Out of every tenant partition: in the default partition, or in none when there is no
        # default partition to return it to.
        return holder is seen.default if seen.default is not None else holder is None
    home = home_target(gpu, desire.mode, desire.homes, seen.default is not None)
    if home is None:
        return holder is None
    if home == DEFAULT_HOME:
        return holder is seen.default
    return holder is not None and seen.homes.get(home) is holder


def without_home(desire: DomainDesire, seen: Classified) -> frozenset[int]:
    """Managed GPUs in neither a tenant partition of nico's nor their home partition: the invariant
    "every GPU always has a home" (#6644) counts these (spec/nmx-c-2026.md)."""
    tenant = {id(p) for p in seen.owned.values()}
    return frozenset(
        gpu
        for gpu in desire.gpus
        if (holder := seen.location.get(gpu)) is None
        or (id(holder) not in tenant and not satisfied(gpu, None, seen, desire))
    )
