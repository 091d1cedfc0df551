"""Full passes beside changes, and several reconcilers: a change is reconciled while the full pass
still runs (it never queues behind the scan, nor behind the scan's share of the concurrency limit);
two reconcilers split a first pass with no domain passed twice; and the domains of one that stops are
looked at by the other at once, not at its next periodic pass. At start-up nothing but the first full
pass reads every domain (no pass of every domain beside it)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession
from typer.testing import CliRunner

from nico import serving
from nico.cli import app
from nico.config import NvLinkConfig, Settings
from nico.db.engine import make_engine
from nico.db.enums import InstanceStatus
from nico.db.models import Instance
from nico.db.queries import reconciler as reconciler_queries
from nico.fabric.backend import DomainTarget, FabricGpu
from nico.reconciler import scans
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.pass_context import DomainResult, PassContext
from nico.reconciler.runtime import pool_size
from nico.reconciler.scans import FullPassReport
from nico.reconciler.scheduler import Reconciler
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place, seed
from tests.support.waiting import stop_within, wait_for


class HeldListing(InProcessBackend):
    """GPU listings of one domain (the deep scan's, a first full pass's) wait until released: a full
    pass that cannot end before then. A pass for a change lists partitions only."""

    def __init__(self, fabric: SimFabric, held: uuid.UUID) -> None:
        super().__init__(fabric, call_timeout=1.0)
        self.held = held
        self.release = asyncio.Event()
        self.waiting = 0

    async def list_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        if target.domain_uuid == self.held:
            self.waiting += 1
            await self.release.wait()
        return await super().list_gpus(target)


async def ready(session: AsyncSession, instance_id: uuid.UUID) -> bool:
    found = await session.get(Instance, instance_id, populate_existing=True)
    return found is not None and found.status == InstanceStatus.READY


async def test_a_change_is_reconciled_while_the_first_full_pass_is_still_scanning(
    session: AsyncSession, site: SimSite, make_reconciler: MakeReconciler
) -> None:
    d0, d1 = site.domains
    backend = HeldListing(site.fabric, d1)
    # One pass at a time: a scan holding the only place would keep a change's pass waiting, were the
    # full pass and the changes' passes to share their limit.
    reconciler = make_reconciler(backend, reconcile_concurrency=1)
    running = asyncio.create_task(reconciler.run())
    try:
        await wait_for(lambda: backend.waiting > 0, within=10, what="the full pass's scan held on a domain")
        lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
        instance = await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp))

        await wait_for(lambda: ready(session, instance.id), within=10, what="the new instance Ready")

        assert reconciler._full is not None and not reconciler._full.done()  # the scan still runs
        assert reconciler.full_passes == 0
        backend.release.set()
        await wait_for(lambda: reconciler.full_passes == 1, within=10, what="the full pass's end")
    finally:
        backend.release.set()
        running.cancel()
        await stop_within("the reconciler", asyncio.gather(running, return_exceptions=True))
        await backend.close()


@pytest.fixture
async def wide(session: AsyncSession) -> SimSite:
    return await seed(session, SimFabric(racks=6, seed=11))


def counted(
    reconcile_domain: Callable[[uuid.UUID], Awaitable[DomainResult]], passes: Counter[uuid.UUID]
) -> Callable[[uuid.UUID], Awaitable[DomainResult]]:
    async def counting(domain: uuid.UUID) -> DomainResult:
        passes[domain] += 1
        return await reconcile_domain(domain)

    return counting


async def first_passes(*reconcilers: Reconciler) -> list[asyncio.Task[None]]:
    """Start the reconcilers together (each has its slot before any first pass) and wait for every
    first full pass to end."""
    for r in reconcilers:
        await r.members.join()
    tasks = [asyncio.create_task(r.run()) for r in reconcilers]
    await wait_for(lambda: all(r.last_full for r in reconcilers), within=30, what="the first full passes")
    return tasks


@contextlib.asynccontextmanager
async def two_running(
    wide: SimSite, make_reconciler: MakeReconciler
) -> AsyncIterator[tuple[Reconciler, Reconciler]]:
    """Two reconcilers on the site, their first full passes ended; stopped afterwards."""
    a, b = (make_reconciler(InProcessBackend(wide.fabric, call_timeout=1.0)) for _ in range(2))
    tasks = await first_passes(a, b)
    try:
        yield a, b
    finally:
        for task in tasks:
            task.cancel()
        await stop_within("the reconcilers", asyncio.gather(*tasks, return_exceptions=True))


async def test_two_reconcilers_split_a_first_pass_and_one_takes_over_when_the_other_stops(
    session: AsyncSession, wide: SimSite, make_reconciler: MakeReconciler
) -> None:
    lp = await f.logical_partition(session, wide.nv.tenant, wide.nv.site)
    for domain in wide.domains:
        await place(session, wide, wide.machines[domain][0], dict.fromkeys(range(4), lp))
    a, b = (make_reconciler(InProcessBackend(wide.fabric, call_timeout=1.0)) for _ in range(2))
    passes: Counter[uuid.UUID] = Counter()
    for r in (a, b):
        setattr(r, "reconcile_domain", counted(r.reconcile_domain, passes))  # noqa: B010
    tasks = await first_passes(a, b)
    try:
        assert a.last_full is not None and b.last_full is not None
        # Each scanned a share, and the shares add up to the site: no domain was scanned twice.
        assert a.last_full.domains > 0 and b.last_full.domains > 0
        assert a.last_full.domains + b.last_full.domains == len(wide.domains)
        assert not set(a.last_full.results) & set(b.last_full.results)  # nor passed by both
        # One locked pass per domain in all (the full passes', a part at a time): no pass of the
        # loop's for every domain at start-up beside the scan.
        assert not passes
        assert Counter([*a.last_full.results, *b.last_full.results]) == Counter(wide.domains)
        assert all(r.status == "ok" for r in [*a.last_full.results.values(), *b.last_full.results.values()])
        assert a.full_passes == b.full_passes == 1
        share_of_b = [d for d in wide.domains if b.members.covers(d)]
        assert share_of_b and not any(a.members.covers(d) for d in share_of_b)

        tasks[1].cancel()  # b stops: its session, and its slot, end
        await asyncio.gather(tasks[1], return_exceptions=True)

        def taken_over() -> bool:
            return a.full_passes >= 2 and a.last_full is not None and a.last_full.domains == len(wide.domains)

        # a's periodic pass is a minute away: only the takeover brings a pass over b's share this soon.
        await wait_for(taken_over, within=10, what="a full pass of a's over b's share too")
        assert a.members.held == (a.members.slot,) and all(a.members.covers(d) for d in share_of_b)
    finally:
        for task in tasks:
            task.cancel()
        await stop_within("the reconcilers", asyncio.gather(*tasks, return_exceptions=True))


async def test_each_of_two_reconcilers_deep_scans_full_parts_of_its_own_share(
    session: AsyncSession, wide: SimSite, make_reconciler: MakeReconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deep scan's part is ``DEEP_PART`` of the reconciler's own domains: with two reconcilers each
    scans its half of the site in half as many parts as one alone. Were a part its share of
    ``DEEP_PART`` of the site's domains, each would scan (and pass) as many parts as one alone, each
    half full, and two would end their first passes no sooner than one."""
    monkeypatch.setattr(scans, "DEEP_PART", 2)
    sizes: dict[int, list[int]] = {}  # each reconciler's (by its metrics) deep scan parts' sizes
    scan = scans.scan

    async def recorded(
        ctx: PassContext, limit: asyncio.Semaphore, report: FullPassReport, domains: Collection[uuid.UUID]
    ) -> list[uuid.UUID]:
        if report.deep:
            sizes.setdefault(id(ctx.metrics), []).append(len(domains))
        return await scan(ctx, limit, report, domains)

    monkeypatch.setattr(scans, "scan", recorded)
    async with two_running(wide, make_reconciler) as (a, b):
        for r in (a, b):
            share = [d for d in wide.domains if r.members.covers(d)]
            assert 0 < len(share) < len(wide.domains) == 6
            full, rest = divmod(len(share), 2)
            assert sizes[id(r.metrics)] == [2] * full + [rest] * (rest > 0)


async def test_each_of_two_reconcilers_quick_scan_reads_the_summaries_of_its_share_only(
    session: AsyncSession, wide: SimSite, make_reconciler: MakeReconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A routine full pass (the quick scan) of each of two reconcilers computes the summaries (digest,
    chassis, busy) of its own domains in the database, not of every domain to keep its share: with
    every reconciler computing the whole site's, two cost the database twice what one does."""
    read: list[int] = []
    summaries = reconciler_queries.domain_summaries

    async def counted(*args: Any, **kwargs: Any) -> Sequence[Any]:
        rows = await summaries(*args, **kwargs)
        read.append(len(rows))
        return rows

    async with two_running(wide, make_reconciler) as (a, b):
        monkeypatch.setattr(reconciler_queries, "domain_summaries", counted)
        for r in (a, b):
            share = [d for d in wide.domains if r.members.covers(d)]
            assert 0 < len(share) < len(wide.domains)
            read.clear()
            report = await r.full_pass()
            assert not report.deep and report.domains == len(share)
            assert read == [len(share)]  # the share's rows, read once


@pytest.mark.parametrize("sized", [True, False], ids=["sized-for-its-concurrency", "default-pool"])
async def test_a_reconcilers_own_engine_keeps_a_connection_for_every_pass_it_runs_at_once(
    wide: SimSite, db: str, settings: Settings, sized: bool
) -> None:
    """``nico reconcile``'s engine (``runtime.pool_size``) holds a connection for every domain pass it
    runs at once: passes over six domains (the loop's kind, a domain each), three at a time, close
    none of the connections they used. On the default pool (one connection here) the passes ran on
    overflow connections, each closed when its pass returned it and opened again by the next: a
    server process and every prepared statement each time."""
    nv = NvLinkConfig(backend="nmxc", reconcile_concurrency=3, fabric_call_timeout="2s")
    config = settings.model_copy(update={"db_pool_size": 1, "nvlink_config": nv})
    engine = make_engine(db, pool_size=pool_size(config) if sized else config.db_pool_size)
    closed: list[object] = []
    event.listen(engine.sync_engine.pool, "close", lambda *_: closed.append(1))
    backend = InProcessBackend(wide.fabric, call_timeout=1.0)
    reconciler = Reconciler(engine, backend, nv, ReconcilerMetrics(CollectorRegistry(), "nmxc", 120.0))
    try:
        results = await reconciler.reconcile(wide.domains)
        assert [r.status for r in results.values()] == ["ok"] * len(wide.domains) == ["ok"] * 6
        assert (not closed) if sized else closed  # the default pool's churn is what the sizing removes
    finally:
        await reconciler.close()
        await backend.close()
        await engine.dispose()


def test_nico_reconcile_runs_with_the_services_collector_thresholds(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nico reconcile`` sets the collector's thresholds of nico's services before its reconciler
    runs (at CPython's defaults a deep pass spent 30% of its CPU collecting). The command runs in this
    thread, the main one (it installs its stop signals), with its signal handlers and mask restored
    after it."""
    seen: list[tuple[int, ...]] = []

    async def reconciler_ran(*_: object) -> None:
        seen.append(gc.get_threshold())

    monkeypatch.setattr(serving, "reconcile_forever", reconciler_ran)
    monkeypatch.setenv("NICO_DATABASE_URL", db)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # CPython's defaults
    try:
        result = CliRunner().invoke(app, ["reconcile", "--metrics-port", "0"])
    finally:
        gc.set_threshold(*before)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert result.exit_code == 0, result.output
    assert seen == [serving.SERVICE_COLLECTOR_THRESHOLDS]
