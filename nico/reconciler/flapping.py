"""Flapping instances: how long a domain's next pass waits when its passes keep moving the same
instance (a tenant moving it back and forth between partitions).

Every pass that changes the fabric reports the instances whose NVLink change it carried out, with the
version of their NVLink config. When one of them had been moved to another version by a pass of the
domain less than twice ``interval`` before (a pass finishing the same version's change does not
count), the domain's next pass waits until ``interval`` after this one. (Twice: the pass a hold lets
through comes just over ``interval`` after the move before it, and a flood must stay held from one
pass to the next.) The tenant's changes meanwhile coalesce into that pass: an instance moved
A -> B -> A meanwhile costs nothing, the planner finding the fabric as wanted. So a flapping instance
costs its domain at most one pass of changes per ``interval``, however fast the requests come.
Instances moved once (creates, a single change) never make anyone wait.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable


class Flapping:
    """Per domain: when each instance was last moved, and until when the domain's passes wait."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._moved: dict[
            uuid.UUID, dict[uuid.UUID, tuple[float, int]]
        ] = {}  # domain -> instance -> (at, version)
        self._held: dict[uuid.UUID, float] = {}

    def after_pass(self, domain: uuid.UUID, moved: Iterable[tuple[uuid.UUID, int]], now: float) -> None:
        """A pass of ``domain`` ending at ``now`` (monotonic) moved the instances ``moved`` (id, NVLink
        config version)."""
        last = self._moved.setdefault(domain, {})
        for instance, (at, _) in list(last.items()):  # only the last two intervals matter
            if now - at >= 2 * self.interval:
                del last[instance]
        again = False
        for instance, version in moved:
            again = again or (instance in last and last[instance][1] != version)
            last[instance] = (now, version)
        if again:
            self._held[domain] = now + self.interval
        if not last:
            self._moved.pop(domain, None)

    def held_until(self, domain: uuid.UUID, now: float) -> float | None:
        """When the domain's next pass may start, if later than ``now``; None: at once."""
        until = self._held.get(domain)
        if until is None or until <= now:
            self._held.pop(domain, None)
            return None
        return until
