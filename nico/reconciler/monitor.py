"""The NVLink partition monitor: keeps every domain's fabric equal to what tenants asked for.

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
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from nico.config import NvLinkConfig
from nico.db.engine import libpq_url, reading
from nico.db.queries import reconciler as queries
from nico.fabric.backend import (
    AsyncOperations,
    DomainTarget,
    EndpointNotConfigured,
    FabricBackend,
    FabricError,
    FabricGpu,
    FabricPartition,
    PartitionEvents,
)
from nico.reconciler import domain_pass
from nico.reconciler import state as statemod
from nico.reconciler.domain_pass import DomainResult, error_label
from nico.reconciler.executor import AfterCall
from nico.reconciler.fingerprint import fabric_digest
from nico.reconciler.homes import Mode
from nico.reconciler.metrics import DomainFigures, MonitorMetrics
from nico.reconciler.planner import plan
from nico.reconciler.writeback import finish_deleted_partitions
from nico.services.nvlink_events import CHANNEL, parse_payload

log = logging.getLogger(__name__)
CLOSE_WAIT = 5.0  # seconds close() waits for cancelled passes and subscriptions to end

BUSY_RETRY_SECONDS = 1.0
WAITING_RETRY_SECONDS = 0.25
PARTITION_COUNT_EVERY = 0.25
HELLO_RETRY_SECONDS = 30.0  # an endpoint whose discovery Hello failed is asked again after this long


@dataclass
class FullPassReport:
    domains: int = 0
    reconciled: int = 0
    errors: int = 0
    duration_ms: float = 0.0
    deep: bool = False
    results: dict[uuid.UUID, DomainResult] = field(default_factory=dict)


class Reconciler:
    def __init__(
        self,
        engine: AsyncEngine,
        backend: FabricBackend,
        config: NvLinkConfig,
        metrics: MonitorMetrics,
        *,
        after_call: AfterCall | None = None,
    ) -> None:
        self.engine = engine
        self.backend = backend
        self.config = config
        self.metrics = metrics
        self.after_call = after_call
        self.call_timeout = config.fabric_call_timeout.total_seconds()
        self.limit = asyncio.Semaphore(config.reconcile_concurrency)
        self.due: dict[uuid.UUID, float] = {}
        # When each domain was last asked for (monotonic): a request older than a pass's load is
        # covered by that pass (see _covered).
        self._asked: dict[uuid.UUID, float] = {}
        self.wake = asyncio.Event()
        self.registry: dict[str, str] = {}
        self.verified: dict[str, uuid.UUID] = {}  # endpoint -> domain its Hello named
        # Discovery: endpoints to ask which domain they serve (configured, plus every registered one),
        # and what they answered, keyed by the domain uuid the fabric reports.
        self.discovery: list[str] = list(config.nmxc_endpoints)
        self.discovered: dict[uuid.UUID, str] = {}
        self._hello_failed: dict[str, float] = {}  # endpoint -> when its last discovery Hello failed
        self._subscriptions: dict[uuid.UUID, tuple[str | None, asyncio.Task[None]]] = {}
        self.full_passes = 0
        self._partitions_asked = False
        self._partitions_counted_at = -math.inf
        self.read_backs = domain_pass.ReadBacks()
        self.health_reads = domain_pass.HealthReads()
        # Domains with a pass under way (run by _loop, each its own task within ``limit``): a request
        # for one of them waits in ``due`` and becomes one more pass when this one ends (coalesced).
        self._running: dict[uuid.UUID, asyncio.Task[None]] = {}
        # Partition events that arrived while the domain's pass ran (arrival, partition id): the pass's
        # own changes announce themselves this way. One more pass only for an event its read-back
        # began before that is not the echo of one of its own calls.
        self._events_in_pass: dict[uuid.UUID, list[tuple[float, int | None]]] = {}
        self.echoes = Echoes()
        # Domains whose passes ended and whose gauge figures are still to read (one task reads them).
        self._figures_due: set[uuid.UUID] = set()
        self._figures_task: asyncio.Task[None] | None = None
        # Health reads the loop's passes left due, made beside the next passes.
        self._health_tasks: set[asyncio.Task[None]] = set()

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
        """Reconcile until cancelled."""
        listener = asyncio.create_task(self._listen(), name="nvlink-listen")
        try:
            await self._loop()
        finally:
            listener.cancel()
            # psycopg's LISTEN connection can be slow to give up a cancelled wait; never hang on it.
            _, stuck = await asyncio.wait({listener}, timeout=CLOSE_WAIT)
            if stuck:
                log.warning("the NOTIFY listener did not stop within %.0f s of its cancellation", CLOSE_WAIT)
            await self.close()

    async def close(self) -> None:
        """Stop watching partition events (the backend is closed by its owner)."""
        tasks = [task for _, task in self._subscriptions.values()] + list(self._running.values())
        tasks += [task for task in self._health_tasks if not task.done()]
        self._health_tasks.clear()
        if self._figures_task is not None and not self._figures_task.done():
            tasks.append(self._figures_task)
        self._figures_task = None
        self._subscriptions.clear()
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
                try:
                    await self.full_pass()
                except Exception:
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
                    del self.due[domain]
                    # Each domain's pass is its own task: a slow domain holds up no other.
                    self._running[domain] = asyncio.create_task(
                        self._pass(domain), name=f"nvlink-pass-{domain}"
                    )
                continue
            count_at = self._partitions_counted_at + PARTITION_COUNT_EVERY
            if self._partitions_asked and now >= count_at:
                await self._count_partitions()
                continue
            waiting = [at for d, at in self.due.items() if d not in self._running]
            counting = [count_at] if self._partitions_asked else []
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
        self._figures_due.add(domain)
        if self._figures_task is None or self._figures_task.done():
            self._figures_task = asyncio.create_task(self._refresh_figures(), name="nvlink-figures")

    async def _refresh_figures(self) -> None:
        """The gauge figures of the domains whose passes ended (see :meth:`_pass`), one read for all
        that ended since the last."""
        while self._figures_due:
            domains = list(self._figures_due)
            self._figures_due.clear()
            await self._domain_figures(domains)

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

    async def _listen(self) -> None:
        """LISTEN for commits that changed desired NVLink state; reconnect if the connection drops."""
        url = libpq_url(self.engine.url.render_as_string(hide_password=False))
        backoff = 0.5
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    backoff = 0.5
                    # Anything committed while we were not listening is found by this pass.
                    self.request(await self._all_domains())
                    async for note in conn.notifies():
                        domains = parse_payload(note.payload)
                        if domains:
                            self.request(domains)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("NOTIFY listener lost its connection (%s); reconnecting", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    async def _all_domains(self) -> list[uuid.UUID]:
        async with reading(self.engine) as conn:
            return await queries.all_domain_uuids(conn)

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
                task = asyncio.create_task(read, name="nvlink-health")
                self._health_tasks.add(task)
                task.add_done_callback(self._health_tasks.discard)
        elif reads:
            await asyncio.gather(*reads)
        reports = [r.report for r in results if r.report is not None]
        snap = self.metrics.snapshot
        snap.machine_status_updates = sum(r.machines_updated for r in reports)
        snap.stale_partitions_deleted = sum(r.stale_partitions_deleted for r in reports)
        if figures and wanted:
            await self._domain_figures(wanted)
        return {r.domain: r for r in results}

    async def _domain_figures(self, domains: list[uuid.UUID]) -> None:
        """The gauges follow a targeted pass at once: the touched domains' figures, read through
        their indexes (the cost does not grow with the site). A failure leaves the old figures; the
        next pass or full pass refreshes them. The logical-partition count follows shortly after."""
        try:
            async with reading(self.engine) as conn:
                rows = await queries.domain_figures(conn, domains)
        except Exception as exc:
            log.warning("gauge figures of %d domains not refreshed: %s", len(domains), exc)
        else:
            self.metrics.domain_figures(_figures(rows), asked=set(domains))
        await self._count_partitions_soon()

    async def _count_partitions_soon(self) -> None:
        """The logical-partition count is the one figure that grows with the site (partitions span
        domains): read it now if it was last read ``PARTITION_COUNT_EVERY`` seconds ago or more,
        otherwise that long after the last read (the loop wakes up for it), however many passes ask."""
        self._partitions_asked = True
        if time.monotonic() >= self._partitions_counted_at + PARTITION_COUNT_EVERY:
            await self._count_partitions()

    async def _count_partitions(self) -> None:
        self._partitions_asked = False
        self._partitions_counted_at = time.monotonic()
        try:
            async with reading(self.engine) as conn:
                count = await queries.logical_partition_count(conn)
        except Exception as exc:
            log.warning("logical partitions not counted: %s", exc)
            return
        self.metrics.snapshot.logical_partitions = count

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
            await domain_pass.read_health(self.engine, self, domain, due)
        except Exception as exc:  # a database failure: the next pass reads again
            log.warning("health of domain %s not recorded: %s", domain, exc)
            self.health_reads.forget(domain)

    async def _guarded(self, domain: uuid.UUID) -> DomainResult:
        async with self.limit:
            try:
                return await self.reconcile_domain(domain)
            except Exception as exc:  # a bug or a database failure: report, retry later
                log.exception("reconciling domain %s failed", domain)
                return DomainResult(domain, "error", error=f"{type(exc).__name__}: {exc}")

    async def reconcile_domain(self, domain: uuid.UUID) -> DomainResult:
        """One locked pass over one domain (:mod:`nico.reconciler.domain_pass`)."""
        return await domain_pass.reconcile_domain(self.engine, self, domain)

    async def target(self, domain: uuid.UUID, chassis_serials: Iterable[str]) -> DomainTarget:
        """Where the domain's manager is; for NMX-C the endpoint registered for one of its chassis,
        checked once with Hello to really serve this domain (a wrong registry row must not let nico
        change someone else's rack)."""
        if self.backend.kind == "nmxm":
            return DomainTarget(domain)
        serials = sorted(chassis_serials)
        endpoint = next((self.registry[s] for s in serials if s in self.registry), None)
        refused: EndpointNotConfigured | None = None
        if endpoint is not None and self.verified.get(endpoint) != domain:
            hello = await self.backend.hello(DomainTarget(domain, endpoint))
            self._heard(endpoint, hello.domain_uuid)
            if hello.domain_uuid != domain:
                # Another domain of the chassis (a minipod rack): its own endpoint may be discovered.
                refused = EndpointNotConfigured(
                    f"endpoint {endpoint} serves domain {hello.domain_uuid}, not {domain}", endpoint=endpoint
                )
                endpoint = None
        if endpoint is None:
            endpoint = self.discovered.get(domain) or (await self.discover()).get(domain)
        if endpoint is None:
            if refused is not None:
                raise refused
            listed = ", ".join(serials) or "(none)"
            raise EndpointNotConfigured(f"no NMX-C endpoint registered for chassis {listed} or discovered")
        target = DomainTarget(domain, endpoint)
        self._ensure_subscription(target)
        return target

    def _heard(self, endpoint: str, domain: uuid.UUID) -> None:
        """An endpoint's Hello named ``domain``: remember it both ways (an endpoint serves one domain)."""
        before = self.verified.get(endpoint)
        if before is not None and self.discovered.get(before) == endpoint:
            del self.discovered[before]
        self.verified[endpoint] = domain
        self.discovered[domain] = endpoint
        self._hello_failed.pop(endpoint, None)

    async def discover(self) -> dict[uuid.UUID, str]:
        """Ask each known NMX-C endpoint that has not said yet which domain it serves (Hello): the
        configured ``nmxc_endpoints`` and every endpoint registered for a chassis, so that several
        domains behind one chassis (a minipod rack, one endpoint per domain) are all found, keyed by
        the domain uuid the fabric reports. An endpoint whose Hello failed is asked again after
        ``HELLO_RETRY_SECONDS``. Returns domain -> endpoint."""
        now = time.monotonic()
        asking = [
            endpoint
            for endpoint in dict.fromkeys([*self.discovery, *sorted(set(self.registry.values()))])
            if endpoint not in self.verified
            and now - self._hello_failed.get(endpoint, -math.inf) >= HELLO_RETRY_SECONDS
        ]
        answers = await asyncio.gather(
            *(self.backend.hello(DomainTarget(uuid.UUID(int=0), e)) for e in asking), return_exceptions=True
        )
        for endpoint, answer in zip(asking, answers, strict=True):
            if isinstance(answer, Exception):
                self._hello_failed[endpoint] = now
                log.info("NMX-C endpoint %s did not answer its discovery Hello: %s", endpoint, answer)
            elif not isinstance(answer, BaseException):
                self._heard(endpoint, answer.domain_uuid)
        return self.discovered

    async def check_operations(self, state: statemod.DomainState) -> tuple[dict[str, str], bool]:
        """Terminal states of this domain's tracked NMX-M operations, and whether any still runs."""
        resolved: dict[str, str] = {}
        running = False
        if not isinstance(self.backend, AsyncOperations):
            return resolved, running
        for intent in state.pending_operations():
            assert intent.operation_id is not None
            found = await self.backend.operation_state(intent.operation_id)
            if found in ("pending", "in-progress"):
                running = True
            else:
                resolved[intent.operation_id] = found
        return resolved, running

    def _ensure_subscription(self, target: DomainTarget) -> None:
        if not isinstance(self.backend, PartitionEvents):
            return
        current = self._subscriptions.get(target.domain_uuid)
        if current is not None and current[0] == target.endpoint and not current[1].done():
            return
        if current is not None:
            current[1].cancel()
        task = asyncio.create_task(self._watch(target), name=f"nvlink-events-{target.domain_uuid}")
        self._subscriptions[target.domain_uuid] = (target.endpoint, task)

    async def _watch(self, target: DomainTarget) -> None:
        """Partition events from the manager wake the domain up (changes made behind nico's back)."""
        assert isinstance(self.backend, PartitionEvents)
        backoff = 1.0
        while True:
            try:
                async for event in self.backend.partition_events(target):
                    backoff = 1.0
                    domain = event.domain_uuid
                    self.echoes.listening(domain, fresh=event.kind == "resync")
                    if event.kind == "partition" and domain in self._running:
                        # The running pass lists the domain after its changes: if that listing starts
                        # after this event, it holds the change (often the pass's own) already.
                        self._events_in_pass.setdefault(domain, []).append(
                            (time.monotonic(), event.nmx_partition_id)
                        )
                        continue
                    if event.kind == "partition" and self.echoes.heard(domain, event.nmx_partition_id):
                        continue  # a change of nico's last pass, which its read-back holds
                    self.read_backs.forget(domain)
                    if event.kind != "partition":
                        self.health_reads.forget(domain)
                    self.request([domain], self.config.notify_debounce.total_seconds())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("partition events of %s stopped: %s", target.domain_uuid, exc)
            finally:
                self.echoes.deaf(target.domain_uuid)  # a new stream proves itself again
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    async def full_pass(self) -> FullPassReport:
        """Every domain: read without locks, reconcile (locked) only those with something to do, and
        refresh the gauges. Every ``deep_pass_every``-th pass (the first included) compares each GPU
        and audits the fabric's GPU inventory; the others compare fabric digests."""
        started = time.monotonic()
        report = FullPassReport()
        report.deep = self.full_passes % self.config.deep_pass_every == 0
        needs_work = await (self._deep_scan(report) if report.deep else self._quick_scan(report))
        if needs_work:
            results = await self.reconcile(needs_work, figures=False)
            report.results = results
            report.reconciled = sum(1 for r in results.values() if r.status == "ok")
        await self._finish_deleted_partitions()
        await self._global_figures()
        report.duration_ms = (time.monotonic() - started) * 1000.0
        self.metrics.iteration_latency.observe(report.duration_ms)
        self.full_passes += 1
        return report

    async def _quick_scan(self, report: FullPassReport) -> list[uuid.UUID]:
        async with reading(self.engine) as conn:
            found = await statemod.summaries(conn)
            await domain_pass.refresh_registry(conn, self)
        report.domains = len(found)
        listed = await asyncio.gather(
            *(self._observe(s.domain, s.chassis_serials, gpus=False) for s in found.values())
        )
        needs_work = []
        for summary, (partitions, _, error) in zip(found.values(), listed, strict=True):
            if error is not None or partitions is None:
                report.errors += 1
                needs_work.append(summary.domain)
                continue
            self.metrics.snapshot.partitions[summary.domain] = len(partitions)
            if not summary.quiet_if(fabric_digest(partitions, self.config.default_partition_mode)):
                needs_work.append(summary.domain)
        self.metrics.forget_domains(set(found))
        return needs_work

    async def _deep_scan(self, report: FullPassReport) -> list[uuid.UUID]:
        # Ask every endpoint again which domain it serves (an endpoint moved to another domain, or a
        # discovered one re-provisioned, is noticed within one deep pass).
        self.verified.clear()
        self.discovered.clear()
        async with self.engine.connect() as conn:
            states = await statemod.load(conn)
            await domain_pass.refresh_registry(conn, self)
            await conn.commit()
        report.domains = len(states)
        observed = await asyncio.gather(
            *(self._observe(s.domain, s.chassis_serials, gpus=True) for s in states.values())
        )
        needs_work: list[uuid.UUID] = []
        mismatches = 0
        for s, (partitions, gpus, error) in zip(states.values(), observed, strict=True):
            if error is not None or partitions is None:
                report.errors += 1
                needs_work.append(s.domain)  # records the error (and retries with backoff)
                continue
            self.metrics.snapshot.partitions[s.domain] = len(partitions)
            if gpus is not None:
                self.metrics.snapshot.gpus[s.domain] = len(gpus)
                mismatches += _mismatches(s, gpus)
            if _has_work(s, partitions, self.config.default_partition_mode):
                needs_work.append(s.domain)
        self.metrics.snapshot.info_mismatches = mismatches
        self.metrics.forget_domains(set(states))
        return needs_work

    async def _observe(
        self, domain: uuid.UUID, chassis_serials: Iterable[str], *, gpus: bool
    ) -> tuple[list[FabricPartition] | None, list[FabricGpu] | None, str | None]:
        async with self.limit:
            try:
                target = await self.target(domain, chassis_serials)
                partitions = await self.backend.list_partitions(target)
                listed = await self.backend.list_gpus(target) if gpus else None
            except FabricError as exc:
                return None, None, error_label(exc, self.backend.kind)
            return partitions, listed, None

    async def _finish_deleted_partitions(self) -> None:
        """Deleting logical partitions with nothing left on the fabric vanish even when no domain had
        work (one that never had a physical partition, or whose last one went in an earlier pass)."""
        async with self.engine.connect() as conn, AsyncSession(bind=conn, expire_on_commit=False) as session:
            await finish_deleted_partitions(session)
            await session.commit()

    async def _global_figures(self) -> None:
        async with reading(self.engine) as conn:
            rows = await queries.domain_figures(conn, None)
            logical = await queries.logical_partition_count(conn)
        self._partitions_asked, self._partitions_counted_at = False, time.monotonic()
        self.metrics.all_figures(_figures(rows), logical_partitions=logical)


# How long after a pass its own changes may still be announced by partition events (``Echoes``).
ECHO_SECONDS = 1.0


class Echoes:
    """The partition events a domain's last passes have coming: NMX-C announces every change, nico's
    own too, and those arrive after the pass that made them (and read them back) has often ended; each
    would otherwise bring one more pass that lists the domain and finds nothing to do.

    One event per completed change call of the partition it touched is expected for ``ECHO_SECONDS``
    after the pass, for the calls that completed while the domain's event stream was known to be live
    (it had delivered an event before they completed: a change made before the stream was open is
    never announced, and its echo must not stand in for another). An event beyond those (a change made
    behind nico's back), one for another partition, one arriving later, or one naming no partition
    brings a pass as before; the periodic full pass remains the backstop for a change whose event was
    taken for an echo."""

    def __init__(self, window: float = ECHO_SECONDS) -> None:
        self.window = window
        self._due: dict[uuid.UUID, tuple[float, Counter[int]]] = {}
        self._live_since: dict[uuid.UUID, float] = {}

    def listening(self, domain: uuid.UUID, *, fresh: bool = False) -> None:
        """The domain's event stream delivered an event (``fresh``: on a stream opened anew, whose
        predecessor's events may be lost)."""
        if fresh:
            self.deaf(domain)
        self._live_since.setdefault(domain, time.monotonic())

    def live(self, domain: uuid.UUID) -> bool:
        """Whether the domain's event stream has delivered an event (echoes are owed from then on)."""
        return domain in self._live_since

    def deaf(self, domain: uuid.UUID) -> None:
        """The domain's event stream ended: no echo is expected until a new one proves itself."""
        self._live_since.pop(domain, None)
        self._due.pop(domain, None)

    def expect(self, domain: uuid.UUID, calls: Iterable[tuple[int, float]]) -> None:
        """A pass over ``domain`` completed change calls: (partition touched, when), one per call."""
        since = self._live_since.get(domain)
        if since is None:
            return
        heard = Counter(partition for partition, done in calls if done > since)
        if not heard:
            return
        until, due = self._due.get(domain, (0.0, Counter[int]()))
        if until < time.monotonic():
            due = Counter()
        self._due[domain] = (time.monotonic() + self.window, due + heard)

    def heard(self, domain: uuid.UUID, partition: int | None) -> bool:
        """Whether a partition event is the echo of a change nico made (and now used up)."""
        until, due = self._due.get(domain, (0.0, Counter[int]()))
        if partition is None or until < time.monotonic() or not due[partition]:
            return False
        due[partition] -= 1
        return True


def _figures(rows: Iterable[Any]) -> dict[uuid.UUID, DomainFigures]:
    """Gauge figures by domain from :func:`queries.domain_figures` rows."""
    found = {}
    for domain, physical, pending, free, used in rows:
        found[domain] = DomainFigures(physical, pending, free, free if used else 0)
    return found


def _has_work(s: statemod.DomainState, partitions: list[FabricPartition], mode: Mode = "domain") -> bool:
    """Whether a domain needs a locked pass: operations to do, instances to settle, intents to close,
    records or observations that no longer match the fabric."""
    if s.unsettled or s.intents:
        return True
    if plan(s.desire(mode), partitions).operations:
        return True
    by_name = {p.name: p for p in partitions}
    for name, record in s.partitions.items():
        found = by_name.get(name)
        if found is None or found.nmx_partition_id != record.nmx_partition_id:
            return True
    location = {g: p.nmx_partition_id for p in partitions for g in p.gpu_uids}
    return any(location.get(g.gpu_uid) != g.observed_fabric_partition for g in s.gpus.values())


def _mismatches(s: statemod.DomainState, gpus: list[FabricGpu]) -> int:
    """GPUs whose recorded identity (machine, device index) disagrees with what the fabric reports,
    plus recorded GPUs the fabric does not report at all."""
    reported = {g.gpu_uid: g for g in gpus}
    count = 0
    for row in s.gpus.values():
        found = reported.get(row.gpu_uid)
        if found is None or found.device_id != row.device_id or found.domain_uuid != s.domain:
            count += 1
    return count
