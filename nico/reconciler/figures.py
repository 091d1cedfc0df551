"""The reconciler's gauge figures read from the database: per domain after its passes (through the
domain's indexes, so the cost does not grow with the site), every domain after a full pass, and the
logical-partition count at a bounded rate."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from nico.db.engine import reading
from nico.db.queries import reconciler as queries
from nico.reconciler.metrics import DomainFigures, ReconcilerMetrics
from nico.reconciler.outages import Outages
from nico.reconciler.partition_count import PartitionCount

log = logging.getLogger(__name__)


class Figures:
    """Reads the gauge figures into ``metrics``."""

    def __init__(
        self, engine: AsyncEngine, metrics: ReconcilerMetrics, outages: Outages | None = None
    ) -> None:
        self.engine = engine
        self.metrics = metrics
        self.outages = outages or Outages()
        # Domains whose passes ended and whose figures are still to read (one task reads them).
        self._due: set[uuid.UUID] = set()
        # Domains whose pass's write-back read their figures (:meth:`passed`): none to read after it.
        self._fresh: set[uuid.UUID] = set()
        self._task: asyncio.Task[None] | None = None
        self.count: PartitionCount = metrics.partition_count

    def passed(self, domain: uuid.UUID, rows: Iterable[Any] | None) -> None:
        """The domain's figures as its pass's write-back read them, in its transaction (``rows`` of
        ``queries.domain_figures``; None: the pass made no write-back, they are read after it)."""
        if rows is not None:
            self.metrics.domain_figures(_figures(rows), asked={domain})
            self._fresh.add(domain)

    def after_pass(self, domain: uuid.UUID) -> None:
        """Read the domain's figures soon, without holding it (passes ending meanwhile are read
        together), unless its pass read them (:meth:`passed`); the logical-partition count follows,
        unless the pass's write-back read it too (then a read is made only for the tenants' usage,
        when that is due)."""
        if domain in self._fresh:
            self._fresh.discard(domain)
        else:
            self._due.add(domain)
        if not self.count.passed(domain) and not self._due and self.metrics.quotas.fresh():
            return  # nothing to read
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._refresh(), name="nvlink-figures")

    async def _refresh(self) -> None:
        if not self._due:  # only passes that read their own figures ended
            await self._count_soon(ask=False)
        while self._due:
            domains = list(self._due)
            self._due.clear()
            await self.domains(domains, ask=False)

    async def domains(self, domains: list[uuid.UUID], *, ask: bool = True) -> None:
        """The gauges follow a targeted pass at once: the touched domains' figures. A failure leaves
        the old figures; the next pass or full pass refreshes them. The logical-partition count
        follows shortly after (``ask``: the domains' passes may have changed it; the passes that
        :meth:`after_pass` follows asked already, or read it themselves)."""
        try:
            async with reading(self.engine) as conn:
                rows = await queries.domain_figures(conn, domains)
        except Exception as exc:
            if not self.outages.database_failed(exc):
                log.warning("gauge figures of %d domains not refreshed: %s", len(domains), exc)
        else:
            self.metrics.domain_figures(_figures(rows), asked=set(domains))
        await self._count_soon(ask=ask)

    async def everything(self) -> None:
        """Every domain's figures and the logical-partition count (a full pass)."""
        self.count.begin()
        try:
            async with reading(self.engine) as conn:
                rows = await queries.domain_figures(conn, None)
                logical = await queries.logical_partition_count(conn)
                await self.metrics.quotas.refresh(conn)  # each tenant's usage beside its limits
        except BaseException:
            self.count.failed()
            raise
        self.metrics.all_figures(_figures(rows), logical_partitions=logical)

    async def _count_soon(self, *, ask: bool = True) -> None:
        """The logical-partition count (:mod:`nico.reconciler.partition_count`), asked for with ``ask``
        (a read now if due); as the passes asked, a read on its own once late (:meth:`count_due_at`),
        however many ask. The tenants' usage is read with it, or alone when due and the count is not."""
        if ask:
            self.count.asked = True
        due_at = self.count.due_at()
        if due_at is not None and (self.count.due() if ask else time.monotonic() >= due_at):
            await self.count_partitions()
        elif not self.metrics.quotas.fresh():
            await self._usage()

    def count_due_at(self) -> float | None:
        """When (monotonic) the count asked for is due; None when none is asked for."""
        return self.count.due_at()

    async def count_partitions(self) -> None:
        self.count.begin()
        try:
            async with reading(self.engine) as conn:
                count = await queries.logical_partition_count(conn)
                await self.metrics.quotas.refresh(conn, unless_fresh=True)  # tenants' usage and limits
        except Exception as exc:
            self.count.failed()
            if not self.outages.database_failed(exc):
                log.warning("logical partitions not counted: %s", exc)
            return
        self.metrics.snapshot.logical_partitions = count

    async def _usage(self) -> None:
        """The tenants' usage alone (the count was read with a pass's write-back)."""
        try:
            async with reading(self.engine) as conn:
                await self.metrics.quotas.refresh(conn, unless_fresh=True)
        except Exception as exc:
            if not self.outages.database_failed(exc):
                log.warning("tenants' usage not read: %s", exc)

    def stop(self) -> list[asyncio.Task[None]]:
        """The read under way, if any, to cancel."""
        task, self._task = self._task, None
        return [task] if task is not None and not task.done() else []


def _figures(rows: Iterable[Any]) -> dict[uuid.UUID, DomainFigures]:
    """Gauge figures by domain from :func:`queries.domain_figures` rows."""
    found = {}
    for domain, physical, pending, free, used, reserved in rows:
        # A domain with machines in use or held in reserve cannot host a whole-domain job.
        found[domain] = DomainFigures(physical, pending, free, free if used or reserved else 0, reserved)
    return found
