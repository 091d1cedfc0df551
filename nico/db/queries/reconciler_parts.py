"""The SQL of a full pass's part's write-back: the statements of a domain's write-back
(:class:`nico.db.queries.reconciler.PassWrites`) taking several domains' rows at once, one statement
for the part where a domain's write-back has one for the domain."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nico.db.queries.reconciler import GpuWrite, PartitionRecord, PassWrites, gpu_write_arrays
from nico.db.raw import Statement, array_literal

_DELETE_PHYSICAL_PARTITIONS = "DELETE FROM physical_partition WHERE id = ANY(CAST(%(ids)s AS uuid[]))"
# A record whose logical partition is gone is not made (the join finds none), as for one record.
_UPSERT_PHYSICAL_PARTITIONS = (
    "INSERT INTO physical_partition (id, logical_partition_id, domain_uuid, nmx_partition_id, "
    "fabric_ref, name) SELECT v.id, lp.id, v.domain, v.pid, v.ref, v.name "
    "FROM unnest(CAST(%(ids)s AS uuid[]), CAST(%(lps)s AS uuid[]), CAST(%(ds)s AS uuid[]), "
    "CAST(%(pids)s AS bigint[]), CAST(%(refs)s AS text[]), CAST(%(names)s AS text[])) "
    "AS v(id, lp, domain, pid, ref, name) JOIN logical_partition lp ON lp.id = v.lp "
    "ON CONFLICT (logical_partition_id, domain_uuid) DO UPDATE SET "
    "nmx_partition_id = EXCLUDED.nmx_partition_id, fabric_ref = EXCLUDED.fabric_ref, "
    "name = EXCLUDED.name, updated = now()"
)
# ``reconciler._GPU_OBSERVATIONS`` with each GPU's domain beside it (its partition's record is looked
# up by the domain and the partition's name).
_GPU_OBSERVATIONS = (
    "UPDATE gpu SET physical_partition_id = CASE WHEN v.seen THEN (SELECT p.id FROM physical_partition p "
    "WHERE p.domain_uuid = v.domain AND p.name = v.name) ELSE gpu.physical_partition_id END, "
    "nmx_partition_id = CASE WHEN v.seen THEN v.pid ELSE gpu.nmx_partition_id END, "
    "observed_at = CASE WHEN v.seen THEN now() ELSE gpu.observed_at END, "
    "updated = CASE WHEN v.seen THEN now() ELSE gpu.updated END, health = COALESCE(v.health, gpu.health) "
    "FROM unnest(CAST(%(uids)s AS numeric[]), CAST(%(names)s AS text[]), CAST(%(pids)s AS bigint[]), "
    "CAST(%(seen)s AS boolean[]), CAST(%(hs)s AS text[]), CAST(%(ds)s AS uuid[])) "
    "AS v(uid, name, pid, seen, health, domain) "
    "WHERE gpu.gpu_uid = v.uid "
    "AND (v.seen OR (v.health IS NOT NULL AND gpu.health IS DISTINCT FROM v.health))"
)
# Each domain's pass, and each machine's count of GPUs in foreign partitions where it changes.
_DOMAIN_PASSES = (
    "WITH held AS (UPDATE machine m SET foreign_gpus = v.n, updated = now() "
    "FROM unnest(CAST(%(ids)s AS varchar[]), CAST(%(counts)s AS smallint[])) AS v(id, n) "
    "WHERE m.id = v.id AND m.id = ANY(CAST(%(ids)s AS varchar[])) AND m.foreign_gpus <> v.n "
    "RETURNING 1) "
    "UPDATE nvlink_domain d SET last_pass_at = now(), last_error = NULL, consecutive_failures = 0, "
    "fabric_digest = v.digest, settled = v.settled, gpus_without_home = v.homeless, "
    "foreign_gpus = v.fg, updated = now() "
    "FROM unnest(CAST(%(ds)s AS uuid[]), CAST(%(digests)s AS text[]), CAST(%(settled)s AS boolean[]), "
    "CAST(%(homeless)s AS int[]), CAST(%(foreign)s AS int[])) AS v(d, digest, settled, homeless, fg) "
    "WHERE d.uuid = v.d"
)
# ``reconciler._HEALTH_REST`` over several domains: their partitions' health (each by its domain and
# name), their multicast budgets newly read and their machines' holds (each domain's machines looked up
# by its index), one statement for the part.
_HEALTHS = """
WITH partitions AS (
    UPDATE physical_partition p SET health = h.health
    FROM unnest(CAST(%(p_ds)s AS uuid[]), CAST(%(names)s AS text[]), CAST(%(hs)s AS text[]))
        AS h(domain, name, health)
    WHERE p.domain_uuid = h.domain AND p.name = h.name AND p.health IS DISTINCT FROM h.health
    RETURNING 1
), budgets AS (
    UPDATE nvlink_domain d SET max_multicast_groups = v.b
    FROM unnest(CAST(%(b_ds)s AS uuid[]), CAST(%(bs)s AS int[])) AS v(d, b) WHERE d.uuid = v.d
    RETURNING 1
), wanted AS (
    SELECT x.id AS machine_id, %(hold)s AND h.sick AS held
    FROM unnest(CAST(%(ds)s AS uuid[])) AS dd(d)
    CROSS JOIN LATERAL (SELECT x.id FROM machine x WHERE x.domain_uuid = dd.d OFFSET 0) x
    CROSS JOIN LATERAL (SELECT bool_or(g.health IS NOT NULL AND g.health <> 'HEALTHY') AS sick, count(*) AS n
                        FROM gpu g WHERE g.machine_id = x.id OFFSET 0) h
    WHERE h.n > 0
), moving AS (
    SELECT m.id, w.held FROM machine m JOIN wanted w ON w.machine_id = m.id
    WHERE m.held_unhealthy IS DISTINCT FROM w.held ORDER BY m.id
    FOR NO KEY UPDATE OF m
)
UPDATE machine m SET held_unhealthy = v.held FROM moving v WHERE m.id = v.id
"""


@dataclass(frozen=True)
class DomainPass:
    """A domain's pass as :meth:`PassWrites.record_domain_pass` records it."""

    domain: uuid.UUID
    digest: str
    settled: bool
    without_home: int
    foreign: int
    held: Mapping[str, int]


@dataclass(frozen=True)
class DomainHealth:
    """A domain's health read with its pass (:meth:`PassWrites.health`): its partitions' health by
    name, and its multicast budget when newly read."""

    domain: uuid.UUID
    partitions: Mapping[str, str]
    budget: int | None


class PartWrites(PassWrites):
    """:class:`PassWrites` for a part of domains: the domains' partition records and GPU observations
    are gathered (the domains' write-backs queue them as for one domain) and go out as one statement
    each (:meth:`records_and_observations`); the part's passes and health as one each."""

    def __init__(self) -> None:
        super().__init__()
        self._deleted: list[uuid.UUID] = []
        self._records: list[PartitionRecord] = []
        self._gpus: list[tuple[str, GpuWrite]] = []  # (the domain as text, a GPU of it)

    def record_partitions(self, deleted: Sequence[uuid.UUID], records: Sequence[PartitionRecord]) -> None:
        self._deleted += deleted
        self._records += records

    def gpu_observations(self, domain: uuid.UUID, gpus: Sequence[GpuWrite]) -> None:
        text = str(domain)  # once a domain, not once a GPU
        self._gpus += [(text, g) for g in gpus]

    def records_and_observations(self) -> None:
        """Queue the gathered partition records (the deleted ones first) and then the GPUs'
        observations, which find a new record by its domain and name."""
        if self._deleted:
            ids = array_literal([str(i) for i in self._deleted])
            self._statements.append(Statement(_DELETE_PHYSICAL_PARTITIONS, {"ids": ids}))
        records, self._deleted, self._records = self._records, [], []
        if len({(r.logical_partition_id, r.domain) for r in records}) < len(records):
            super().record_partitions([], records)  # one statement may not upsert a row twice
        elif records:
            params = {
                "ids": [r.id for r in records],
                "lps": [r.logical_partition_id for r in records],
                "ds": [r.domain for r in records],
                "pids": [r.nmx_partition_id for r in records],
                "refs": [r.fabric_ref for r in records],
                "names": [r.name for r in records],
            }
            self._statements.append(Statement(_UPSERT_PHYSICAL_PARTITIONS, params))
        gpus, self._gpus = self._gpus, []
        if gpus:
            params = {
                **gpu_write_arrays([g for _, g in gpus]),
                "ds": "{" + ",".join([d for d, _ in gpus]) + "}",  # uuids: nothing to quote
            }
            self._statements.append(Statement(_GPU_OBSERVATIONS, params))

    def domain_passes(self, passes: Sequence[DomainPass]) -> None:
        """Record the domains' passes (:meth:`PassWrites.record_domain_pass`, each), one statement."""
        if not passes:
            return
        held: dict[str, int] = {}
        for p in passes:
            held.update(p.held)
        params = {
            "ids": array_literal(held),
            "counts": array_literal(held.values()),
            "ds": array_literal([str(p.domain) for p in passes]),
            "digests": array_literal([p.digest for p in passes]),
            "settled": "{" + ",".join(["t" if p.settled else "f" for p in passes]) + "}",
            "homeless": array_literal([p.without_home for p in passes]),
            "foreign": array_literal([p.foreign for p in passes]),
        }
        self._statements.append(Statement(_DOMAIN_PASSES, params))

    def healths(self, healths: Sequence[DomainHealth], *, hold: bool) -> None:
        """The rest of the domains' health after their GPUs' (:meth:`PassWrites.health`, each): the
        holds of their machines, their partitions' health, their multicast budgets when newly read."""
        if not healths:
            return
        rows = [(str(h.domain), name, state) for h in healths for name, state in h.partitions.items()]
        budgets = [h for h in healths if h.budget is not None]
        params = {
            "ds": array_literal([str(h.domain) for h in healths]),
            "hold": hold,
            "p_ds": array_literal([r[0] for r in rows]),
            "names": array_literal([r[1] for r in rows]),
            "hs": array_literal([r[2] for r in rows]),
            "b_ds": array_literal([str(h.domain) for h in budgets]),
            "bs": array_literal([h.budget for h in budgets]),
        }
        self._statements.append(Statement(_HEALTHS, params))
