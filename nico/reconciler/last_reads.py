"""What the reconciler remembers of each domain's last reads, to skip a read while it is fresh: the
partitions a pass read back (:class:`ReadBacks`) and when its health was read (:class:`HealthReads`)."""

from __future__ import annotations

import time
import uuid

from nico.fabric.backend import DomainTarget, FabricPartition
from nico.reconciler.planner import Plan
from nico.reconciler.state import DomainState

# A full pass's scan's listing of a domain with work (where it was listed, the listing, when the
# listing began), the state the scan compared it with, and the plan the scan made (None: none).
Scanned = tuple[DomainTarget, list[FabricPartition], float, DomainState, Plan | None]

# How long a domain's last read-back stands in for the listing before a change. Only ever used to plan
# a change: the read-back after the change (and a pass with nothing to do) always lists the fabric, so
# Ready still means seen on the fabric; a stale copy costs a failed or useless call and another pass.
FRESH_SECONDS = 5.0


class ReadBacks:
    """The last read-back of each domain, to skip the list before a change while it is fresh.

    Forgotten when the fabric says it changed (an NMX-C partition event), when a call fails, and when
    the domain's target moves to another endpoint."""

    def __init__(self, max_age: float = FRESH_SECONDS) -> None:
        self.max_age = max_age
        self._seen: dict[uuid.UUID, tuple[float, str | None, list[FabricPartition]]] = {}
        self._scans: dict[uuid.UUID, Scanned] = {}  # for the pass that follows (:meth:`use_scan`)

    def fresh(self, target: DomainTarget) -> list[FabricPartition] | None:
        found = self._seen.get(target.domain_uuid)
        if found is None or found[1] != target.endpoint or time.monotonic() - found[0] > self.max_age:
            return None
        return found[2]

    def store(self, target: DomainTarget, partitions: list[FabricPartition], read_at: float) -> None:
        self._seen[target.domain_uuid] = (read_at, target.endpoint, partitions)

    def forget(self, domain: uuid.UUID) -> None:
        self._seen.pop(domain, None)
        self._scans.pop(domain, None)

    def scanned(
        self,
        target: DomainTarget,
        partitions: list[FabricPartition],
        read_at: float,
        state: DomainState,
        plan: Plan | None,
    ) -> None:
        """A scan listed the domain (beginning at ``read_at``) and found work by ``state``, as it loaded
        it without the domain's lock (``plan``: the plan it made, if it made one)."""
        self._scans[target.domain_uuid] = (target, partitions, read_at, state, plan)

    def use_scan(self, state: DomainState) -> tuple[DomainState, Plan | None]:
        """Once the domain's pass has loaded ``state`` under its lock: when that is the state the scan
        compared (no pass wrote anything of the domain in between, nor began to change it: no intent),
        the scan's listing becomes the domain's latest read-back (a change is planned on it while it
        is fresh), and the scan's state (equal, its desire made already) and plan are returned (the
        planner is pure: the same state on the same listing plans the same). Otherwise (another
        reconciler passed the domain meanwhile: the listing may predate its changes) the scan is
        forgotten, and ``state`` is returned without a plan. Once."""
        found = self._scans.pop(state.domain, None)
        if found is None or found[3] != state:
            return state, None
        target, partitions, read_at, scanned, plan = found
        self.store(target, partitions, read_at)
        return scanned, plan

    def listed_since(self, domain: uuid.UUID, at: float) -> bool:
        """Whether the domain's latest read-back is a listing started at ``at`` or later (so it holds
        every change the fabric had reported by then)."""
        found = self._seen.get(domain)
        return found is not None and found[0] >= at


# How long a domain's last health read stands: a pass (one per instance created, several a second on a
# busy domain, and the passes partition events bring) does not read health again within this time. A
# health event from the fabric makes the last read old at once (and brings a pass that reads it). The
# read itself (two or three calls and their writes) is made after the pass, outside the domain's lock
# (``HealthDue``), so it never holds the domain up for the next change.
HEALTH_FRESH_SECONDS = 5.0


class HealthReads:
    """When each domain's health was last read (see ``HEALTH_FRESH_SECONDS``)."""

    def __init__(self, max_age: float = HEALTH_FRESH_SECONDS) -> None:
        self.max_age = max_age
        self._read: dict[uuid.UUID, float] = {}
        self._forgotten: dict[uuid.UUID, float] = {}  # when each domain's read was last made old

    def fresh(self, domain: uuid.UUID) -> bool:
        return time.monotonic() - self._read.get(domain, -float("inf")) <= self.max_age

    def store(self, domain: uuid.UUID, read_at: float | None = None) -> None:
        """The domain's health was read (begun at ``read_at``, monotonic: a read made old after it began,
        by a health event, is not stored as fresh: it may have missed what the event announced)."""
        if read_at is not None and self._forgotten.get(domain, -float("inf")) >= read_at:
            return
        self._read[domain] = time.monotonic()

    def forget(self, domain: uuid.UUID) -> None:
        self._read.pop(domain, None)
        self._forgotten[domain] = time.monotonic()
