"""A domain pass's write-back on the connection that holds the domain's lock, with the logical-partition
count read in its transaction when a count is due: the gauge then needs no read of its own after the
pass (:mod:`nico.reconciler.partition_count`)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from nico.config import NvLinkConfig
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.planner import DomainDesire
from nico.reconciler.state import DomainState
from nico.reconciler.writeback import PassHealth, PassOutcome, WriteBackReport, write_back


async def pass_write_back(
    conn: AsyncConnection,
    metrics: ReconcilerMetrics,
    config: NvLinkConfig,
    state: DomainState,
    outcome: PassOutcome,
    wanted: DomainDesire,
    stored: PassHealth | None,
    *,
    lock: int | None,
) -> WriteBackReport:
    """:func:`write_back` of ``outcome`` (``wanted``: the pass's desire; ``stored``: the health read
    with the pass; ``lock``: the domain lock let go with the COMMIT), and the count when due."""
    count = metrics.partition_count
    counting = count.due()
    if counting:
        count.begin()  # it covers every commit before it: this one's too, it is in its transaction
    try:
        async with AsyncSession(bind=conn, expire_on_commit=False) as session:
            report = await write_back(
                session,
                state,
                outcome,
                config.default_partition_mode,
                config.foreign_partitions,
                wanted,
                stored,
                unlock=lock,
                count_partitions=counting,
            )
            await session.commit()  # committed by write_back already: nothing is sent
    except BaseException:
        if counting:
            count.failed()
        raise
    if report.logical_partitions is not None:
        metrics.snapshot.logical_partitions = report.logical_partitions
        count.read_with_pass(state.domain)
    else:  # this pass's commit is not counted: its end asks for a count (Figures.after_pass)
        count.with_pass.discard(state.domain)
    return report
