"""The steps of a domain's locked pass, shared by a single domain's pass
(:mod:`nico.reconciler.domain_pass`) and each domain of a part's (:mod:`nico.reconciler.parts`): look
(observe and plan), act (the calls and the read-back, or the health read alone), what the pass came to
(:func:`pass_outcome`) and, after the write-back, its metrics and result (:func:`pass_ended`). Each
step takes the domain's :class:`DomainWork` and fills it in; the database steps are the callers'."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field, replace

from nico.fabric.backend import DomainTarget, FabricError, FabricPartition
from nico.reconciler import health
from nico.reconciler import state as statemod
from nico.reconciler.executor import Outcome, created_names, execute
from nico.reconciler.operations import CreatePartition, change_counts
from nico.reconciler.pass_context import DomainResult, HealthDue, Observed, PassContext
from nico.reconciler.planner import DomainDesire, Plan, plan
from nico.reconciler.promise import nothing_left
from nico.reconciler.writeback import PassHealth, PassOutcome, WriteBackReport


@dataclass
class DomainWork:
    """One domain's pass as it goes on: its state and desire, what it saw and planned, the calls it
    made and what it read back."""

    state: statemod.DomainState
    wanted: DomainDesire
    seen: Observed | None = None
    result: Plan = field(default_factory=lambda: Plan([]))
    acts: bool = False  # changes the fabric: intents recorded, calls made
    reading: bool = False  # its health is read with the pass
    read_at: float = 0.0
    intent_ids: dict[int, uuid.UUID] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    observed: list[FabricPartition] = field(default_factory=list)
    read: health.HealthRead | None = None
    error: FabricError | None = None  # the fabric failed the pass (its read-back forgotten)


async def look(ctx: PassContext, work: DomainWork, planned: Plan | None = None) -> None:
    """Observe the domain and plan (``planned``: the plan of the listing the domain's last read-back
    holds, when known): whether the pass acts, and whether it reads the domain's health."""
    domain, observing = work.state.domain, ctx.config.mode == "observe"
    try:
        seen = await observe_domain(ctx, work.state)
        result = planned if planned is not None and seen.cached else plan(work.wanted, seen.partitions)
        if seen.cached and (observing or not result.operations):
            # Nothing to change by the last read-back: only a listing now may say what is Ready.
            listed = await list_now(ctx, seen.target)
            if listed != seen.partitions:  # (the same fabric: the same plan)
                result = plan(work.wanted, listed)
            seen = replace(seen, partitions=listed, cached=False)
    except FabricError as exc:
        ctx.read_backs.forget(domain)
        work.error = exc
        return
    work.seen, work.result, work.observed = seen, result, seen.partitions
    work.acts = bool(result.operations) and not seen.still_running and not observing
    # The health read with the pass, stored with its write-back (not after it, aside: HealthDue).
    work.reading, work.read_at = ctx.health_in_pass and not ctx.health_reads.fresh(domain), time.monotonic()


async def act(ctx: PassContext, work: DomainWork) -> None:
    """The domain's calls and read-back (its intents committed), or its health read alone."""
    assert work.seen is not None
    domain, target = work.state.domain, work.seen.target
    if not work.acts:
        work.read = await fetch_health(ctx, work.state, target) if work.reading else None
        return
    work.outcomes = await execute(
        ctx.backend,
        target,
        work.result.operations,
        ctx.metrics,
        call_timeout=ctx.call_timeout,
        after_call=ctx.after_call,
    )
    if any(o.status != "completed" for o in work.outcomes):
        ctx.read_backs.forget(domain)
    try:
        work.observed, work.read = await read_back(ctx, work.state, target, health_too=work.reading)
    except FabricError as exc:
        ctx.read_backs.forget(domain)
        # The calls are made and their intents recorded: the next pass adopts what they did.
        work.error = exc


def pass_outcome(ctx: PassContext, work: DomainWork) -> tuple[PassOutcome, PassHealth | None, Plan]:
    """What the pass came to, for its write-back: the outcome, the health read to store, and the plan
    its read-back leaves."""
    seen = work.seen
    assert seen is not None
    # No call made: the fabric as read and the desire are the plan's own, and so is what is left.
    if not work.outcomes and work.observed is seen.partitions:
        again = work.result
    elif nothing_left(work.result, work.outcomes, seen.partitions, work.observed):
        again = Plan([], held=work.result.held)  # the read-back is what the calls promised
    else:  # the partitions the pass's calls created are nico's
        created = created_names(work.outcomes)
        again = plan(replace(work.wanted, owned_names=work.wanted.owned_names | created), work.observed)
    unfinished = any(o.status != "completed" for o in work.outcomes)
    outcome = PassOutcome(
        before=seen.partitions,
        observed=work.observed,
        outcomes=work.outcomes,
        intent_ids=work.intent_ids,
        blocked=work.result.blocked,
        resolved_operations=seen.resolved,
        settled=not again.operations and not again.blocked and not unfinished and not seen.still_running,
    )
    stored = PassHealth(work.read, hold=not ctx.config.place_on_unhealthy) if work.read is not None else None
    return outcome, stored, again


def pass_ended(
    ctx: PassContext,
    work: DomainWork,
    outcome: PassOutcome,
    again: Plan,
    report: WriteBackReport,
    loaded_at: float,
) -> DomainResult:
    """After the write-back: the pass's metrics, its health stored, exported or left due, and its
    result (the pass began to load at ``loaded_at``, monotonic)."""
    seen = work.seen
    assert seen is not None
    domain, state, observed = work.state.domain, work.state, work.observed
    ctx.metrics.gpus_without_home(domain, report.gpus_without_home)
    ctx.metrics.planned(domain, change_counts(again.operations), foreign_gpus=report.foreign_gpus)
    due = None
    if work.read is not None:
        ctx.health_reads.store(domain, work.read_at)
        health.export(ctx.metrics.health, domain, work.read, observed)
    elif not ctx.health_reads.fresh(domain) and not ctx.health_in_pass:
        ctx.health_reads.store(domain)  # taken: one read at a time; forgotten if it fails
        due = HealthDue(seen.target, observed, state.multicast_budget)
    done = pass_result(ctx, state, outcome, work.result, again, report, still_running=seen.still_running)
    outcomes = work.outcomes
    moved = frozenset((i.id, i.version) for i in state.unsettled.values()) if outcomes else frozenset()
    changed = changed_partitions(outcomes, observed)
    return replace(done, changed=changed, health=due, loaded_at=loaded_at, moved=moved)


async def observe_domain(ctx: PassContext, state: statemod.DomainState) -> Observed:
    target = await ctx.observer.target(state.domain, state.chassis_serials)
    tracked = [i.operation_id for i in state.pending_operations() if i.operation_id is not None]
    resolved, still_running = await ctx.observer.operation_states(tracked)  # the NMX-M operations
    cached = ctx.read_backs.fresh(target) if not state.pending_operations() else None
    if cached is not None:
        return Observed(target, resolved, still_running, cached, cached=True)
    partitions = await list_now(ctx, target)
    return Observed(target, resolved, still_running, partitions)


async def read_back(
    ctx: PassContext, state: statemod.DomainState, target: DomainTarget, *, health_too: bool
) -> tuple[list[FabricPartition], health.HealthRead | None]:
    """The listing after the pass's calls and, with ``health_too``, the domain's health beside it."""
    if not health_too:
        return await list_now(ctx, target), None
    return await asyncio.gather(list_now(ctx, target), fetch_health(ctx, state, target))


async def fetch_health(
    ctx: PassContext, state: statemod.DomainState, target: DomainTarget
) -> health.HealthRead | None:
    """The domain's health (its multicast budget as loaded); None when the fabric could not say."""
    return await health.fetch(ctx.backend, state.domain, target, state.multicast_budget)


async def list_now(ctx: PassContext, target: DomainTarget) -> list[FabricPartition]:
    """List the domain's partitions, and keep the listing as the domain's latest read-back."""
    read_at = time.monotonic()
    partitions = await ctx.backend.list_partitions(target)
    ctx.read_backs.store(target, partitions, read_at)
    return partitions


def pass_result(
    ctx: PassContext,
    state: statemod.DomainState,
    outcome: PassOutcome,
    result: Plan,
    again: Plan,
    report: WriteBackReport,
    *,
    still_running: bool,
) -> DomainResult:
    """Metrics of the pass, and what the scheduler should do next about the domain."""
    domain = state.domain
    for latency in report.apply_latencies_ms:
        ctx.metrics.apply_latency.observe(latency)
    unfinished = [o for o in outcome.outcomes if o.status != "completed"]
    error = unfinished[0].error if unfinished else None
    if still_running and error is None:
        running = ", ".join(i.operation_id or "" for i in state.pending_operations())
        error = f"Failed to complete NMX-M operation in time: {running} still running"
    if result.blocked and error is None:
        error = next(iter(result.blocked.values()))
    ctx.metrics.domain_result(
        domain, error=error, partitions=len(outcome.observed), blocked=len(result.blocked)
    )
    operations = len(outcome.outcomes)
    if still_running:
        return DomainResult(domain, "waiting", operations=operations, report=report)
    if unfinished:
        retryable = any(o.retryable for o in unfinished)
        return DomainResult(
            domain, "error", operations, len(unfinished), retryable, unfinished[0].error, True, report
        )
    # Observing, what is left to do stays left: the next pass is the periodic one (or a change's).
    follow_up = bool(again.operations) and ctx.config.mode == "active"
    return DomainResult(domain, "ok", operations, follow_up=follow_up, report=report)


def changed_partitions(
    outcomes: list[Outcome], observed: list[FabricPartition]
) -> tuple[tuple[int, float], ...]:
    """The fabric partition id of each completed change call (a create's from the read-back) and when
    the call ended."""
    ids = {p.name: p.nmx_partition_id for p in observed}
    calls: dict[int | None, tuple[int, float]] = {}
    for o in outcomes:
        if o.status != "completed" or o.call in calls or o.done_at is None:
            continue
        if isinstance(o.op, CreatePartition):
            if o.op.name in ids:
                calls[o.call] = (ids[o.op.name], o.done_at)
        else:
            calls[o.call] = (o.op.partition.nmx_partition_id, o.done_at)
    return tuple(calls.values())
