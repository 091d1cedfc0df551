"""One locked pass over one NVLink domain: load, observe, plan, record intents, execute, read back,
write back.

The pass runs under the domain's PostgreSQL advisory lock, held on the connection that also writes
the domain's intents and results. In observe mode (``nvlink_config.mode``) it stops after the plan:
no intent, no fabric call; the write-back tells the truth about the fabric as it is. It is handed
everything it uses (:class:`PassContext`) and knows nothing of who runs it
(:mod:`nico.reconciler.scheduler` decides when a domain gets a pass).
"""

from __future__ import annotations

import logging
import time
import uuid

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from nico.db.queries import reconciler as queries
from nico.fabric.backend import FabricError
from nico.fabric.observation import FabricObserver
from nico.reconciler import health
from nico.reconciler import state as statemod
from nico.reconciler.intents import record_intents
from nico.reconciler.pass_context import DomainResult, HealthDue, PassContext
from nico.reconciler.pass_steps import DomainWork, act, look, pass_ended, pass_outcome
from nico.reconciler.pass_writeback import pass_write_back
from nico.reconciler.writeback import record_domain_error

log = logging.getLogger(__name__)


def lock_key(domain: uuid.UUID) -> int:
    """The advisory-lock key of a domain: its first 64 bits as a signed bigint."""
    return int.from_bytes(domain.bytes[:8], "big", signed=True)


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
    # The load's transaction, if any, stays open until the plan is known: a pass that changes
    # something writes its intents in it. One desire for the pass's state:
    work = DomainWork(state, state.desire(ctx.config.default_partition_mode, ctx.config.foreign_partitions))
    await look(ctx, work)
    if work.error is not None:
        await conn.rollback()
        return await failed(conn, ctx, domain, work.error)
    if work.acts:  # its intents committed (one round trip) before any call
        work.intent_ids = await record_intents(conn, domain, work.result.operations)
    else:
        await conn.commit()
    await act(ctx, work)
    if work.error is not None:
        return await failed(conn, ctx, domain, work.error, operations=len(work.outcomes))
    outcome, stored, again = pass_outcome(ctx, work)
    report = await pass_write_back(
        conn, ctx.metrics, ctx.config, state, outcome, work.wanted, stored, lock=lock
    )
    return pass_ended(ctx, work, outcome, again, report, loaded_at)


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


def error_label(exc: FabricError, manager: str) -> str:
    """How a fabric failure is recorded on the domain (``manager``: "NMX-C" or "NMX-M")."""
    return (
        f"Failed to reach {manager}: {exc.message}" if exc.retryable else f"{manager} refused: {exc.message}"
    )
