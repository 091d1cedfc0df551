"""The executor: carries out one domain's planned operations against the fabric (removals in order, then
the additions at once).

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
from dataclasses import dataclass, field, replace
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
    """Carry out ``operations`` and say what became of each (in their order). Removals run one by one,
    in order; the additions after them (each on its own partition, with GPUs no other touches) run at
    once, at most ``PARALLEL_ADDITIONS`` at a time, so a pass waits about one call for all of them.
    ``after_call`` runs after every successful call (tests use it to stop the reconciler between a call
    and its write-back; with it the calls run one by one)."""
    run = _Run(backend, target, metrics, call_timeout, after_call)
    outcomes: list[Outcome | None] = [None] * len(operations)
    first_addition = next(
        (i for i, op in enumerate(operations) if isinstance(op, AddGpus | CreatePartition)), len(operations)
    )
    additions = operations[first_addition:]
    at_once = after_call is None and _independent(additions)
    for i, op in enumerate(operations if not at_once else operations[:first_addition]):
        outcomes[i] = await run.one(op)
    if at_once and additions:
        gate = asyncio.Semaphore(PARALLEL_ADDITIONS)

        async def addition(i: int) -> None:
            async with gate:
                outcomes[i] = await run.one(operations[i])

        await asyncio.gather(*(addition(i) for i in range(first_addition, len(operations))))
    return [o for o in outcomes if o is not None]


PARALLEL_ADDITIONS = 8


def _independent(additions: list[Operation]) -> bool:
    """Only additions, each on a partition of its own, no GPU in two of them."""
    keys: set[str] = set()
    gpus: set[int] = set()
    for op in additions:
        if not isinstance(op, AddGpus | CreatePartition):
            return False
        key = "name:" + op.name if isinstance(op, CreatePartition) else "ref:" + op.partition.ref
        uids = op_gpus(op)
        if key in keys or uids & gpus:
            return False
        keys.add(key)
        gpus |= uids
    return True


@dataclass
class _Run:
    """One execution's shared state: membership as changed by it, GPUs a failed removal left in
    place, and why the remaining calls are skipped."""

    backend: FabricBackend
    target: DomainTarget
    metrics: MonitorMetrics | None
    call_timeout: float
    after_call: AfterCall | None
    current: dict[str, FabricPartition] = field(default_factory=dict)  # by partition ref
    blocked: set[int] = field(default_factory=set)
    stop: str | None = None

    async def one(self, op: Operation) -> Outcome:
        if self.stop is not None:
            return Outcome(op, "skipped", self.stop, retryable=True)
        adds = isinstance(op, AddGpus | CreatePartition)
        if adds and op_gpus(op) & self.blocked:
            return Outcome(op, "skipped", "needs GPUs a failed removal left in place", retryable=True)
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.call_timeout * 2 + 1):
                await _call(self.backend, self.target, op, self.current)
        except OperationPending as exc:
            outcome = Outcome(op, "timedout", exc.message, exc.operation_id, retryable=True)
            self.stop = "an earlier operation is still running on the manager"
        except (TimeoutError, FabricError) as exc:
            error = exc if isinstance(exc, FabricError) else FabricTimeout("call exceeded its deadline")
            status: Status = "timedout" if isinstance(error, FabricTimeout) else "failed"
            outcome = Outcome(
                op, status, f"{type(error).__name__}: {error.message}", retryable=error.retryable
            )
            if isinstance(error, FabricUnavailable | FabricTimeout):
                self.stop = f"manager unreachable: {error.message}"
            if not adds:
                self.blocked |= op_gpus(op)
        else:
            outcome = Outcome(op, "completed")
        if self.metrics is not None:
            self.metrics.operation_done(metric_operation(op), outcome.status, time.monotonic() - started)
        if outcome.status == "completed" and self.after_call is not None:
            await self.after_call(op)
        return outcome


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
