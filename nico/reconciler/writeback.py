"""After a domain's operations, the fabric is read back and the database told the truth about it.

In one transaction: recorded physical partitions are aligned with the partitions the fabric reports
(partitions created this pass, or adopted from an intent, are recorded; records of partitions that
are gone are dropped); each GPU's observed partition is stored; intents are closed; an instance
becomes Ready — through :mod:`nico.services.lifecycle` — only when the read-back holds exactly the
desired membership of its current NVLink config version; terminating instances finish once their
GPUs are out of every tenant partition; logical partitions being deleted vanish once their physical
partitions are gone.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.types import BigInteger, String

from nico.fabric.backend import FabricPartition
from nico.reconciler.executor import Outcome
from nico.reconciler.fingerprint import fabric_digest
from nico.reconciler.planner import (
    Classified,
    CreatePartition,
    Operation,
    classify,
    lp_of_name,
    metric_operation,
    op_gpus,
    satisfied,
)
from nico.reconciler.state import DomainState
from nico.services import lifecycle


@dataclass
class WriteBackReport:
    machines_updated: int = 0
    stale_partitions_deleted: int = 0
    instances_ready: list[uuid.UUID] = field(default_factory=list)
    apply_latencies_ms: list[float] = field(default_factory=list)
    instances_terminated: int = 0
    unsatisfiable: dict[uuid.UUID, str] = field(default_factory=dict)
    partitions_removed: int = 0


async def record_intents(
    session: AsyncSession, domain: uuid.UUID, operations: Sequence[Operation]
) -> dict[int, uuid.UUID]:
    """Write what is about to be asked of the fabric (committed by the caller before any call).
    Returns intent ids by position in ``operations``."""
    ids: dict[int, uuid.UUID] = {}
    rows = []
    for index, op in enumerate(operations):
        intent_id = uuid.uuid4()
        ids[index] = intent_id
        name = op.name if isinstance(op, CreatePartition) else op.partition.name
        rows.append(
            {
                "id": intent_id,
                "domain": domain,
                "lp": op.lp,
                "operation": metric_operation(op),
                "name": name,
                "ref": None if isinstance(op, CreatePartition) else op.partition.ref,
                "gpus": [str(g) for g in sorted(op_gpus(op))],
            }
        )
    if rows:
        await session.execute(
            text(
                "INSERT INTO fabric_intent (id, domain_uuid, logical_partition_id, operation, "
                "partition_name, fabric_ref, gpu_uids, state) "
                "SELECT :id, :domain, lp.id, :operation, :name, :ref, CAST(:gpus AS numeric[]), 'pending' "
                "FROM (SELECT 1) one LEFT JOIN logical_partition lp ON lp.id = :lp"
            ).bindparams(bindparam("gpus", type_=ARRAY(String))),
            rows,
        )
    return ids


async def write_back(
    session: AsyncSession,
    state: DomainState,
    before: list[FabricPartition],
    observed: list[FabricPartition],
    outcomes: list[Outcome],
    intent_ids: dict[int, uuid.UUID],
    blocked: dict[uuid.UUID, str],
    resolved_operations: dict[str, str],
    *,
    settled: bool,
) -> WriteBackReport:
    """Record the read-back ``observed`` for ``state.domain``; ``before`` is what the fabric held
    before this pass's operations (records missing from it are stale: changed behind nico's back).
    ``resolved_operations`` maps NMX-M operation ids checked this pass to their terminal state;
    ``settled``: the read-back leaves nothing to do, so later full passes may skip the domain while
    its fabric keeps the same digest."""
    report = WriteBackReport()
    domain = state.domain
    created = {o.op.name for o in outcomes if isinstance(o.op, CreatePartition)}
    seen = classify(observed, state.owned_names() | created)

    # 1. Recorded physical partitions follow the fabric.
    was = {p.name: p.partition_id for p in before}
    keep: dict[str, FabricPartition] = {p.name: p for p in seen.owned.values()}
    for name, record in state.partitions.items():
        now = keep.get(name)
        if now is None or now.partition_id != record.fabric_partition_id:
            await session.execute(text("DELETE FROM physical_partition WHERE id = :id"), {"id": record.id})
        if was.get(name) != record.fabric_partition_id:
            report.stale_partitions_deleted += 1
    pp_ids: dict[str, uuid.UUID] = {}
    for name, partition in keep.items():
        lp = lp_of_name(name)
        row = await session.execute(
            text(
                "INSERT INTO physical_partition (id, logical_partition_id, domain_uuid, fabric_partition_id, "
                "fabric_ref, name) SELECT :id, lp.id, :domain, :pid, :ref, :name FROM logical_partition lp "
                "WHERE lp.id = :lp "
                "ON CONFLICT (logical_partition_id, domain_uuid) DO UPDATE SET "
                "fabric_partition_id = EXCLUDED.fabric_partition_id, fabric_ref = EXCLUDED.fabric_ref, "
                "name = EXCLUDED.name, updated = now() RETURNING id"
            ),
            {
                "id": state.partitions[name].id if name in state.partitions else uuid.uuid4(),
                "lp": lp,
                "domain": domain,
                "pid": partition.partition_id,
                "ref": partition.ref,
                "name": name,
            },
        )
        pp_id = row.scalar()
        if pp_id is not None:
            pp_ids[name] = pp_id

    # 2. Intents are closed.
    await _close_intents(session, state, seen, outcomes, intent_ids, resolved_operations)

    # 3. Each GPU's observed partition.
    changes: list[dict[str, object]] = []
    machines: set[str] = set()
    for gpu in state.gpus.values():
        holder = seen.location.get(gpu.gpu_uid)
        fabric_pid = holder.partition_id if holder is not None else None
        pp_id = pp_ids.get(holder.name) if holder is not None else None
        if pp_id != gpu.observed_physical_partition or fabric_pid != gpu.observed_fabric_partition:
            changes.append({"uid": str(gpu.gpu_uid), "pp": pp_id, "pid": fabric_pid})
            machines.add(gpu.machine_id)
    if changes:  # one statement for the whole domain
        await session.execute(
            text(
                "UPDATE gpu SET physical_partition_id = v.pp, fabric_partition_id = v.pid, "
                "observed_at = now(), updated = now() "
                "FROM unnest(CAST(:uids AS numeric[]), CAST(:pps AS uuid[]), CAST(:pids AS bigint[])) "
                "AS v(uid, pp, pid) WHERE gpu.gpu_uid = v.uid"
            ).bindparams(
                bindparam("uids", type_=ARRAY(String)),
                bindparam("pps", type_=ARRAY(String)),
                bindparam("pids", type_=ARRAY(BigInteger)),
            ),
            {
                "uids": [c["uid"] for c in changes],
                "pps": [str(c["pp"]) if c["pp"] else None for c in changes],
                "pids": [c["pid"] for c in changes],
            },
        )
    report.machines_updated = len(machines)

    # 4. Instances: Ready only on an exact match for the version loaded at the start of the pass.
    await _settle_instances(session, state, seen, blocked, report)

    # 5. Logical partitions being deleted vanish once nothing of them remains.
    rows = await session.execute(
        text(
            "SELECT lp.id FROM logical_partition lp WHERE lp.status = 'Deleting' "
            "AND NOT EXISTS (SELECT 1 FROM physical_partition pp WHERE pp.logical_partition_id = lp.id)"
        )
    )
    for (lp_id,) in rows.all():
        if await lifecycle.finish_partition_deletion(session, lp_id):
            report.partitions_removed += 1

    await session.execute(
        text(
            "UPDATE nvlink_domain SET last_pass_at = now(), last_error = NULL, consecutive_failures = 0, "
            "fabric_digest = :digest, settled = :settled, updated = now() WHERE uuid = :d"
        ),
        {"d": domain, "digest": fabric_digest(observed), "settled": settled and not report.unsatisfiable},
    )
    return report


async def _close_intents(
    session: AsyncSession,
    state: DomainState,
    seen: Classified,
    outcomes: list[Outcome],
    intent_ids: dict[int, uuid.UUID],
    resolved_operations: dict[str, str],
) -> None:
    present = {p.name for p in seen.owned.values()}
    updates: list[dict[str, object]] = []
    for index, outcome in enumerate(outcomes):
        intent_id = intent_ids.get(index)
        if intent_id is None:
            continue
        if outcome.status == "skipped":
            new_state = "abandoned"
        elif outcome.status == "timedout" and outcome.operation_id:
            new_state = "timedout"
        else:
            new_state = outcome.status
        updates.append(
            {"id": intent_id, "state": new_state, "error": outcome.error, "op": outcome.operation_id}
        )
    for intent in state.intents:  # open intents of earlier passes
        if intent.operation_id and intent.state in ("pending", "timedout"):
            final = resolved_operations.get(intent.operation_id)
            if final is None:
                continue
            new_state = {"completed": "completed", "failed": "failed", "cancelled": "failed"}.get(
                final, "abandoned"
            )
            if intent.operation == "create" and intent.name in present:
                new_state = "adopted"
        elif intent.operation == "create" and intent.name in present:
            new_state = "adopted"
        else:
            new_state = "abandoned"
        updates.append({"id": intent.id, "state": new_state, "error": None, "op": intent.operation_id})
    if updates:
        await session.execute(
            text(
                "UPDATE fabric_intent SET state = :state, error = :error, "
                "operation_id = COALESCE(:op, operation_id), updated = now() WHERE id = :id"
            ),
            updates,
        )


async def _settle_instances(
    session: AsyncSession,
    state: DomainState,
    seen: Classified,
    blocked: dict[uuid.UUID, str],
    report: WriteBackReport,
) -> None:
    owned = {id(p) for p in seen.owned.values()}
    now = datetime.now(UTC)
    for instance in state.unsettled.values():
        gpus = state.gpus_of(instance.machine_id)
        if instance.terminating:
            out = all(id(seen.location.get(g.gpu_uid)) not in owned for g in gpus.values())
            if out and await lifecycle.finish_instance_termination(session, instance.id):
                report.instances_terminated += 1
            continue
        missing = sorted(set(instance.bindings) - set(gpus))
        if missing:
            report.unsatisfiable[instance.id] = f"machine {instance.machine_id} has no GPU index {missing[0]}"
            continue
        if any(lp in blocked for lp in instance.bindings.values()):
            continue
        if not all(satisfied(g.gpu_uid, instance.bindings.get(device), seen) for device, g in gpus.items()):
            continue
        observation = {device: (state.domain, g.gpu_uid) for device, g in gpus.items()}
        if await lifecycle.apply_nvlink_observation(session, instance.id, instance.version, observation):
            report.instances_ready.append(instance.id)
            report.apply_latencies_ms.append(max(0.0, (now - instance.changed_at).total_seconds() * 1000.0))


async def record_domain_error(session: AsyncSession, domain: uuid.UUID, error: str) -> None:
    await session.execute(
        text(
            "UPDATE nvlink_domain SET last_error = :e, last_error_at = now(), settled = false, "
            "consecutive_failures = consecutive_failures + 1, updated = now() WHERE uuid = :d"
        ),
        {"d": domain, "e": error[:2000]},
    )
