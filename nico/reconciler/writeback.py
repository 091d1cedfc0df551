"""After a domain's operations, the fabric is read back and the database told the truth about it.

In one transaction: recorded physical partitions are aligned with the partitions the fabric reports
(partitions created this pass, or adopted from an intent, are recorded; records of partitions that
are gone are dropped); each GPU's observed partition is stored; intents are closed; an instance
becomes Ready — through :mod:`nico.reconciler.lifecycle` — only when the read-back holds exactly the
desired membership of its current NVLink config version; terminating instances finish once their
GPUs are out of every tenant partition; logical partitions being deleted vanish once their physical
partitions are gone. GPUs in partitions nico did not make are counted per machine (a held machine is
not free) and per domain, and an instance waiting for a GPU such a partition keeps says so in its
status history.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.queries import reconciler as queries
from nico.fabric.backend import FabricPartition
from nico.reconciler import lifecycle
from nico.reconciler.executor import Outcome, created_names
from nico.reconciler.fingerprint import fabric_digest
from nico.reconciler.health import HealthRead
from nico.reconciler.homes import Mode
from nico.reconciler.planner import (
    Classified,
    DomainDesire,
    Foreign,
    classify,
    held,
    lp_of_name,
    satisfied,
    without_home,
)
from nico.reconciler.state import DomainState


@dataclass
class WriteBackReport:
    machines_updated: int = 0
    stale_partitions_deleted: int = 0
    instances_ready: list[uuid.UUID] = field(default_factory=list)
    apply_latencies_ms: list[float] = field(default_factory=list)
    instances_terminated: int = 0
    unsatisfiable: dict[uuid.UUID, str] = field(default_factory=dict)
    partitions_removed: int = 0
    gpus_without_home: int = 0
    foreign_gpus: int = 0  # GPUs of the domain in partitions nico did not make, after the pass
    waiting_on_foreign: dict[uuid.UUID, str] = field(default_factory=dict)  # instance -> why it waits
    figures: list[Any] | None = None  # the domain's gauge figures as the write-back left them
    records_dropped: int = 0  # physical partition records deleted (gone from the fabric, or replaced)
    unlocked: bool = False  # the domain's lock was let go with the COMMIT (``write_back``'s ``unlock``)
    logical_partitions: int | None = None  # counted in the write-back's transaction (``count_partitions``)


@dataclass(frozen=True)
class PassHealth:
    """A domain's health read during its pass, to store with the write-back; ``hold``: machines with a
    GPU reporting anything but HEALTHY are held out of placement (otherwise every hold is released)."""

    read: HealthRead
    hold: bool


@dataclass(frozen=True)
class PassOutcome:
    """What one locked pass over a domain learned, for :func:`write_back`.

    ``before``: what the fabric held before this pass's operations (records missing from it are
    stale: changed behind nico's back); ``observed``: the read-back after them;
    ``intent_ids``: intent ids by position in ``outcomes``; ``blocked``: logical partitions the plan
    could not serve, with why; ``resolved_operations``: NMX-M operation ids checked this pass, to their
    terminal state; ``settled``: the read-back leaves nothing to do, so later full passes may skip the
    domain while its fabric keeps the same digest."""

    before: list[FabricPartition]
    observed: list[FabricPartition]
    outcomes: list[Outcome] = field(default_factory=list)
    intent_ids: dict[int, uuid.UUID] = field(default_factory=dict)
    blocked: dict[uuid.UUID, str] = field(default_factory=dict)
    resolved_operations: dict[str, str] = field(default_factory=dict)
    settled: bool = False


async def write_back(
    session: AsyncSession,
    state: DomainState,
    outcome: PassOutcome,
    mode: Mode = "domain",
    foreign: Foreign = "keep",
    desire: DomainDesire | None = None,
    health: PassHealth | None = None,
    *,
    unlock: int | None = None,
    count_partitions: bool = False,
) -> WriteBackReport:
    """Record the read-back of ``outcome`` for ``state.domain`` (module docstring) and commit it;
    ``mode`` is the default partition mode (where a GPU in no tenant partition belongs), ``foreign``
    what becomes of partitions nico did not make; ``desire``: the state's desire by them, when the
    caller has it already; ``health``: the domain's health read during the pass, stored with it
    (each GPU's in its observation's statement, the rest in the last round trip); ``unlock``: the
    domain lock the session holds, with generic plans (``queries.one_domain_rows``), let go right
    after the COMMIT, in its round trip (``report.unlocked``); ``count_partitions``: the logical
    partitions counted in its transaction too (``report.logical_partitions``).

    One round trip in the usual pass (the statements go out together, :class:`queries.PassWrites`):
    partition records that change, intents, GPU observations, the instances settled, the domain's
    pass (and its health), its figures and the commit. Instances that finish terminating and logical
    partitions that finish deleting take round trips of their own, before (:func:`_settle_apart`)."""
    report = WriteBackReport()
    seen = classify(outcome.observed, state.owned_names() | created_names(outcome.outcomes), state.adopted())
    desire = state.desire(mode, foreign) if desire is None else desire
    writes = queries.PassWrites()
    if unlock is None:  # the lock's session plans generically already
        writes.plan_generically()
    pp_ids = align_partitions(writes, state, seen, outcome.before, report)
    writes.close_intents(intent_updates(state, seen, outcome))
    healths = health.read.gpus if health is not None else None
    moved = record_gpu_observations(writes, state, seen, pp_ids, report, healths)
    # Instances: Ready only on an exact match for the version loaded at the start of the pass.
    finishing, observations = observed_instances(state, seen, outcome.blocked, report, desire)
    # Usually nothing finishes: the instances settle in one statement, all in one round trip.
    together = not finishing and not report.records_dropped
    if together and observations:
        writes.settle_observed(
            {o.instance_id: o.version for o in observations},
            [(o.instance_id, device, *gpu) for o in observations for device, gpu in o.gpus.items()],
        )
    applied = None if together else await _settle_apart(session, writes, observations, finishing, report)
    # Every GPU always has a home (#6644): checked on every pass, repaired by the next plan.
    report.gpus_without_home = len(without_home(desire, seen))
    report.foreign_gpus = sum(len(p.gpu_uids) for p in seen.unknown)
    writes.note_waiting(report.waiting_on_foreign)
    writes.record_domain_pass(
        state.domain,
        fabric_digest(outcome.observed, mode),
        outcome.settled and not report.unsatisfiable,
        report.gpus_without_home,
        report.foreign_gpus,
        held=held_machines(state, seen, moved),
    )
    if health is not None:  # before the figures: a machine held for its health is not free
        read = health.read
        partitions = {p.name: p.health for p in outcome.observed}
        budget = read.budget if read.budget_is_new else None
        writes.health(state.domain, partitions, hold=health.hold, budget=budget)
    writes.domain_figures(state.domain)  # in the same round trip, not a read of its own after it
    if count_partitions:
        writes.logical_partition_count()
    found = await writes.send(session, commit=True, unlock_after=unlock)
    report.figures, report.unlocked = found.figures, unlock is not None
    report.logical_partitions = found.logical_partitions
    settled = [o.instance_id for o in observations if o.instance_id in found.settled]
    report_ready(report, state, settled if applied is None else applied)
    return report


async def _settle_apart(
    session: AsyncSession,
    writes: queries.PassWrites,
    observations: list[lifecycle.Observation],
    finishing: list[uuid.UUID],
    report: WriteBackReport,
) -> list[uuid.UUID]:
    """The instances when some finish (``finishing``) or a record was dropped (a partition being deleted
    may have nothing left), each in the order of the locks (docs/architecture.md, "Locks"), after the
    statements queued so far. The settle is queued; returns the instances it applies."""
    if observations and not finishing:
        writes.lock_settling([o.instance_id for o in observations])
    if report.records_dropped:  # only then can a logical partition being deleted have nothing left
        writes.deleting_partitions()
    found = await writes.send(session)
    for instance_id in finishing:  # before the others are locked, as always
        if await lifecycle.finish_instance_termination(session, instance_id):
            report.instances_terminated += 1
    if observations and finishing:
        ids = [o.instance_id for o in observations]
        found.settling = await queries.locked_settling_instances(session, ids)
    settled = lifecycle.settlement(observations, found.settling)
    if settled.versions:
        writes.settle(settled.versions, settled.waiting, settled.gpus)
    if found.deleting:  # the settle goes first, then each partition under its own lock
        await writes.send(session)
        report.partitions_removed = await finish_partitions(session, found.deleting)
    return settled.applied


def align_partitions(
    writes: queries.PassWrites,
    state: DomainState,
    seen: Classified,
    before: list[FabricPartition],
    report: WriteBackReport,
) -> dict[str, uuid.UUID]:
    """Recorded physical partitions follow the fabric (queued before the GPUs' observations, which
    find a new record by its name); returns the record id each partition will have, by name (a new
    record's as made here: one of a partition whose logical partition already had a record on the
    domain keeps that record's, and one whose logical partition is gone is not made)."""
    was = {p.name: p.nmx_partition_id for p in before}
    keep: dict[str, FabricPartition] = {p.name: p for p in seen.owned.values()}
    deleted: list[uuid.UUID] = []
    for name, record in state.partitions.items():
        now = keep.get(name)
        if now is None or now.nmx_partition_id != record.nmx_partition_id:
            deleted.append(record.id)
        if was.get(name) != record.nmx_partition_id:
            report.stale_partitions_deleted += 1
    pp_ids: dict[str, uuid.UUID] = {}
    records: list[queries.PartitionRecord] = []
    for name, partition in keep.items():
        recorded = state.partitions.get(name)
        pp_ids[name] = recorded.id if recorded is not None else uuid.uuid4()
        if (
            recorded is not None
            and recorded.nmx_partition_id == partition.nmx_partition_id
            and recorded.ref == partition.ref
        ):
            continue  # recorded as the fabric has it: no statement
        records.append(
            queries.PartitionRecord(
                pp_ids[name], lp_of_name(name), state.domain, partition.nmx_partition_id, partition.ref, name
            )
        )
    writes.record_partitions(deleted, records)
    report.records_dropped = len(deleted)
    return pp_ids


def record_gpu_observations(
    writes: queries.PassWrites,
    state: DomainState,
    seen: Classified,
    pp_ids: dict[str, uuid.UUID],
    report: WriteBackReport,
    healths: Mapping[int, str] | None,
) -> set[str]:
    """Each GPU's observed partition (only the GPUs whose observation changed) and, with ``healths``
    (GPU GUID -> health, as the fabric reported it), each GPU's health, in the same statement; the
    machines of the GPUs whose observation changed. (A GPU in a new record whose id turns out another,
    :func:`align_partitions`, is written as changed: the statement finds the record by its name.)"""
    rows: list[queries.GpuWrite] = []
    machines: set[str] = set()
    for gpu in state.gpus.values():
        holder = seen.location.get(gpu.gpu_uid)
        fabric_pid = holder.nmx_partition_id if holder is not None else None
        pp_id = pp_ids.get(holder.name) if holder is not None else None
        changed = pp_id != gpu.observed_physical_partition or fabric_pid != gpu.observed_fabric_partition
        if changed:
            machines.add(gpu.machine_id)
        if changed or healths is not None:
            health = healths.get(gpu.gpu_uid) if healths is not None else None
            name = holder.name if pp_id is not None and holder is not None else None
            rows.append(queries.GpuWrite(gpu.gpu_uid, name, fabric_pid, changed, health))
    report.machines_updated = len(machines)
    if healths is not None:  # the fabric's GPUs the domain's rows lack: their health stored wherever they are
        rows += [queries.GpuWrite(u, None, None, False, h) for u, h in healths.items() if u not in state.gpus]
    writes.gpu_observations(state.domain, rows)
    return machines


def held_machines(state: DomainState, seen: Classified, moved: set[str]) -> dict[str, int]:
    """Each machine's GPUs in foreign partitions, for the machines that have some now, had some as
    loaded, or whose GPUs moved, where the count differs from the one loaded (the machine's row, read
    under the domain's lock: only its passes write it); none when no count changes (the statement that
    writes them, and the capacity triggers it fires, are left out)."""
    foreign = {id(p) for p in seen.unknown}
    counts = dict.fromkeys(moved, 0)
    loaded: dict[str, int] = {}
    for gpu in state.gpus.values():
        if gpu.machine_foreign:
            loaded[gpu.machine_id] = gpu.machine_foreign
            counts.setdefault(gpu.machine_id, 0)
        if id(seen.location.get(gpu.gpu_uid)) in foreign:
            counts[gpu.machine_id] = counts.get(gpu.machine_id, 0) + 1
    return {machine: n for machine, n in counts.items() if n != loaded.get(machine, 0)}


async def finish_deleted_partitions(session: AsyncSession) -> int:
    """Logical partitions being deleted vanish once nothing of them remains; returns how many went."""
    return await finish_partitions(session, await queries.deleting_partitions_with_nothing_left(session))


async def finish_partitions(session: AsyncSession, lp_ids: list[uuid.UUID]) -> int:
    """Finish the deletion of each logical partition (each under its own lock); how many went."""
    removed = 0
    for lp_id in lp_ids:
        if await lifecycle.finish_partition_deletion(session, lp_id):
            removed += 1
    return removed


def intent_updates(state: DomainState, seen: Classified, outcome: PassOutcome) -> list[dict[str, object]]:
    """The final state of this pass's intents, and of earlier passes' open intents it can close."""
    present = {p.name for p in seen.owned.values()} | set(seen.homes)
    updates: list[dict[str, object]] = []
    for index, done in enumerate(outcome.outcomes):
        intent_id = outcome.intent_ids.get(index)
        if intent_id is None:
            continue
        if done.status == "skipped":
            new_state = "abandoned"
        elif done.status == "timedout" and done.operation_id:
            new_state = "timedout"
        else:
            new_state = done.status
        updates.append({"id": intent_id, "state": new_state, "error": done.error, "op": done.operation_id})
    for intent in state.intents:  # open intents of earlier passes
        if intent.operation_id and intent.state in ("pending", "timedout"):
            final = outcome.resolved_operations.get(intent.operation_id)
            if final is None:
                continue
            new_state = {"completed": "completed", "failed": "failed", "cancelled": "failed"}.get(
                final, "abandoned"
            )
            if intent.operation == "create" and intent.name in present:
                new_state = "adopted"
        elif intent.operation == "create" and intent.name in present:
            new_state = "adopted"
        else:
            new_state = "abandoned"
        updates.append({"id": intent.id, "state": new_state, "error": None, "op": intent.operation_id})
    return updates


def observed_instances(
    state: DomainState,
    seen: Classified,
    blocked: dict[uuid.UUID, str],
    report: WriteBackReport,
    desire: DomainDesire,
) -> tuple[list[uuid.UUID], list[lifecycle.Observation]]:
    """The terminating instances whose GPUs are out of every tenant partition (to finish), and an
    observation of each other instance the read-back shows realised (to settle, all at once: one
    lock, one write). Instances bound to GPUs their machine lacks go to ``report.unsatisfiable``."""
    owned = {id(p) for p in seen.owned.values()}
    kept = held(desire, seen)
    finishing: list[uuid.UUID] = []
    observations: list[lifecycle.Observation] = []
    for instance in state.unsettled.values():
        gpus = state.gpus_of(instance.machine_id)
        if instance.terminating:
            if all(id(seen.location.get(g.gpu_uid)) not in owned for g in gpus.values()):
                finishing.append(instance.id)
            continue
        missing = sorted(set(instance.bindings) - set(gpus))
        if missing:
            report.unsatisfiable[instance.id] = f"machine {instance.machine_id} has no GPU index {missing[0]}"
            continue
        if any(lp in blocked for lp in instance.bindings.values()):
            continue
        if waiting := sorted(device for device, g in gpus.items() if g.gpu_uid in kept):
            report.waiting_on_foreign[instance.id] = lifecycle.waiting_message(waiting)
            continue
        if not all(
            satisfied(g.gpu_uid, instance.bindings.get(device), seen, desire) for device, g in gpus.items()
        ):
            continue
        observation = {device: (state.domain, g.gpu_uid) for device, g in gpus.items()}
        observations.append(lifecycle.Observation(instance.id, instance.version, observation))
    return finishing, observations


def report_ready(report: WriteBackReport, state: DomainState, applied: list[uuid.UUID]) -> None:
    """The instances applied, with how long each took from its config change to now."""
    now = datetime.now(UTC)
    for instance_id in applied:
        report.instances_ready.append(instance_id)
        changed_at = state.unsettled[instance_id].changed_at
        report.apply_latencies_ms.append(max(0.0, (now - changed_at).total_seconds() * 1000.0))


async def record_domain_error(session: AsyncSession, domain: uuid.UUID, error: str) -> None:
    await queries.record_domain_error(session, domain, error)
