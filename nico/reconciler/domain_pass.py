"""One locked pass over one NVLink domain: load, observe, plan, record intents, execute, read back,
write back.

The pass runs under the domain's PostgreSQL advisory lock, held on the connection that also writes
the domain's intents and results. In observe mode (``nvlink_config.mode``) it stops after the plan:
no intent, no fabric call; the write-back tells the truth about the fabric as it is. It is handed
everything it uses (:class:`PassContext`) and knows nothing of who runs it
(:mod:`nico.reconciler.scheduler` decides when a domain gets a pass).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from nico.config import NvLinkConfig
from nico.db.queries import reconciler as queries
from nico.fabric.backend import DomainTarget, FabricBackend, FabricError, FabricPartition
from nico.fabric.observation import FabricObserver
from nico.reconciler import health
from nico.reconciler import state as statemod
from nico.reconciler.executor import AfterCall, Outcome, created_names, execute
from nico.reconciler.intents import record_intents
from nico.reconciler.last_reads import HealthReads, ReadBacks
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.operations import CreatePartition, change_counts
from nico.reconciler.outages import Outages
from nico.reconciler.pass_writeback import pass_write_back
from nico.reconciler.planner import DomainDesire, Plan, plan
from nico.reconciler.writeback import PassHealth, PassOutcome, WriteBackReport, record_domain_error

log = logging.getLogger(__name__)

DomainStatus = Literal["ok", "busy", "error", "waiting", "gone"]


def lock_key(domain: uuid.UUID) -> int:
    """The advisory-lock key of a domain: its first 64 bits as a signed bigint."""
    return int.from_bytes(domain.bytes[:8], "big", signed=True)


@dataclass
class DomainResult:
    domain: uuid.UUID
    status: DomainStatus
    operations: int = 0
    failed: int = 0
    retryable: bool = True
    error: str | None = None
    follow_up: bool = False  # the read-back still differs from the desire: look again soon
    report: WriteBackReport | None = None
    # The fabric partition id each completed change call touched and when it ended, one entry per call
    # (a partition the pass changed twice is here twice): the partition events those calls will bring
    # (``echoes.Echoes``).
    changed: tuple[tuple[int, float], ...] = ()
    health: HealthDue | None = None  # the domain's health is to be read now (:func:`read_health`)
    # When (monotonic) the pass began to load the domain's state: every commit the reconciler had
    # been told of (NOTIFY) before then is in what the pass acted on.
    loaded_at: float | None = None
    # The instances (id, NVLink config version) whose change the pass carried out on the fabric (none
    # when it made no call): the scheduler spaces the passes of a domain whose passes keep moving one
    # to a new version (``flapping``).
    moved: frozenset[tuple[uuid.UUID, int]] = frozenset()


@dataclass(frozen=True)
class HealthDue:
    """A health read a pass leaves to be made after it: where, the partitions it read back, and the
    domain's multicast budget as the pass loaded it (None: never read; the health read asks the
    fabric)."""

    target: DomainTarget
    partitions: list[FabricPartition]
    budget: int | None = None


@dataclass(frozen=True)
class PassContext:
    """Everything a pass uses, handed in by whoever runs it."""

    engine: AsyncEngine  # the pass holds one connection: the domain's lock, its load and its writes
    backend: FabricBackend
    observer: FabricObserver  # where the domain's manager is, and its pending operations
    config: NvLinkConfig
    metrics: ReconcilerMetrics
    read_backs: ReadBacks
    health_reads: HealthReads
    after_call: AfterCall | None = None
    outages: Outages = field(default_factory=Outages)
    # The domain's health, when due, is read during the pass and stored with its write-back; otherwise
    # after it, on a connection of its own (the loop's passes: the domain is free again sooner).
    health_in_pass: bool = False

    @property
    def call_timeout(self) -> float:
        return self.config.fabric_call_timeout.total_seconds()


async def reconcile_domain(ctx: PassContext, domain: uuid.UUID) -> DomainResult:
    """Take the domain's lock (``busy`` if another reconciler holds it) and make one pass."""
    can = ctx.backend.capabilities  # what the registry read is for
    async with ctx.engine.connect() as conn:
        # The load and the intents need no transaction (psycopg's BEGIN waits a round trip of its own).
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        key = lock_key(domain)
        loaded_at = time.monotonic()
        try:
            # The lock is the session's; the load goes out with it (one round trip).
            state, registry, locked = await statemod.load_one(
                conn, domain, lock=key, endpoints=can.per_endpoint, credentials=can.credentials is not None
            )
        except BaseException:
            await conn.invalidate()  # the lock may be taken: end the session, and the lock with it
            raise
        if not locked:
            return DomainResult(domain, "busy")
        released = False
        try:
            use_registry(ctx.observer, registry)
            result = await locked_pass(conn, ctx, domain, state, loaded_at, lock=key)
            released = result.report is not None and result.report.unlocked  # with the write-back's COMMIT
            return result
        finally:
            if not released:
                await _let_go(conn, key)


async def _let_go(conn: AsyncConnection, key: int) -> None:
    """End the pass's transaction, if open, and let go of its domain lock ``key``."""
    try:
        await conn.rollback()
        # Outside any transaction: one round trip (the pool puts the isolation level back).
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await queries.release_domain_lock(conn, key)
    except Exception:  # the session is gone and its lock with it; never reuse it
        await conn.invalidate()


@dataclass
class Observed:
    target: DomainTarget
    resolved: dict[str, str]  # NMX-M operation id -> terminal state
    still_running: bool
    partitions: list[FabricPartition]
    cached: bool = False  # ``partitions`` is the last pass's read-back, not a listing made now


async def locked_pass(
    conn: AsyncConnection,
    ctx: PassContext,
    domain: uuid.UUID,
    state: statemod.DomainState | None,
    loaded_at: float,
    *,
    lock: int | None = None,
) -> DomainResult:
    """The pass, once the domain's lock (``lock``: let go with the write-back's COMMIT, then
    ``report.unlocked``) is taken and its state loaded (at ``loaded_at``, monotonic)."""
    if state is None:
        return DomainResult(domain, "gone")
    reads = ctx.read_backs
    mode, observing = ctx.config.default_partition_mode, ctx.config.mode == "observe"
    # The load's transaction, if any, stays open until the plan is known: a pass that changes
    # something writes its intents in it. One desire for the pass's state:
    wanted = state.desire(mode, ctx.config.foreign_partitions)
    try:
        seen = await observe_domain(ctx, state)
        result = plan(wanted, seen.partitions)
        if seen.cached and (observing or not result.operations):
            # Nothing to change by the last read-back: only a listing now may say what is Ready.
            listed = await list_now(ctx, seen.target)
            if listed != seen.partitions:  # (the same fabric: the same plan)
                result = plan(wanted, listed)
            seen = replace(seen, partitions=listed, cached=False)
    except FabricError as exc:
        await conn.rollback()
        reads.forget(domain)
        return await failed(conn, ctx, domain, exc)
    outcomes: list[Outcome] = []
    intent_ids: dict[int, uuid.UUID] = {}
    observed = seen.partitions
    # The health read with the pass, stored with its write-back (not after it, aside: HealthDue).
    reading, read_at = ctx.health_in_pass and not ctx.health_reads.fresh(domain), time.monotonic()
    if not result.operations or seen.still_running or observing:
        await conn.commit()
        read = await fetch_health(ctx, state, seen.target) if reading else None
    else:
        intent_ids, outcomes = await _apply(conn, ctx, domain, seen.target, result)
        if any(o.status != "completed" for o in outcomes):
            reads.forget(domain)
        try:
            observed, read = await read_back(ctx, state, seen.target, health_too=reading)
        except FabricError as exc:
            reads.forget(domain)
            # The calls are made and their intents recorded: the next pass adopts what they did.
            return await failed(conn, ctx, domain, exc, operations=len(outcomes))
    unfinished = [o for o in outcomes if o.status != "completed"]
    # No call made: the fabric as read and the desire are the plan's own, and so is what is left.
    again = result if not outcomes and observed is seen.partitions else _again(wanted, outcomes, observed)
    outcome = PassOutcome(
        before=seen.partitions,
        observed=observed,
        outcomes=outcomes,
        intent_ids=intent_ids,
        blocked=result.blocked,
        resolved_operations=seen.resolved,
        settled=not again.operations and not again.blocked and not unfinished and not seen.still_running,
    )
    stored = PassHealth(read, hold=not ctx.config.place_on_unhealthy) if read is not None else None
    report = await pass_write_back(conn, ctx.metrics, ctx.config, state, outcome, wanted, stored, lock=lock)
    ctx.metrics.gpus_without_home(domain, report.gpus_without_home)
    ctx.metrics.planned(domain, change_counts(again.operations), foreign_gpus=report.foreign_gpus)
    due = None
    if read is not None:
        ctx.health_reads.store(domain, read_at)
        health.export(ctx.metrics.health, domain, read, observed)
    elif not ctx.health_reads.fresh(domain) and not ctx.health_in_pass:
        ctx.health_reads.store(domain)  # taken: one read at a time; forgotten if it fails
        due = HealthDue(seen.target, observed, state.multicast_budget)
    done = pass_result(ctx, state, outcome, result, again, report, still_running=seen.still_running)
    moved = frozenset((i.id, i.version) for i in state.unsettled.values()) if outcomes else frozenset()
    return replace(
        done, changed=changed_partitions(outcomes, observed), health=due, loaded_at=loaded_at, moved=moved
    )


def _again(wanted: DomainDesire, outcomes: list[Outcome], observed: list[FabricPartition]) -> Plan:
    """What is left to do by the read-back after the pass's calls (the partitions they created are
    nico's)."""
    return plan(replace(wanted, owned_names=wanted.owned_names | created_names(outcomes)), observed)


async def read_health(ctx: PassContext, domain: uuid.UUID, due: HealthDue) -> None:
    """Read, store and export the domain's health a pass left due, on a connection of its own and
    without the domain's lock (a pass may run meanwhile: health rows are only ever updated)."""
    async with ctx.engine.connect() as conn:
        found = await health.observe(
            conn,
            ctx.backend,
            ctx.metrics.health,
            domain,
            due.target,
            due.partitions,
            place_on_unhealthy=ctx.config.place_on_unhealthy,
            budget=due.budget,
        )
    if found is None:
        ctx.health_reads.forget(domain)  # the next pass tries again


async def refresh_registry(conn: AsyncConnection, observer: FabricObserver) -> None:
    """Where the managers are and how to sign in, as stored now: NMX-C endpoints and NMX-M
    credentials added or changed while the reconciler runs are used from the next pass on (with none
    stored, the backend keeps the credentials it was built with)."""
    use_registry(
        observer, statemod.Registry(await statemod.endpoints(conn), await queries.nmxm_credentials(conn))
    )


def use_registry(observer: FabricObserver, registry: statemod.Registry) -> None:
    """Use the registry as stored (see :func:`refresh_registry`; a domain's pass, its chassis' rows)."""
    observer.use_registry(registry.endpoints, registry.nmxm_credentials, covers=registry.covers)


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


async def _apply(
    conn: AsyncConnection, ctx: PassContext, domain: uuid.UUID, target: DomainTarget, result: Plan
) -> tuple[dict[int, uuid.UUID], list[Outcome]]:
    """Record the plan's intents (in the load's transaction, if any) and commit them before any call
    (one round trip), then make the calls."""
    intent_ids = await record_intents(conn, domain, result.operations)
    outcomes = await execute(
        ctx.backend,
        target,
        result.operations,
        ctx.metrics,
        call_timeout=ctx.call_timeout,
        after_call=ctx.after_call,
    )
    return intent_ids, outcomes


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


async def failed(
    conn: AsyncConnection, ctx: PassContext, domain: uuid.UUID, exc: FabricError, *, operations: int = 0
) -> DomainResult:
    """Record a fabric failure on the domain."""
    message = error_label(exc, ctx.backend.capabilities.manager)
    ctx.outages.fabric_failed(domain, message)
    async with AsyncSession(bind=conn, expire_on_commit=False) as session:
        await record_domain_error(session, domain, message)
        await session.commit()
    ctx.metrics.domain_result(domain, error=message, partitions=None, blocked=0)
    return DomainResult(domain, "error", operations, retryable=exc.retryable, error=message)


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


def error_label(exc: FabricError, manager: str) -> str:
    """How a fabric failure is recorded on the domain (``manager``: "NMX-C" or "NMX-M")."""
    return (
        f"Failed to reach {manager}: {exc.message}" if exc.retryable else f"{manager} refused: {exc.message}"
    )
