"""The full pass's locked passes, a part of domains at a time: what
:func:`nico.reconciler.domain_pass.reconcile_domain` does for one domain, done for several together
where the database is concerned.

One round trip takes the part's advisory locks (each domain whose lock another reconciler holds is
left to it: ``busy``) and loads their state; each domain is observed and planned on its own; one
transaction records the intents of every domain that changes something and commits them before any
call; the domains' calls and read-backs go on at once (each domain has its own manager), at most
``reconcile_concurrency`` steps at once (:class:`Limits`); one transaction writes every domain's
read-back back (:mod:`nico.reconciler.part_writeback`), then the locks go in one statement. A domain
whose fabric fails is recorded as failed in that transaction while the others' read-backs land;
everything else (observe mode, foreign partitions, health read with the pass, metrics, echoes, Ready
only from a listing made in the pass) is as for a single domain. A tenant's pass of a domain of the
part waits for the part to end: the part is kept small (:data:`PART_SIZE`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from nico.db.queries import reconciler as queries
from nico.fabric.backend import FabricError, FabricPartition
from nico.reconciler import health
from nico.reconciler import state as statemod
from nico.reconciler.domain_pass import (
    DomainResult,
    HealthDue,
    Observed,
    PassContext,
    changed_partitions,
    error_label,
    fetch_health,
    list_now,
    lock_key,
    observe_domain,
    pass_result,
    read_back,
    use_registry,
)
from nico.reconciler.executor import Outcome, created_names, execute
from nico.reconciler.health import HealthRead
from nico.reconciler.intents import intent_rows
from nico.reconciler.operations import change_counts
from nico.reconciler.part_writeback import DomainWrite, write_back_part
from nico.reconciler.planner import DomainDesire, Plan, plan
from nico.reconciler.writeback import PassHealth, PassOutcome, WriteBackReport

log = logging.getLogger(__name__)

# Domains a part takes at most: its locks are held from its load to its write-back's commit, so a
# tenant's pass of one of them waits up to the part's whole pass (a first convergence at 2,000 racks
# on two busy cores: 216 ms at the median, 448 ms at most, for parts of 12-13); small enough that
# this stays under a second, large enough that a part's statements cost a fraction of one domain's.
PART_SIZE = 16
# Parts passed at once: while two wait on the database (their load, intents or write-back), a third's
# plans and calls keep this process busy (at 2,000 racks on two cores, three at once ended the first
# pass sooner than two; more make each part, and a tenant's pass waiting for one, longer).
PARTS_AT_ONCE = 3


@dataclass(frozen=True)
class Limits:
    """The full pass's parts under way at once, and its domains' fabric steps at once (as many as
    ``reconcile_concurrency`` domains). A part waits for the loop's passes before it takes its locks
    (the scheduler's ``Yielding`` limit), never while it holds them: a tenant's pass of one of its
    domains would wait for it the longer."""

    parts: asyncio.Semaphore
    steps: asyncio.Semaphore

    @classmethod
    def of(cls, concurrency: int) -> Limits:
        return cls(asyncio.Semaphore(PARTS_AT_ONCE), asyncio.Semaphore(concurrency))


@dataclass
class _Work:
    """One domain of the part as its pass goes on."""

    state: statemod.DomainState
    wanted: DomainDesire = field(init=False)
    seen: Observed | None = None
    result: Plan = field(default_factory=lambda: Plan([]))
    acts: bool = False  # changes the fabric: intents recorded, calls made
    reading: bool = False  # its health is read with the pass
    read_at: float = 0.0
    intent_ids: dict[int, uuid.UUID] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    observed: list[FabricPartition] = field(default_factory=list)
    read: HealthRead | None = None
    error: FabricError | None = None


def split(domains: list[uuid.UUID]) -> list[list[uuid.UUID]]:
    """The domains in parts of :data:`PART_SIZE` at most, as even as can be."""
    count = -(-len(domains) // PART_SIZE)
    size = -(-len(domains) // count) if count else 1
    return [domains[i : i + size] for i in range(0, len(domains), size)]


async def pass_part(
    ctx: PassContext, domains: Sequence[uuid.UUID], limit: asyncio.Semaphore
) -> list[DomainResult]:
    """:func:`reconcile_part` with each domain's health read with its pass (a part is never the loop's:
    the full pass's passes read it so), told to ``ctx.outages``; a database outage or a bug fails
    each domain."""
    if not domains:
        return []
    try:
        results = await reconcile_part(replace(ctx, health_in_pass=True), domains, limit)
    except Exception as exc:  # a database outage or a bug: report, retry later
        if not ctx.outages.database_failed(exc):
            log.exception("reconciling %d domains (%s, ...) failed", len(domains), domains[0])
        return [DomainResult(d, "error", error=f"{type(exc).__name__}: {exc}") for d in domains]
    ctx.outages.database_ok()
    for result in results:
        if result.status == "ok":
            ctx.outages.fabric_ok(result.domain)
    return results


async def reconcile_part(
    ctx: PassContext, domains: Sequence[uuid.UUID], limit: asyncio.Semaphore
) -> list[DomainResult]:
    """Take the locks of ``domains`` and make one pass over each domain locked (module docstring);
    each domain's fabric steps within ``limit``. Busy and gone domains have a result too."""
    can = ctx.backend.capabilities
    keys = list(dict.fromkeys(lock_key(d) for d in domains))  # (two domains may share a key: once)
    async with ctx.engine.connect() as conn:
        loaded_at = time.monotonic()
        try:
            states, registry, taken = await statemod.load_part(
                conn, domains, keys, endpoints=can.per_endpoint, credentials=can.credentials is not None
            )
        except BaseException:
            await conn.invalidate()  # some locks may be taken: end the session, and them with it
            raise
        locked = [d for d in domains if lock_key(d) in taken]
        results = [DomainResult(d, "busy") for d in domains if lock_key(d) not in taken]
        if not locked:
            await conn.commit()
            return results
        try:
            use_registry(ctx.observer, registry)
            results += [DomainResult(d, "gone") for d in locked if d not in states]
            mine = [states[d] for d in locked if d in states]
            return results + await _locked_part(conn, ctx, mine, limit, loaded_at)
        finally:
            try:
                await conn.rollback()
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                await queries.release_domain_locks(conn, [k for k in keys if k in taken])
            except Exception:  # the session is gone and its locks with it; never reuse it
                await conn.invalidate()


async def _locked_part(
    conn: AsyncConnection,
    ctx: PassContext,
    states: list[statemod.DomainState],
    limit: asyncio.Semaphore,
    loaded_at: float,
) -> list[DomainResult]:
    """The part's passes, once its locks are taken and its states loaded, in the load's transaction."""
    mode, foreign = ctx.config.default_partition_mode, ctx.config.foreign_partitions
    works = [_Work(s) for s in states]
    await _each(_look(ctx, w, limit) for w in works)
    rows: list[dict[str, Any]] = []
    for work in works:
        if work.acts:
            work.intent_ids, mine = intent_rows(work.state.domain, work.result.operations)
            rows += mine
    # Every intent of the part is committed before any of its calls (one round trip).
    await queries.insert_intents(conn, rows, commit=True)
    await conn.commit()
    await _each(_act(ctx, w, limit) for w in works)
    writes = {w.state.domain: _written(ctx, w) for w in works if w.error is None}
    errors = {
        w.state.domain: error_label(w.error, ctx.backend.capabilities.manager) for w in works if w.error
    }
    async with AsyncSession(bind=conn, expire_on_commit=False) as session:
        reports = await write_back_part(session, [w for w, _ in writes.values()], errors, mode, foreign)
        await session.commit()  # committed by the write-back already: nothing is sent
    results = []
    for work in works:
        domain = work.state.domain
        if work.error is not None:
            results.append(_failed(ctx, work, errors[domain]))
        else:
            again = writes[domain][1]
            results.append(_done(ctx, work, writes[domain][0], again, reports[domain], loaded_at))
    return results


async def _each(steps: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run the domains' steps at once; the first to fail (a bug: a fabric error is the domain's own)
    stops the others (no call is made after the part gave up), and its error is raised."""
    tasks = [asyncio.ensure_future(step) for step in steps]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()  # those still running (none, unless one failed or the part is stopped)


async def _look(ctx: PassContext, work: _Work, limit: asyncio.Semaphore) -> None:
    """Observe the domain and plan (as :func:`domain_pass.locked_pass` does): whether it acts."""
    observing = ctx.config.mode == "observe"
    async with limit:
        try:
            # The scan's listing, its plan and its state's desire, when the domain is as the scan found it.
            work.state, planned = ctx.read_backs.use_scan(work.state)
            work.wanted = work.state.desire(ctx.config.default_partition_mode, ctx.config.foreign_partitions)
            seen = await observe_domain(ctx, work.state)
            result = planned if planned is not None and seen.cached else plan(work.wanted, seen.partitions)
            if seen.cached and (observing or not result.operations):
                # Nothing to change by the last read-back: only a listing now may say what is Ready.
                seen = replace(seen, partitions=await list_now(ctx, seen.target), cached=False)
                result = plan(work.wanted, seen.partitions)
        except FabricError as exc:
            ctx.read_backs.forget(work.state.domain)
            work.error = exc
            return
    work.seen, work.result, work.observed = seen, result, seen.partitions
    work.acts = bool(result.operations) and not seen.still_running and not observing
    # The health read with the pass, stored with its write-back (not after it, aside: HealthDue).
    domain = work.state.domain
    work.reading, work.read_at = ctx.health_in_pass and not ctx.health_reads.fresh(domain), time.monotonic()


async def _act(ctx: PassContext, work: _Work, limit: asyncio.Semaphore) -> None:
    """The domain's calls and read-back (its intents committed), or its health read alone."""
    if work.error is not None or work.seen is None:
        return
    domain, target = work.state.domain, work.seen.target
    async with limit:
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


def _written(ctx: PassContext, work: _Work) -> tuple[DomainWrite, Plan]:
    """The domain's share of the write-back, and the plan its read-back leaves."""
    assert work.seen is not None
    seen = work.seen
    unfinished = [o for o in work.outcomes if o.status != "completed"]
    desire = replace(work.wanted, owned_names=work.wanted.owned_names | created_names(work.outcomes))
    again = plan(desire, work.observed) if work.outcomes else work.result
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
    return DomainWrite(work.state, outcome, work.wanted, stored), again


def _done(
    ctx: PassContext, work: _Work, write: DomainWrite, again: Plan, report: WriteBackReport, loaded_at: float
) -> DomainResult:
    """Metrics of the domain's pass and its result (as :func:`domain_pass.locked_pass` has them)."""
    assert work.seen is not None
    domain, state, observed = work.state.domain, work.state, work.observed
    ctx.metrics.gpus_without_home(domain, report.gpus_without_home)
    ctx.metrics.planned(domain, change_counts(again.operations), foreign_gpus=report.foreign_gpus)
    due = None
    if work.read is not None:
        ctx.health_reads.store(domain, work.read_at)
        health.export(ctx.metrics.health, domain, work.read, observed)
    elif not ctx.health_reads.fresh(domain) and not ctx.health_in_pass:
        ctx.health_reads.store(domain)  # taken: one read at a time; forgotten if it fails
        due = HealthDue(work.seen.target, observed, state.multicast_budget)
    still_running = work.seen.still_running
    done = pass_result(ctx, state, write.outcome, work.result, again, report, still_running=still_running)
    outcomes = work.outcomes
    moved = frozenset((i.id, i.version) for i in state.unsettled.values()) if outcomes else frozenset()
    changed = changed_partitions(outcomes, observed)
    return replace(done, changed=changed, health=due, loaded_at=loaded_at, moved=moved)


def _failed(ctx: PassContext, work: _Work, message: str) -> DomainResult:
    """A domain whose fabric failed, its error recorded with the part's write-back."""
    assert work.error is not None
    domain = work.state.domain
    ctx.outages.fabric_failed(domain, message)
    ctx.metrics.domain_result(domain, error=message, partitions=None, blocked=0)
    operations = len(work.outcomes)
    return DomainResult(domain, "error", operations, retryable=work.error.retryable, error=message)
