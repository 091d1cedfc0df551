"""The write-back of a part of a full pass: several domains' read-backs told to the database in one
transaction of two round trips in the usual case, with :mod:`nico.reconciler.writeback`'s rules.

Each domain's rows are built as its own write-back builds them (partition records, GPU observations,
the instances the read-back shows realised); the statements that take rows of several domains at
once take the part's together: one for every intent the part closes, one lock of every instance it
settles (in id order, as every set of them is locked), one settle, one note of the instances waiting
on foreign partitions, one read of the part's gauge figures. A domain whose write-back has more to
do than that (instances that finish terminating: each a round trip of its own, under its own lock)
gets the single domain's write-back, in a transaction of its own after the part's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.queries import reconciler as queries
from nico.db.queries.reconciler_parts import DomainHealth, DomainPass, PartWrites
from nico.reconciler import lifecycle
from nico.reconciler.executor import created_names
from nico.reconciler.fingerprint import fabric_digest
from nico.reconciler.homes import Mode
from nico.reconciler.planner import Classified, DomainDesire, Foreign, classify, without_home
from nico.reconciler.state import DomainState
from nico.reconciler.writeback import (
    PassHealth,
    PassOutcome,
    WriteBackReport,
    align_partitions,
    finish_partitions,
    held_machines,
    intent_updates,
    observed_instances,
    record_gpu_observations,
    report_ready,
    write_back,
)


@dataclass(frozen=True)
class DomainWrite:
    """One domain's share of a part's write-back: what :func:`writeback.write_back` takes."""

    state: DomainState
    outcome: PassOutcome
    desire: DomainDesire
    health: PassHealth | None = None


@dataclass
class _Queued:
    """A domain's write-back as queued in the part's: its report, the read-back classified, the
    instances it settles, the machines whose GPUs moved."""

    write: DomainWrite
    report: WriteBackReport
    seen: Classified
    observations: list[lifecycle.Observation] = field(default_factory=list)
    moved: set[str] = field(default_factory=set)


async def write_back_part(
    session: AsyncSession,
    writes: Sequence[DomainWrite],
    errors: Mapping[uuid.UUID, str],
    mode: Mode = "domain",
    foreign: Foreign = "keep",
) -> dict[uuid.UUID, WriteBackReport]:
    """Record each domain's read-back (``writes``) and each failed domain's error (``errors``: domain
    -> how it failed) and commit (module docstring); the domains' reports."""
    pending = PartWrites()
    pending.plan_generically()
    queued: list[_Queued] = []
    alone: list[DomainWrite] = []
    updates: list[dict[str, object]] = []
    for write in writes:
        item = _classified(write)
        finishing, item.observations = observed_instances(
            write.state, item.seen, write.outcome.blocked, item.report, write.desire
        )
        if finishing:  # terminations take round trips of their own: the single domain's write-back
            alone.append(write)
            continue
        state, healths = write.state, write.health.read.gpus if write.health is not None else None
        pp_ids = align_partitions(pending, state, item.seen, write.outcome.before, item.report)
        updates += intent_updates(state, item.seen, write.outcome)
        item.moved = record_gpu_observations(pending, state, item.seen, pp_ids, item.report, healths)
        queued.append(item)
    pending.records_and_observations()
    pending.close_intents(updates)
    observations = [o for item in queued for o in item.observations]
    if observations:
        pending.lock_settling([o.instance_id for o in observations])
    if any(item.report.records_dropped for item in queued):
        # Only then can a logical partition being deleted have nothing left, as for one domain: each
        # part's write-back locked every such partition of the site, so the write-backs (of each part
        # of every reconciler) queued on its row, holding their domains, and could deadlock.
        pending.deleting_partitions()
    found = await pending.send(session)
    for domain, message in errors.items():
        await queries.record_domain_error(session, domain, message)
    settled = lifecycle.settlement(observations, found.settling)
    if settled.versions:
        pending.settle(settled.versions, settled.waiting, settled.gpus)
    removed = 0
    if found.deleting:  # the settle goes first, then each partition under its own lock
        await pending.send(session)
        removed = await finish_partitions(session, found.deleting)
    applied = set(settled.applied)
    for item in queued:
        report_ready(item.report, item.write.state, [i for i in item.write.state.unsettled if i in applied])
    _record_passes(pending, queued, mode)
    if queued:
        queued[0].report.partitions_removed = removed
        pending.domain_figures(*(item.write.state.domain for item in queued))
    figures = (await pending.send(session, commit=True)).figures or []
    reports = {item.write.state.domain: item.report for item in queued}
    for domain, report in reports.items():
        report.figures = [row for row in figures if row[0] == domain]
    for write in alone:
        reports[write.state.domain] = await write_back(
            session, write.state, write.outcome, mode, foreign, write.desire, write.health
        )
    return reports


def _classified(write: DomainWrite) -> _Queued:
    """The domain's read-back classified as its write-back does (the partitions this pass created are
    nico's)."""
    outcome = write.outcome
    created = created_names(outcome.outcomes)
    seen = classify(outcome.observed, write.state.owned_names() | created, write.state.adopted())
    return _Queued(write, WriteBackReport(), seen)


def _record_passes(pending: PartWrites, queued: list[_Queued], mode: Mode) -> None:
    """The domains' passes, their waiting notes and their health, queued (as :func:`write_back` does
    for one domain, a statement for them all)."""
    passes: list[DomainPass] = []
    healths: dict[bool, list[DomainHealth]] = {}
    waiting: dict[uuid.UUID, str] = {}
    for item in queued:
        write, report = item.write, item.report
        state, outcome = write.state, write.outcome
        report.gpus_without_home = len(without_home(write.desire, item.seen))
        report.foreign_gpus = sum(len(p.gpu_uids) for p in item.seen.unknown)
        waiting |= report.waiting_on_foreign
        digest = fabric_digest(outcome.observed, mode)
        settled = outcome.settled and not report.unsatisfiable
        held = held_machines(state, item.seen, item.moved)
        passes.append(
            DomainPass(state.domain, digest, settled, report.gpus_without_home, report.foreign_gpus, held)
        )
        if write.health is not None:  # before the figures: a machine held for its health is not free
            read = write.health.read
            partitions = {p.name: p.health for p in outcome.observed}
            budget = read.budget if read.budget_is_new else None
            healths.setdefault(write.health.hold, []).append(DomainHealth(state.domain, partitions, budget))
    pending.note_waiting(waiting)
    pending.domain_passes(passes)
    for hold, of_domains in healths.items():
        pending.healths(of_domains, hold=hold)
