"""The executor: carries out one domain's planned operations against the fabric (paired removals and
additions in waves, the rest in order).

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
    FabricUnavailable,
    OperationPending,
)
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.operations import (
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
    call: int | None = None  # which call of the execution made it (removals merged in a wave share one)
    done_at: float | None = None  # when the call ended (time.monotonic())


def created_names(outcomes: list[Outcome]) -> frozenset[str]:
    """The names of the partitions ``outcomes`` created (nico's from then on, before any record)."""
    return frozenset(o.op.name for o in outcomes if isinstance(o.op, CreatePartition))


async def execute(
    backend: FabricBackend,
    target: DomainTarget,
    operations: list[Operation],
    metrics: ReconcilerMetrics | None,
    *,
    call_timeout: float,
    after_call: AfterCall | None = None,
) -> list[Outcome]:
    """Carry out ``operations`` and say what became of each (in their order).

    The planner pairs each addition with the removals that free its GPUs, right before it. Paired
    units that touch no partition another unit of theirs touches run as one wave: the wave's removals
    from one partition go as one call, removals from different partitions at once, and each addition
    starts as soon as the removals feeding it return, all at once. So a GPU is out of every partition
    only while its own addition is being made (the call that takes it back waits on nothing but the
    removal that freed it), and a pass placing N instances waits about two calls, not 2N. Deletions and
    removals of GPUs that go nowhere run one by one, in order, between waves. ``after_call`` runs after
    every successful call (tests use it to stop the reconciler between a call and its write-back; with
    it every call runs one by one, in the planned order)."""
    run = _Run(backend, target, metrics, call_timeout, after_call)
    outcomes: list[Outcome | None] = [None] * len(operations)
    if after_call is not None:
        for i, op in enumerate(operations):
            outcomes[i] = await run.one(op)
    else:
        for step in _steps(operations):
            if isinstance(step, int):
                outcomes[step] = await run.one(operations[step])
            else:
                await _wave(run, operations, step, outcomes)
    return [o for o in outcomes if o is not None]


PARALLEL_ADDITIONS = 8  # the most additions (and removals) one wave has in flight


@dataclass(frozen=True)
class _Unit:
    """Removals (indexes into the plan) and the addition they feed (its GPUs hold all of theirs)."""

    removals: tuple[int, ...]
    addition: int


def _key(op: Operation) -> str:
    """The partition an operation touches."""
    return "name:" + op.name if isinstance(op, CreatePartition) else "ref:" + op.partition.ref


def _steps(operations: list[Operation]) -> list[int | list[_Unit]]:
    """The plan as steps: an operation to make alone, or a wave of paired units to make at once
    (:func:`execute`). A unit joins the wave before it when no partition it removes from is one the
    wave adds to, and the other way round, its addition's partition is new to the wave and the wave
    is not full; the wave's order then changes nothing the planner's order would have done."""
    steps: list[int | list[_Unit]] = []
    wave: list[_Unit] = []
    sources: set[str] = set()
    targets: set[str] = set()

    def flush() -> None:
        nonlocal wave
        if wave:
            steps.append(wave)
        wave = []
        sources.clear()
        targets.clear()

    i = 0
    while i < len(operations):
        j = i
        while j < len(operations) and isinstance(operations[j], RemoveGpus):
            j += 1
        addition = operations[j] if j < len(operations) else None
        if not isinstance(addition, AddGpus | CreatePartition) or not all(
            op_gpus(operations[k]) <= op_gpus(addition) for k in range(i, j)
        ):
            flush()
            steps.append(i)  # a deletion, or a removal whose GPUs go nowhere or to a later addition
            i += 1
            continue
        unit = _Unit(tuple(range(i, j)), j)
        from_ = {_key(operations[k]) for k in unit.removals}
        to = _key(addition)
        if len(wave) >= PARALLEL_ADDITIONS or to in targets or to in sources or from_ & targets:
            flush()
        wave.append(unit)
        sources.update(from_)
        targets.add(to)
        i = j + 1
    flush()
    return steps


async def _wave(
    run: _Run, operations: list[Operation], units: list[_Unit], outcomes: list[Outcome | None]
) -> None:
    """Make one wave (:func:`execute`): the outcome of a removal merged with others is theirs too."""
    by_source: dict[str, list[int]] = {}
    for unit in units:
        for k in unit.removals:
            by_source.setdefault(_key(operations[k]), []).append(k)
    async with asyncio.TaskGroup() as group:
        removals: dict[str, asyncio.Task[Outcome]] = {}
        for key, indexes in by_source.items():
            first = operations[indexes[0]]
            assert isinstance(first, RemoveGpus)
            merged = replace(first, gpu_uids=frozenset().union(*(op_gpus(operations[k]) for k in indexes)))
            removals[key] = group.create_task(run.one(merged))

        async def addition(unit: _Unit) -> None:
            feeding = {removals[_key(operations[k])] for k in unit.removals}
            if feeding:
                await asyncio.wait(feeding)
            outcomes[unit.addition] = await run.one(operations[unit.addition])

        for unit in units:
            group.create_task(addition(unit))
    for key, indexes in by_source.items():
        done = removals[key].result()
        for k in indexes:
            outcomes[k] = replace(done, op=operations[k])


@dataclass
class _Run:
    """One execution's shared state: membership as changed by it, GPUs a failed removal left in
    place, and why the remaining calls are skipped."""

    backend: FabricBackend
    target: DomainTarget
    metrics: ReconcilerMetrics | None
    call_timeout: float
    after_call: AfterCall | None
    current: dict[str, FabricPartition] = field(default_factory=dict)  # by partition ref
    blocked: set[int] = field(default_factory=set)
    stop: str | None = None
    calls: int = 0

    async def one(self, op: Operation) -> Outcome:
        if self.stop is not None:
            return Outcome(op, "skipped", self.stop, retryable=True)
        adds = isinstance(op, AddGpus | CreatePartition)
        if adds and op_gpus(op) & self.blocked:
            return Outcome(op, "skipped", "needs GPUs a failed removal left in place", retryable=True)
        started = time.monotonic()
        call = self.calls
        self.calls += 1
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
        outcome = replace(outcome, call=call, done_at=time.monotonic())
        if self.metrics is not None:
            self.metrics.operation_done(metric_operation(op), outcome.status, time.monotonic() - started)
        if outcome.status == "completed" and self.after_call is not None:
            await self.after_call(op)
        return outcome


async def _call(
    backend: FabricBackend, target: DomainTarget, op: Operation, current: dict[str, FabricPartition]
) -> None:
    if isinstance(op, CreatePartition):
        # Only managers with a multicast budget take the limit (NMX-M partitions refuse one).
        limit = op.multicast_groups_limit if backend.capabilities.multicast_limits else None
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
