"""The executor: carries out one domain's planned operations against the fabric, in order.

Every call has a deadline (the backend's, and a safety net here). A failed removal blocks the
additions that need its GPUs; an unreachable or hanging manager stops the domain at once (further
calls would only wait out their deadlines too); an NMX-M operation still running at its deadline
stops the domain until it finishes. What actually happened is returned per operation and counted in
the ``*_changes_applied_total`` and ``*_op_latency_milliseconds`` series.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal

from nico.fabric.backend import (
    DomainTarget,
    FabricBackend,
    FabricError,
    FabricPartition,
    FabricTimeout,
    FabricTopology,
    FabricUnavailable,
    OperationPending,
)
from nico.reconciler.metrics import MonitorMetrics
from nico.reconciler.planner import (
    AddGpus,
    CreatePartition,
    DeletePartition,
    Operation,
    RemoveGpus,
    metric_operation,
    op_gpus,
)

Status = Literal["completed", "failed", "timedout", "skipped"]
AfterCall = Callable[[Operation], Awaitable[None]]


@dataclass(frozen=True)
class Outcome:
    op: Operation
    status: Status
    error: str | None = None
    operation_id: str | None = None  # an NMX-M operation to check on later
    retryable: bool = False


async def execute(
    backend: FabricBackend,
    target: DomainTarget,
    operations: list[Operation],
    metrics: MonitorMetrics | None,
    *,
    call_timeout: float,
    after_call: AfterCall | None = None,
) -> list[Outcome]:
    """Run ``operations`` in order and say what became of each. ``after_call`` runs after every
    successful call (tests use it to stop the reconciler between a call and its write-back)."""
    current: dict[str, FabricPartition] = {}  # membership as changed by this run, by partition ref
    blocked: set[int] = set()
    outcomes: list[Outcome] = []
    stop: str | None = None
    for op in operations:
        if stop is not None:
            outcomes.append(Outcome(op, "skipped", stop, retryable=True))
            continue
        adds = isinstance(op, AddGpus | CreatePartition)
        if adds and op_gpus(op) & blocked:
            outcomes.append(
                Outcome(op, "skipped", "needs GPUs a failed removal left in place", retryable=True)
            )
            continue
        started = time.monotonic()
        try:
            async with asyncio.timeout(call_timeout * 2 + 1):
                await _call(backend, target, op, current)
        except OperationPending as exc:
            outcome = Outcome(op, "timedout", exc.message, exc.operation_id, retryable=True)
            stop = "an earlier operation is still running on the manager"
        except (TimeoutError, FabricError) as exc:
            error = exc if isinstance(exc, FabricError) else FabricTimeout("call exceeded its deadline")
            status: Status = "timedout" if isinstance(error, FabricTimeout) else "failed"
            outcome = Outcome(
                op, status, f"{type(error).__name__}: {error.message}", retryable=error.retryable
            )
            if isinstance(error, FabricUnavailable | FabricTimeout):
                stop = f"manager unreachable: {error.message}"
            if not adds:
                blocked |= op_gpus(op)
        else:
            outcome = Outcome(op, "completed")
        if metrics is not None:
            metrics.operation_done(metric_operation(op), outcome.status, time.monotonic() - started)
        outcomes.append(outcome)
        if outcome.status == "completed" and after_call is not None:
            await after_call(op)
    return outcomes


async def _call(
    backend: FabricBackend, target: DomainTarget, op: Operation, current: dict[str, FabricPartition]
) -> None:
    if isinstance(op, CreatePartition):
        # Only managers with a multicast budget (NMX-C GetDomainProperties) take the limit; NMX-M
        # partitions have no attributes and refuse one.
        limit = op.multicast_groups_limit if isinstance(backend, FabricTopology) else None
        made = await backend.create_partition(target, op.name, op.gpu_uids, multicast_groups_limit=limit)
        current[made.ref] = made
        return
    partition = current.get(op.partition.ref, op.partition)
    if isinstance(op, DeletePartition):
        await backend.delete_partition(target, partition)
        current.pop(partition.ref, None)
    elif isinstance(op, RemoveGpus):
        await backend.remove_gpus(target, partition, op.gpu_uids)
        current[partition.ref] = replace(partition, gpu_uids=partition.gpu_uids - op.gpu_uids)
    else:
        await backend.add_gpus(target, partition, op.gpu_uids)
        current[partition.ref] = replace(partition, gpu_uids=partition.gpu_uids | op.gpu_uids)
