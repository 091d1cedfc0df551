"""Every SQL statement of the instance, named for what it returns: the creation read and write
(driver-level: a batch is a hot path), giving free machines to new instances (the claim's reads and
its ``FOR UPDATE SKIP LOCKED`` pick), the quota check sent with the commit, the one-query reads behind
every instance response, the rows an update or delete changes, and the lists. The ``GET`` body that
PostgreSQL writes is :mod:`nico.instance.document`'s."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from sqlalchemy import Select, delete, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import MachineStatus, NvLinkInterfaceStatus
from nico.db.models import (
    Instance,
    InstanceType,
    LogicalPartition,
    Machine,
    MachineCapability,
    NvlinkInterface,
    Vpc,
)
from nico.db.models.capacity import NO_DOMAIN
from nico.db.queries.common import columns, sites_of_provider, text_search
from nico.db.queries.feed import CLIQUE_OF_INTERFACE
from nico.db.queries.nvlink_interface import locked_partitions
from nico.db.raw import (
    AtCommit,
    Numbered,
    NumberedStatement,
    Statement,
    WrittenAtCommit,
    array_literal,
    driver_connection,
    pipelined,
    raw_cursor,
    send_at_commit,
    write_at_commit,
)
from nico.logical_partition.queries import GPU_DOMAINS, RESERVED_DOMAINS

# ---- creation -----------------------------------------------------------------------------------

# Creation reads everything its checks need, and takes its first locks, in one statement
# (nico/db/sql/creation_context.sql; the checks themselves run in Python, in the reference's order): a
# batch is a hot path, and a dozen small ORM lookups cost more CPU than all its SQL.
_CREATION_CONTEXT = """
SELECT * FROM nico_creation_context(%(org)s, %(requested)s, %(vpc)s, %(itype)s, %(subnets)s::uuid[],
                                    %(names)s::text[], %(partitions)s::uuid[])
"""


@dataclass(frozen=True)
class CreationContext:
    """The row of :func:`creation_context`, by name."""

    tenant_id: uuid.UUID
    targeted: bool
    requested_tenant_exists: bool
    vpc_id: uuid.UUID | None
    vpc_tenant_id: uuid.UUID | None
    vpc_site_id: uuid.UUID | None
    vpc_status: str | None
    vpc_default_partition_id: uuid.UUID | None
    site_status: str | None
    instance_type_id: uuid.UUID | None
    instance_type_site_id: uuid.UUID | None
    subnets: list[dict[str, Any]]  # id, tenant_id, status, vpc_id (as text)
    clash: list[str] | None  # [instance id, name] of an existing instance with a requested name
    uses_site: bool
    instances_of_type: int
    reserved: int | None  # None: no allocation for the type
    capabilities: list[dict[str, Any]]  # name, count of the type's NVLink GPU capabilities
    placement: Inputs | None = None  # what placement starts from, when asked (``InputsAsk``)


@dataclass(frozen=True)
class InputsAsk:
    """Placement's inputs asked with the creation context (``PLACEMENT_INPUTS``, budgets and homes
    included): for the partitions ``explicit`` (none: the VPC's default partition) at the VPC's site,
    with a sample of ``per_kind`` domains of each kind (None: no sample)."""

    instance_type_id: uuid.UUID
    explicit: list[uuid.UUID]
    per_kind: int | None


async def creation_context(
    conn: Connection,
    *,
    org: str,
    requested_tenant: uuid.UUID | None,
    vpc_id: uuid.UUID,
    instance_type_id: uuid.UUID | None,
    subnet_ids: list[uuid.UUID],
    names: list[str],
    partition_ids: list[uuid.UUID],
    placement: InputsAsk | None = None,
) -> tuple[CreationContext | None, dict[uuid.UUID, LogicalPartition]]:
    """What creation checks, the VPC and its default logical partition locked FOR SHARE and the logical
    partitions of ``partition_ids`` that exist, locked FOR SHARE in id order (transient ORM objects,
    for reading), the transaction's plans generic from then on (``nico_creation_context``), and with
    ``placement`` what placement starts from (``PLACEMENT_INPUTS``, after the locks), in one round trip
    (a psycopg pipeline), on ``conn``, the driver connection under the create's session (its
    transaction begun). The context is None when the org has no tenant."""
    params = {
        "org": org,
        "requested": requested_tenant,
        "vpc": vpc_id,
        "itype": instance_type_id,
        "subnets": array_literal(subnet_ids),  # array literals: see _INSERT_INSTANCES
        "names": array_literal(names),
        "partitions": array_literal(partition_ids),
    }
    inputs = None
    async with conn.pipeline():  # leaving the block syncs: both results have arrived
        # The statements are prepared on their first execution (``prepare=True``), and from the context
        # on the transaction's take the plan their prepared statement keeps for any values: each looks
        # rows up by key, so the plan does not depend on them, and a pooled connection then plans each
        # statement once, not for its first five executions too (PostgreSQL's default tries five
        # custom plans before it settles on the generic one: with a pool of 16 connections taking
        # requests in turn, that is the first 80 creates, planning the big insert each time).
        context = await conn.execute(_CREATION_CONTEXT, params, prepare=True)
        if placement is not None:
            inputs = raw_cursor(conn)
            values = placement_params(
                placement.instance_type_id,
                site_id=None,
                vpc_id=vpc_id,
                partition_ids=placement.explicit or None,
                per_kind=placement.per_kind,
            )
            await inputs.execute(PLACEMENT_INPUTS.sql, PLACEMENT_INPUTS.values(values), prepare=True)
    row = await context.fetchone()
    if row is None:
        return None, {}
    *checked, locked = row
    found = locked_partitions(
        (uuid.UUID(lp), uuid.UUID(tenant), uuid.UUID(site), status) for lp, tenant, site, status in locked
    )
    placed = await inputs.fetchone() if inputs is not None else None
    context_row = CreationContext(*checked)
    return replace(context_row, placement=inputs_of(placed)) if placed is not None else context_row, found


# ---- giving free machines to new instances (driver-level: on a 200-rack site this is the create
# request's hot spot): where logical partitions are, free and used machines per domain, and locking
# free machines with ``FOR UPDATE SKIP LOCKED``, all or nothing.

# The domains of unsettled bindings: a skip scan of ix_nvlink_interface_unsettled (partition, placed
# domain) per partition, one index probe per domain found, however many bindings wait there (13,000
# with no reconciler running cost 9 ms read one by one; migration 0012).
_PLACED = """
placed AS (
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
# domains where the logical partitions ``ids`` are present come from ``_PLACED``, in the same statement.
_SAMPLE = f"""
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

# The domains whose multicast budget cannot take the logical partitions ``ids``: each of them not yet
# present in a domain (a physical partition there, or an unsettled binding the reconciler has not built
# yet) would draw its multicast groups limit from the domain's budget, and the sum does not fit. Each
# with its budget, what the partitions present there draw from it and what ``ids`` would add; usually
# no row (and none unless one of ``ids`` has a limit). Decided here rather than from every domain's list
# of the partitions present: on a large site that list, sent for every domain, cost the API more CPU
# than the rest of the create's placement.
_BUDGETS = """
SELECT b.uuid, b.budget, b.in_use, b.need
FROM (
    SELECT d.uuid, d.max_multicast_groups AS budget, COALESCE(sum(lp.multicast_groups_limit), 0) AS in_use,
           (SELECT COALESCE(sum(l.multicast_groups_limit), 0) FROM logical_partition l
            WHERE l.id = ANY(%(ids)s)
              AND l.id <> ALL(COALESCE(array_agg(lp.id) FILTER (WHERE lp.id IS NOT NULL), '{}'))) AS need
    FROM nvlink_domain d
    LEFT JOIN LATERAL (
        SELECT p.logical_partition_id AS lp_id FROM physical_partition p WHERE p.domain_uuid = d.uuid
        UNION
        SELECT n.logical_partition_id FROM machine m JOIN nvlink_interface n ON n.instance_id = m.instance_id
        WHERE m.domain_uuid = d.uuid AND n.status IN ('Pending', 'Provisioning', 'Error')
    ) present ON true
    LEFT JOIN logical_partition lp ON lp.id = present.lp_id
    WHERE d.site_id = %(site)s AND d.max_multicast_groups IS NOT NULL
      AND EXISTS (SELECT 1 FROM logical_partition l
                  WHERE l.id = ANY(%(ids)s) AND l.multicast_groups_limit > 0)
    GROUP BY d.uuid, d.max_multicast_groups
) b
WHERE b.need > 0 AND b.in_use + b.need > b.budget
"""

# The single-domain partitions among ``ids`` and those holding a reservation: where their GPUs are and
# where their reserved machines are.
_HOMES = f"""
SELECT lp.id, lp.name, lp.single_nvlink_domain, lp.reservation_instance_type_id,
       {GPU_DOMAINS.format(lp="lp.id")}, {RESERVED_DOMAINS.format(lp="lp.id")}
FROM logical_partition lp
WHERE lp.id = ANY(%(ids)s) AND (lp.single_nvlink_domain OR lp.reservation_instance_type_id IS NOT NULL)
ORDER BY lp.id
"""

# Everything placement starts from, in one statement (``PLACEMENT_INPUTS``): the logical partitions the
# request binds GPUs to (``ids``; NULL: the default partition of the VPC ``vpc``, if it has one) at the
# site (``site``; NULL: the VPC's), where they are present (``_PLACED``, ``_LP_DOMAINS``), their multicast
# groups limits, and with ``budgets`` the domains over their multicast budgets (``_BUDGETS``) and the
# single-domain and reserving partitions' homes (``_HOMES``), and with ``per_kind`` the sample of the
# domains (``_SAMPLE``). Given the VPC, it needs nothing a create's checks read: it goes out in the round
# trip of the creation context, after its locks.
_REQUEST = """
req AS (
    SELECT coalesce(%(site)s::uuid, (SELECT v.site_id FROM vpc v WHERE v.id = %(vpc)s)) AS site,
           coalesce(%(ids)s::uuid[], ARRAY(SELECT v.nvlink_logical_partition_id FROM vpc v
                                          WHERE v.id = %(vpc)s AND v.nvlink_logical_partition_id IS NOT NULL))
           AS ids
)"""
_INPUTS = f"""{_PLACED}
SELECT {_LP_DOMAINS},
       (SELECT coalesce(json_object_agg(lp.id, lp.multicast_groups_limit), '{{}}') FROM logical_partition lp
        WHERE lp.id = ANY(%(ids)s)),
       CASE WHEN %(budgets)s THEN (
           SELECT coalesce(json_agg(json_build_array(b.domain, b.budget, b.in_use, b.need)), '[]')
           FROM ({_BUDGETS}) AS b(domain, budget, in_use, need)) END,
       CASE WHEN %(budgets)s THEN (
           SELECT coalesce(json_agg(json_build_array(h.id, h.name, h.single, h.rtype, h.gpus, h.reserved)
                                    ORDER BY h.id), '[]')
           FROM ({_HOMES}) AS h(id, name, single, rtype, gpus, reserved)) END,
       CASE WHEN %(per_kind)s IS NOT NULL THEN (
           SELECT coalesce(json_agg(json_build_array(g.no_domain, g.free, g.n, g.domains, g.used)), '[]')
           FROM ({_SAMPLE}) AS g(no_domain, free, n, domains, used)) END
"""
PLACEMENT_INPUTS = Numbered.of(
    f"WITH RECURSIVE {_REQUEST},"
    + _INPUTS.replace("%(ids)s::uuid[]", "%(ids)s")
    .replace("%(ids)s", "(SELECT r.ids FROM req r)::uuid[]")
    .replace("%(site)s", "(SELECT r.site FROM req r)")
    .replace("%(per_kind)s", "%(per_kind)s::int")
    .replace("%(budgets)s", "%(budgets)s::boolean")
)


# Creates and binding updates that bind GPUs to a single-domain logical partition decide where they
# go one after another: each takes the partition's transaction-level advisory lock (the two-key form,
# a key space of its own: class HOME_LOCK_CLASS, the partition id's hash) once it has read that the
# partition is single-domain, in id order, and reads the partition's home again under it, after the
# one before it committed. An advisory lock, not the row's: the request already holds the row FOR
# SHARE, and two requests upgrading their shares would deadlock. Taken after the row locks (docs/
# architecture.md, "Locks"): its holder waits for no lock that a request waiting for it holds.
HOME_LOCK_CLASS = 28
_LOCK_HOMES = """
SELECT pg_advisory_xact_lock(%(class)s, hashtext(s.id::text))
FROM (SELECT id FROM unnest(%(ids)s::uuid[]) AS t(id) ORDER BY id) s
"""

# Free machines of the type the reservations of ``lps`` hold (in ``domains`` unless null), one domain's
# first, contiguous trays first, skipping machines other transactions hold.
_LOCK_RESERVED = """
SELECT m.id, m.domain_uuid FROM machine m
WHERE m.reserved_lp_id = ANY(%(lps)s) AND m.site_id = %(site)s AND m.instance_type_id = %(type)s
  AND m.instance_id IS NULL AND m.status = 'Ready' AND NOT m.is_missing_on_site
  AND m.foreign_gpus = 0 AND NOT m.held_unhealthy
  AND (%(domains)s::uuid[] IS NULL OR m.domain_uuid = ANY(%(domains)s::uuid[]))
ORDER BY m.domain_uuid, m.chassis_serial, m.tray_index, m.id
LIMIT %(count)s
FOR UPDATE SKIP LOCKED
"""

# Free machines of the type in one domain that a create binding GPUs to ``lps`` could take: those no
# reservation holds, and those the reservations of ``lps`` hold.
_FREE_THERE = """
SELECT (SELECT coalesce(sum(c.free), 0) FROM domain_capacity c
        WHERE c.site_id = %(site)s AND c.instance_type_id = %(type)s AND c.domain_uuid = %(domain)s)
     + (SELECT count(*) FROM machine m
        WHERE m.reserved_lp_id = ANY(%(lps)s) AND m.instance_type_id = %(type)s AND m.domain_uuid = %(domain)s
          AND m.instance_id IS NULL AND m.status = 'Ready' AND NOT m.is_missing_on_site
          AND m.foreign_gpus = 0 AND NOT m.held_unhealthy)
"""

Connection = psycopg.AsyncConnection[Any]


class PartitionHome(NamedTuple):
    """Where a single-domain or reserving logical partition is: its GPUs' domains and its reserved
    machines' domains (``_HOMES``)."""

    id: uuid.UUID
    name: str
    single_domain: bool
    reserved_type: uuid.UUID | None
    gpu_domains: frozenset[uuid.UUID]
    reserved_domains: frozenset[uuid.UUID]

    @property
    def domains(self) -> frozenset[uuid.UUID]:
        return self.gpu_domains | self.reserved_domains


def _homes(rows: Sequence[Any]) -> list[PartitionHome]:
    return [
        PartitionHome(lp, name, single, rtype, frozenset(gpus), frozenset(reserved))
        for lp, name, single, rtype, gpus, reserved in rows
    ]


async def partition_homes(conn: Connection, partition_ids: Collection[uuid.UUID]) -> list[PartitionHome]:
    """The single-domain and reserving partitions among ``partition_ids``, and where they are."""
    if not partition_ids:
        return []
    return _homes(await (await conn.execute(_HOMES, {"ids": list(partition_ids)})).fetchall())


async def locked_homes(
    conn: Connection, confined: Collection[uuid.UUID], partition_ids: Collection[uuid.UUID]
) -> list[PartitionHome]:
    """The homes of ``partition_ids`` read again after taking the lock of each single-domain partition
    of ``confined`` (``_LOCK_HOMES``), in one round trip: what the request decides from them holds to
    its commit."""
    results = await pipelined(
        conn,
        [
            Statement(_LOCK_HOMES, {"ids": sorted(confined), "class": HOME_LOCK_CLASS}),
            Statement(_HOMES, {"ids": list(partition_ids)}),
        ],
    )
    return _homes(results[1])


async def lock_reserved_machines(
    conn: Connection,
    site_id: uuid.UUID,
    instance_type_id: uuid.UUID,
    partition_ids: Collection[uuid.UUID],
    count: int,
    domains: Collection[uuid.UUID] | None,
) -> list[tuple[str, uuid.UUID | None]]:
    """Up to ``count`` free machines of the type the reservations of ``partition_ids`` hold (in
    ``domains`` unless None), locked: (machine id, domain)."""
    params = {
        "lps": list(partition_ids),
        "site": site_id,
        "type": instance_type_id,
        "domains": None if domains is None else list(domains),
        "count": count,
    }
    return [(m, d) for m, d in await (await conn.execute(_LOCK_RESERVED, params)).fetchall()]


async def free_there(
    conn: Connection,
    site_id: uuid.UUID,
    instance_type_id: uuid.UUID,
    domain: uuid.UUID,
    partition_ids: Collection[uuid.UUID],
) -> int:
    """Free machines of the type in ``domain`` a create for ``partition_ids`` could take (``_FREE_THERE``)."""
    params = {"site": site_id, "type": instance_type_id, "domain": domain, "lps": list(partition_ids)}
    row = await (await conn.execute(_FREE_THERE, params)).fetchone()
    return int(row[0]) if row else 0


Budget = tuple[uuid.UUID, int, int, int]


class Inputs(NamedTuple):
    """What placement starts from (:func:`placement_inputs`)."""

    lp_domains: frozenset[uuid.UUID]  # where the logical partitions are present
    limits: dict[uuid.UUID, int]  # each logical partition's multicast groups limit
    budgets: list[Budget]  # (domain, budget, groups in use, groups needed): the domains over budget
    sample: Sample | None  # a sample of each kind of domain (``_SAMPLE``), if asked
    homes: list[PartitionHome] = []  # the single-domain and reserving partitions (``_HOMES``)


async def placement_inputs(
    conn: Connection,
    site_id: uuid.UUID,
    instance_type_id: uuid.UUID,
    partition_ids: Collection[uuid.UUID],
    *,
    budgets: bool,
    per_kind: int | None,
) -> Inputs:
    """Where the logical partitions ``partition_ids`` are present and their multicast groups limits;
    with ``budgets`` (a request that binds GPUs), the domains whose multicast budgets they do not fit
    when one of them has a limit and where the single-domain and reserving ones among them are; with
    ``per_kind``, a sample of the domains (``_SAMPLE``: up to ``per_kind`` domains of each kind placement
    ranks by, machines without a domain if free, and the totals over every domain). One statement
    (``PLACEMENT_INPUTS``); a create sends it with its context (:func:`creation_context`)."""
    params = placement_params(
        instance_type_id, site_id=site_id, vpc_id=None, partition_ids=list(partition_ids), per_kind=per_kind
    )
    async with raw_cursor(conn) as cursor:
        await cursor.execute(PLACEMENT_INPUTS.sql, PLACEMENT_INPUTS.values(params), prepare=True)
        row = await cursor.fetchone()
    assert row is not None
    found = inputs_of(row)
    return found if budgets else found._replace(budgets=[], homes=[])


def placement_params(
    instance_type_id: uuid.UUID,
    *,
    site_id: uuid.UUID | None,
    vpc_id: uuid.UUID | None,
    partition_ids: list[uuid.UUID] | None,
    per_kind: int | None,
) -> dict[str, Any]:
    """``PLACEMENT_INPUTS``'s parameters: at ``site_id`` (None: the VPC's) for ``partition_ids`` (None:
    the VPC's default partition), budgets and homes read."""
    return {
        "site": site_id,
        "vpc": vpc_id,
        "ids": array_literal(partition_ids) if partition_ids is not None else None,
        "budgets": True,
        "per_kind": per_kind,
        "none": NO_DOMAIN,
        "type": instance_type_id,
    }


def inputs_of(row: Sequence[Any]) -> Inputs:
    """:class:`Inputs` from ``PLACEMENT_INPUTS``'s row (its JSON holds uuids as text)."""
    domains, raw_limits, raw_budgets, raw_homes, raw_sample = row
    budgets: list[Budget] = [
        (uuid.UUID(d), int(cap), int(used), int(need)) for d, cap, used, need in raw_budgets or ()
    ]
    homes = [
        PartitionHome(
            uuid.UUID(lp),
            name,
            single,
            uuid.UUID(rtype) if rtype is not None else None,
            frozenset(uuid.UUID(d) for d in gpus),
            frozenset(uuid.UUID(d) for d in reserved),
        )
        for lp, name, single, rtype, gpus, reserved in raw_homes or ()
    ]
    sample = (
        _sample([(n, free, k, [uuid.UUID(d) for d in ds], used) for n, free, k, ds, used in raw_sample])
        if raw_sample is not None
        else None
    )
    return Inputs(
        frozenset(d for d in domains if d is not None),
        {uuid.UUID(k): int(v) for k, v in raw_limits.items()},
        budgets,
        sample,
        homes,
    )


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
        "domains": array_literal([domain for domain, _ in plan]),
        "counts": array_literal([n for _, n in plan]),
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
    params = {"site": site_id, "type": instance_type_id, "domains": array_literal(domains), "count": count}
    return _pick(await (await conn.execute(_LOCK_FIRST, params, prepare=True)).fetchall())


def _pick(rows: list[Any]) -> Pick:
    """(machine id, domain, None) per machine locked, or (None, domain, gave) per short domain."""
    if rows and rows[0][0] is None:
        return Pick([], {domain: got for _, domain, got in rows})
    return Pick([(machine_id, domain) for machine_id, domain, _ in rows], {})


# ---- the write, and the quota checked with the commit ------------------------------------------

# One statement for everything a create writes (a batch is 18 instances with their interfaces,
# bindings and history): row-by-row statements cost more CPU than the inserts themselves. Foreign keys
# are checked at the end of the statement, when every row of it exists. Rows that are listed in
# creation order get clock_timestamp(), taken row by row in request order. The arrays go as array
# literals (:func:`nico.db.raw.array_literal`, one string each): psycopg dumps a list element by
# element in Python, in binary or as text, which cost the API more than the rest of the insert's
# parameters (14 lists a create); PostgreSQL reads a literal of a batch's few dozen values in
# microseconds. The statement answers
# with the response's documents, built from what each insert returns (``RETURNING``), in the shape
# and order of ``_BY_IDS`` with chronological history (pinned by ``tests/api/test_instance_document.py``,
# ``test_create_answers_what_a_read_of_the_new_instances_shows``): a create reads nothing back.
_INSERT_INSTANCES = """
WITH new AS (
    INSERT INTO instance (id, tenant_id, site_id, instance_type_id, vpc_id, name, description, ipxe_script,
                          user_data, always_boot_with_custom_ipxe, phone_home_enabled, labels, status,
                          created_by, nvlink_config_version, nvlink_config_changed_at, created, updated)
    SELECT u.id, %(tenant)s, %(site)s, %(itype)s, %(vpc)s, u.name, %(description)s, %(ipxe)s, %(user_data)s,
           %(always_ipxe)s, %(phone_home)s, %(labels)s::jsonb, u.status, %(by)s, 1, now(), now(), now()
    FROM unnest(%(ids)s::uuid[], %(names)s::text[], %(statuses)s::text[]) AS u(id, name, status)
    RETURNING id, name, description, tenant_id, site_id, instance_type_id, vpc_id, ipxe_script, user_data,
              always_boot_with_custom_ipxe, phone_home_enabled, labels, status, created, updated
), assigned AS (
    UPDATE machine SET instance_id = u.instance_id, updated = now()
    FROM unnest(%(machines)s::text[], %(ids)s::uuid[]) AS u(machine_id, instance_id)
    WHERE machine.id = u.machine_id
      AND machine.id = ANY(%(machines)s::text[])  -- by the key, whatever the statistics say
    RETURNING machine.id, machine.instance_id, machine.domain_uuid
), history AS (
    INSERT INTO status_detail (instance_id, status, message, created, updated)
    SELECT u.instance_id, u.status, u.message, clock_timestamp(), clock_timestamp()
    FROM unnest(%(h_ids)s::uuid[], %(h_statuses)s::text[], %(h_messages)s::text[])
         WITH ORDINALITY AS u(instance_id, status, message, n)
    ORDER BY u.n
    RETURNING id, instance_id, status, message, created, updated
), ports AS (
    INSERT INTO instance_interface (id, instance_id, subnet_id, is_physical, status, created, updated)
    SELECT gen_random_uuid(), u.instance_id, u.subnet_id, u.physical, 'Ready', clock_timestamp(),
           clock_timestamp()
    FROM unnest(%(p_ids)s::uuid[], %(p_subnets)s::uuid[], %(p_physical)s::boolean[])
         WITH ORDINALITY AS u(instance_id, subnet_id, physical, n)
    ORDER BY u.n
    RETURNING id, instance_id, subnet_id, is_physical, status, created, updated
), bindings AS (
    INSERT INTO nvlink_interface (id, instance_id, logical_partition_id, site_id, device_instance, device,
                                  status, created_by, placed_domain_uuid, created, updated)
    SELECT gen_random_uuid(), u.instance_id, u.partition_id, %(site)s, u.device_instance, u.device, 'Pending',
           %(by)s, a.domain_uuid, clock_timestamp(), clock_timestamp()
    FROM unnest(%(b_ids)s::uuid[], %(b_partitions)s::uuid[], %(b_devices)s::int[], %(b_names)s::text[])
         WITH ORDINALITY AS u(instance_id, partition_id, device_instance, device, n)
    LEFT JOIN assigned a ON a.instance_id = u.instance_id  -- the machine's domain, as placed
    ORDER BY u.n
    RETURNING id, instance_id, logical_partition_id, domain_uuid, device_instance, gpu_uid, status, created,
              updated
), x AS (
    SELECT x.instance_id, json_agg(json_build_object(
               'id', x.id, 'instance_id', x.instance_id, 'subnet_id', x.subnet_id,
               'is_physical', x.is_physical, 'status', x.status, 'created', x.created, 'updated', x.updated)
           ORDER BY x.created, x.id) AS interfaces
    FROM ports x GROUP BY x.instance_id
), n AS (
    SELECT n.instance_id, json_agg(json_build_object(
               'id', n.id, 'instance_id', n.instance_id,
               'nv_link_logical_partition_id', n.logical_partition_id, 'nv_link_domain_id', n.domain_uuid,
               'device_instance', n.device_instance,
               'gpu_guid', n.gpu_uid::text, 'status', n.status, 'created', n.created, 'updated', n.updated,
               'nv_link_clique_id', {clique})
           ORDER BY n.created, n.device_instance, n.id) AS nvlink_interfaces
    FROM bindings n GROUP BY n.instance_id
), h AS (
    SELECT h.instance_id, json_agg(json_build_object(
               'status', h.status, 'message', h.message, 'created', h.created, 'updated', h.updated)
           ORDER BY h.created, h.id) AS status_history
    FROM history h GROUP BY h.instance_id
), note AS (
    SELECT CASE WHEN %(notify)s::text IS NOT NULL THEN pg_notify(%(channel)s, %(notify)s) END
)
SELECT i.id, i.name, i.description, i.tenant_id, i.site_id, i.instance_type_id, i.vpc_id, i.ipxe_script,
       i.user_data, i.always_boot_with_custom_ipxe, i.phone_home_enabled, i.labels, i.status, i.created,
       i.updated, s.infrastructure_provider_id, s.serial_console_hostname, m.id AS machine_id,
       coalesce(x.interfaces, '[]') AS interfaces, coalesce(n.nvlink_interfaces, '[]') AS nvlink_interfaces,
       coalesce(h.status_history, '[]') AS status_history
FROM new i
JOIN site s ON s.id = i.site_id
LEFT JOIN assigned m ON m.instance_id = i.id
LEFT JOIN x ON x.instance_id = i.id
LEFT JOIN n ON n.instance_id = i.id
LEFT JOIN h ON h.instance_id = i.id
CROSS JOIN note
""".replace("{clique}", CLIQUE_OF_INTERFACE.strip())
_INSERT = Numbered.of(_INSERT_INSTANCES)  # over 4 KB: see Numbered


@dataclass(frozen=True)
class NewInstance:
    """One instance row to insert, with the machine it takes."""

    id: uuid.UUID
    name: str
    status: str
    machine_id: str


@dataclass(frozen=True)
class SharedFields:
    """What every instance of one create shares."""

    tenant_id: uuid.UUID
    site_id: uuid.UUID
    instance_type_id: uuid.UUID | None
    vpc_id: uuid.UUID
    description: str | None
    ipxe_script: str | None
    user_data: str | None
    always_boot_with_custom_ipxe: bool
    phone_home_enabled: bool
    labels: dict[str, str] | None
    created_by: str | None


def insert_instances(
    session: AsyncSession,
    shared: SharedFields,
    instances: Sequence[NewInstance],
    history: Sequence[tuple[uuid.UUID, str, str]],
    ports: Sequence[tuple[uuid.UUID, uuid.UUID, bool]],
    bindings: Sequence[tuple[uuid.UUID, uuid.UUID, int, str | None]],
    *,
    channel: str,
    notify: str | None,
) -> WrittenAtCommit:
    """Have the session's commit insert instances, assign their machines, and add their history
    (instance, status, message), Ethernet interfaces (instance, subnet, physical) and NVLink bindings
    (instance, partition, GPU index, device name), in list order, NOTIFYing ``notify`` on ``channel``
    in the same statement, sent with the COMMIT and ahead of the checks registered to go with it
    (:func:`nico.db.raw.write_at_commit`): a round trip fewer, and the checks count these instances.
    Its rows, once committed: the new instances' documents as :func:`instance_documents` reads them
    (chronological history; any order), from what the inserts returned."""
    params = {
        "tenant": shared.tenant_id,
        "site": shared.site_id,
        "itype": shared.instance_type_id,
        "vpc": shared.vpc_id,
        "description": shared.description,
        "ipxe": shared.ipxe_script,
        "user_data": shared.user_data,
        "always_ipxe": shared.always_boot_with_custom_ipxe,
        "phone_home": shared.phone_home_enabled,
        "labels": Jsonb(shared.labels) if shared.labels is not None else None,
        "by": shared.created_by,
        "ids": array_literal([i.id for i in instances]),
        "names": array_literal([i.name for i in instances]),
        "statuses": array_literal([i.status for i in instances]),
        "machines": array_literal([i.machine_id for i in instances]),
        "h_ids": array_literal([h[0] for h in history]),
        "h_statuses": array_literal([h[1] for h in history]),
        "h_messages": array_literal([h[2] for h in history]),
        "p_ids": array_literal([p[0] for p in ports]),
        "p_subnets": array_literal([p[1] for p in ports]),
        "p_physical": array_literal([p[2] for p in ports]),
        "b_ids": array_literal([b[0] for b in bindings]),
        "b_partitions": array_literal([b[1] for b in bindings]),
        "b_devices": array_literal([b[2] for b in bindings]),
        "b_names": array_literal([b[3] for b in bindings]),
        "channel": channel,
        "notify": notify,
    }
    return write_at_commit(session, NumberedStatement(_INSERT, params))


# nico/db/sql/quota.sql: the tenant's reservations for the type locked (concurrent creates of one tenant and
# type take turns at the count), its instances of the type counted after the lock, and an error
# raised when there is no allocation (NC002) or the count is over (NC003, detail "count/reserved").
_CHECK_QUOTA = "SELECT nico_check_quota(%(tenant)s, %(itype)s)"
_NO_ALLOCATION, _OVER_QUOTA = "NC002", "NC003"


@dataclass(frozen=True)
class QuotaRefusal:
    """Why a create's commit was refused: no allocation for the type (``reserved`` None), or the
    tenant's instances of the type (``count``, the create's included) over ``reserved``."""

    count: int | None = None
    reserved: int | None = None


def check_quota_at_commit(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    itype_id: uuid.UUID,
    refused: Callable[[QuotaRefusal], Exception],
) -> None:
    """Have the session's commit check the tenant's quota for the type under the lock of its
    reservations, in the COMMIT's round trip (:func:`nico.db.raw.send_at_commit`): the lock, held to
    the commit, is held for no round trip. When the check refuses, nothing is committed and the
    commit raises ``refused(why)``."""

    def refusal(exc: psycopg.Error) -> Exception | None:
        if exc.sqlstate == _NO_ALLOCATION:
            return refused(QuotaRefusal())
        if exc.sqlstate == _OVER_QUOTA and exc.diag.message_detail:
            count, reserved = exc.diag.message_detail.split("/")
            return refused(QuotaRefusal(int(count), int(reserved)))
        return None

    statement = Statement(_CHECK_QUOTA, {"tenant": tenant_id, "itype": itype_id})
    send_at_commit(session, AtCommit(statement, refusal))


# ---- reading instances as responses show them ---------------------------------------------------

_COLUMNS = """
    i.id, i.name, i.description, i.tenant_id, i.site_id, i.instance_type_id, i.vpc_id, i.ipxe_script,
    i.user_data, i.always_boot_with_custom_ipxe, i.phone_home_enabled, i.labels, i.status, i.created,
    i.updated, s.infrastructure_provider_id, s.serial_console_hostname, m.id AS machine_id,
    (SELECT coalesce(json_agg(json_build_object(
            'id', x.id, 'instance_id', x.instance_id, 'subnet_id', x.subnet_id,
            'is_physical', x.is_physical, 'status', x.status, 'created', x.created, 'updated', x.updated)
        ORDER BY x.created, x.id), '[]')
     FROM instance_interface x WHERE x.instance_id = i.id) AS interfaces,
    (SELECT coalesce(json_agg(json_build_object(
            'id', n.id, 'instance_id', n.instance_id, 'nv_link_logical_partition_id', n.logical_partition_id,
            'nv_link_domain_id', n.domain_uuid, 'device_instance', n.device_instance,
            'gpu_guid', n.gpu_uid::text, 'status', n.status, 'created', n.created, 'updated', n.updated,
            'nv_link_clique_id', {clique})
        ORDER BY n.created, n.device_instance, n.id), '[]')
     FROM nvlink_interface n WHERE n.instance_id = i.id) AS nvlink_interfaces,
    (SELECT coalesce(json_agg(json_build_object(
            'status', h.status, 'message', h.message, 'created', h.created, 'updated', h.updated)
        ORDER BY h.created {direction}, h.id {direction}), '[]')
     FROM (SELECT d.id, d.status, d.message, d.created, d.updated FROM status_detail d
           WHERE d.instance_id = i.id ORDER BY d.created {direction}, d.id {direction}
           LIMIT %(history_limit)s) h
    ) AS status_history
"""
_COLUMNS = _COLUMNS.replace("{clique}", CLIQUE_OF_INTERFACE.strip())
_FROM = "instance i JOIN site s ON s.id = i.site_id LEFT JOIN machine m ON m.instance_id = i.id"

_BY_IDS = {
    direction: f"SELECT {_COLUMNS.format(direction=direction)} FROM {_FROM} WHERE i.id = ANY(%(ids)s)"
    for direction in ("ASC", "DESC")
}
# One round trip for GET: the caller's tenant and the instance, whichever of them exists.
_FOR_CALLER = (
    "SELECT (SELECT t.id FROM tenant t WHERE t.org = %(org)s) AS caller_tenant_id, d.* "
    f"FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT {_COLUMNS.format(direction='DESC')} FROM {_FROM} "
    "WHERE i.id = %(id)s) AS d ON true"
)

Source = AsyncSession | psycopg.AsyncConnection[Any]


async def _fetch(source: Source, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Run ``sql`` at the driver level: in a session's transaction, or on a raw connection of the read
    pool. This is the hot read path: SQLAlchemy's statement, result and session machinery cost more
    than the query itself (see benchmarks/api_bench.py)."""
    driver = await driver_connection(source) if isinstance(source, AsyncSession) else source
    async with driver.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql, params)
        rows: list[dict[str, Any]] = await cursor.fetchall()
    return rows


async def instance_documents(
    source: Source, ids: Sequence[uuid.UUID], *, chronological: bool, history_limit: int | None
) -> list[dict[str, Any]]:
    """Instance rows with machine, interfaces, bindings and history as JSON (any order).
    ``chronological``: history oldest first; otherwise newest first."""
    sql = _BY_IDS["ASC" if chronological else "DESC"]
    return await _fetch(source, sql, {"ids": list(ids), "history_limit": history_limit})


async def instance_document_for_caller(
    source: Source, org: str, instance_id: uuid.UUID, history_limit: int
) -> dict[str, Any]:
    """The org's tenant id (``caller_tenant_id``) and the instance's columns (all None when missing)."""
    (data,) = await _fetch(
        source, _FOR_CALLER, {"org": org, "id": instance_id, "history_limit": history_limit}
    )
    return data


# ---- rows for changing one instance -------------------------------------------------------------


async def locked_instance(
    session: AsyncSession, instance_id: uuid.UUID, *, refresh: bool = False
) -> Instance | None:
    """The instance FOR UPDATE; ``refresh``: reloaded even if the session holds a copy (a long-lived
    session may hold an outdated one)."""
    stmt = select(Instance).where(Instance.id == instance_id).with_for_update()
    if refresh:
        stmt = stmt.execution_options(populate_existing=True)
    return await session.scalar(stmt)


async def delete_instance(session: AsyncSession, instance_id: uuid.UUID) -> None:
    """Remove the instance (its interfaces and history cascade; its machine is freed by ON DELETE SET
    NULL)."""
    await session.execute(delete(Instance).where(Instance.id == instance_id))


async def delete_decommissioned_machine(session: AsyncSession, instance_id: uuid.UUID) -> None:
    """Remove the instance's machine if it was force-deleted (it waited for its GPUs to leave their
    partitions; its GPUs, capabilities and history cascade)."""
    await session.execute(
        delete(Machine).where(
            Machine.instance_id == instance_id, Machine.status == MachineStatus.DECOMMISSIONED
        )
    )


async def bindings_of_instance(session: AsyncSession, instance_id: uuid.UUID) -> list[NvlinkInterface]:
    """Every NVLink binding of the instance, Deleting ones included."""
    return list(
        await session.scalars(select(NvlinkInterface).where(NvlinkInterface.instance_id == instance_id))
    )


async def mark_bindings_deleting(session: AsyncSession, instance_id: uuid.UUID) -> int:
    """Every live NVLink binding of the instance becomes Deleting (its GPUs are about to leave their
    partitions: from now on no answer may call them Ready); returns how many changed."""
    result = await session.execute(
        update(NvlinkInterface)
        .where(
            NvlinkInterface.instance_id == instance_id,
            NvlinkInterface.status != NvLinkInterfaceStatus.DELETING,
        )
        .values(status=NvLinkInterfaceStatus.DELETING, updated=func.now())
    )
    return int(getattr(result, "rowcount", 0) or 0)


async def has_bindings(session: AsyncSession, instance_id: uuid.UUID) -> bool:
    return bool(await session.scalar(select(exists().where(NvlinkInterface.instance_id == instance_id))))


async def machine_of_instance(session: AsyncSession, instance_id: uuid.UUID) -> Machine | None:
    return await session.scalar(select(Machine).where(Machine.instance_id == instance_id))


async def locked_machine(session: AsyncSession, machine_id: str) -> Machine | None:
    """The machine FOR UPDATE (targeted creation)."""
    return await session.scalar(select(Machine).where(Machine.id == machine_id).with_for_update())


async def instance_named(
    session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID, name: str
) -> uuid.UUID | None:
    """The id of the tenant's instance of that name at the site."""
    return await session.scalar(
        select(Instance.id).where(
            Instance.tenant_id == tenant_id, Instance.site_id == site_id, Instance.name == name
        )
    )


async def capabilities_of_machines(session: AsyncSession, machine_ids: list[Any]) -> list[MachineCapability]:
    """The machines' capabilities in their order."""
    return list(
        await session.scalars(
            select(MachineCapability)
            .where(MachineCapability.machine_id.in_(machine_ids))
            .order_by(MachineCapability.position, MachineCapability.created)
        )
    )


# ---- lists --------------------------------------------------------------------------------------


async def existing_vpc_ids(session: AsyncSession, vpc_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    return set((await session.scalars(select(Vpc.id).where(Vpc.id.in_(vpc_ids)))).all())


def instance_ids_where(
    tenant_id: uuid.UUID,
    *,
    site_ids: Sequence[uuid.UUID] = (),
    vpc_ids: Sequence[uuid.UUID] = (),
    statuses: Sequence[str] = (),
    instance_type_ids: Sequence[uuid.UUID] = (),
    machine_ids: Sequence[str] = (),
    provider_id: uuid.UUID | None = None,
    name: str | None = None,
    query: str | None = None,
    nothing: bool = False,
) -> Select[Any]:
    """The ids of the tenant's instances that pass every given filter (``query``: a case-insensitive
    substring of name, description or status; ``nothing``: none pass)."""
    stmt = select(Instance.id).where(Instance.tenant_id == tenant_id)
    if site_ids:
        stmt = stmt.where(Instance.site_id.in_(site_ids))
    if vpc_ids:
        stmt = stmt.where(Instance.vpc_id.in_(vpc_ids))
    if statuses:
        stmt = stmt.where(Instance.status.in_(statuses))
    if instance_type_ids:
        stmt = stmt.where(Instance.instance_type_id.in_(instance_type_ids))
    if machine_ids:
        stmt = stmt.where(exists().where(Machine.instance_id == Instance.id, Machine.id.in_(machine_ids)))
    if provider_id is not None:
        stmt = stmt.where(Instance.site_id.in_(sites_of_provider(provider_id)))
    if name is not None:
        stmt = stmt.where(Instance.name == name)
    if query:
        stmt = stmt.where(text_search(Instance, query))
    if nothing:
        stmt = stmt.where(Instance.id.is_(None))
    return stmt


_MACHINE_OF = select(Machine.id).where(Machine.instance_id == Instance.id).scalar_subquery()
_TYPE_NAME = select(InstanceType.name).where(InstanceType.id == Instance.instance_type_id).scalar_subquery()
# The orders of instance lists, by API order field.
INSTANCE_ORDER: dict[str, Any] = {
    **columns(Instance),
    "machine_id": _MACHINE_OF,
    "instance_type_name": _TYPE_NAME,
    # One tenant per list, no InfiniBand, no security groups: these orders are the creation order.
    "tenant_org_display_name": Instance.created,
    "has_infiniband": Instance.created,
    "network_security_group.name": Instance.created,
}
