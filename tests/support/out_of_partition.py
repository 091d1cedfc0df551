"""How long a GPU stays out of every partition, in fabric calls made one after another (issue 12,
#6644: never longer than one operation).

The reconciler's changes are journaled where it makes them (its backend's four change calls): when
each call starts and ends, and which GPUs of the call's domain are in no partition when it ends. A GPU
that goes out has waited through every call of its domain that started after it went out and ended
before the call that brought it back started; counting that call too gives how many operations it
was out for, one after another. Calls made at once (a wave of additions) overlap, so they do not add
up: a GPU out only while its own addition is made was out for one operation.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from nico.fabric.backend import DomainTarget
from nico.sim.fabric import SimFabric

CHANGES = ("create_partition", "delete_partition", "add_gpus", "remove_gpus")


@dataclass(frozen=True)
class Event:
    kind: str  # "start" | "end"
    call: int
    domain: uuid.UUID
    out: frozenset[int] = frozenset()  # at an end: the domain's GPUs in no partition


class OutJournal:
    """The change calls made through ``backend`` (an instance, or a backend class: every instance)."""

    def __init__(self, fabric: SimFabric, backend: object, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fabric = fabric
        self.events: list[Event] = []
        self.initially_out = {d: self._out(d) for d in fabric.domains}
        self._numbers = itertools.count()
        for name in CHANGES:
            original = getattr(backend, name)
            if isinstance(backend, type):

                async def method(
                    me: Any, target: DomainTarget, *args: Any, _call: Any = original, **kw: Any
                ) -> Any:
                    return await self._journaled(target, lambda: _call(me, target, *args, **kw))

                monkeypatch.setattr(backend, name, method)
            else:

                async def bound(target: DomainTarget, *args: Any, _call: Any = original, **kw: Any) -> Any:
                    return await self._journaled(target, lambda: _call(target, *args, **kw))

                monkeypatch.setattr(backend, name, bound)

    async def _journaled(self, target: DomainTarget, call: Callable[[], Awaitable[Any]]) -> Any:
        n = next(self._numbers)
        self.events.append(Event("start", n, target.domain_uuid))
        try:
            await asyncio.sleep(0)  # calls made at once overlap, as they do on a real manager
            return await call()
        finally:
            self.events.append(Event("end", n, target.domain_uuid, self._out(target.domain_uuid)))

    def _out(self, domain: uuid.UUID) -> frozenset[int]:
        sim = self.fabric.domain(domain)
        return frozenset(set(sim.gpus) - set(sim.owner))

    @property
    def calls(self) -> int:
        return sum(1 for e in self.events if e.kind == "end")

    def longest_out(self) -> int:
        """The most operations, one after another, any GPU was out of every partition for (module
        docstring); a GPU still out at the end counts every call of its domain since it went out."""
        started: dict[int, int] = {}
        ended: dict[int, int] = {}
        domain_of: dict[int, uuid.UUID] = {}
        since: dict[tuple[uuid.UUID, int], int] = {
            (d, g): -1 for d, out in self.initially_out.items() for g in out
        }
        longest = 0

        def waited(domain: uuid.UUID, went_out: int, until: int) -> int:
            return sum(
                1
                for c, end in ended.items()
                if domain_of[c] == domain and started[c] > went_out and end < until
            )

        for i, event in enumerate(self.events):
            domain_of[event.call] = event.domain
            if event.kind == "start":
                started[event.call] = i
                continue
            ended[event.call] = i
            for gpu in event.out:
                since.setdefault((event.domain, gpu), i)
            for key in [k for k in since if k[0] == event.domain and k[1] not in event.out]:
                longest = max(longest, 1 + waited(event.domain, since.pop(key), started[event.call]))
        for (domain, _), went_out in since.items():
            longest = max(longest, waited(domain, went_out, len(self.events)))
        return longest
