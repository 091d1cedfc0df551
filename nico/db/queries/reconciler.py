"""The reconciler's SQL: loading domain state, summaries, locks, write-back and the global gauges.

Functions take an ``AsyncConnection`` (reads of the reconciler, outside any ORM session) or an
``AsyncSession`` (writes that share a transaction with :mod:`nico.reconciler.lifecycle`) and return
plain rows; :mod:`nico.reconciler.state` turns them into domain state.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from psycopg.types.json import Jsonb
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from nico.db.raw import Statement, array_literal, driver_connection, pipelined


def _domain_filter(column: str, domains: Sequence[uuid.UUID] | None) -> str:
    return "" if domains is None else f" AND {column} = ANY(:domains)"


def _params(domains: Sequence[uuid.UUID] | None) -> dict[str, Any]:
    return {} if domains is None else {"domains": list(domains)}


# ---- state loading ------------------------------------------------------------------------------


# (domain uuid, site id, multicast budget as last read from the fabric: None, never read) of every
# domain (or of those named).
_DOMAIN_SITES = "SELECT uuid, site_id, max_multicast_groups FROM nvlink_domain WHERE true"


# One row per GPU with what it wants: the live binding of its instance's GPU, unless the instance is
# terminating (then its GPUs must leave every tenant partition). Columns: domain (text: a uuid object
# per row was the largest part of reading them; the load makes one per domain), gpu_uid (text),
# machine id, device id, instance id, wanted logical partition, physical partition id, fabric
# partition id, chassis serial, slot id, the machine's GPUs in foreign partitions as last recorded.
# The instance and the binding are looked up per GPU of a machine with an instance through their
# indexes (uq_nvlink_interface_live_gpu gives at most one binding).
_GPU_WANTS_COLUMNS = """
            SELECT m.domain_uuid::text, g.gpu_uid::text, m.id, g.device_id, m.instance_id,
                   CASE WHEN m.instance_id IS NULL
                          OR (SELECT i.status FROM instance i WHERE i.id = m.instance_id) = 'Terminating'
                        THEN NULL
                        ELSE (SELECT ni.logical_partition_id FROM nvlink_interface ni
                              WHERE ni.instance_id = m.instance_id AND ni.device_instance = g.device_id - 1
                                AND ni.status <> 'Deleting')
                   END,
                   g.physical_partition_id, g.nmx_partition_id, m.chassis_serial, g.slot_id, m.foreign_gpus
            """
# Every domain's GPUs (the whole site: one pass over both tables).
_GPU_WANTS = (
    _GPU_WANTS_COLUMNS + "FROM gpu g JOIN machine m ON m.id = g.machine_id WHERE m.domain_uuid IS NOT NULL"
)
# The GPUs of named domains (a pass's one domain, a deep scan's part of 50): from the domains' machines
# (machine.domain_uuid's index) to each machine's GPUs through a lateral subquery fenced with OFFSET 0
# (never flattened into a join), so every row is looked up by key whatever the statistics say. A pass's
# load is planned once per connection (generic plans) and, in a first pass after a site's racks were
# imported, on tables not yet analysed: joined, the planner hashed every GPU and binding of the site
# for each domain (230 ms a domain at 2,000 racks on PostgreSQL 15, three quarters of that first
# pass's time) and every GPU of the site for each 50-domain part (53 ms at 2,000 racks against 20 ms,
# and 16 ms either way once analysed).
_GPU_WANTS_OF = (
    _GPU_WANTS_COLUMNS + "FROM machine m CROSS JOIN LATERAL (SELECT g.gpu_uid, g.device_id, "
    "g.physical_partition_id, g.nmx_partition_id, g.slot_id FROM gpu g WHERE g.machine_id = m.id OFFSET 0) g "
    "WHERE m.domain_uuid = ANY(:domains)"
)


_PHYSICAL_PARTITIONS = (
    "SELECT id, logical_partition_id, domain_uuid, nmx_partition_id, fabric_ref, name "
    "FROM physical_partition WHERE true"
)


async def physical_partitions(conn: AsyncConnection, domains: Sequence[uuid.UUID] | None) -> Sequence[Any]:
    """(id, logical partition id, domain, fabric partition id, fabric ref, name) of recorded partitions."""
    rows = await conn.execute(
        text(_PHYSICAL_PARTITIONS + _domain_filter("domain_uuid", domains)), _params(domains)
    )
    return rows.all()


# (id, domain, partition name, operation, operation id, state) of pending or timed-out intents.
_OPEN_INTENTS = (
    "SELECT id, domain_uuid, partition_name, operation, operation_id, state FROM fabric_intent "
    "WHERE state IN ('pending', 'timedout')"
)


# (id, domain, status, config version, changed at, machine id, {device: lp} json) of instances on a
# domain that are terminating or whose applied NVLink version lags the desired one.
# Named columns: the load's statement reads these rows as JSON objects (two ids would be one key).
_UNSETTLED_INSTANCES = """
            SELECT i.id AS instance_id, m.domain_uuid, i.status, i.nvlink_config_version,
                   i.nvlink_config_changed_at, m.id AS machine_id,
                   COALESCE(
                       (SELECT json_object_agg(ni.device_instance, ni.logical_partition_id)
                        FROM nvlink_interface ni WHERE ni.instance_id = i.id AND ni.status <> 'Deleting'),
                       '{}'::json) AS bindings
            FROM instance i JOIN machine m ON m.instance_id = i.id
            WHERE m.domain_uuid IS NOT NULL
              AND (i.status = 'Terminating'
                   OR i.nvlink_applied_version IS DISTINCT FROM i.nvlink_config_version)
            """


_NMXC_ENDPOINTS = "SELECT chassis_serial, endpoint FROM nvlink_nmxc_endpoint"
_NMXM_CREDENTIALS = "SELECT username, password FROM fabric_credential WHERE name = 'nmx-m'"


async def nmxc_endpoints(conn: AsyncConnection) -> Sequence[Any]:
    """(chassis serial, endpoint URL) of the NMX-C registry."""
    return (await conn.execute(text(_NMXC_ENDPOINTS))).all()


async def nmxm_credentials(conn: AsyncConnection) -> tuple[str, str] | None:
    """The stored NMX-M basic-auth credentials (name ``services.fabric_registry.NMXM_CREDENTIAL``)."""
    row = (await conn.execute(text(_NMXM_CREDENTIALS))).first()
    return (str(row[0]), str(row[1])) if row is not None else None


@dataclass
class DomainRows:
    """One domain's state rows (as :func:`domains_rows` returns them, with the multicast limits of every
    logical partition bound on the domain), the registry rows of its chassis and the NMX-M credentials;
    ``locked``: the domain's lock was taken with them (:func:`one_domain_rows`)."""

    sites: list[Any]
    gpus: list[Any]
    partitions: list[Any]
    intents: list[Any]
    unsettled: list[Any]
    limits: list[Any]
    endpoints: list[Any]
    credentials: tuple[str, str] | None
    locked: bool = True


def _psycopg(sql: str) -> str:
    return sql.replace(":domains", "%(domains)s").replace(":ids", "%(ids)s")


async def domains_rows(conn: AsyncConnection, domains: Sequence[uuid.UUID] | None) -> list[list[Any]]:
    """The rows of ``domains`` (all when None) by ``_DOMAIN_SITES``, ``_GPU_WANTS``,
    ``_PHYSICAL_PARTITIONS``, ``_OPEN_INTENTS`` and ``_UNSETTLED_INSTANCES``, in one round
    trip at the driver level: a full load reads a row per GPU of the site, and SQLAlchemy's rows cost
    more CPU than the reading."""
    sqls = [
        _DOMAIN_SITES + _domain_filter("uuid", domains),
        _GPU_WANTS if domains is None else _GPU_WANTS_OF,
        _PHYSICAL_PARTITIONS + _domain_filter("domain_uuid", domains),
        _OPEN_INTENTS + _domain_filter("domain_uuid", domains),
        _UNSETTLED_INSTANCES + _domain_filter("m.domain_uuid", domains),
    ]
    params = _params(domains) or None
    return await pipelined(await driver_connection(conn), [Statement(_psycopg(sql), params) for sql in sqls])


# The multicast limits of the logical partitions bound on a domain, looked up by key as in
# ``_GPU_WANTS_OF`` (as a join: 21 ms a domain of a first pass at 2,000 racks).
_DOMAIN_LIMITS = (
    "SELECT DISTINCT lp.id, lp.multicast_groups_limit FROM machine m "
    "CROSS JOIN LATERAL (SELECT ni.logical_partition_id FROM nvlink_interface ni "
    "WHERE ni.instance_id = m.instance_id OFFSET 0) ni "
    "CROSS JOIN LATERAL (SELECT lp.id, lp.multicast_groups_limit FROM logical_partition lp "
    "WHERE lp.id = ni.logical_partition_id OFFSET 0) lp "
    "WHERE m.domain_uuid = ANY(:domains)"
)
# The registry rows of the domain's chassis only: a pass that read the whole registry cost every pass
# time in the number of racks (the first pass over 2,000 racks read 4 million rows). Each of the
# domain's trimmed serials looked up through ix_nvlink_nmxc_endpoint_serial (as a semi-join, or as an
# array on an unanalysed registry, the planner read every row of it: 1.2-2 ms a pass at 2,000 racks).
_DOMAIN_ENDPOINTS = (
    "SELECT e.chassis_serial, e.endpoint "
    "FROM (SELECT DISTINCT btrim(m.chassis_serial) AS serial FROM machine m "
    "WHERE m.domain_uuid = ANY(:domains)) s "
    "CROSS JOIN LATERAL (SELECT e.chassis_serial, e.endpoint FROM nvlink_nmxc_endpoint e "
    "WHERE btrim(e.chassis_serial) = s.serial OFFSET 0) e"
)
_ONE_DOMAIN = [_psycopg(_GPU_WANTS_OF)]
# The few rows of a domain's other statements (its own row, physical partitions, open intents, its
# unsettled instances, the multicast limits of its partitions; its chassis' registry rows and the NMX-M
# credentials when asked for), each as one JSON array of its rows, in one statement: a statement costs
# psycopg and PostgreSQL more than a handful of rows as JSON costs them.
_SMALL = {
    "sites": _DOMAIN_SITES + _domain_filter("uuid", []),
    "partitions": _PHYSICAL_PARTITIONS + _domain_filter("domain_uuid", []),
    "intents": _OPEN_INTENTS + _domain_filter("domain_uuid", []),
    "unsettled": _UNSETTLED_INSTANCES + _domain_filter("m.domain_uuid", []),
    "limits": _DOMAIN_LIMITS,
    "endpoints": _DOMAIN_ENDPOINTS,
    "credentials": _NMXM_CREDENTIALS,
}


def _small_rows(parts: Sequence[str]) -> str:
    """The statement of :data:`_SMALL`'s ``parts``: one column per part, NULL for no rows."""
    columns = ", ".join(f"(SELECT json_agg(x) FROM ({_SMALL[part]}) x)" for part in parts)
    return _psycopg("SELECT " + columns)


def _uuid(value: str | None) -> uuid.UUID | None:
    return uuid.UUID(value) if value is not None else None


def _datetime(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value is not None else None


def _small_values(parts: Sequence[str], row: Sequence[Any]) -> dict[str, list[Any]]:
    """:func:`_small_rows`'s row as each part's rows, with the types their own statements give."""
    found: dict[str, list[Any]] = {}
    for part, rows in zip(parts, row, strict=True):
        values: list[Any] = [list(r.values()) for r in rows or ()]
        if part == "sites":
            values = [(uuid.UUID(d), _uuid(site), budget) for d, site, budget in values]
        elif part == "partitions":
            values = [(uuid.UUID(i), _uuid(lp), uuid.UUID(d), *rest) for i, lp, d, *rest in values]
        elif part == "intents":
            values = [(uuid.UUID(i), uuid.UUID(d), *rest) for i, d, *rest in values]
        elif part == "unsettled":
            values = [
                (uuid.UUID(i), uuid.UUID(d), status, version, _datetime(at), *rest)
                for i, d, status, version, at, *rest in values
            ]
        elif part == "limits":
            values = [(uuid.UUID(lp), limit) for lp, limit in values]
        found[part] = values
    return found


# The domain's lock tried and, once taken, the pass's plan settings for the session (PASS_PLANS's
# reasons) until it is let go (:func:`unlock`): one statement for the lock and both of the pass's
# transactions, none of its own in either. The session's own settings come back with the unlock (the
# connection may be the API's: ``nico serve`` runs a reconciler on its engine).
_TRY_LOCK = (
    "SELECT l, CASE WHEN l THEN set_config('plan_cache_mode', 'force_generic_plan', false) END, "
    "CASE WHEN l THEN set_config('jit', 'off', false) END, "
    "CASE WHEN l THEN set_config('enable_seqscan', 'off', false) END FROM pg_try_advisory_lock(%(k)s) AS l"
)
# set_config with NULL resets a setting to the session's default, as RESET does.
_UNLOCK = (
    "SELECT pg_advisory_unlock(%(k)s), set_config('plan_cache_mode', NULL, false), "
    "set_config('jit', NULL, false), set_config('enable_seqscan', NULL, false)"
)


def unlock(key: int) -> Statement:
    """Let go of the domain lock ``key`` taken by :func:`one_domain_rows`, and put the session's plan
    settings back."""
    return Statement(_UNLOCK, {"k": key})


# A pass's transaction (its load, its write-back) looks a domain's rows up by key: generic plans
# (``nico.db.raw.GENERIC_PLANS``'s reason), no JIT compilation and no sequential scan. On unanalysed
# tables a generic plan's cost is a guess far above the rows it reads (the domain's GPU rows: 500,000
# for 72 rows), and past ``jit_above_cost`` a server built with LLVM compiled the statement at every
# execution (28 ms of a pass's load on PostgreSQL 15, more than the rest of the pass's SQL together).
# On a small site the same guesses go the other way: a table of a few pages looks cheaper to read
# whole than through its index, and the generic plan (kept for the connection's life) read every GPU
# of the site in each pass's GPU observations (1,152 rows for the 4 a converging pass writes at 16
# racks) and every machine in its load and figures. A statement that has no index to use still scans.
PASS_PLANS = Statement(
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('jit', 'off', true), "
    "set_config('enable_seqscan', 'off', true)"
)


async def one_domain_rows(
    conn: AsyncConnection,
    domain: uuid.UUID,
    *,
    lock: int | None = None,
    endpoints: bool = True,
    credentials: bool = True,
) -> DomainRows:
    """Everything a pass loads about ``domain``, and the registry of its chassis (its NMX-C endpoints
    unless not ``endpoints``, the NMX-M credentials unless not ``credentials``: what the backend has
    no use for is not read), in one round trip: the statements go out together in a psycopg
    pipeline, in the connection's current transaction. With ``lock``, the domain's session-level
    advisory lock ``lock`` is tried first in the same round trip; when another session holds it,
    ``locked`` is False and the rows are to be thrown away. A lock taken holds generic plans for the
    session until :func:`unlock` lets go of it."""
    statement = Statement(_TRY_LOCK, {"k": lock}) if lock is not None else PASS_PLANS
    first, rows = await _domain_rows(
        conn, [statement], [domain], endpoints=endpoints, credentials=credentials
    )
    return replace(rows, locked=bool(first[0][0]) if lock is not None else True)


async def _domain_rows(
    conn: AsyncConnection,
    first: Sequence[Statement],
    domains: Sequence[uuid.UUID],
    *,
    endpoints: bool,
    credentials: bool,
) -> tuple[list[Any], DomainRows]:
    """The rows of the last of ``first`` and the pass's load of ``domains`` after them, in one round
    trip (generic plans once ``first`` has set them: :data:`_TRY_LOCK` or :data:`PASS_PLANS`)."""
    parts = ["sites", "partitions", "intents", "unsettled", "limits"]
    parts += ["endpoints"] * endpoints + ["credentials"] * credentials
    params = {"domains": list(domains)}
    statements = [*first] + [Statement(sql, params) for sql in [*_ONE_DOMAIN, _small_rows(parts)]]
    *heads, gpus, small = await pipelined(await driver_connection(conn), statements)
    found = _small_values(parts, small[0])
    stored = found.get("credentials")
    return heads[-1], DomainRows(
        found["sites"],
        gpus,
        found["partitions"],
        found["intents"],
        found["unsettled"],
        found["limits"],
        found.get("endpoints", []),
        (str(stored[0][0]), str(stored[0][1])) if stored else None,
    )


# The advisory locks of several domains (a part of a full pass), each tried once: the keys taken.
_TRY_LOCKS = "SELECT k FROM unnest(CAST(%(keys)s AS bigint[])) AS k WHERE pg_try_advisory_lock(k)"


async def part_rows(
    conn: AsyncConnection,
    domains: Sequence[uuid.UUID],
    locks: Sequence[int],
    *,
    endpoints: bool = True,
    credentials: bool = True,
) -> tuple[DomainRows, set[int]]:
    """:func:`one_domain_rows` for several domains (a part of a full pass), after trying each of the
    advisory locks ``locks`` (the second value: the keys taken), in one round trip. The rows of a
    domain whose lock was not taken are to be thrown away."""
    # The part's transaction plans generically (PASS_PLANS), as the lock's session does for one domain.
    tried = [PASS_PLANS, Statement(_TRY_LOCKS, {"keys": list(locks)})]
    first, rows = await _domain_rows(conn, tried, domains, endpoints=endpoints, credentials=credentials)
    return rows, {int(key) for (key,) in first}


async def domain_summaries(
    conn: AsyncConnection, domains: Sequence[uuid.UUID] | None = None
) -> Sequence[Any]:
    """(domain, fabric digest, settled, chassis serials, busy) per domain of ``domains`` (None: every
    domain), computed in the database: a reconciler's share is all it computes."""
    rows = await conn.execute(
        text(
            """
            SELECT d.uuid, d.fabric_digest, d.settled,
                   COALESCE((SELECT array_agg(DISTINCT m.chassis_serial) FROM machine m
                             WHERE m.domain_uuid = d.uuid), '{}'),
                   EXISTS (SELECT 1 FROM machine m JOIN instance i ON i.id = m.instance_id
                           WHERE m.domain_uuid = d.uuid
                             AND (i.status = 'Terminating'
                                  OR i.nvlink_applied_version IS DISTINCT FROM i.nvlink_config_version))
                   OR EXISTS (SELECT 1 FROM fabric_intent f
                              WHERE f.domain_uuid = d.uuid AND f.state IN ('pending', 'timedout'))
            FROM nvlink_domain d
            """
            + ("" if domains is None else " WHERE d.uuid = ANY(CAST(:ds AS uuid[]))")
        ),
        {} if domains is None else {"ds": list(domains)},
    )
    return rows.all()


async def all_domain_uuids(conn: AsyncConnection) -> list[uuid.UUID]:
    return list((await conn.execute(text("SELECT uuid FROM nvlink_domain"))).scalars())


# ---- the per-domain lock ------------------------------------------------------------------------


async def release_domain_lock(conn: AsyncConnection, key: int) -> None:
    """:func:`unlock`, outside any transaction."""
    await pipelined(await driver_connection(conn), [unlock(key)])


async def release_domain_locks(conn: AsyncConnection, keys: Sequence[int]) -> None:
    """Release several domains' advisory locks (a part of a full pass), one statement."""
    await conn.execute(
        text("SELECT pg_advisory_unlock(k) FROM unnest(CAST(:keys AS bigint[])) AS k"), {"keys": list(keys)}
    )


# ---- write-back ---------------------------------------------------------------------------------


_INSERT_INTENTS = (
    "INSERT INTO fabric_intent (id, domain_uuid, logical_partition_id, operation, "
    "partition_name, fabric_ref, gpu_uids, state) "
    "SELECT r.id, r.domain, (SELECT lp.id FROM logical_partition lp WHERE lp.id = r.lp), r.operation, "
    "r.name, r.ref, ARRAY(SELECT CAST(g AS numeric) FROM jsonb_array_elements_text(r.gpus) AS g), 'pending' "
    "FROM jsonb_to_recordset(%(rows)s) AS r(id uuid, domain uuid, lp uuid, operation text, name text, "
    "ref text, gpus jsonb)"
)


async def insert_intents(conn: AsyncConnection, rows: list[dict[str, Any]], *, commit: bool = False) -> None:
    """Insert pending intents (keys: id, domain, lp, operation, name, ref, gpus: GPU uids as text),
    one statement for all, and with ``commit`` commit them, in one round trip."""
    statements = [Statement(_INSERT_INTENTS, {"rows": Jsonb(rows, dumps=_dumps)})] if rows else []
    await pipelined(await driver_connection(conn), statements, commit=commit, then=[] if commit else None)


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str)


_DELETE_PHYSICAL_PARTITION = "DELETE FROM physical_partition WHERE id = %(id)s"
_UPSERT_PHYSICAL_PARTITION = (
    "INSERT INTO physical_partition (id, logical_partition_id, domain_uuid, nmx_partition_id, "
    "fabric_ref, name) SELECT %(id)s, lp.id, %(domain)s, %(nmx_partition_id)s, %(fabric_ref)s, %(name)s "
    "FROM logical_partition lp WHERE lp.id = %(logical_partition_id)s "
    "ON CONFLICT (logical_partition_id, domain_uuid) DO UPDATE SET "
    "nmx_partition_id = EXCLUDED.nmx_partition_id, fabric_ref = EXCLUDED.fabric_ref, "
    "name = EXCLUDED.name, updated = now() RETURNING id"
)


@dataclass(frozen=True)
class PartitionRecord:
    """A fabric partition of a logical partition on a domain to record
    (:meth:`PassWrites.record_partitions`)."""

    id: uuid.UUID  # the record's id when it is new (an existing record keeps its own)
    logical_partition_id: uuid.UUID | None
    domain: uuid.UUID
    nmx_partition_id: int
    fabric_ref: str | None
    name: str


# Each GPU's observed partition and its health, one statement for the domain's GPUs (each GPU row
# written once in a pass that reads health: not once for its observation and again for its health).
# ``seen``: the GPU's observation changed (the others keep theirs, and their observed_at); its physical
# partition is looked up by the fabric name of the partition holding it (NULL: a partition nico keeps
# no record of), so the records written earlier in the same transaction (new ones included) are found
# without a round trip of their own; health NULL: not reported (kept). Rows that change in neither are
# not written; GPUs nico does not know are ignored.
_GPU_OBSERVATIONS = (
    "UPDATE gpu SET physical_partition_id = CASE WHEN v.seen THEN (SELECT p.id FROM physical_partition p "
    "WHERE p.domain_uuid = %(d)s AND p.name = v.name) ELSE gpu.physical_partition_id END, "
    "nmx_partition_id = CASE WHEN v.seen THEN v.pid ELSE gpu.nmx_partition_id END, "
    "observed_at = CASE WHEN v.seen THEN now() ELSE gpu.observed_at END, "
    "updated = CASE WHEN v.seen THEN now() ELSE gpu.updated END, health = COALESCE(v.health, gpu.health) "
    "FROM unnest(CAST(%(uids)s AS numeric[]), CAST(%(names)s AS text[]), CAST(%(pids)s AS bigint[]), "
    "CAST(%(seen)s AS boolean[]), CAST(%(hs)s AS text[])) AS v(uid, name, pid, seen, health) "
    "WHERE gpu.gpu_uid = v.uid "
    "AND (v.seen OR (v.health IS NOT NULL AND gpu.health IS DISTINCT FROM v.health))"
)
# The ids again as an array: joined by id alone, the planner (a hundred rows expected of the JSON)
# read every intent ever recorded, once a pass.
_CLOSE_INTENTS = (
    "UPDATE fabric_intent f SET state = v.state, error = v.error, "
    "operation_id = COALESCE(v.op, f.operation_id), updated = now() "
    "FROM jsonb_to_recordset(%(rows)s) AS v(id uuid, state text, error text, op text) "
    "WHERE f.id = v.id AND f.id = ANY(CAST(%(intents)s AS uuid[]))"
)
_LOCKED_SETTLING = (
    "SELECT i.id, i.status, i.nvlink_config_version, ARRAY(SELECT n.device_instance "
    "FROM nvlink_interface n WHERE n.instance_id = i.id AND n.status <> 'Deleting') "
    "FROM instance i WHERE i.id = ANY(%(ids)s) ORDER BY i.id FOR UPDATE OF i"
)
_SETTLE = (
    "WITH gone AS (DELETE FROM nvlink_interface WHERE instance_id = ANY(%(ids)s) "
    "AND status = 'Deleting' RETURNING 1), "
    "bound AS (UPDATE nvlink_interface n SET status = 'Ready', domain_uuid = o.domain, "
    "gpu_uid = o.gpu, updated = now() "
    "FROM unnest(CAST(%(g_inst)s AS uuid[]), CAST(%(g_dev)s AS int[]), CAST(%(g_dom)s AS uuid[]), "
    "CAST(%(g_uid)s AS numeric[])) AS o(instance_id, device, domain, gpu) "
    "WHERE n.instance_id = o.instance_id AND n.device_instance = o.device AND n.status <> 'Deleting' "
    "AND (n.status <> 'Ready' OR n.domain_uuid IS DISTINCT FROM o.domain "
    "OR n.gpu_uid IS DISTINCT FROM o.gpu) RETURNING 1), "
    "applied AS (UPDATE instance i SET nvlink_applied_version = v.version, "
    "status = CASE WHEN i.id = ANY(%(waiting)s) THEN 'Ready' ELSE i.status END, updated = now() "
    "FROM unnest(CAST(%(ids)s AS uuid[]), CAST(%(versions)s AS bigint[])) AS v(id, version) "
    "WHERE i.id = v.id AND (i.nvlink_applied_version IS DISTINCT FROM v.version "
    "OR i.id = ANY(%(waiting)s)) RETURNING 1), "
    "history AS (INSERT INTO status_detail (instance_id, status, message) "
    "SELECT w, 'Ready', 'Instance is ready for use' FROM unnest(CAST(%(waiting)s AS uuid[])) AS w "
    "RETURNING 1) "
    "SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM bound), "
    "(SELECT count(*) FROM applied), (SELECT count(*) FROM history)"
)
# :data:`_LOCKED_SETTLING`, the settlement of ``nico.reconciler.lifecycle`` and :data:`_SETTLE` as one
# statement, for instances observed realised (``ids`` at ``versions``; ``g_*``: every GPU of their
# machines): each is locked (in id order) and settles only when, as locked, it is not Terminating, is
# still at the version observed and has no live binding on a device without an observed GPU. The
# waiting ones (Pending, Configuring) become Ready with a status history entry. Returns the instances
# settled. One statement and no round trip between the lock and the writes.
_SETTLE_OBSERVED = (
    "WITH observed AS (SELECT * FROM unnest(CAST(%(ids)s AS uuid[]), CAST(%(versions)s AS bigint[])) "
    "AS o(id, version)), "
    "locked AS (SELECT i.id, i.status, i.nvlink_config_version AS version FROM instance i "
    "WHERE i.id = ANY(CAST(%(ids)s AS uuid[])) ORDER BY i.id FOR UPDATE OF i), "
    "gpus AS (SELECT * FROM unnest(CAST(%(g_inst)s AS uuid[]), CAST(%(g_dev)s AS int[]), "
    "CAST(%(g_dom)s AS uuid[]), CAST(%(g_uid)s AS numeric[])) AS g(instance_id, device, domain, gpu)), "
    "ok AS (SELECT l.id, l.version, l.status IN ('Pending', 'Configuring') AS waiting "
    "FROM locked l JOIN observed o ON o.id = l.id "
    "WHERE l.status <> 'Terminating' AND l.version = o.version "
    "AND NOT EXISTS (SELECT 1 FROM nvlink_interface n WHERE n.instance_id = l.id AND n.status <> 'Deleting' "
    "AND NOT EXISTS (SELECT 1 FROM gpus g WHERE g.instance_id = l.id AND g.device = n.device_instance))), "
    "gone AS (DELETE FROM nvlink_interface WHERE instance_id IN (SELECT id FROM ok) "
    "AND status = 'Deleting' RETURNING 1), "
    "bound AS (UPDATE nvlink_interface n SET status = 'Ready', domain_uuid = g.domain, "
    "gpu_uid = g.gpu, updated = now() FROM gpus g JOIN ok ON ok.id = g.instance_id "
    "WHERE n.instance_id = g.instance_id AND n.device_instance = g.device AND n.status <> 'Deleting' "
    "AND (n.status <> 'Ready' OR n.domain_uuid IS DISTINCT FROM g.domain "
    "OR n.gpu_uid IS DISTINCT FROM g.gpu) RETURNING 1), "
    "applied AS (UPDATE instance i SET nvlink_applied_version = ok.version, "
    "status = CASE WHEN ok.waiting THEN 'Ready' ELSE i.status END, updated = now() "
    "FROM ok WHERE i.id = ok.id AND (i.nvlink_applied_version IS DISTINCT FROM ok.version OR ok.waiting) "
    "RETURNING 1), "
    "history AS (INSERT INTO status_detail (instance_id, status, message) "
    "SELECT ok.id, 'Ready', 'Instance is ready for use' FROM ok WHERE ok.waiting RETURNING 1) "
    "SELECT ok.id FROM ok"
)
# In id order (the partial index on them reads them so, a plan without it would not): they are
# finished (locked) in this order, so two write-backs finishing some of the same ones (two
# reconcilers' at once) wait for each other in one order and never deadlock.
_DELETING_WITH_NOTHING_LEFT = (
    "SELECT lp.id FROM logical_partition lp WHERE lp.status = 'Deleting' "
    "AND NOT EXISTS (SELECT 1 FROM physical_partition pp WHERE pp.logical_partition_id = lp.id) "
    "ORDER BY lp.id"
)
_RECORD_DOMAIN_PASS = (
    "UPDATE nvlink_domain SET last_pass_at = now(), last_error = NULL, consecutive_failures = 0, "
    "fabric_digest = %(digest)s, settled = %(settled)s, gpus_without_home = %(homeless)s, "
    "foreign_gpus = %(foreign)s, updated = now() WHERE uuid = %(d)s"
)
# Only the rows that change: the capacity triggers move a machine between free and held. Sent with
# the domain's pass record, as one statement (one statement fewer per pass: its client and server
# overhead was most of its cost). The ids again as an array keep the planner on machine's primary key
# (joined by id alone it read every machine).
_HELD_MACHINES_AND_DOMAIN_PASS = (
    "WITH held AS (UPDATE machine m SET foreign_gpus = v.n, updated = now() "
    "FROM unnest(CAST(%(ids)s AS varchar[]), CAST(%(counts)s AS smallint[])) AS v(id, n) "
    "WHERE m.id = v.id AND m.id = ANY(CAST(%(ids)s AS varchar[])) AND m.foreign_gpus <> v.n "
    "RETURNING 1) " + _RECORD_DOMAIN_PASS
)
# Intents closed and GPUs observed in one statement (one statement fewer per pass; they touch other
# tables).
_CLOSING_AND_OBSERVING = f"WITH closed AS ({_CLOSE_INTENTS}) {_GPU_OBSERVATIONS}"
# The intents closed, the GPUs observed (either or both) and the instances settled in one statement: one
# statement fewer in a converging pass. Each part writes other rows than the others read (the settle
# reads instances and bindings, and the GPUs it is handed), so one snapshot for all changes nothing
# they find. Not with GPU health, whose feed events carry their bindings' status as the statement
# leaves it (:meth:`PassWrites.settle_observed`).
_SETTLING = _SETTLE_OBSERVED.removeprefix("WITH ")
_OBSERVATIONS = f"observations AS ({_GPU_OBSERVATIONS} RETURNING 1)"
_AND_SETTLE = {
    _CLOSE_INTENTS: f"WITH closed AS ({_CLOSE_INTENTS}), {_SETTLING}",
    _GPU_OBSERVATIONS: f"WITH {_OBSERVATIONS}, {_SETTLING}",
    _CLOSING_AND_OBSERVING: f"WITH closed AS ({_CLOSE_INTENTS}), {_OBSERVATIONS}, {_SETTLING}",
}
# A note in an instance's status history, unless its latest entry says the same already.
_WAITING_NOTES = (
    "INSERT INTO status_detail (instance_id, status, message) "
    "SELECT i.id, i.status, v.message "
    "FROM unnest(CAST(%(ids)s AS uuid[]), CAST(%(messages)s AS text[])) AS v(id, message) "
    "JOIN instance i ON i.id = v.id "
    "WHERE (SELECT s.message FROM status_detail s WHERE s.instance_id = v.id "
    "ORDER BY s.created DESC, s.id DESC LIMIT 1) IS DISTINCT FROM v.message"
)


class GpuWrite(NamedTuple):
    """One GPU's row as a pass writes it (:meth:`PassWrites.gpu_observations`): the name of the
    partition nico records that holds it (None: none) and the fabric partition id holding it, whether
    that observation changed, its health (None: not read or not reported)."""

    gpu_uid: int
    name: str | None
    pid: int | None
    seen: bool
    health: str | None


class SettlingInstance(NamedTuple):
    """An instance locked to settle: its current status and NVLink config version, and the device
    instances of its live (not Deleting) bindings."""

    id: uuid.UUID
    status: str
    version: int
    devices: list[int]


@dataclass
class PassRows:
    """What the statements of a :class:`PassWrites` read: the instances locked to settle, and the
    logical partitions being deleted that have nothing left."""

    settling: list[SettlingInstance] = field(default_factory=list)
    deleting: list[uuid.UUID] = field(default_factory=list)
    figures: list[Any] | None = None  # rows of domain_figures, when asked for
    settled: set[uuid.UUID] = field(default_factory=set)  # the instances settle_observed settled
    logical_partitions: int | None = None  # the logical partitions counted, when asked for


def gpu_write_arrays(gpus: Sequence[GpuWrite]) -> dict[str, str]:
    """The GPUs' observations as the array literals :data:`_GPU_OBSERVATIONS` casts (uids, names, pids,
    seen, hs; :func:`array_literal`'s reason), one element a GPU in ``gpus``' order."""
    return {
        "uids": "{" + ",".join([str(g.gpu_uid) for g in gpus]) + "}",
        "names": array_literal([g.name for g in gpus]),
        "pids": "{" + ",".join(["NULL" if g.pid is None else str(g.pid) for g in gpus]) + "}",
        "seen": "{" + ",".join(["t" if g.seen else "f" for g in gpus]) + "}",
        "hs": array_literal([g.health for g in gpus]),
    }


class PassWrites:
    """Statements of a pass's write-back, queued in the order they are to run and sent together: one
    round trip for all of them (:func:`nico.db.raw.pipelined`), the commit included when asked."""

    def __init__(self) -> None:
        self._statements: list[Statement] = []
        self._settling: int | None = None
        self._deleting: int | None = None
        self._figures: int | None = None
        self._settled: int | None = None
        self._count: int | None = None
        self._count_in_figures = False  # the count is the figures' rows' last column
        self._health_observed = False  # the GPU observations queued carry health

    def plan_generically(self) -> None:
        """The transaction's statements from here on take generic plans, no JIT and no sequential scan
        (:data:`PASS_PLANS`): a pass's write-back looks its rows up by key."""
        self._statements.append(PASS_PLANS)

    def close_intents(self, updates: list[dict[str, object]]) -> None:
        """Set intents' final state (keys: id, state, error, op), one statement for all."""
        if updates:
            ids = array_literal([str(u["id"]) for u in updates])
            self._statements.append(
                Statement(_CLOSE_INTENTS, {"rows": Jsonb(updates, dumps=_dumps), "intents": ids})
            )

    def record_partitions(self, deleted: Sequence[uuid.UUID], records: Sequence[PartitionRecord]) -> None:
        """Delete the ``deleted`` physical partition records, then record each of ``records`` (a fabric
        partition of a logical partition on a domain; none when its logical partition is gone)."""
        self._statements += [Statement(_DELETE_PHYSICAL_PARTITION, {"id": pp_id}) for pp_id in deleted]
        self._statements += [Statement(_UPSERT_PHYSICAL_PARTITION, vars(r)) for r in records]

    def gpu_observations(self, domain: uuid.UUID, gpus: Sequence[GpuWrite]) -> None:
        """Store each GPU's observed partition where it changed and its health where reported
        (:data:`_GPU_OBSERVATIONS`), after the domain's partition records."""
        if gpus:
            self._health_observed = any(g.health is not None for g in gpus)
            params = {"d": domain, **gpu_write_arrays(gpus)}
            last = self._statements[-1] if self._statements else None
            if last is not None and last.sql is _CLOSE_INTENTS:  # one statement for both: other tables
                self._statements[-1] = Statement(_CLOSING_AND_OBSERVING, {**(last.params or {}), **params})
            else:
                self._statements.append(Statement(_GPU_OBSERVATIONS, params))

    def health(
        self, domain: uuid.UUID, partitions: Mapping[str, str], *, hold: bool, budget: int | None
    ) -> None:
        """The rest of the domain's health after its GPUs' (:func:`record_health`'s statements): the
        holds of its machines, its partitions' health, its multicast budget when newly read."""
        self._statements.append(health_rest(domain, partitions, hold=hold, budget=budget))

    def lock_settling(self, ids: Sequence[uuid.UUID]) -> None:
        """Lock the instances (FOR UPDATE, in id order, the order every set of them is locked in) and
        read them as they are once locked (:attr:`PassRows.settling`; instances gone are missing)."""
        self._settling = len(self._statements)
        self._statements.append(Statement(_LOCKED_SETTLING, {"ids": list(ids)}))

    def domain_figures(self, *domains: uuid.UUID) -> None:
        """Read the domains' gauge figures (:func:`domain_figures`) as the transaction sees them
        (:attr:`PassRows.figures`)."""
        last = self._statements[-1] if self._statements else None
        if last is not None and last.sql is _RECORD_DOMAIN_PASS and len(domains) == 1:  # one statement
            params = {**(last.params or {}), "domains": list(domains)}
            self._statements[-1] = Statement(_PASS_AND_FIGURES, params)
        else:
            self._statements.append(Statement(_ONE_DOMAIN_FIGURES, {"domains": list(domains)}))
        self._figures = len(self._statements) - 1

    def logical_partition_count(self) -> None:
        """Count the logical partitions as the transaction sees them (:func:`logical_partition_count`;
        :attr:`PassRows.logical_partitions`): in the figures' statement when it was queued last."""
        last = self._statements[-1] if self._statements else None
        if last is not None and self._figures == len(self._statements) - 1 and last.sql in _COUNTED:
            self._statements[-1] = Statement(_COUNTED[last.sql], last.params)
            self._count_in_figures = True
            return
        self._count = len(self._statements)
        self._statements.append(Statement(_COUNT_LOGICAL_PARTITIONS))

    def deleting_partitions(self) -> None:
        """Read the logical partitions being deleted that have no physical partition left."""
        self._deleting = len(self._statements)
        self._statements.append(Statement(_DELETING_WITH_NOTHING_LEFT))

    def settle(
        self,
        versions: Mapping[uuid.UUID, int],
        waiting: Sequence[uuid.UUID],
        gpus: Sequence[tuple[uuid.UUID, int, uuid.UUID, int]],
    ) -> None:
        """:func:`settle_instances`, queued."""
        params = {
            "ids": list(versions),
            "versions": list(versions.values()),
            "waiting": list(waiting),
            "g_inst": [g[0] for g in gpus],
            "g_dev": [g[1] for g in gpus],
            "g_dom": [g[2] for g in gpus],
            "g_uid": [str(g[3]) for g in gpus],
        }
        self._statements.append(Statement(_SETTLE, params))

    def settle_observed(
        self, versions: Mapping[uuid.UUID, int], gpus: Sequence[tuple[uuid.UUID, int, uuid.UUID, int]]
    ) -> None:
        """Lock, check and settle the instances observed realised (``versions``: at which NVLink config
        version each was; ``gpus``: every GPU of their machines, as instance, device_instance, domain,
        gpu_uid) in one statement (:data:`_SETTLE_OBSERVED`; :attr:`PassRows.settled`), with the intents
        closed and the GPU observations queued last when they are (:data:`_AND_SETTLE`)."""
        params = {
            "ids": list(versions),
            "versions": list(versions.values()),
            "g_inst": [g[0] for g in gpus],
            "g_dev": [g[1] for g in gpus],
            "g_dom": [g[2] for g in gpus],
            "g_uid": [str(g[3]) for g in gpus],
        }
        last = self._statements[-1] if self._statements else None
        if last is not None and last.sql in _AND_SETTLE and not self._health_observed:
            self._statements[-1] = Statement(_AND_SETTLE[last.sql], {**(last.params or {}), **params})
        else:
            self._statements.append(Statement(_SETTLE_OBSERVED, params))
        self._settled = len(self._statements) - 1

    def record_domain_pass(
        self,
        domain: uuid.UUID,
        digest: str,
        settled: bool,
        without_home: int,
        foreign: int = 0,
        held: Mapping[str, int] | None = None,
    ) -> None:
        """The domain's pass (its fabric digest, whether it is settled, its GPUs without a home and in
        foreign partitions) and, in the same statement, each machine's count of GPUs in foreign
        partitions (``held``: machine id -> count; only the rows whose count changes are written)."""
        params = {"d": domain, "digest": digest, "settled": settled, "homeless": without_home}
        params |= {"foreign": foreign}
        if held:
            params |= {"ids": array_literal(held), "counts": array_literal(held.values())}
            self._statements.append(Statement(_HELD_MACHINES_AND_DOMAIN_PASS, params))
        else:
            self._statements.append(Statement(_RECORD_DOMAIN_PASS, params))

    def note_waiting(self, messages: Mapping[uuid.UUID, str]) -> None:
        """Say in each instance's status history why it waits (instance id -> message), once."""
        if messages:
            params = {"ids": list(messages), "messages": list(messages.values())}
            self._statements.append(Statement(_WAITING_NOTES, params))

    async def send(
        self, session: AsyncSession, *, commit: bool = False, unlock_after: int | None = None
    ) -> PassRows:
        """Run the queued statements in the session's transaction (begun with them on a connection in
        autocommit mode: a domain's pass) (then commit it, with ``commit``, and then, with
        ``unlock_after``, let go of that domain lock: :func:`unlock`, in the same round trip) and
        empty the queue."""
        statements, self._statements = self._statements, []
        settling, deleting, figures, settled = self._settling, self._deleting, self._figures, self._settled
        count, counted = self._count, self._count_in_figures
        self._settling = self._deleting = self._figures = self._settled = self._count = None
        self._count_in_figures = self._health_observed = False
        if not statements and not commit:
            return PassRows()
        if commit:
            await session.flush()  # nothing of the ORM's may be left to a later transaction
        then = [unlock(unlock_after)] if unlock_after is not None else [] if commit else None
        driver = await driver_connection(session)
        results = await pipelined(driver, statements, commit=commit, then=then, begin=True)
        rows = results[figures] if figures is not None else None
        partitions = int(results[count][0][0]) if count is not None else None
        if counted and rows:  # (no row, no count: the domain is gone; a read of its own is asked for)
            partitions, rows = int(rows[0][-1]), [row[:-1] for row in rows]
        return PassRows(
            [SettlingInstance(*row) for row in results[settling]] if settling is not None else [],
            [lp_id for (lp_id,) in results[deleting]] if deleting is not None else [],
            rows,
            {instance_id for (instance_id,) in results[settled]} if settled is not None else set(),
            partitions,
        )


async def locked_settling_instances(
    session: AsyncSession, ids: Sequence[uuid.UUID]
) -> list[SettlingInstance]:
    """The instances FOR UPDATE (in id order, the order every set of them is locked in), as they
    are once locked; instances that are gone are missing."""
    writes = PassWrites()
    writes.lock_settling(ids)
    return (await writes.send(session)).settling


async def settle_instances(
    session: AsyncSession,
    versions: Mapping[uuid.UUID, int],
    waiting: Sequence[uuid.UUID],
    gpus: Sequence[tuple[uuid.UUID, int, uuid.UUID, int]],
) -> None:
    """In one statement, for instances the caller holds locked: Deleting bindings go, the others
    become Ready with their domain and GPU GUID (``gpus``: instance, device_instance, domain,
    gpu_uid), each instance's applied NVLink config version is recorded (``versions``), and the
    ``waiting`` ones become Ready with a status history entry. Rows already so are not rewritten."""
    writes = PassWrites()
    writes.settle(versions, waiting, gpus)
    await writes.send(session)


async def deleting_partitions_with_nothing_left(session: AsyncSession) -> list[uuid.UUID]:
    """Logical partitions being deleted that have no physical partition left."""
    writes = PassWrites()
    writes.deleting_partitions()
    return (await writes.send(session)).deleting


async def record_domain_error(session: AsyncSession, domain: uuid.UUID, error: str) -> None:
    await session.execute(
        text(
            "UPDATE nvlink_domain SET last_error = :e, last_error_at = now(), settled = false, "
            "consecutive_failures = consecutive_failures + 1, updated = now() WHERE uuid = :d"
        ),
        {"d": domain, "e": error[:2000]},
    )


# ---- gauges -------------------------------------------------------------------------------------
#
# The gauges are kept per domain (a pass refreshes only the domains it touched, at a cost independent
# of the site's size) plus one global figure, the logical partitions (they span domains).


# One pass over the machines (and one over the physical partitions) grouped by domain: linear in what it
# reads whatever the planner's statistics say. (Five subqueries per domain were planned, on a site
# whose statistics lagged, as scans of every machine with no reservation per domain: 2,000 domains
# took seconds.)
_DOMAIN_FIGURES = """
SELECT d.uuid, coalesce(p.n, 0), coalesce(f.pending, 0), coalesce(f.free, 0), coalesce(f.used, 0),
       coalesce(f.reserved, 0)
FROM nvlink_domain d
LEFT JOIN (SELECT domain_uuid, count(*) AS n FROM physical_partition WHERE true{partitions}
           GROUP BY domain_uuid) p ON p.domain_uuid = d.uuid
LEFT JOIN (SELECT m.domain_uuid,
                  count(*) FILTER (WHERE i.id IS NOT NULL AND i.status <> 'Terminating'
                                     AND i.nvlink_applied_version IS DISTINCT FROM i.nvlink_config_version)
                      AS pending,
                  count(*) FILTER (WHERE m.instance_id IS NULL AND m.status = 'Ready' AND m.foreign_gpus = 0
                                     AND m.reserved_lp_id IS NULL AND NOT m.held_unhealthy) AS free,
                  count(*) FILTER (WHERE m.instance_id IS NOT NULL OR m.status <> 'Ready'
                                     OR m.foreign_gpus > 0 OR m.held_unhealthy) AS used,
                  count(*) FILTER (WHERE m.instance_id IS NULL AND m.status = 'Ready' AND m.foreign_gpus = 0
                                     AND NOT m.held_unhealthy AND m.reserved_lp_id IS NOT NULL) AS reserved
           FROM machine m LEFT JOIN instance i ON i.id = m.instance_id
           WHERE m.domain_uuid IS NOT NULL{machines}
           GROUP BY m.domain_uuid) f ON f.domain_uuid = d.uuid
WHERE true{domains}
"""


_COUNT_LOGICAL_PARTITIONS = "SELECT count(*) FROM logical_partition"
# The column each of _DOMAIN_FIGURES's domain filters is on.
_FIGURE_FILTERS = {"partitions": "domain_uuid", "machines": "m.domain_uuid", "domains": "d.uuid"}


_ONE_DOMAIN_FIGURES = _psycopg(
    _DOMAIN_FIGURES.format(**{key: _domain_filter(column, []) for key, column in _FIGURE_FILTERS.items()})
)
# A pass's record of its domain and the domain's figures, in one statement: the record changes nothing
# the figures count (held machines' counts, which they do count, go out with the record otherwise).
_PASS_AND_FIGURES = f"WITH pass AS ({_RECORD_DOMAIN_PASS}) {_ONE_DOMAIN_FIGURES}"
# The figures' statement with the logical partitions counted in a last column (one statement fewer in a
# write-back that counts them: :meth:`PassWrites.logical_partition_count`).
_FIGURES_END = "coalesce(f.reserved, 0)\nFROM nvlink_domain d"
_COUNTED = {
    sql: sql.replace(_FIGURES_END, _FIGURES_END.replace("\n", f", ({_COUNT_LOGICAL_PARTITIONS})\n", 1), 1)
    for sql in (_ONE_DOMAIN_FIGURES, _PASS_AND_FIGURES)
}


async def domain_figures(conn: AsyncConnection, domains: Sequence[uuid.UUID] | None) -> Sequence[Any]:
    """Per domain of ``domains`` (all when None): (domain, physical partitions recorded, instances
    pending on the fabric (not terminating, applied version behind the desired one), Ready machines
    without an instance, held by no reservation, nor a foreign partition, nor their GPUs' health;
    machines with an instance, not Ready or held by a foreign partition or their GPUs' health; Ready
    machines without an instance that a logical partition's reservation holds). Named domains are read
    through their indexes (``machine.domain_uuid``, ``physical_partition (domain_uuid, ...)``), so a
    domain costs the same on a site of any size; every domain, in one pass over the machines; a domain
    that no longer exists has no row."""
    sql = _DOMAIN_FIGURES.format(**{key: _domain_filter(c, domains) for key, c in _FIGURE_FILTERS.items()})
    rows = await conn.execute(text(sql), _params(domains))
    return rows.all()


async def multicast_limits(conn: AsyncConnection, partition_ids: Sequence[uuid.UUID]) -> Sequence[Any]:
    """(logical partition, multicast groups limit) of ``partition_ids``."""
    rows = await conn.execute(
        text("SELECT id, multicast_groups_limit FROM logical_partition WHERE id = ANY(:ids)"),
        {"ids": list(partition_ids)},
    )
    return rows.all()


# GPUs nico does not know are ignored; rows already right are not written.
_GPU_HEALTH = (
    "UPDATE gpu SET health = h.health FROM unnest(CAST(%(uids)s AS numeric[]), CAST(%(hs)s AS text[])) "
    "AS h(uid, health) WHERE gpu.gpu_uid = h.uid AND gpu.health IS DISTINCT FROM h.health"
)
# The rest of a domain's health after its GPUs' (written by an earlier statement: the holds read them),
# in one statement: its partitions' health (by fabric name), its multicast budget when newly read (NULL:
# not written) and its machines' holds. Rows already right are not written (the capacity triggers see
# only real changes). The holds go from the domain's machines (machine.domain_uuid's index) to each
# one's GPUs by gpu's primary key, through a lateral subquery fenced with OFFSET 0, whatever the
# planner's statistics say: joined, a site whose statistics lagged (a first pass right after its racks
# were imported) had each domain's health scan every GPU of the site (21 ms a domain at 2,000 racks;
# 28 ms at 10,000 once planned generically with a pass's write-back, where a first pass spent more on
# it than on anything else). Machines without GPUs are left as they are.
_HEALTH_REST = """
WITH partitions AS (
    UPDATE physical_partition p SET health = h.health
    FROM unnest(CAST(%(names)s AS text[]), CAST(%(hs)s AS text[])) AS h(name, health)
    WHERE p.domain_uuid = %(d)s AND p.name = h.name AND p.health IS DISTINCT FROM h.health
    RETURNING 1
), budget AS (
    UPDATE nvlink_domain SET max_multicast_groups = CAST(%(b)s AS int)
    WHERE uuid = %(d)s AND CAST(%(b)s AS int) IS NOT NULL
    RETURNING 1
), wanted AS (
    SELECT x.id AS machine_id, %(hold)s AND h.sick AS held
    FROM machine x
    CROSS JOIN LATERAL (SELECT bool_or(g.health IS NOT NULL AND g.health <> 'HEALTHY') AS sick, count(*) AS n
                        FROM gpu g WHERE g.machine_id = x.id OFFSET 0) h
    WHERE x.domain_uuid = %(d)s AND h.n > 0
), moving AS (
    SELECT m.id, w.held FROM machine m JOIN wanted w ON w.machine_id = m.id
    WHERE m.domain_uuid = %(d)s AND m.held_unhealthy IS DISTINCT FROM w.held ORDER BY m.id
    FOR NO KEY UPDATE OF m
)
UPDATE machine m SET held_unhealthy = v.held FROM moving v WHERE m.id = v.id AND m.domain_uuid = %(d)s
"""


async def record_health(
    conn: AsyncConnection,
    domain: uuid.UUID,
    gpus: Mapping[int, str],
    partitions: Mapping[str, str],
    *,
    hold: bool,
    budget: int | None = None,
) -> None:
    """Store the fabric's word on the domain's health and commit, in one round trip: each GPU's health
    (by GUID), each physical partition's (by its fabric name in the domain), the multicast budget when
    newly read (``budget``); and hold the domain's machines with a GPU reporting anything but HEALTHY
    out of placement (``hold``; otherwise release every hold): the machine pick and the capacity
    counts leave held machines out. On a connection in autocommit mode the statements are one
    transaction all the same (the pipeline's, up to its sync): no BEGIN nor COMMIT goes out."""
    statements = [PASS_PLANS]  # by key, as a pass's
    if gpus:
        statements.append(
            Statement(_GPU_HEALTH, {"uids": array_literal(gpus), "hs": array_literal(gpus.values())})
        )
    statements.append(health_rest(domain, partitions, hold=hold, budget=budget))
    await pipelined(await driver_connection(conn), statements, commit=True, then=[])


def health_rest(
    domain: uuid.UUID, partitions: Mapping[str, str], *, hold: bool, budget: int | None
) -> Statement:
    """The machines' holds, the partitions' health and the budget (:data:`_HEALTH_REST`)."""
    names, healths = array_literal(partitions), array_literal(partitions.values())
    return Statement(_HEALTH_REST, {"d": domain, "names": names, "hs": healths, "b": budget, "hold": hold})


async def logical_partition_count(conn: AsyncConnection) -> int:
    """Logical partitions in the database (Deleting ones included): a count over the primary key,
    the one gauge figure that is not per domain (the reconciler reads it at a bounded rate)."""
    return int((await conn.execute(text(_COUNT_LOGICAL_PARTITIONS))).scalar_one())
