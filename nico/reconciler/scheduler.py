"""The reconciler's scheduler: which domain gets a pass, and when. It owns the work queue (requests
per domain, debounced and coalesced), LISTEN, retries with per-domain backoff and the periodic full
and deep scans; it runs each pass (:mod:`nico.reconciler.domain_pass`) with what the pass needs and
follows the fabric's events through :mod:`nico.fabric.observation`.

Wake-ups: ``NOTIFY nico_nvlink`` (the domains a commit changed, reconciled within milliseconds,
debounced by ``notify_debounce``), NMX-C partition events where the backend offers them, retries
with per-domain backoff, and a full pass every ``monitor_run_interval`` that also repairs drift.

Work is per domain under a PostgreSQL advisory lock held on the connection that also writes the
domain's intents and results: several reconcilers split the domains between them, and when one dies
its session (and so its locks) ends and the others take its domains at their next wake-up. A full
pass reads every domain without locks and takes a lock only where there is something to do, so a
steady-state pass over thousands of racks writes nothing. The full pass is a task of its own
beside the passes for changes, with its own concurrency limit, so a change never queues behind it;
when several reconcilers run, their full passes split the domains (:mod:`nico.reconciler.members`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Coroutine, Iterable
from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from nico.config import NvLinkConfig
from nico.fabric.backend import FabricBackend, PartitionEvent
from nico.fabric.observation import FabricObserver
from nico.reconciler import domain_pass, parts, scans, stopping, trays
from nico.reconciler.echoes import Echoes
from nico.reconciler.executor import AfterCall
from nico.reconciler.figures import Figures
from nico.reconciler.flapping import Flapping
from nico.reconciler.last_reads import HealthReads, ReadBacks
from nico.reconciler.listening import listen
from nico.reconciler.members import Members
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.outages import Outages
from nico.reconciler.pass_context import DomainResult, HealthDue, PassContext
from nico.reconciler.queueing import WorkQueue, Yielding
from nico.reconciler.scans import FullPassReport

log = logging.getLogger(__name__)
CLOSE_WAIT = 5.0  # seconds close() waits for cancelled passes and subscriptions to end
# Seconds a stopping reconciler lets its passes in flight finish (a pass cut short leaves intents a
# later pass has to resolve); within Kubernetes' and a shell's patience with SIGTERM.
STOP_GRACE = 3.0


class Reconciler:
    """Keeps every NVLink domain's fabric equal to what tenants asked for (module docstring)."""

    def __init__(
        self,
        engine: AsyncEngine,
        backend: FabricBackend,
        config: NvLinkConfig,
        metrics: ReconcilerMetrics,
        *,
        after_call: AfterCall | None = None,
    ) -> None:
        self.engine, self.backend, self.config, self.metrics = engine, backend, config, metrics
        self.after_call = after_call
        self.limit = asyncio.Semaphore(config.reconcile_concurrency)
        self.queue = WorkQueue()
        self.scan_limit = Yielding(config.reconcile_concurrency, self.queue.idle)  # the full pass's own
        self.members = Members(engine)
        self.due, self.wake = self.queue.due, self.queue.wake
        self._health_limit = asyncio.Semaphore(config.reconcile_concurrency)  # health reads at a time
        self.echoes = Echoes()  # a new event stream proves itself again (``deaf`` when one ends)
        self.observer = FabricObserver(
            backend, config.nmxc_endpoints, on_event=self._on_event, on_end=self.echoes.deaf
        )
        self.full_passes = 0
        self.outages = Outages()
        self.figures = Figures(engine, metrics, self.outages)
        self.read_backs, self.health_reads = ReadBacks(), HealthReads()
        self._running = self.queue.running  # the loop's passes under way, each within ``limit``
        # Partition events that arrived while the domain's pass ran (arrival, partition id): the pass's
        # own changes announce themselves this way. One more pass only for an event its read-back
        # began before that is not the echo of one of its own calls.
        self._events_in_pass: dict[uuid.UUID, list[tuple[float, int | None]]] = {}
        # Health reads the loop's passes left due, made beside the next passes.
        self._health_tasks: set[asyncio.Task[None]] = set()
        self._full: asyncio.Task[None] | None = None  # the loop's full pass under way
        self._next_full = 0.0  # when the loop starts its next full pass (monotonic; inf: one runs)
        self._heard = asyncio.Event()  # the NOTIFY listener has connected (once)
        self._full_again = False  # who covers what changed during the running full pass
        self._full_domains: set[uuid.UUID] = set()  # the full pass's locked passes under way
        self._parts = parts.Limits.of(config.reconcile_concurrency)  # the full pass's parts and steps
        self.last_full: FullPassReport | None = None
        self.flapping = Flapping(config.instance_change_interval.total_seconds())

    def request(self, domains: Iterable[uuid.UUID], delay: float = 0.0) -> None:
        """Reconcile ``domains`` after ``delay`` seconds (sooner if already due sooner)."""
        self.queue.request(domains, delay)

    async def run(self) -> None:
        """Reconcile until cancelled. Cancelled (a stop), it starts no pass and lets those in flight
        finish for up to :data:`STOP_GRACE` seconds before cancelling them, so a rolling restart
        leaves no half-made change behind."""
        listening = listen(self.engine, self.request, self.outages, self._connected)
        listener = asyncio.create_task(listening, name="nvlink-listen")
        with contextlib.suppress(Exception):  # a database not there yet: the watch joins later
            await self.members.join()  # before the first full pass, to take only a share of it
        watch = asyncio.create_task(self.members.watch(self._members_changed), name="nvlink-members")
        try:
            await self._loop()
        except asyncio.CancelledError:
            # The passes in flight (the loop's and a full pass's) may finish, up to STOP_GRACE.
            await stopping.drain((*self._running.values(), self._full), STOP_GRACE)
            raise
        finally:
            await stopping.cancel((listener, watch), CLOSE_WAIT)  # the watch gives the slot up
            await self.close()

    async def close(self) -> None:
        """Stop watching partition events (the backend is closed by its owner)."""
        tasks = [*self.observer.stop(), *self.figures.stop(), *self._running.values(), *self._health_tasks]
        self._health_tasks.clear()
        self._running.clear()
        await stopping.cancel((*tasks, self._full), CLOSE_WAIT)

    async def _loop(self) -> None:
        debounce = self.config.notify_debounce.total_seconds()
        while True:
            now = time.monotonic()
            next_full = self._next_full if self._heard.is_set() else math.inf
            if now >= next_full:
                # Its own task: the passes for changes go on beside it (a stop lets it end, see run).
                self._next_full = math.inf
                self._full = asyncio.create_task(self._periodic_full(), name="nvlink-full-pass")
                continue
            ready = [d for d, at in self.due.items() if at <= now and self._free(d)]
            if ready:
                # Let a burst of commits arrive as one wake-up: wait until the newest request is
                # ``debounce`` old (a request that waited for its domain's running pass starts at once).
                settle = self.queue.burst_wait(ready, now, debounce)
                if settle > 0:
                    await asyncio.sleep(settle)
                now = time.monotonic()
                for domain in [d for d, at in self.due.items() if at <= now and self._free(d)]:
                    held = self.flapping.held_until(domain, now)
                    if held is not None:  # it keeps moving one instance: its changes coalesce meanwhile
                        self.due[domain] = held
                        continue
                    del self.due[domain]
                    # Each domain's pass is its own task: a slow domain holds up no other.
                    self.queue.start(
                        domain, asyncio.create_task(self._pass(domain), name=f"nvlink-pass-{domain}")
                    )
                continue
            count_at = self.figures.count_due_at()
            if count_at is not None and now >= count_at:
                await self.figures.count_partitions()
                continue
            waiting = [at for d, at in self.due.items() if self._free(d)]
            counting = [count_at] if count_at is not None else []
            timeout = min([next_full, *waiting, *counting]) - now
            self.wake.clear()
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation that arrives
            # as the wake-up completes, and the loop (and whoever awaits the stop) would run on forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(timeout, 0.0) if timeout < math.inf else None):
                    await self.wake.wait()

    def _free(self, domain: uuid.UUID) -> bool:
        """Whether the loop may start a pass of the domain: none of its own or the full pass's runs."""
        return domain not in self._running and domain not in self._full_domains

    async def _periodic_full(self) -> None:
        """The loop's full pass; the next an interval after it (at once if the reconcilers changed)."""
        try:
            await self.full_pass()
        except Exception as exc:
            if not self.outages.database_failed(exc):
                log.exception("full reconcile pass failed")
        finally:
            again, self._full_again = self._full_again, False
            interval = 0.0 if again else self.config.monitor_run_interval.total_seconds()
            self._next_full = time.monotonic() + interval
            self.wake.set()

    def _connected(self, domains: list[uuid.UUID]) -> None:
        """The listener (re)connected: the first time, the first full pass starts (it finds what came
        before); after a lost connection every domain gets a pass (its commits went unheard)."""
        if self._heard.is_set():
            self.request(domains)
        self._heard.set()
        self.wake.set()

    def _members_changed(self) -> None:
        """A reconciler started or stopped: a full pass over this one's share now (or next)."""
        if self._full is not None and not self._full.done():
            self._full_again = True
        else:
            self._next_full = time.monotonic()
        self.wake.set()

    async def _pass(self, domain: uuid.UUID) -> None:
        """One domain's pass started by :meth:`_loop`; then what comes next for it."""
        started = time.monotonic()
        try:
            result = (await self.reconcile([domain], figures=False, health_aside=True))[domain]
            self.figures.passed(domain, result.report.figures if result.report else None)
            # The loop's (and full pass's) passes expect echoes: events during them wait for _after_events.
            self.echoes.expect(domain, result.changed)
            self.flapping.after_pass(domain, result.moved, time.monotonic())
            self.queue.covered(result)
        except Exception:
            log.exception("reconcile of domain %s failed", domain)
            self.request([domain], delay=1.0)
        finally:
            self.metrics.iteration_latency.observe((time.monotonic() - started) * 1000.0)
            self.queue.ended(domain)
            self._after_events(domain)
            self.wake.set()
        # Figures the write-back did not read follow without holding the domain (see Figures.after_pass).
        self.figures.after_pass(domain)

    def _after_events(self, domain: uuid.UUID) -> None:
        """The partition events that arrived while the domain's pass ran: nothing more to do for one
        the pass's last listing began after (it holds what the event announces) or that echoes one of
        the pass's own calls; for any other, forget that listing and make another pass."""
        again = False
        for arrived, partition in self._events_in_pass.pop(domain, []):
            echo = self.echoes.heard(domain, partition)  # an echo is used up, covered or not
            again = again or not (echo or self.read_backs.listed_since(domain, arrived))
        if again:
            self.read_backs.forget(domain)
            self.request([domain], self.config.notify_debounce.total_seconds())

    # ---- passes ---------------------------------------------------------------------------------

    async def reconcile(
        self,
        domains: Iterable[uuid.UUID],
        *,
        figures: bool = True,
        health_aside: bool = False,
        full: bool = False,
    ) -> dict[uuid.UUID, DomainResult]:
        """Reconcile the given domains now (bounded concurrency; ``full``: the full pass's, which
        leaves out domains the loop is passing); schedule retries as needed; read the health the
        passes left due (before returning, or in tasks of their own: ``health_aside``, the loop's
        way, so the domain is free for its next pass at once); then refresh those domains' gauge
        figures (``figures``; the full pass refreshes every domain's)."""
        wanted = list(dict.fromkeys(domains))
        # The full pass's a part of domains at a time (at most PARTS_AT_ONCE parts at once).
        each = map(self._full_part, parts.split(wanted)) if full else map(self._guarded, wanted)
        results = [r for done in await asyncio.gather(*each) for r in done]
        for result in results:
            failures = self.metrics.snapshot.failures.get(result.domain, 1)
            self.queue.after(result, failures, self.config.retry_backoff_max.total_seconds())
        reads = [self._read_health(r.domain, r.health) for r in results if r.health is not None]
        if health_aside:
            for read in reads:
                self._aside(read, "nvlink-health")
        elif reads:
            await asyncio.gather(*reads)
        reports = [r.report for r in results if r.report is not None]
        snap = self.metrics.snapshot
        snap.machine_status_updates = sum(r.machines_updated for r in reports)
        snap.stale_partitions_deleted = sum(r.stale_partitions_deleted for r in reports)
        if figures and wanted:
            await self.figures.domains(wanted)
        return {r.domain: r for r in results}

    def _aside(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``work`` beside the passes (cancelled by :meth:`close`)."""
        (task := asyncio.create_task(work, name=name)).add_done_callback(self._health_tasks.discard)
        self._health_tasks.add(task)

    async def _read_health(self, domain: uuid.UUID, due: HealthDue) -> None:
        try:
            async with self._health_limit:
                await domain_pass.read_health(self.context(), domain, due)
        except Exception as exc:  # a database failure: the next pass reads again
            if not self.outages.database_failed(exc, domain):
                log.warning("health of domain %s not recorded: %s", domain, exc)
            self.health_reads.forget(domain)

    async def _guarded(self, domain: uuid.UUID) -> list[DomainResult]:
        async with self.limit:
            return [await self._attempt(domain)]

    async def _full_part(self, part: list[uuid.UUID]) -> list[DomainResult]:
        """The full pass's locked passes of a part of domains (:mod:`nico.reconciler.parts`), those
        the loop's passes leave it (they do all this would). A change's pass waits for this part only."""
        async with self._parts.parts, self.scan_limit:  # the loop's passes first, before its locks
            part = [d for d in part if d not in self._running]
            self._full_domains.update(part)
            try:
                results = await parts.pass_part(self.context(), part, self._parts.steps)
                for result in results:
                    self.echoes.expect(result.domain, result.changed)  # their events bring no pass
            finally:
                for domain in part:
                    self._full_domains.discard(domain)
                    self._after_events(domain)
                self.wake.set()
        for result in results:
            self.queue.covered(result)
        return results

    async def _attempt(self, domain: uuid.UUID) -> DomainResult:
        try:
            result = await self.reconcile_domain(domain)
        except Exception as exc:  # a database outage or a bug: report, retry later
            if not self.outages.database_failed(exc, domain):
                log.exception("reconciling domain %s failed", domain)
            return DomainResult(domain, "error", error=f"{type(exc).__name__}: {exc}")
        self.outages.database_ok()
        if result.status == "ok":
            self.outages.fabric_ok(domain)
        return result

    async def reconcile_domain(self, domain: uuid.UUID) -> DomainResult:
        """One locked pass over one domain (:mod:`nico.reconciler.domain_pass`); its health read in it
        when due, unless it is the loop's (read aside)."""
        ctx = replace(self.context(), health_in_pass=domain not in self._running)
        return await domain_pass.reconcile_domain(ctx, domain)

    def context(self) -> PassContext:
        """What a pass uses (``after_call`` as set now: tests set it on a running reconciler)."""
        return PassContext(
            self.engine,
            self.backend,
            self.observer,
            self.config,
            self.metrics,
            self.read_backs,
            self.health_reads,
            self.after_call,
            self.outages,
        )

    # ---- fabric events ----------------------------------------------------------------------------

    def _on_event(self, event: PartitionEvent) -> None:
        """Partition events from the manager wake the domain up (changes made behind nico's back)."""
        domain = event.domain_uuid
        self.echoes.listening(domain, fresh=event.kind == "resync")
        if event.kind == "partition" and not self._free(domain):
            # The running pass lists the domain after its changes: if that listing starts after this
            # event, it holds the change (often the pass's own) already.
            self._events_in_pass.setdefault(domain, []).append((time.monotonic(), event.nmx_partition_id))
            return
        if event.kind == "partition" and self.echoes.heard(domain, event.nmx_partition_id):
            return  # a change of nico's last pass, which its read-back holds
        self.read_backs.forget(domain)
        if event.kind != "partition":
            self.health_reads.forget(domain)
        if event.kind == "topology":  # a tray swapped? its GPUs' GUIDs changed
            self._aside(self._after_topology(domain), "nvlink-trays")
        self.request([domain], self.config.notify_debounce.total_seconds())

    async def _after_topology(self, domain: uuid.UUID) -> None:
        if await trays.after_topology_change(self.context(), domain):
            self.request([domain])

    async def full_pass(self) -> FullPassReport:
        """Every domain: read without locks, reconcile (locked) only those with something to do, and
        refresh the gauges. Every ``deep_pass_every``-th pass (the first included) compares each GPU
        and audits the fabric's GPU inventory; the others compare fabric digests."""
        started = time.monotonic()
        report = FullPassReport()
        report.deep = self.full_passes % self.config.deep_pass_every == 0
        ctx = self.context()
        every = await scans.every_domain(ctx)
        if report.deep:  # ask every endpoint again which domain it serves (one moved is noticed)
            ctx.observer.endpoints.forget()
        passing: asyncio.Task[dict[uuid.UUID, DomainResult]] | None = None
        try:  # the locked passes of a part's domains with work go on while the next part is scanned
            async for needs_work in scans.in_parts(ctx, self.scan_limit, report, every, self.members.covers):
                report.results.update(await passing if passing else {})
                passing = asyncio.create_task(self.reconcile(needs_work, figures=False, full=True))
            report.results.update(await passing if passing else {})
        finally:
            if passing is not None:
                passing.cancel()
        report.reconciled = sum(1 for r in report.results.values() if r.status == "ok")
        if report.deep:
            self.metrics.snapshot.info_mismatches = report.mismatches
        self.metrics.forget_domains(set(every))
        await scans.finish_deleted(ctx)
        await self.figures.everything()
        report.duration_ms = (time.monotonic() - started) * 1000.0
        self.metrics.iteration_latency.observe(report.duration_ms)
        self.full_passes += 1
        self.last_full = report
        return report
