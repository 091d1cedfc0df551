"""Whether a pass's read-back holds what its calls promised: then the plan of the read-back is known
to be empty, and the pass does not make it (pure).

A complete plan (none of its GPUs sent home first to reach their partition by the next pass, no
logical partition blocked) carried out in full leaves the domain as its desire says, so planning the
fabric it leaves yields nothing (the planner's property; tests/unit/test_promise.py holds it for
both default partition modes, foreign partitions kept or evicted, and fabrics that passes cut short
left behind). The promise is the listing the plan was made from with the plan's operations applied,
partition by name (names are unique per domain); a read-back that differs from it in any partition
or member (a failed call, a change behind nico's back, a stale cached listing) is planned again."""

from __future__ import annotations

from collections.abc import Sequence

from nico.fabric.backend import FabricPartition
from nico.reconciler.executor import Outcome
from nico.reconciler.operations import AddGpus, CreatePartition, DeletePartition, Operation
from nico.reconciler.planner import Plan


def nothing_left(
    result: Plan, outcomes: Sequence[Outcome], before: list[FabricPartition], observed: list[FabricPartition]
) -> bool:
    """Whether ``observed`` (the read-back) leaves nothing to do: ``result`` was planned from
    ``before``, complete, and every one of its operations completed (``outcomes``) as promised."""
    if result.deferred or result.blocked or len(outcomes) != len(result.operations):
        return False
    if any(o.status != "completed" for o in outcomes):
        return False
    promise = promised(before, [o.op for o in outcomes])
    return promise is not None and _members(observed) == promise


def promised(before: list[FabricPartition], ops: Sequence[Operation]) -> dict[str, frozenset[int]] | None:
    """Each partition's members by name once ``ops`` are carried out on ``before`` (None: names not
    unique, nothing can be promised)."""
    held = _members(before)
    if held is None:
        return None
    for op in ops:
        if isinstance(op, CreatePartition):
            held[op.name] = op.gpu_uids
            continue
        name = op.partition.name
        if isinstance(op, DeletePartition):
            held.pop(name, None)
        elif isinstance(op, AddGpus):
            held[name] = held.get(name, frozenset()) | op.gpu_uids
        else:
            held[name] = held.get(name, frozenset()) - op.gpu_uids
    return held


def _members(partitions: list[FabricPartition]) -> dict[str, frozenset[int]] | None:
    found = {p.name: p.gpu_uids for p in partitions}
    return found if len(found) == len(partitions) else None
