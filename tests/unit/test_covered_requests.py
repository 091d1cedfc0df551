"""A request for a domain that came before a pass loaded the domain's state is covered by that pass
(its NOTIFY followed the commit the load saw): when the pass ends with nothing left to do, the request
is dropped instead of costing one more pass (``WorkQueue.covered``). Anything else still brings one.
And the debounce waits only for fresh requests: one that waited for its domain's running pass starts
its pass at once (``WorkQueue.burst_wait``)."""

from __future__ import annotations

import time
import uuid

from prometheus_client import CollectorRegistry

from nico.config import NvLinkConfig
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.pass_context import DomainResult, DomainStatus
from nico.reconciler.scheduler import Reconciler

DOMAIN = uuid.uuid4()


def reconciler() -> Reconciler:
    # Only the request bookkeeping is exercised: no database, no fabric.
    metrics = ReconcilerMetrics(CollectorRegistry(), "nmxc", 60.0)
    return Reconciler(None, None, NvLinkConfig(), metrics)  # type: ignore[arg-type]


def ended(status: DomainStatus = "ok", *, loaded_at: float, follow_up: bool = False) -> DomainResult:
    return DomainResult(DOMAIN, status, follow_up=follow_up, loaded_at=loaded_at)


def test_a_request_made_before_the_pass_loaded_is_dropped_when_the_pass_is_done() -> None:
    r = reconciler()
    r.request([DOMAIN])
    r.queue.covered(ended(loaded_at=time.monotonic() + 0.001))
    assert DOMAIN not in r.due


def test_a_request_made_after_the_pass_loaded_still_brings_a_pass() -> None:
    r = reconciler()
    loaded = time.monotonic()
    r.request([DOMAIN])  # the pass may not have seen the commit this announces
    r.queue.covered(ended(loaded_at=loaded - 0.001))
    assert DOMAIN in r.due


def test_a_pass_that_left_work_or_failed_covers_nothing() -> None:
    for status, follow_up in (("ok", True), ("error", False), ("busy", False), ("waiting", False)):
        r = reconciler()
        r.request([DOMAIN])
        r.queue.covered(ended(status, loaded_at=time.monotonic() + 0.001, follow_up=follow_up))  # type: ignore[arg-type]
        assert DOMAIN in r.due, status


def test_a_pass_without_a_load_covers_nothing() -> None:
    r = reconciler()
    r.request([DOMAIN])
    r.queue.covered(DomainResult(DOMAIN, "ok"))  # a pass of a domain that is gone, say
    assert DOMAIN in r.due


def test_passes_wait_for_a_burst_to_settle_only_after_a_fresh_request() -> None:
    r = reconciler()
    other = uuid.uuid4()
    r.request([DOMAIN])
    now = time.monotonic()
    assert 0.0 < r.queue.burst_wait([DOMAIN], now, 0.005) <= 0.005  # just asked: a burst may follow
    assert r.queue.burst_wait([DOMAIN], now + 0.1, 0.005) == 0.0  # asked long ago (waited for its pass)
    r.request([other])
    assert r.queue.burst_wait([DOMAIN, other], now + 0.1, 0.005) == 0.0  # both old by then
    assert r.queue.burst_wait([DOMAIN], time.monotonic(), 0.0) == 0.0  # no debounce configured
