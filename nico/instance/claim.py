"""Giving free machines to new instances without ever giving one machine twice (a create's step
after its checks; read top down: :func:`claim`, then what it calls, in order).

Placement (pure) chooses; this module locks the choice with ``FOR UPDATE SKIP LOCKED``, re-checking
that each machine is still Ready and unassigned. A machine another transaction holds or has taken is
left out: the pick goes on to placement's next choice in the same statement (migration 0014), and
when none is left placement chooses again, so a request fails only when capacity is really gone. A
pick is all or nothing (one statement, migration 0013), so a partial one holds nothing when placement
chooses again. Locks: docs/architecture.md.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from nico.instance import queries
from nico.instance.confinement import Fence
from nico.services.errors import conflict
from nico.services.placement import Ask, NoCapacity, Plan, plan_choices, plan_counts

# Domains of each kind placement tells apart in a sample: enough to spread concurrent requests over
# equal domains and to find the next one when a request loses the race for one.
PER_KIND = 8
# Domains that fit a whole request one pick tries, best first (``plan_choices``): requests arriving
# together rank alike, and all but a few lose the race for the first.
CHOICES = 8


def sample_size(seed: int | None) -> int | None:
    """Domains of each kind placement reads: a seeded request (tests) reads every domain."""
    return PER_KIND if seed is None else None


@dataclass(frozen=True)
class Claimed:
    """A machine locked for a new instance, and its NVLink domain."""

    id: str
    domain_uuid: uuid.UUID | None


async def claim(
    conn: queries.Connection,
    *,
    site_id: uuid.UUID,
    ask: Ask,
    partition_ids: Iterable[uuid.UUID] = (),
    seed: int | None = None,
    inputs: queries.Inputs | None = None,
) -> list[Claimed]:
    """Lock ``ask.count`` machines for the transaction of ``conn`` (the driver connection under the
    create's session; the caller then sets their ``instance_id``).

    A request that binds GPUs to partitions holding machines of the type in reserve takes those
    first; a single-domain partition keeps the rest in its domain (or, empty, in one domain: a 409
    naming it otherwise, :mod:`nico.instance.confinement`). Placement decides how many machines to
    take from which domain, from counts (``domain_capacity``, kept by triggers; a random sample of
    each kind of domain when one fits); the database picks and locks that many in each (contiguous
    trays first), skipping machines other requests hold (:func:`_claim_free`).

    ``inputs``: placement's inputs for ``partition_ids`` as the creation context read them (with a
    sample of :func:`sample_size` domains, budgets and homes included), else read here.
    """
    wanted_lps = set(partition_ids)
    if inputs is None:
        inputs = await queries.placement_inputs(
            conn, site_id, ask.instance_type_id, wanted_lps, budgets=True, per_kind=sample_size(seed)
        )
    if not ask.needs_nvlink:  # no GPUs bound: no budget to draw from, no home to keep to
        inputs = inputs._replace(budgets=[], homes=[])
    fence = Fence(inputs.homes)
    if fence.confined:  # decided one request after another: read again under the partitions' lock
        confined = [home.id for home in fence.confined]
        fence = Fence(await queries.locked_homes(conn, confined, wanted_lps))
    within = fence.allowed()
    reserving = fence.reserving(ask.instance_type_id)
    taken: list[Claimed] = []
    if reserving:
        found = await queries.lock_reserved_machines(
            conn, site_id, ask.instance_type_id, reserving, ask.count, within
        )
        taken = [Claimed(machine_id, domain) for machine_id, domain in found]
        if len(taken) == ask.count:
            return taken
        if taken and (ask.topology_optimized or fence.confined):  # the rest beside them
            within = frozenset({d for d in (taken[0].domain_uuid,) if d is not None})
    rest = Ask(
        instance_type_id=ask.instance_type_id,
        count=ask.count - len(taken),
        needs_nvlink=ask.needs_nvlink,
        topology_optimized=ask.topology_optimized or (bool(fence.confined) and within is None),
        lp_domains=inputs.lp_domains | fence.reserved_domains,
    )
    try:
        return taken + await _claim_free(conn, site_id, rest, inputs, within, seed)
    except NoCapacity as exc:
        if fence.confined:
            domain = next(iter(within)) if within else None
            raise fence.refusal(domain, exc.best_domain + len(taken), ask.count) from None
        raise NoCapacity(
            ask.count, exc.available + len(taken), exc.best_domain + len(taken), exc.topology
        ) from None


async def _claim_free(
    conn: queries.Connection,
    site_id: uuid.UUID,
    ask: Ask,
    inputs: queries.Inputs,
    within: frozenset[uuid.UUID] | None,
    seed: int | None,
) -> list[Claimed]:
    """``ask.count`` free machines no reservation holds (only in ``within``'s domains unless None).

    When the request fits in one domain, the pick tries the domains that fit in placement's order, in
    one statement, and takes the first that still has them all. When a domain yields fewer (another
    request won the race for it), nothing of it stays locked; when every domain tried did, placement
    decides again with what is really left: the next candidates, not a 409, so a request fails only
    when capacity is really gone (:class:`NoCapacity`)."""
    over = _over_budget(inputs.budgets, inputs.limits)
    counts = await _counts(conn, site_id, ask, None if over or within is not None else inputs.sample)
    counts.keep(within)
    rng = random.Random(seed)
    seen_short: dict[uuid.UUID | None, int] = {}
    while True:  # ends: every short pick lowers a free count, until placement gives up
        plans = _plan_within_budgets(counts, ask, rng, over)
        if len(plans) > 1:  # single domains, best first: the first that still has them all, at once
            domains = [domain for ((domain, _),) in plans if domain is not None]
            pick = await queries.lock_first_free(conn, site_id, ask.instance_type_id, domains, ask.count)
        else:
            pick = await queries.lock_free_machines(conn, site_id, ask.instance_type_id, plans[0])
        if not pick.short:
            assert len(pick.locked) == ask.count
            return [Claimed(machine_id, machine_domain) for machine_id, machine_domain in pick.locked]
        # The rest are held by other requests (or went since the counts); nothing stays locked.
        seen_short.update(pick.short)
        counts.apply(seen_short)
        if counts.unlisted and max(counts.free.values(), default=0) < ask.count:
            counts = await _counts(conn, site_id, ask, None)  # the sample ran out: all of them
            counts.apply(seen_short)


async def _counts(
    conn: queries.Connection, site_id: uuid.UUID, ask: Ask, sample: queries.Sample | None
) -> _Counts:
    """Placement's input from ``domain_capacity``: the sample of each kind of domain when one of
    them fits the whole request (so the cost follows the kinds of domain, not their number: a
    2,000-rack site reads a handful of rows), else every domain with free machines."""
    if sample is not None and (sample.best >= ask.count or ask.topology_optimized):
        counts = _Counts.of(sample.rows)
        counts.unlisted = sample.in_domains - sum(counts.free.values())
        return counts
    return _Counts.of(await queries.machine_counts_by_domain(conn, site_id, ask.instance_type_id))


@dataclass
class _Counts:
    """Free machines per domain (and without one), assigned ones, and free ones in unlisted domains."""

    free: dict[uuid.UUID, int]
    used: dict[uuid.UUID, int]
    loose: int
    unlisted: int = 0

    @classmethod
    def of(cls, rows: Iterable[tuple[uuid.UUID | None, int, int]]) -> _Counts:
        """From (domain, assigned, available) rows; the domain None is the machines without one."""
        counts = cls({}, {}, 0)
        for domain, assigned, available in rows:
            if domain is None:
                counts.loose = available
            else:
                counts.free[domain], counts.used[domain] = available, assigned
        return counts

    def keep(self, within: frozenset[uuid.UUID] | None) -> None:
        """Only the domains of ``within`` (None: all, and machines without a domain)."""
        if within is not None:
            self.free = {d: n for d, n in self.free.items() if d in within}
            self.loose = 0

    def apply(self, seen: dict[uuid.UUID | None, int]) -> None:
        """What a short pick showed: no more than it gave is free there now."""
        for domain, n in seen.items():
            if domain is None:
                self.loose = min(self.loose, n)
            elif domain in self.free:
                self.free[domain] = min(self.free[domain], n)


def _over_budget(budgets: list[queries.Budget], limits: dict[uuid.UUID, int]) -> dict[uuid.UUID, str]:
    """Domains that cannot take the logical partitions (``limits``: each one's multicast groups
    limit), as the placement inputs found them (``budgets``: each not yet present there would draw its
    limit from the domain's budget, ``max_multicast_groups``, and the sum does not fit). Domain -> why
    (the 409's words)."""
    if not any(limits.values()):
        return {}
    return {
        domain: (
            f"NVLink domain {domain} has {budget - in_use} of its {budget} multicast groups "
            f"(max_multicast_groups) left; the logical partition needs {need} (multicastGroupsLimit)"
        )
        for domain, budget, in_use, need in budgets
    }


def _plan_within_budgets(
    counts: _Counts, ask: Ask, rng: random.Random, over: dict[uuid.UUID, str]
) -> list[Plan]:
    """Placement's choices (``plan_choices``) over the domains whose multicast budget can take the
    request; when only the budget stands in the way, a 409 naming it rather than a failure on the
    fabric later."""
    free, loose, used = counts.free, counts.loose, counts.used
    if not over:
        return plan_choices(free, loose, ask, rng, used, counts.unlisted, most=CHOICES)
    within = {domain: (0 if domain in over else n) for domain, n in free.items()}
    try:
        return plan_choices(within, loose, ask, rng, used, most=CHOICES)
    except NoCapacity:
        try:
            plan_counts(free, loose, ask, random.Random(0), used)
        except NoCapacity:
            raise  # machines are short anyway: the usual answer
        reason = next(iter(over[d] for d in free if d in over and free[d]), next(iter(over.values())))
        raise conflict(f"Multicast group budget exceeded: {reason}") from None
