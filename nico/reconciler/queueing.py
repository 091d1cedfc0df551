"""The reconciler's work queue: which domains are due for a pass and when, requests debounced and
coalesced per domain, and the retry each pass's result asks for. The scheduler
(:mod:`nico.reconciler.scheduler`) starts the passes; this only keeps the book."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Iterable

from nico.reconciler.domain_pass import DomainResult

# Another session holds the domain's lock for one pass of it: look again soon after.
BUSY_RETRY_SECONDS = 0.25
WAITING_RETRY_SECONDS = 0.25


class WorkQueue:
    """Domains due for a pass (monotonic time), and ``wake`` set whenever that changes."""

    def __init__(self) -> None:
        self.due: dict[uuid.UUID, float] = {}
        # When each domain was last asked for (monotonic): a request older than a pass's load is
        # covered by that pass (see covered).
        self.asked: dict[uuid.UUID, float] = {}
        self.wake = asyncio.Event()

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
