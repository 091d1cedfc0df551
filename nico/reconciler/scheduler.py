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
steady-state pass over thousands of racks writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Coroutine, Iterable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from nico.config import NvLinkConfig
from nico.fabric.backend import FabricBackend, PartitionEvent
from nico.fabric.observation import FabricObserver
from nico.reconciler import domain_pass, scans, trays
from nico.reconciler.domain_pass import DomainResult, PassContext
from nico.reconciler.echoes import Echoes
from nico.reconciler.executor import AfterCall
from nico.reconciler.figures import Figures
from nico.reconciler.flapping import Flapping
from nico.reconciler.last_reads import HealthReads, ReadBacks
from nico.reconciler.listening import listen
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.outages import Outages
from nico.reconciler.scans import FullPassReport

log = logging.getLogger(__name__)
CLOSE_WAIT = 5.0  # seconds close() waits for cancelled passes and subscriptions to end
# Seconds a stopping reconciler lets its passes in flight finish (a pass cut short leaves intents a
# later pass has to resolve); within Kubernetes' and a shell's patience with SIGTERM.
STOP_GRACE = 3.0

BUSY_RETRY_SECONDS = 1.0
WAITING_RETRY_SECONDS = 0.25


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
        self.engine = engine
        self.backend = backend
        self.config = config
        self.metrics = metrics
        self.after_call = after_call
        self.limit = asyncio.Semaphore(config.reconcile_concurrency)
        # Health reads at a time: a full pass leaves one due per domain, and thousands of them waiting
        # on the connection pool at once time out there.
        self._health_limit = asyncio.Semaphore(config.reconcile_concurrency)
        self.due: dict[uuid.UUID, float] = {}
        # When each domain was last asked for (monotonic): a request older than a pass's load is
        # covered by that pass (see _covered).
        self._asked: dict[uuid.UUID, float] = {}
        self.wake = asyncio.Event()
        self.observer = FabricObserver(
            backend, config.nmxc_endpoints, on_event=self._on_event, on_end=self._stream_ended
        )
        self.full_passes = 0
        self.outages = Outages()
        self.figures = Figures(engine, metrics, self.outages)
        self.read_backs = ReadBacks()
        self.health_reads = HealthReads()
        # Domains with a pass under way (run by _loop, each its own task within ``limit``): a request
        # for one of them waits in ``due`` and becomes one more pass when this one ends (coalesced).
        self._running: dict[uuid.UUID, asyncio.Task[None]] = {}
        # Partition events that arrived while the domain's pass ran (arrival, partition id): the pass's
        # own changes announce themselves this way. One more pass only for an event its read-back
        # began before that is not the echo of one of its own calls.
        self._events_in_pass: dict[uuid.UUID, list[tuple[float, int | None]]] = {}
        self.echoes = Echoes()
        # Health reads the loop's passes left due, made beside the next passes.
        self._health_tasks: set[asyncio.Task[None]] = set()
        self._full: asyncio.Task[FullPassReport] | None = None  # the loop's full pass under way
        self.flapping = Flapping(config.instance_change_interval.total_seconds())

    # ---- wake-ups -------------------------------------------------------------------------------

    def request(self, domains: Iterable[uuid.UUID], delay: float = 0.0) -> None:
        """Reconcile ``domains`` after ``delay`` seconds (sooner if already due sooner)."""
        now = time.monotonic()
        for domain in domains:
            self.due[domain] = min(self.due.get(domain, math.inf), now + delay)
            self._asked[domain] = now
        self.wake.set()

    def _burst_wait(self, ready: Iterable[uuid.UUID], now: float, debounce: float) -> float:
        """How long to wait before starting the passes of the ``ready`` domains: until the newest
        request among them is ``debounce`` old (0: at once)."""
        newest = max((self._asked.get(d, -math.inf) for d in ready), default=-math.inf)
        return max(newest + debounce - now, 0.0)

    def _covered(self, result: DomainResult) -> None:
        """Drop the domain's waiting request when the pass that just ended already did what it asked:
        the pass ended with nothing left to do, and every request came before it loaded the domain's
        state (so it saw the commits they announce: a NOTIFY is delivered after its commit). Such
        a request, made while the pass ran (a create committed just before the pass loaded it, its
        notification arriving after), would otherwise cost one more pass that lists the fabric and
        holds the domain while the next change waits."""
        loaded = result.loaded_at
        if result.status != "ok" or result.follow_up or loaded is None:
            return
        if self._asked.get(result.domain, math.inf) < loaded:
            self.due.pop(result.domain, None)

    async def run(self) -> None:
        """Reconcile until cancelled. Cancelled (a stop), it starts no pass and lets those in flight
        finish for up to :data:`STOP_GRACE` seconds before cancelling them, so a rolling restart
        leaves no half-made change behind."""
        listener = asyncio.create_task(listen(self.engine, self.request, self.outages), name="nvlink-listen")
        try:
            await self._loop()
        except asyncio.CancelledError:
            await self._drain()
            raise
        finally:
            listener.cancel()
            # psycopg's LISTEN connection can be slow to give up a cancelled wait; never hang on it.
            _, stuck = await asyncio.wait({listener}, timeout=CLOSE_WAIT)
            if stuck:
                log.warning("the NOTIFY listener did not stop within %.0f s of its cancellation", CLOSE_WAIT)
            await self.close()

    async def _drain(self) -> None:
        """Wait for the passes in flight (the loop's and a full pass's) to end, up to STOP_GRACE."""
        passes = [
            task for task in (*self._running.values(), self._full) if task is not None and not task.done()
        ]
        if passes:
            _, left = await asyncio.wait(passes, timeout=STOP_GRACE)
            if left:
                log.warning(
                    "stopping: %d pass(es) still running after %.0f s are cancelled", len(left), STOP_GRACE
                )

    async def close(self) -> None:
        """Stop watching partition events (the backend is closed by its owner)."""
        tasks: list[asyncio.Task[Any]] = [
            *self.observer.stop(),
            *self.figures.stop(),
            *self._running.values(),
        ]
        if self._full is not None and not self._full.done():
            tasks.append(self._full)
        tasks += [task for task in self._health_tasks if not task.done()]
        self._health_tasks.clear()
        self._running.clear()
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        # A pass stuck in a call that ignores cancellation must not stop the process from stopping.
        _, stuck = await asyncio.wait(tasks, timeout=CLOSE_WAIT)
        for task in stuck:
            log.warning("%s did not stop within %.0f s of its cancellation", task.get_name(), CLOSE_WAIT)

    async def _loop(self) -> None:
        interval = self.config.monitor_run_interval.total_seconds()
        debounce = self.config.notify_debounce.total_seconds()
        next_full = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= next_full:
                # Its own task, shielded: a stop lets it finish its domains' passes (see _drain).
                self._full = asyncio.create_task(self.full_pass(), name="nvlink-full-pass")
                try:
                    await asyncio.shield(self._full)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if not self.outages.database_failed(exc):
                        log.exception("full reconcile pass failed")
                next_full = time.monotonic() + interval
                continue
            ready = [d for d, at in self.due.items() if at <= now and d not in self._running]
            if ready:
                # Let a burst of commits arrive as one wake-up: wait until the newest request is
                # ``debounce`` old (a request that waited for its domain's running pass starts at once).
                settle = self._burst_wait(ready, now, debounce)
                if settle > 0:
                    await asyncio.sleep(settle)
                now = time.monotonic()
                for domain in [d for d, at in self.due.items() if at <= now and d not in self._running]:
                    held = self.flapping.held_until(domain, now)
                    if held is not None:  # it keeps moving one instance: its changes coalesce meanwhile
                        self.due[domain] = held
                        continue
                    del self.due[domain]
                    # Each domain's pass is its own task: a slow domain holds up no other.
                    self._running[domain] = asyncio.create_task(
                        self._pass(domain), name=f"nvlink-pass-{domain}"
                    )
                continue
            count_at = self.figures.count_due_at()
            if count_at is not None and now >= count_at:
                await self.figures.count_partitions()
                continue
            waiting = [at for d, at in self.due.items() if d not in self._running]
            counting = [count_at] if count_at is not None else []
            timeout = min([next_full, *waiting, *counting]) - now
            self.wake.clear()
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation that arrives
            # as the wake-up completes, and the loop (and whoever awaits the stop) would run on forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(timeout, 0.0)):
                    await self.wake.wait()

    async def _pass(self, domain: uuid.UUID) -> None:
        """One domain's pass started by :meth:`_loop`; then what comes next for it."""
        started = time.monotonic()
        try:
            result = (await self.reconcile([domain], figures=False, health_aside=True))[domain]
            # Only the loop's passes expect echoes: events during them wait for _after_events.
            self.echoes.expect(domain, result.changed)
            self.flapping.after_pass(domain, result.moved, time.monotonic())
            self._covered(result)
        except Exception:
            log.exception("reconcile of domain %s failed", domain)
            self.request([domain], delay=1.0)
        finally:
            self.metrics.iteration_latency.observe((time.monotonic() - started) * 1000.0)
            self._running.pop(domain, None)
            self._after_events(domain)
            self.wake.set()
        # The gauges follow without holding the domain: a change that arrived during this pass starts
        # the next one now, not after a read of figures; passes ending meanwhile are read together.
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
        self, domains: Iterable[uuid.UUID], *, figures: bool = True, health_aside: bool = False
    ) -> dict[uuid.UUID, DomainResult]:
        """Reconcile the given domains now (bounded concurrency); schedule retries as needed; read
        the health the passes left due (before returning, or in tasks of their own: ``health_aside``,
        the loop's way, so the domain is free for its next pass at once); then refresh those domains'
        gauge figures (``figures``; the full pass refreshes every domain's)."""
        wanted = list(dict.fromkeys(domains))
        results = await asyncio.gather(*(self._guarded(d) for d in wanted))
        for result in results:
            self._schedule_after(result)
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
        task = asyncio.create_task(work, name=name)
        self._health_tasks.add(task)
        task.add_done_callback(self._health_tasks.discard)

    def _schedule_after(self, result: DomainResult) -> None:
        if result.status == "busy":
            self.request([result.domain], BUSY_RETRY_SECONDS)
        elif result.status == "waiting":
            self.request([result.domain], WAITING_RETRY_SECONDS)
        elif result.status == "error":
            failures = self.metrics.snapshot.failures.get(result.domain, 1)
            delay = min(0.5 * 2 ** (failures - 1), self.config.retry_backoff_max.total_seconds())
            self.request([result.domain], delay)
        elif result.follow_up:
            self.request([result.domain], 0.0 if not result.failed else 0.5)

    async def _read_health(self, domain: uuid.UUID, due: domain_pass.HealthDue) -> None:
        try:
            async with self._health_limit:
                await domain_pass.read_health(self.context(), domain, due)
        except Exception as exc:  # a database failure: the next pass reads again
            if not self.outages.database_failed(exc, domain):
                log.warning("health of domain %s not recorded: %s", domain, exc)
            self.health_reads.forget(domain)

    async def _guarded(self, domain: uuid.UUID) -> DomainResult:
        async with self.limit:
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
        """One locked pass over one domain (:mod:`nico.reconciler.domain_pass`)."""
        return await domain_pass.reconcile_domain(self.context(), domain)

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
        if event.kind == "partition" and domain in self._running:
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

    def _stream_ended(self, domain: uuid.UUID) -> None:
        self.echoes.deaf(domain)  # a new stream proves itself again

    async def full_pass(self) -> FullPassReport:
        """Every domain: read without locks, reconcile (locked) only those with something to do, and
        refresh the gauges. Every ``deep_pass_every``-th pass (the first included) compares each GPU
        and audits the fabric's GPU inventory; the others compare fabric digests."""
        started = time.monotonic()
        report = FullPassReport()
        report.deep = self.full_passes % self.config.deep_pass_every == 0
        needs_work = await scans.scan(self.context(), self.limit, report)
        if needs_work:
            results = await self.reconcile(needs_work, figures=False)
            report.results = results
            report.reconciled = sum(1 for r in results.values() if r.status == "ok")
        await scans.finish_deleted(self.context())
        await self.figures.everything()
        report.duration_ms = (time.monotonic() - started) * 1000.0
        self.metrics.iteration_latency.observe(report.duration_ms)
        self.full_passes += 1
        return report
