"""The reconciler's work queue: which domains are due for a pass and when, requests debounced and
coalesced per domain, the retry each pass's result asks for, and which passes run. The scheduler
(:mod:`nico.reconciler.scheduler`) starts the passes; this only keeps the book, and lets the full
pass's work wait while a pass for a change runs (:class:`Yielding`)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections.abc import Iterable
from typing import Literal

from nico.reconciler.pass_context import DomainResult

# Another session holds the domain's lock for one pass of it: look again soon after.
BUSY_RETRY_SECONDS = 0.25
WAITING_RETRY_SECONDS = 0.25
# Seconds the full pass's next step waits at most for the passes for changes to end: they go first,
# and the full pass still moves on under a steady stream of them.
YIELD_MAX = 0.5


class WorkQueue:
    """Domains due for a pass (monotonic time), and ``wake`` set whenever that changes."""

    def __init__(self) -> None:
        self.due: dict[uuid.UUID, float] = {}
        # When each domain was last asked for (monotonic): a request older than a pass's load is
        # covered by that pass (see covered).
        self.asked: dict[uuid.UUID, float] = {}
        self.wake = asyncio.Event()
        # The passes for changes under way (each its own task): a request for one of them waits in
        # ``due`` and becomes one more pass when this one ends (coalesced). ``idle``: none runs.
        self.running: dict[uuid.UUID, asyncio.Task[None]] = {}
        self.idle = asyncio.Event()
        self.idle.set()

    def start(self, domain: uuid.UUID, task: asyncio.Task[None]) -> None:
        self.running[domain] = task
        self.idle.clear()

    def ended(self, domain: uuid.UUID) -> None:
        self.running.pop(domain, None)
        if not self.running:
            self.idle.set()

    def request(self, domains: Iterable[uuid.UUID], delay: float = 0.0) -> None:
        """Reconcile ``domains`` after ``delay`` seconds (sooner if already due sooner)."""
        now = time.monotonic()
        for domain in domains:
            self.due[domain] = min(self.due.get(domain, math.inf), now + delay)
            self.asked[domain] = now
        self.wake.set()

    def burst_wait(self, ready: Iterable[uuid.UUID], now: float, debounce: float) -> float:
        """How long to wait before starting the passes of the ``ready`` domains: until the newest
        request among them is ``debounce`` old (0: at once)."""
        newest = max((self.asked.get(d, -math.inf) for d in ready), default=-math.inf)
        return max(newest + debounce - now, 0.0)

    def covered(self, result: DomainResult) -> None:
        """Drop the domain's waiting request when the pass that just ended already did what it asked:
        the pass ended with nothing left to do, and every request came before it loaded the domain's
        state (so it saw the commits they announce: a NOTIFY is delivered after its commit). Such
        a request, made while the pass ran (a create committed just before the pass loaded it, its
        notification arriving after), would otherwise cost one more pass that lists the fabric and
        holds the domain while the next change waits."""
        loaded = result.loaded_at
        if result.status != "ok" or result.follow_up or loaded is None:
            return
        if self.asked.get(result.domain, math.inf) < loaded:
            self.due.pop(result.domain, None)

    def after(self, result: DomainResult, failures: int, backoff_max: float) -> None:
        """The next pass a result asks for (``failures``: the domain's consecutive failures)."""
        if result.status == "busy":
            self.request([result.domain], BUSY_RETRY_SECONDS)
        elif result.status == "waiting":
            self.request([result.domain], WAITING_RETRY_SECONDS)
        elif result.status == "error":
            self.request([result.domain], min(0.5 * 2 ** (failures - 1), backoff_max))
        elif result.follow_up:
            self.request([result.domain], 0.0 if not result.failed else 0.5)


class Yielding(asyncio.Semaphore):
    """The full pass's limit: each step it starts first waits (up to :data:`YIELD_MAX`) until no pass
    for a change runs, so on one event loop a change's pass is not slowed by a scan's many steps."""

    def __init__(self, value: int, idle: asyncio.Event) -> None:
        super().__init__(value)
        self.idle = idle

    async def acquire(self) -> Literal[True]:
        if not self.idle.is_set():  # (a timeout armed and cancelled per step costs a scan's CPU)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(YIELD_MAX):
                    await self.idle.wait()
        return await super().acquire()
