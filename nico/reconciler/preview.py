"""What the next pass would send to the fabric, domain by domain, and why (``nico admin nvlink-plan``).

Computed as a pass computes it: the domain's state loaded from the database, a fresh listing of its
partitions, the planner with the configured homes and foreign partition policy. Nothing is locked,
recorded or sent, so it answers the same in observe and in active mode; in active mode the next pass
usually finds nothing left, and what remains is what it could not do (a blocked logical partition,
GPUs held by partitions nico did not make).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from nico.config import NvLinkConfig
from nico.db.queries import reconciler as queries
from nico.fabric.backend import FabricBackend, FabricError
from nico.fabric.observation import FabricObserver
from nico.reconciler import state as statemod
from nico.reconciler.domain_pass import error_label
from nico.reconciler.operations import CreatePartition, Operation, change_kind, op_gpus, reason
from nico.reconciler.planner import classify, plan


@dataclass(frozen=True)
class PlannedChange:
    """One operation the next pass would send."""

    kind: str  # create, delete, add, remove
    partition: str  # the partition's name on the fabric
    nmx_partition_id: int | None  # None for a partition to be created
    gpus: list[int]
    logical_partition_id: uuid.UUID | None
    why: str


@dataclass(frozen=True)
class HeldGpu:
    """A GPU nico manages that a partition nico did not make holds, and keeps (keep mode)."""

    gpu_uid: int
    machine_id: str
    partition: str
    instance_id: uuid.UUID | None  # the instance on its machine, which waits for it
    wanted_by: uuid.UUID | None  # the logical partition a tenant wants it in


@dataclass
class DomainPlan:
    domain: uuid.UUID
    changes: list[PlannedChange] = field(default_factory=list)
    blocked: dict[uuid.UUID, str] = field(default_factory=dict)  # logical partition -> why
    held: list[HeldGpu] = field(default_factory=list)
    foreign_gpus: int = 0  # GPUs (managed or not) in partitions nico did not make
    error: str | None = None  # the fabric could not be read: nothing is planned


async def preview(
    engine: AsyncEngine,
    backend: FabricBackend,
    config: NvLinkConfig,
    domain: uuid.UUID | None = None,
) -> list[DomainPlan]:
    """The plan of ``domain`` (every domain when None), in domain order."""
    async with engine.connect() as conn:
        states = await statemod.load(conn, [domain] if domain is not None else None)
        endpoints = await statemod.endpoints(conn)
        credentials = await queries.nmxm_credentials(conn)
        await conn.commit()
    observer = FabricObserver(backend, config.nmxc_endpoints)
    observer.use_registry(endpoints, credentials)
    return [await _plan_domain(observer, backend, config, states[d]) for d in sorted(states)]


async def _plan_domain(
    observer: FabricObserver, backend: FabricBackend, config: NvLinkConfig, state: statemod.DomainState
) -> DomainPlan:
    found = DomainPlan(state.domain)
    try:
        target = await observer.target(state.domain, state.chassis_serials)
        partitions = await backend.list_partitions(target)
    except FabricError as exc:
        found.error = error_label(exc, backend.capabilities.manager)
        return found
    desire = state.desire(config.default_partition_mode, config.foreign_partitions)
    result = plan(desire, partitions)
    found.changes = [_change(op) for op in result.operations]
    found.blocked = dict(result.blocked)
    seen = classify(partitions, desire.owned_names, desire.adopted)
    found.foreign_gpus = sum(len(p.gpu_uids) for p in seen.unknown)
    for gpu_uid, name in sorted(result.held.items()):
        row = state.gpus[gpu_uid]
        found.held.append(HeldGpu(gpu_uid, row.machine_id, name, row.instance_id, row.wants))
    return found


def _change(op: Operation) -> PlannedChange:
    if isinstance(op, CreatePartition):
        name, pid = op.name, None
    else:
        name, pid = op.partition.name, op.partition.nmx_partition_id
    return PlannedChange(change_kind(op), name, pid, sorted(op_gpus(op)), op.lp, reason(op))
