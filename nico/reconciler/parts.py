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
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from nico.db.queries import reconciler as queries
from nico.reconciler import state as statemod
from nico.reconciler.domain_pass import error_label, lock_key, use_registry
from nico.reconciler.intents import intent_rows
from nico.reconciler.part_writeback import DomainWrite, write_back_part
from nico.reconciler.pass_context import DomainResult, PassContext
from nico.reconciler.pass_steps import DomainWork, act, look, pass_ended, pass_outcome
from nico.reconciler.planner import Plan

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
    # The scan's listing, its plan and its state, for each domain as the scan found it.
    scanned = [ctx.read_backs.use_scan(s) for s in states]
    works = [DomainWork(state, state.desire(mode, foreign)) for state, _ in scanned]
    await _each(_look(ctx, w, planned, limit) for w, (_, planned) in zip(works, scanned, strict=True))
    rows: list[dict[str, Any]] = []
    for work in works:
        if work.acts:
            work.intent_ids, mine = intent_rows(work.state.domain, work.result.operations)
            rows += mine
    # Every intent of the part is committed before any of its calls (one round trip).
    await queries.insert_intents(conn, rows, commit=True)
    await conn.commit()
    await _each(_act(ctx, w, limit) for w in works)
    # What each domain's pass came to: (outcome, health to store, the plan its read-back leaves).
    ended = {w.state.domain: pass_outcome(ctx, w) for w in works if w.error is None}
    writes = [
        DomainWrite(w.state, ended[w.state.domain][0], w.wanted, ended[w.state.domain][1])
        for w in works
        if w.error is None
    ]
    errors = {
        w.state.domain: error_label(w.error, ctx.backend.capabilities.manager) for w in works if w.error
    }
    async with AsyncSession(bind=conn, expire_on_commit=False) as session:
        reports = await write_back_part(session, writes, errors, mode, foreign)
        await session.commit()  # committed by the write-back already: nothing is sent
    results = []
    for work in works:
        domain = work.state.domain
        if work.error is not None:
            results.append(_failed(ctx, work, errors[domain]))
        else:
            outcome, _, again = ended[domain]
            results.append(pass_ended(ctx, work, outcome, again, reports[domain], loaded_at))
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


async def _look(ctx: PassContext, work: DomainWork, planned: Plan | None, limit: asyncio.Semaphore) -> None:
    """Observe the domain and plan (``planned``: the scan's plan, if any), within ``limit``."""
    async with limit:
        await look(ctx, work, planned)


async def _act(ctx: PassContext, work: DomainWork, limit: asyncio.Semaphore) -> None:
    """The domain's calls and read-back (its intents committed), or its health read alone."""
    if work.error is not None or work.seen is None:
        return
    async with limit:
        await act(ctx, work)


def _failed(ctx: PassContext, work: DomainWork, message: str) -> DomainResult:
    """A domain whose fabric failed, its error recorded with the part's write-back."""
    assert work.error is not None
    domain = work.state.domain
    ctx.outages.fabric_failed(domain, message)
    ctx.metrics.domain_result(domain, error=message, partitions=None, blocked=0)
    operations = len(work.outcomes)
    return DomainResult(domain, "error", operations, retryable=work.error.retryable, error=message)
