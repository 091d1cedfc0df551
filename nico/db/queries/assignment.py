"""The SQL of giving free machines to new instances (driver-level: on a 200-rack site this is the
create request's hot spot): where logical partitions are, free and used machines per domain, and
locking free machines with ``FOR UPDATE SKIP LOCKED``, all or nothing."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any, NamedTuple

import psycopg

from nico.db.models.capacity import NO_DOMAIN
from nico.db.raw import Statement, pipelined

# The domains of unsettled bindings: a skip scan of ix_nvlink_interface_unsettled (partition, placed
# domain) per partition, one index probe per domain found, however many bindings wait there (13,000
# with no reconciler running cost 9 ms read one by one; migration 0012).
_PLACED = """
WITH RECURSIVE placed AS (
    SELECT lp.id AS lp_id,
           (SELECT n.placed_domain_uuid FROM nvlink_interface n
            WHERE n.logical_partition_id = lp.id AND n.status IN ('Pending', 'Provisioning', 'Error')
              AND n.placed_domain_uuid IS NOT NULL
            ORDER BY n.placed_domain_uuid LIMIT 1) AS domain
    FROM unnest(%(ids)s::uuid[]) AS lp(id)
    UNION ALL
    SELECT p.lp_id,
           (SELECT n.placed_domain_uuid FROM nvlink_interface n
            WHERE n.logical_partition_id = p.lp_id AND n.status IN ('Pending', 'Provisioning', 'Error')
              AND n.placed_domain_uuid > p.domain
            ORDER BY n.placed_domain_uuid LIMIT 1)
    FROM placed p WHERE p.domain IS NOT NULL
)
"""
# The domains where the partitions of ``ids`` are present (after ``_PLACED``).
_LP_DOMAINS = """ARRAY(
    SELECT p.domain_uuid FROM physical_partition p WHERE p.logical_partition_id = ANY(%(ids)s)
    UNION
    SELECT placed.domain FROM placed WHERE placed.domain IS NOT NULL
)"""
_PARTITION_FACTS = f"""{_PLACED}
SELECT {_LP_DOMAINS},
(SELECT coalesce(json_object_agg(lp.id, lp.multicast_groups_limit), '{{}}') FROM logical_partition lp
 WHERE lp.id = ANY(%(ids)s))
"""

# One row per domain (migration 0009's triggers keep the counts), not a scan of every machine: the
# cost follows the number of domains with free machines, whatever the site's size.
_SUMMARY = """
SELECT c.domain_uuid, c.used, c.free FROM domain_capacity c
WHERE c.site_id = %(site)s AND c.instance_type_id = %(type)s AND c.free > 0
"""
# A few domains of each kind placement tells apart, from a random place in each kind's list (so
# concurrent requests spread over equal domains), instead of all of them: (partition present, fragment
# or untouched, free count) is what placement ranks by, so a list holding every kind gives the plan the
# whole list would. Each kind's size comes along for the totals. No sort: one pass, grouped. The
# domains where the logical partitions ``ids`` are present are found in the same statement, so that it
# goes out beside ``_PARTITION_FACTS`` rather than after it.
_SAMPLE = f"""{_PLACED}
SELECT g.no_domain, g.free, g.n, g.domains[g.s:g.s + %(per_kind)s - 1], g.used[g.s:g.s + %(per_kind)s - 1]
FROM (
    SELECT c.domain_uuid = %(none)s AS no_domain, c.free, count(*) AS n,
           array_agg(c.domain_uuid) AS domains, array_agg(c.used) AS used,  -- one order for both
           1 + floor(random() * greatest(count(*) - %(per_kind)s + 1, 1))::int AS s
    FROM domain_capacity c
    WHERE c.site_id = %(site)s AND c.instance_type_id = %(type)s AND c.free > 0
    GROUP BY c.domain_uuid = %(none)s, c.domain_uuid = ANY({_LP_DOMAINS}), c.used = 0, c.free
) g
"""

# nico/db/sql/machine_pick.sql: every domain of the plan picked and locked in one statement, all or none.
_LOCK = "SELECT * FROM nico_lock_free_machines(%(site)s, %(type)s, %(domains)s::uuid[], %(counts)s::int[])"
# nico/db/sql/machine_pick.sql: the whole count in the first of the domains that still has it.
_LOCK_FIRST = (
    "SELECT * FROM nico_lock_free_machines_first(%(site)s, %(type)s, %(domains)s::uuid[], %(count)s)"
)

# Each domain's multicast budget and what the logical partitions present there (a physical partition,
# or an unsettled binding the reconciler has not built yet) already draw from it; no row unless one of
# the logical partitions ``ids`` has a multicast groups limit (nothing to draw from any budget).
_BUDGETS = """
SELECT d.uuid, d.max_multicast_groups, COALESCE(sum(lp.multicast_groups_limit), 0),
       COALESCE(array_agg(lp.id) FILTER (WHERE lp.id IS NOT NULL), '{}')
FROM nvlink_domain d
LEFT JOIN LATERAL (
    SELECT p.logical_partition_id AS lp_id FROM physical_partition p WHERE p.domain_uuid = d.uuid
    UNION
    SELECT n.logical_partition_id FROM machine m JOIN nvlink_interface n ON n.instance_id = m.instance_id
    WHERE m.domain_uuid = d.uuid AND n.status IN ('Pending', 'Provisioning', 'Error')
) present ON true
LEFT JOIN logical_partition lp ON lp.id = present.lp_id
WHERE d.site_id = %(site)s AND d.max_multicast_groups IS NOT NULL
  AND EXISTS (SELECT 1 FROM logical_partition l WHERE l.id = ANY(%(ids)s) AND l.multicast_groups_limit > 0)
GROUP BY d.uuid, d.max_multicast_groups
"""

Connection = psycopg.AsyncConnection[Any]


Budget = tuple[uuid.UUID, int, int, frozenset[uuid.UUID]]


class Inputs(NamedTuple):
    """What placement starts from (:func:`placement_inputs`)."""

    lp_domains: frozenset[uuid.UUID]  # where the logical partitions are present
    limits: dict[uuid.UUID, int]  # each logical partition's multicast groups limit
    budgets: list[Budget]  # (domain, budget, groups in use, partitions present); none if no limit
    sample: Sample | None  # a sample of each kind of domain (``_SAMPLE``), if asked


async def placement_inputs(
    conn: Connection,
    site_id: uuid.UUID,
    instance_type_id: uuid.UUID,
    partition_ids: Collection[uuid.UUID],
    *,
    budgets: bool,
    per_kind: int | None,
) -> Inputs:
    """In one round trip (a pipeline): where the logical partitions ``partition_ids`` are present
    and their multicast groups limits (``_PARTITION_FACTS``); with ``budgets``, the site's multicast
    budgets when one of them has a limit; with ``per_kind``, a sample of the domains (``_SAMPLE``: up
    to ``per_kind`` domains of each kind placement ranks by, machines without a domain if free, and
    the totals over every domain), ranked by the partitions' domains found in its own statement."""
    ids = list(partition_ids)
    statements = []
    if ids:
        statements.append(Statement(_PARTITION_FACTS, {"ids": ids}))
        if budgets:
            statements.append(Statement(_BUDGETS, {"site": site_id, "ids": ids}))
    if per_kind is not None:
        params = {
            "site": site_id,
            "type": instance_type_id,
            "none": NO_DOMAIN,
            "per_kind": per_kind,
            "ids": ids,
        }
        statements.append(Statement(_SAMPLE, params))
    results = await pipelined(conn, statements) if statements else []
    lp_domains: frozenset[uuid.UUID] = frozenset()
    limits: dict[uuid.UUID, int] = {}
    found: list[Budget] = []
    if ids:
        ((domains, raw_limits),) = results.pop(0)
        lp_domains = frozenset(d for d in domains if d is not None)
        limits = {uuid.UUID(k): int(v) for k, v in raw_limits.items()}
        if budgets:
            found = [(d, cap, int(used), frozenset(present)) for d, cap, used, present in results.pop(0)]
    return Inputs(lp_domains, limits, found, _sample(results[0]) if per_kind is not None else None)


async def machine_counts_by_domain(
    conn: Connection, site_id: uuid.UUID, instance_type_id: uuid.UUID
) -> list[tuple[uuid.UUID | None, int, int]]:
    """(domain or None, assigned machines, free machines) of the type on the site, for the domains
    (and machines without one) that have free machines. Read from ``domain_capacity``: committed
    counts, so machines other requests hold right now still count as free (the lock skips them)."""
    rows = await (
        await conn.execute(_SUMMARY, {"site": site_id, "type": instance_type_id}, prepare=True)
    ).fetchall()
    return [(None if domain == NO_DOMAIN else domain, used, free) for domain, used, free in rows]


class Sample(NamedTuple):
    rows: list[tuple[uuid.UUID | None, int, int]]  # (domain or None, used, free)
    in_domains: int  # free machines in all the domains
    best: int  # the largest free count in one domain


def _sample(found: list[Any]) -> Sample:
    rows: list[tuple[uuid.UUID | None, int, int]] = []
    in_domains = best = 0
    for no_domain, free, n, domains, used in found:
        if no_domain:
            rows.append((None, 0, free))
            continue
        in_domains += free * n
        best = max(best, free)
        rows.extend((domain, assigned, free) for domain, assigned in zip(domains, used, strict=True))
    return Sample(rows, in_domains, best)


class Pick(NamedTuple):
    """What :func:`lock_free_machines` or :func:`lock_first_free` got: the machines locked (machine id,
    domain), every one asked for; or none, and what each domain that came up short gave (its locks
    released)."""

    locked: list[tuple[str, uuid.UUID | None]]
    short: dict[uuid.UUID | None, int]


async def lock_free_machines(
    conn: Connection,
    site_id: uuid.UUID,
    instance_type_id: uuid.UUID,
    plan: list[tuple[uuid.UUID | None, int]],
) -> Pick:
    """Lock ``n`` free machines of the type on each ``(domain, n)`` of ``plan`` (domain None: machines
    without one), contiguous trays first, skipping machines other transactions hold; all of them or
    none (``nico_lock_free_machines``, migration 0013: one statement, no savepoint to roll back)."""
    params = {
        "site": site_id,
        "type": instance_type_id,
        "domains": [domain for domain, _ in plan],
        "counts": [n for _, n in plan],
    }
    return _pick(await (await conn.execute(_LOCK, params, prepare=True)).fetchall())


async def lock_first_free(
    conn: Connection,
    site_id: uuid.UUID,
    instance_type_id: uuid.UUID,
    domains: list[uuid.UUID],
    count: int,
) -> Pick:
    """Lock ``count`` free machines of the type in the first of ``domains`` that still has that many,
    contiguous trays first, skipping machines other transactions hold; in one statement
    (``nico_lock_free_machines_first``, migration 0014). A domain that comes up short keeps none of its
    machines locked; when all do, nothing is locked and the pick says what each gave."""
    params = {"site": site_id, "type": instance_type_id, "domains": domains, "count": count}
    return _pick(await (await conn.execute(_LOCK_FIRST, params, prepare=True)).fetchall())


def _pick(rows: list[Any]) -> Pick:
    """(machine id, domain, None) per machine locked, or (None, domain, gave) per short domain."""
    if rows and rows[0][0] is None:
        return Pick([], {domain: got for _, domain, got in rows})
    return Pick([(machine_id, domain) for machine_id, domain, _ in rows], {})
