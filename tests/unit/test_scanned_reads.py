"""A full pass's scan hands its listing and plan to the domain's locked pass only when the pass loads
the state the scan compared (``ReadBacks.scanned`` / ``use_scan``): a pass of another reconciler in
between (its write-back changed the GPUs' observations) has the locked pass list the fabric again."""

from __future__ import annotations

import time
import uuid

from nico.fabric.backend import DomainTarget, FabricPartition
from nico.reconciler.last_reads import ReadBacks
from nico.reconciler.planner import plan
from nico.reconciler.state import DomainState, GpuRow

DOMAIN = uuid.uuid4()
LP = uuid.uuid4()
INSTANCE = uuid.uuid4()
TARGET = DomainTarget(DOMAIN, "http://nmx-c:1")


def state(observed: int | None) -> DomainState:
    """One GPU that wants LP, last observed in fabric partition ``observed``."""
    gpu = GpuRow(7, "m-1", 1, INSTANCE, LP, None, observed, "SN-1", 1)
    return DomainState(DOMAIN, gpus={7: gpu}, chassis_serials={"SN-1"})


def default_partition() -> list[FabricPartition]:
    return [FabricPartition(32766, "32766", "Default Partition", frozenset({7}))]


def test_the_scans_listing_and_plan_serve_the_pass_that_loads_the_same_state() -> None:
    reads = ReadBacks()
    scanned, listing = state(32766), default_partition()
    planned = plan(scanned.desire(), listing)
    assert planned.operations  # the GPU goes to its logical partition's
    reads.scanned(TARGET, listing, time.monotonic(), scanned, planned)

    loaded = state(32766)  # loaded again under the lock: equal, another object
    same, reused = reads.use_scan(loaded)
    assert reused is planned and same is scanned  # its desire made once
    assert reads.fresh(TARGET) is listing  # the pass plans on the scan's listing, as on a read-back
    assert reads.use_scan(loaded) == (loaded, None)  # once


def test_a_state_written_since_the_scan_has_the_pass_list_again() -> None:
    reads = ReadBacks()
    listing = default_partition()
    reads.scanned(TARGET, listing, time.monotonic(), state(32766), None)

    moved = state(5)  # another reconciler's write-back: the GPU is in partition 5 now
    assert reads.use_scan(moved) == (moved, None)
    assert reads.fresh(TARGET) is None  # no listing that may predate that pass's changes


def test_an_event_forgets_the_scan() -> None:
    reads = ReadBacks()
    scanned = state(32766)
    reads.scanned(TARGET, default_partition(), time.monotonic(), scanned, None)
    reads.forget(DOMAIN)  # a partition event: the listing may be stale
    assert reads.use_scan(state(32766))[1] is None and reads.fresh(TARGET) is None
