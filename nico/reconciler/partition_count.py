"""When the logical-partition count is to be read again: the one gauge figure that grows with the site
(partitions span domains), so it is read at a bounded rate, after the commits that may change it.

A read covers every commit made before it began. A pass's write-back reads the count in its own
transaction when a read is due (:meth:`PartitionCount.due`: the last began :data:`EVERY` seconds ago or
more), and so leaves nothing to read after it; any other pass asks for a read
(:meth:`PartitionCount.passed`). A read asked for is made on its own (:mod:`nico.reconciler.figures`)
only :data:`LATE` seconds after it became due: while passes keep coming, one of them carries it, and a
burst of changes costs no read of its own until it ends."""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field

EVERY = 0.25  # seconds between two reads of the count, at least
LATE = 0.25  # seconds a read asked for waits, once due, for a pass to carry it


@dataclass
class PartitionCount:
    """The count's bookkeeping: when its last read began (monotonic), whether commits since want another,
    and the domains whose last pass read it with its write-back."""

    at: float = -math.inf
    asked: bool = False
    with_pass: set[uuid.UUID] = field(default_factory=set)

    def due(self, now: float | None = None) -> bool:
        """Whether a read may begin now (the last began :data:`EVERY` seconds ago or more)."""
        return (time.monotonic() if now is None else now) >= self.at + EVERY

    def due_at(self) -> float | None:
        """When (monotonic) the read asked for is to be made on its own; None when none is asked for."""
        return self.at + EVERY + LATE if self.asked else None

    def begin(self, now: float | None = None) -> None:
        """A read begins: it covers every commit made before it."""
        self.asked = False
        self.at = time.monotonic() if now is None else now

    def failed(self) -> None:
        """A read that began failed: what it was to cover is asked for again."""
        self.asked = True

    def read_with_pass(self, domain: uuid.UUID) -> None:
        """The domain's pass read the count in its write-back's transaction: its commit is counted."""
        self.with_pass.add(domain)

    def passed(self, domain: uuid.UUID) -> bool:
        """A pass of the domain ended: ask for a read unless its write-back made one; whether it asked."""
        if domain in self.with_pass:
            self.with_pass.discard(domain)
            return False
        self.asked = True
        return True
