"""Which free machines new instances go to. Pure: plain data in, plain data out (no I/O, no ORM).

Policy, in order of preference, for the NVLink domains that can take the whole request:

1. a domain where a requested logical partition is already present (its GPUs can share memory with
   the new ones without spreading the partition over more domains);
2. a domain that is already in use (a fragment) before an untouched one, so whole domains stay free
   for whole-domain jobs;
3. the fewest free machines (best fit);
4. a seeded random choice among equals, so concurrent requests spread over equal domains.

Requests without NVLink interfaces take machines without a domain first: they cannot fragment one.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple
from uuid import UUID


class MachineSlot(NamedTuple):
    """What placement knows of a machine (a tuple: sites have thousands)."""

    id: str
    domain: UUID | None
    instance_type_id: UUID | None
    ready: bool
    assigned: bool


@dataclass(frozen=True)
class Ask:
    """What is being placed: ``count`` machines of one instance type."""

    instance_type_id: UUID
    count: int = 1
    needs_nvlink: bool = False
    topology_optimized: bool = False
    lp_domains: frozenset[UUID] = frozenset()


class NoCapacity(Exception):
    """Not enough machines. ``available`` is the free pool, ``best_domain`` the largest free count in
    one domain (for the topology-optimised message)."""

    def __init__(self, requested: int, available: int, best_domain: int, topology: bool) -> None:
        super().__init__(f"requested {requested}, available {available}, best domain {best_domain}")
        self.requested, self.available, self.best_domain, self.topology = (
            requested,
            available,
            best_domain,
            topology,
        )


@dataclass
class _Domain:
    uuid: UUID
    free: list[str] = field(default_factory=list)
    used: int = 0


def eligible(slot: MachineSlot, ask: Ask) -> bool:
    """A machine may take a new instance: right type, Ready, unassigned."""
    return slot.instance_type_id == ask.instance_type_id and slot.ready and not slot.assigned


def _domains(
    slots: Iterable[MachineSlot], ask: Ask, used: Mapping[UUID, int]
) -> tuple[list[_Domain], list[str]]:
    """Free machines grouped by domain (every domain that has machines of the type), and the free
    machines without a domain. ``used`` adds assigned machines not given as slots."""
    by_uuid: dict[UUID, _Domain] = {d: _Domain(d, used=n) for d, n in used.items()}
    loose: list[str] = []
    wanted = ask.instance_type_id
    for machine_id, uuid, type_id, ready, assigned in slots:
        if type_id != wanted:
            continue
        free = ready and not assigned  # eligible(), inlined: this loop sees every free machine
        if uuid is None:
            if free:
                loose.append(machine_id)
            continue
        domain = by_uuid.get(uuid)
        if domain is None:
            domain = by_uuid[uuid] = _Domain(uuid)
        if free:
            domain.free.append(machine_id)
        elif assigned:
            domain.used += 1
    return list(by_uuid.values()), loose


def _rank(domains: Sequence[_Domain], ask: Ask, rng: random.Random) -> list[_Domain]:
    """Domains in order of preference (module docstring)."""
    keys = {d.uuid: (d.uuid not in ask.lp_domains, d.used == 0, len(d.free), rng.random()) for d in domains}
    return sorted(domains, key=lambda d: keys[d.uuid])


def _take(machines: list[str], count: int, rng: random.Random) -> list[str]:
    return rng.sample(sorted(machines), count)


def place(
    slots: Collection[MachineSlot], ask: Ask, seed: int | None = None, used: Mapping[UUID, int] | None = None
) -> list[str]:
    """Exactly ``ask.count`` eligible machine ids, or :class:`NoCapacity`.

    ``topology_optimized``: all in one domain (machines without a domain are not candidates).
    Otherwise one domain if one fits, else filled from the fullest domains first. ``used`` counts
    assigned machines per domain that the caller did not list as slots (a big site lists only its
    free machines).
    """
    if ask.count < 1:
        raise ValueError("count must be at least 1")
    rng = random.Random(seed)
    domains, loose = _domains(slots, ask, used or {})
    in_domains = sum(len(d.free) for d in domains)
    # The reference counts the whole pool, domain or not, before it looks at topology.
    pool = in_domains + (len(loose) if ask.topology_optimized or not ask.needs_nvlink else 0)
    best = max((len(d.free) for d in domains), default=0)
    if pool < ask.count:
        raise NoCapacity(ask.count, pool, best, ask.topology_optimized)
    if not ask.needs_nvlink and not ask.topology_optimized and len(loose) >= ask.count:
        return _take(loose, ask.count, rng)
    ranked = _rank([d for d in domains if d.free], ask, rng)
    for domain in ranked:
        if len(domain.free) >= ask.count:
            return _take(domain.free, ask.count, rng)
    if ask.topology_optimized:
        raise NoCapacity(ask.count, pool, best, True)
    # No single domain fits: loose machines first, then the fullest domains, so the emptiest survive.
    chosen = [] if ask.needs_nvlink else list(loose)
    for domain in ranked:
        need = ask.count - len(chosen)
        if need <= 0:
            break
        chosen.extend(_take(domain.free, min(need, len(domain.free)), rng))
    return chosen[: ask.count]
