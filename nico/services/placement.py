"""How many of the free machines new instances take from which NVLink domain. Pure: counts in,
counts out (no I/O, no ORM); ``nico.instance.claim`` counts the free machines and locks that many.

Policy, in order of preference, for the NVLink domains that can take the whole request:

1. a domain where a requested logical partition is already present (its GPUs can share memory with
   the new ones without spreading the partition over more domains);
2. a domain that is already in use (a fragment) before an untouched one, so whole domains stay free
   for whole-domain jobs;
3. the fewest free machines (best fit);
4. a seeded random choice among equals, so concurrent requests spread over equal domains.

Requests without NVLink interfaces take machines without a domain first: they cannot fragment one.

Requests that arrive together rank alike, so the other domains that fit follow the first, in the same
order (``plan_choices``): a request whose first choice others hold right now takes the next.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID


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
    free: int = 0
    used: int = 0


def _rank(domains: Sequence[_Domain], ask: Ask, rng: random.Random) -> list[_Domain]:
    """Domains in order of preference (module docstring)."""
    keys = {d.uuid: (d.uuid not in ask.lp_domains, d.used == 0, d.free, rng.random()) for d in domains}
    return sorted(domains, key=lambda d: keys[d.uuid])


Plan = list[tuple[UUID | None, int]]  # (domain, or None for machines without one; how many)


def plan_counts(
    free: Mapping[UUID, int],
    loose: int,
    ask: Ask,
    rng: random.Random,
    used: Mapping[UUID, int] | None = None,
    unlisted: int = 0,
) -> Plan:
    """The plan :func:`plan_choices` prefers."""
    return plan_choices(free, loose, ask, rng, used, unlisted)[0]


def plan_choices(
    free: Mapping[UUID, int],
    loose: int,
    ask: Ask,
    rng: random.Random,
    used: Mapping[UUID, int] | None = None,
    unlisted: int = 0,
    most: int = 1,
) -> list[Plan]:
    """How many machines to take from which domain (None: machines without a domain), by the policy
    of the module docstring; ``free`` counts free machines per domain (every domain that has machines
    of the type), ``loose`` those without a domain. A database can then lock that many in each.

    ``unlisted``: free machines in domains left out of ``free`` (they count in the pool only). A
    caller may leave domains out when ``free`` still holds, of every kind of domain the ranking tells
    apart (partition present or not, fragment or untouched, free count), at least one, and one of
    them fits the whole request: the plan is then one the whole list could give.

    The first plan is the preferred one. When it takes one domain, up to ``most - 1`` more follow: the
    other domains that fit the whole request, in the same order. A request whose first choice other
    requests hold right now takes the next one (``nico_lock_free_machines_first``)."""
    if ask.count < 1:
        raise ValueError("count must be at least 1")
    counts = used or {}
    domains = [_Domain(uuid, n, counts.get(uuid, 0)) for uuid, n in free.items()]
    in_domains = sum(d.free for d in domains) + unlisted
    # The reference counts the whole pool, domain or not, before it looks at topology.
    pool = in_domains + (loose if ask.topology_optimized or not ask.needs_nvlink else 0)
    best = max((d.free for d in domains), default=0)
    if pool < ask.count:
        raise NoCapacity(ask.count, pool, best, ask.topology_optimized)
    if not ask.needs_nvlink and not ask.topology_optimized and loose >= ask.count:
        return [[(None, ask.count)]]
    ranked = _rank([d for d in domains if d.free], ask, rng)
    fits = [domain for domain in ranked if domain.free >= ask.count]
    if fits:
        return [[(domain.uuid, ask.count)] for domain in fits[:most]]
    if ask.topology_optimized:
        raise NoCapacity(ask.count, pool, best, True)
    # No single domain fits: loose machines first, then the fullest domains, so the emptiest survive.
    if unlisted:
        raise ValueError("no listed domain fits the request: list every domain")
    plan: list[tuple[UUID | None, int]] = []
    remaining = ask.count
    if not ask.needs_nvlink and loose:
        plan.append((None, min(loose, remaining)))
        remaining -= plan[-1][1]
    for domain in ranked:
        if remaining <= 0:
            break
        plan.append((domain.uuid, min(domain.free, remaining)))
        remaining -= plan[-1][1]
    return [plan]
