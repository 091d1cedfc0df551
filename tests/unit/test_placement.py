"""Placement properties over random sites, on what production calls (``plan_counts``: how many
machines from which domain; the database then locks that many): right count, never more than a domain
has free, one domain when asked, best fit, whole domains kept free while a fragment fits, the
partition's domains first, ties spread by the seed; and the choices after the first (``plan_choices``):
where a request goes when others hold its first choice."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nico.services.placement import Ask, NoCapacity, plan_choices, plan_counts

TYPE = uuid.UUID(int=1)
DOMAINS = [uuid.UUID(int=100 + n) for n in range(6)]


@st.composite
def sites(draw: st.DrawFn) -> tuple[dict[uuid.UUID, int], dict[uuid.UUID, int], int]:
    """Free machines of the type per domain (every domain with machines of the type, maybe 0 free),
    assigned ones per domain, free machines without a domain."""
    free: dict[uuid.UUID, int] = {}
    used: dict[uuid.UUID, int] = {}
    for domain in DOMAINS:
        machines = draw(st.integers(0, 18))
        if machines:
            free[domain] = draw(st.integers(0, machines))
            used[domain] = draw(st.integers(0, machines - free[domain]))
    return free, used, draw(st.integers(0, 18))


asks = st.builds(
    Ask,
    instance_type_id=st.just(TYPE),
    count=st.integers(1, 20),
    needs_nvlink=st.booleans(),
    topology_optimized=st.booleans(),
    lp_domains=st.frozensets(st.sampled_from(DOMAINS), max_size=2),
)


@settings(max_examples=400, deadline=None)
@given(site=sites(), ask=asks, seed=st.integers(0, 2**32))
def test_placement_properties(
    site: tuple[dict[uuid.UUID, int], dict[uuid.UUID, int], int], ask: Ask, seed: int
) -> None:
    free, used, loose = site
    try:
        plan = plan_counts(free, loose, ask, random.Random(seed), used)
    except NoCapacity as exc:
        fits = [d for d, n in free.items() if n >= ask.count]
        pool = sum(free.values()) + (loose if ask.topology_optimized or not ask.needs_nvlink else 0)
        assert exc.available == pool
        assert exc.best_domain == max(free.values(), default=0)
        if ask.topology_optimized:
            assert not fits
        else:
            assert pool < ask.count
        return

    taken = Counter[uuid.UUID | None]()
    for domain, n in plan:
        assert n > 0
        taken[domain] += n
    assert sum(taken.values()) == ask.count  # never more (or fewer) than requested
    for domain, n in taken.items():
        assert n <= (loose if domain is None else free[domain])  # only free machines
        if ask.needs_nvlink or ask.topology_optimized:
            assert domain is not None
    if ask.topology_optimized:
        assert len(taken) == 1
    if len(taken) == 1 and None not in taken:
        (domain,) = taken
        assert domain is not None
        fitting = [d for d, n in free.items() if n >= ask.count]
        preferred = [d for d in fitting if d in ask.lp_domains] or fitting
        assert domain in preferred  # the partition's domains come first
        fragments = [d for d in preferred if used.get(d, 0)]
        if fragments:  # whole free domains are preserved while a fragment fits
            assert used.get(domain, 0)
        peers = fragments or preferred
        assert free[domain] == min(free[d] for d in peers)  # best fit: no tighter domain skipped


@settings(max_examples=300, deadline=None)
@given(site=sites(), ask=asks, seed=st.integers(0, 2**32), most=st.integers(1, 8))
def test_the_next_choices_are_the_other_fitting_domains_in_rank_order(
    site: tuple[dict[uuid.UUID, int], dict[uuid.UUID, int], int], ask: Ask, seed: int, most: int
) -> None:
    """The first choice is ``plan_counts``'s plan. When it takes one domain, the others are every
    other domain that fits the whole request (up to ``most`` choices in all), one each, in the order
    the policy ranks them: partition present, then fragment, then fewest free."""
    free, used, loose = site
    try:
        choices = plan_choices(free, loose, ask, random.Random(seed), used, most=most)
    except NoCapacity:
        return
    assert choices[0] == plan_counts(free, loose, ask, random.Random(seed), used)
    single = len(choices[0]) == 1 and choices[0][0][0] is not None
    if not single:
        assert len(choices) == 1
        return
    fitting = {d for d, n in free.items() if n >= ask.count}
    domains = [plan[0][0] for plan in choices]
    assert all(plan == [(d, ask.count)] for plan, d in zip(choices, domains, strict=True))
    assert len(set(domains)) == len(domains) == min(most, len(fitting))
    assert set(domains) <= fitting

    def rank(d: uuid.UUID | None) -> tuple[bool, bool, int]:
        assert d is not None
        return (d not in ask.lp_domains, used.get(d, 0) == 0, free[d])

    assert [rank(d) for d in domains] == sorted(rank(d) for d in domains)
    if len(domains) < len(fitting):  # the ones left out rank no better than the last one taken
        assert all(rank(d) >= rank(domains[-1]) for d in fitting - set(domains))


@given(site=sites(), seed=st.integers(0, 2**32))
def test_without_nvlink_machines_without_a_domain_come_first(
    site: tuple[dict[uuid.UUID, int], dict[uuid.UUID, int], int], seed: int
) -> None:
    free, used, loose = site
    if not loose:
        return
    assert plan_counts(free, loose, Ask(instance_type_id=TYPE), random.Random(seed), used) == [(None, 1)]


def test_ties_are_spread_by_the_seed() -> None:
    free = dict.fromkeys(DOMAINS[:4], 18)
    ask = Ask(instance_type_id=TYPE, count=2, topology_optimized=True)
    chosen = Counter(plan_counts(free, 0, ask, random.Random(seed))[0][0] for seed in range(200))
    assert set(chosen) == set(DOMAINS[:4])  # every equal domain gets some of the requests


def test_count_must_be_positive() -> None:
    with pytest.raises(ValueError):
        plan_counts({}, 0, Ask(instance_type_id=TYPE, count=0), random.Random(0))


def test_fill_uses_the_fullest_domains_first() -> None:
    free = {DOMAINS[0]: 18, DOMAINS[1]: 3, DOMAINS[2]: 5}
    used = {DOMAINS[1]: 15, DOMAINS[2]: 13}
    plan = plan_counts(
        free, 0, Ask(instance_type_id=TYPE, count=20, needs_nvlink=True), random.Random(1), used
    )
    assert dict(plan) == {DOMAINS[1]: 3, DOMAINS[2]: 5, DOMAINS[0]: 12}


def test_used_counts_make_a_domain_a_fragment() -> None:
    free = {DOMAINS[0]: 4, DOMAINS[1]: 4}
    ask = Ask(instance_type_id=TYPE, count=2, topology_optimized=True)
    for seed in range(20):
        assert plan_counts(free, 0, ask, random.Random(seed), {DOMAINS[1]: 3}) == [(DOMAINS[1], 2)]


def _kind(domain: uuid.UUID, free: dict[uuid.UUID, int], used: dict[uuid.UUID, int], ask: Ask) -> tuple:
    return (domain in ask.lp_domains, used.get(domain, 0) == 0, free[domain])


@settings(max_examples=300, deadline=None)
@given(site=sites(), ask=asks, seed=st.integers(0, 2**32), pick=st.randoms(use_true_random=False))
def test_a_sample_of_every_kind_plans_as_the_whole_list(
    site: tuple[dict[uuid.UUID, int], dict[uuid.UUID, int], int], ask: Ask, seed: int, pick: random.Random
) -> None:
    """What ``nico.instance.claim`` gives placement on a big site: one domain of each kind it ranks by, the
    free machines of the others as ``unlisted``. Whenever a listed domain fits the request, the plan
    takes a domain of the kind the whole list's plan takes (or fails the same way)."""
    free, used, loose = site
    kinds: dict[tuple, uuid.UUID] = {}
    for domain in pick.sample(sorted(free), len(free)):
        if free[domain]:
            kinds.setdefault(_kind(domain, free, used, ask), domain)
    sample = {d: free[d] for d in kinds.values()}
    if not any(n >= ask.count for n in sample.values()):
        return  # the claim reads every domain then
    unlisted = sum(free.values()) - sum(sample.values())
    try:
        whole = plan_counts(free, loose, ask, random.Random(seed), used)
    except NoCapacity as exc:
        with pytest.raises(NoCapacity) as sampled:
            plan_counts(sample, loose, ask, random.Random(seed), used, unlisted)
        assert (sampled.value.available, sampled.value.best_domain) == (exc.available, exc.best_domain)
        return
    planned = plan_counts(sample, loose, ask, random.Random(seed), used, unlisted)
    assert [n for _, n in planned] == [n for _, n in whole]
    for (a, _), (b, _) in zip(planned, whole, strict=True):
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert _kind(a, free, used, ask) == _kind(b, free, used, ask)


def test_unlisted_domains_count_in_the_pool_only() -> None:
    ask = Ask(instance_type_id=TYPE, count=30, topology_optimized=True)
    with pytest.raises(NoCapacity) as exc:
        plan_counts({DOMAINS[0]: 18}, 0, ask, random.Random(0), unlisted=36)
    assert (exc.value.available, exc.value.best_domain) == (54, 18)
    with pytest.raises(ValueError):  # no listed domain fits and the rest are unknown: list them all
        plan_counts({DOMAINS[0]: 18}, 0, Ask(instance_type_id=TYPE, count=30), random.Random(0), unlisted=36)
