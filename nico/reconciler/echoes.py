"""The partition events a domain's last passes have coming (their echoes), so that an event announcing
nico's own change does not bring one more pass."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterable

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
