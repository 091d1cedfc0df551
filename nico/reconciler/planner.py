"""The planner: desired state + observed fabric of one NVLink domain -> ordered fabric operations.

Pure: plain data in, plain data out, no I/O. The rules:

* A managed GPU (one of a machine nico knows) wants either a logical partition ``lp`` or ``None``,
  meaning "in no tenant partition" — it belongs in the domain's default partition (id 32766).
* Each logical partition has at most one physical partition per domain, named deterministically
  (:func:`partition_name`), so names — unique per domain on the fabric — identify nico's partitions.
  A partition is nico's when its name belongs to a physical partition nico recorded, or to an intent
  nico recorded before a create whose outcome it never learned (crash, late NMX-M completion): that
  partition is adopted, not rebuilt. A partition nico took over from another manager keeps the name
  it was made with (``adopted``: its name -> the logical partition it now stands for). Anything else
  is foreign (made by NICo, Base Command Manager or an operator). What becomes of a foreign partition
  is ``foreign``'s choice: ``keep`` (the reconciler's default) never deletes it nor takes a GPU out of
  it, and the managed GPUs in it are held (:attr:`Plan.held`): never sent to a tenant partition nor
  home, counted as housed; ``evict`` takes the managed GPUs out of it (deleting it when none is left).
  GPUs of machines nico does not know are never touched. An empty partition carrying nico's name with
  no record (what an interrupted create leaves) is not foreign: it is deleted in both.
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

import functools
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from nico.fabric.backend import FabricPartition
from nico.reconciler.homes import DEFAULT_HOME, Mode, home_target, home_targets, is_tray_partition_name
from nico.reconciler.operations import AddGpus, CreatePartition, DeletePartition, Operation, RemoveGpus
from nico.reconciler.ordering import paired

PARTITION_NAME_PREFIX = "nico-"
Foreign = Literal["keep", "evict"]  # what becomes of partitions nico did not make


def partition_name(lp: uuid.UUID) -> str:
    """The fabric name of ``lp``'s physical partition in any domain (unique per domain)."""
    return f"{PARTITION_NAME_PREFIX}{lp}"


@functools.lru_cache(maxsize=4096)  # asked again for every partition at every step of a pass
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
    partition's name (GPUs of unknown slot have none). ``adopted`` maps the names of recorded
    partitions nico did not name (taken over from another manager) to their logical partition.
    ``foreign``: keep or evict the partitions nico did not make (module docstring; the reconciler
    passes ``foreign_partitions``, "keep" unless configured otherwise).
    """

    domain: uuid.UUID
    gpus: Mapping[int, uuid.UUID | None]
    owned_names: frozenset[str] = frozenset()
    mode: Mode = "domain"
    homes: Mapping[int, str] = field(default_factory=dict)
    multicast_limits: Mapping[uuid.UUID, int] = field(default_factory=dict)  # lp -> multicast groups
    adopted: Mapping[str, uuid.UUID] = field(default_factory=dict)
    foreign: Foreign = "evict"


@dataclass(frozen=True)
class Classified:
    """The observed partitions of a domain, sorted by who they belong to."""

    default: FabricPartition | None
    owned: dict[uuid.UUID, FabricPartition]  # lp -> nico's partition of it
    unknown: list[FabricPartition]
    location: dict[int, FabricPartition] = field(default_factory=dict)  # gpu_uid -> partition holding it
    homes: dict[str, FabricPartition] = field(default_factory=dict)  # tray partitions, by name


def classify(
    partitions: Iterable[FabricPartition],
    owned_names: frozenset[str],
    adopted: Mapping[str, uuid.UUID] | None = None,
) -> Classified:
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
        lp = _owner(partition.name, owned_names, adopted or {})
        if lp is not None and lp not in owned:
            owned[lp] = partition
        else:
            unknown.append(partition)
    return Classified(default, owned, unknown, location, homes)


def _owner(name: str, owned_names: frozenset[str], adopted: Mapping[str, uuid.UUID]) -> uuid.UUID | None:
    """The logical partition a partition of this name belongs to, or None when it is not nico's."""
    if name in adopted:
        return adopted[name]
    return lp_of_name(name) if name in owned_names else None


@dataclass(frozen=True)
class Plan:
    """Ordered operations, and the logical partitions that cannot be placed in this domain now
    (with why), so the reconciler can say so instead of leaving instances silently Pending.
    ``held``: managed GPUs left in foreign partitions (keep mode), to the name of the partition."""

    operations: list[Operation]
    blocked: dict[uuid.UUID, str] = field(default_factory=dict)
    held: dict[int, str] = field(default_factory=dict)
    deferred: frozenset[int] = frozenset()  # GPUs sent home first, to reach their partition next pass

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
    return replace(result, deferred=frozenset(deferred)) if deferred else result


def _plan(desire: DomainDesire, observed: list[FabricPartition], stranded: set[int]) -> Plan:
    """:func:`plan`, once; ``stranded`` receives the GPUs the paired order leaves out of every
    partition across a re-made partition's delete and create (no home to wait in)."""
    seen = classify(observed, desire.owned_names, desire.adopted)
    kept = held(desire, seen)
    wanted: dict[uuid.UUID, set[int]] = {}
    home_of: dict[int, str | None] = {}  # GPUs in no tenant partition -> their home
    targets = home_targets(desire.gpus, desire.mode, desire.homes, seen.default is not None)
    for gpu, lp in desire.gpus.items():
        if gpu in kept:
            continue  # held by a foreign partition: it stays there
        if lp is None:
            home_of[gpu] = targets[gpu]
        else:
            wanted.setdefault(lp, set()).add(gpu)
    removals: list[Operation] = []
    recreate, evicted = _from_owned(desire, seen, wanted, removals)
    default, to_default = _from_default(desire, seen, home_of, evicted, kept, removals)
    _from_homes(desire, seen, home_of, removals)
    names_in_use = _from_foreign(desire, seen, removals)
    additions, blocked = _tenant_additions(desire, seen, wanted, recreate, names_in_use)
    if default is not None and (missing := frozenset(to_default - default.gpu_uids)):
        additions.append(AddGpus(default, missing, "default", None))
    additions += _home_additions(seen, home_of)
    if default is not seen.default:  # deleted by this plan (tray mode): the homes without it
        targets = home_targets(desire.gpus, desire.mode, desire.homes, default is not None)
    parking = _parking(targets, seen, default, removals)
    held_in = {gpu: partition.name for gpu, partition in kept.items()}
    return Plan(paired(removals, additions, parking, stranded), blocked, held_in)


def held(desire: DomainDesire, seen: Classified) -> dict[int, FabricPartition]:
    """Managed GPUs in foreign partitions that stay there (keep mode), to the partition holding each."""
    if desire.foreign != "keep":
        return {}
    return {gpu: p for p in seen.unknown for gpu in p.gpu_uids if gpu in desire.gpus}


def _from_owned(
    desire: DomainDesire, seen: Classified, wanted: dict[uuid.UUID, set[int]], removals: list[Operation]
) -> tuple[set[uuid.UUID], set[int]]:
    """Removals from nico's own partitions; the logical partitions whose partition is deleted (to be
    made again), and the GPUs nico no longer manages found in them (force-deleted machines: nico put
    them there, so nico takes them out and returns them to the default partition, if there is one)."""
    recreate: set[uuid.UUID] = set()
    evicted: set[int] = set()
    for lp, partition in seen.owned.items():
        keep = wanted.get(lp, set())
        leaving = partition.gpu_uids - keep
        if not partition.gpu_uids & keep and (leaving or lp not in wanted):
            removals.append(DeletePartition(partition, "owned", lp))
            recreate.add(lp)
        elif leaving:
            removals.append(RemoveGpus(partition, frozenset(leaving), "owned", lp))
        evicted.update(g for g in leaving if g not in desire.gpus)
    return recreate, evicted


def _from_default(
    desire: DomainDesire,
    seen: Classified,
    home_of: dict[int, str | None],
    evicted: set[int],
    kept: Mapping[int, FabricPartition],
    removals: list[Operation],
) -> tuple[FabricPartition | None, set[int]]:
    """Removals from the domain default; the default as it stays (None: none, or deleted) and the GPUs
    that belong in it. GPUs held by foreign partitions count as housed."""
    default = seen.default
    if default is None:
        return None, set()
    managed = desire.gpus
    to_default = {g for g, home in home_of.items() if home == DEFAULT_HOME} | evicted
    leaving = frozenset(g for g in default.gpu_uids if g in managed and g not in to_default)
    everyone_housed = all(g in desire.homes or g in kept for g in managed)
    if desire.mode == "tray" and everyone_housed and not to_default and leaving == default.gpu_uids:
        # Every GPU of the default is nico's, and every GPU nico manages has a tray home: the
        # domain default goes.
        removals.append(DeletePartition(default, "default", None))
        return None, to_default
    if leaving:  # in domain mode the default may end empty, but it is never deleted
        removals.append(RemoveGpus(default, leaving, "default", None))
    return default, to_default


def _from_homes(
    desire: DomainDesire, seen: Classified, home_of: dict[int, str | None], removals: list[Operation]
) -> None:
    """Removals from tray home partitions (deleted when the domain goes back to the domain model)."""
    for name, partition in seen.homes.items():
        leaving = frozenset(g for g in partition.gpu_uids if g in desire.gpus and home_of.get(g) != name)
        is_home = any(home == name for home in home_of.values())
        back = desire.mode == "domain" and seen.default is not None and not is_home
        if back and leaving == partition.gpu_uids:
            removals.append(DeletePartition(partition, "home", None))  # back to the domain model
        elif leaving:
            removals.append(RemoveGpus(partition, leaving, "home", None))


def _from_foreign(desire: DomainDesire, seen: Classified, removals: list[Operation]) -> dict[str, str]:
    """Empty ghosts named by nico deleted; in evict mode, managed GPUs taken out of partitions nico did
    not make. The names those partitions keep, with why a logical partition cannot have one."""
    names_in_use: dict[str, str] = {}
    for partition in seen.unknown:
        leaving = frozenset(g for g in partition.gpu_uids if g in desire.gpus)
        if not partition.gpu_uids and lp_of_name(partition.name) is not None:
            removals.append(DeletePartition(partition, "unknown", None))  # an empty ghost named by nico
        elif desire.foreign == "keep":
            names_in_use[partition.name] = (
                f"partition name {partition.name} is held by a partition nico did not make, which it keeps "
                "(foreign_partitions = keep)"
            )
        elif partition.gpu_uids and leaving == partition.gpu_uids:
            removals.append(DeletePartition(partition, "unknown", None))
        else:
            if leaving:
                removals.append(RemoveGpus(partition, leaving, "unknown", None))
            names_in_use[partition.name] = (
                f"partition name {partition.name} is held by a partition nico did not record, which holds "
                "GPUs of machines nico does not manage"
            )
    return names_in_use


def _tenant_additions(
    desire: DomainDesire,
    seen: Classified,
    wanted: dict[uuid.UUID, set[int]],
    recreate: set[uuid.UUID],
    names_in_use: Mapping[str, str],
) -> tuple[list[Operation], dict[uuid.UUID, str]]:
    """The creates and additions of tenant partitions, and the logical partitions blocked (with why)."""
    additions: list[Operation] = []
    blocked: dict[uuid.UUID, str] = {}
    for lp in sorted(wanted):
        gpus = frozenset(wanted[lp])
        existing = seen.owned.get(lp)
        if existing is None or lp in recreate:
            name = partition_name(lp)
            if name in names_in_use:
                blocked[lp] = names_in_use[name]
                continue
            additions.append(CreatePartition(name, lp, gpus, desire.multicast_limits.get(lp)))
        elif missing := gpus - existing.gpu_uids:
            additions.append(AddGpus(existing, missing, "owned", lp))
    return additions, blocked


def _home_additions(seen: Classified, home_of: dict[int, str | None]) -> list[Operation]:
    """GPUs sent to their tray home partitions (created when missing)."""
    trays: dict[str, set[int]] = {}
    for gpu, home in sorted(home_of.items()):
        if home is None or home == DEFAULT_HOME:
            continue
        present = seen.homes.get(home)
        if present is None or gpu not in present.gpu_uids:
            trays.setdefault(home, set()).add(gpu)
    additions: list[Operation] = []
    for name in sorted(trays):
        present = seen.homes.get(name)
        if present is None:
            additions.append(CreatePartition(name, None, frozenset(trays[name])))
        else:
            additions.append(AddGpus(present, frozenset(trays[name]), "home", None))
    return additions


def _parking(
    homes: dict[int, str | None], seen: Classified, default: FabricPartition | None, removals: list[Operation]
) -> dict[int, FabricPartition]:
    """Each managed GPU's home partition (``homes``: its name) where it is on the fabric and stays
    there through the plan: where a GPU can wait (module docstring)."""
    deleted = {op.partition.nmx_partition_id for op in removals if isinstance(op, DeletePartition)}
    parking: dict[int, FabricPartition] = {}
    for gpu, home in homes.items():
        holder = default if home == DEFAULT_HOME else seen.homes.get(home) if home is not None else None
        if holder is not None and holder.nmx_partition_id not in deleted:
            parking[gpu] = holder
    return parking


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
    "every GPU always has a home" (#6644) counts these (spec/nmx-c-2026.md). A GPU a foreign partition
    holds (keep mode) is housed."""
    tenant = {id(p) for p in seen.owned.values()}
    kept = held(desire, seen)
    if desire.mode == "domain" and seen.default is not None:  # every GPU's home: the default partition
        housed = tenant | {id(seen.default)}  # (a GPU in no partition: id(None), never in it)
        return frozenset(g for g in desire.gpus if g not in kept and id(seen.location.get(g)) not in housed)
    return frozenset(
        gpu
        for gpu in desire.gpus
        if gpu not in kept
        and (
            (holder := seen.location.get(gpu)) is None
            or (id(holder) not in tenant and not satisfied(gpu, None, seen, desire))
        )
    )
