"""A model NVLink fabric for the planner's property tests: operations applied under the hardware
rules a real controller enforces, with the time each GPU spends outside every partition."""

from __future__ import annotations

from dataclasses import replace

from nico.fabric.backend import FabricPartition
from nico.reconciler.operations import AddGpus, CreatePartition, DeletePartition, Operation, RemoveGpus


class HardwareRuleBroken(AssertionError):
    pass


def apply(
    partitions: list[FabricPartition], ops: list[Operation], *, default_deletable: bool = True
) -> tuple[list[FabricPartition], list[int]]:
    """Apply ``ops`` in order under the controller's rules (a GPU in at most one partition, names
    unique; the default partition deletable only if ``default_deletable``, as in tray mode); returns
    the partitions, and for each GPU that left every partition and came back, the number of
    operations it spent outside (as a list)."""
    by_id = {p.nmx_partition_id: p for p in partitions}
    next_id = max([p.nmx_partition_id for p in partitions if not p.is_default], default=0) + 1
    out_since: dict[int, int] = {}
    windows: list[int] = []

    def holder(gpu: int) -> int | None:
        return next((pid for pid, p in by_id.items() if gpu in p.gpu_uids), None)

    for index, op in enumerate(ops):
        if isinstance(op, CreatePartition | AddGpus):
            if any(holder(g) is not None for g in op.gpu_uids):
                raise HardwareRuleBroken(f"a GPU that is in a partition: {op}")
            for gpu in op.gpu_uids:
                if gpu in out_since:
                    windows.append(index - out_since.pop(gpu))
        if isinstance(op, CreatePartition):
            if any(p.name == op.name for p in by_id.values()):
                raise HardwareRuleBroken(f"name in use: {op.name}")
            by_id[next_id] = FabricPartition(next_id, str(next_id), op.name, op.gpu_uids)
            next_id += 1
            continue
        current = by_id.get(op.partition.nmx_partition_id)
        if current is None:
            raise HardwareRuleBroken(f"unknown partition: {op}")
        if isinstance(op, DeletePartition):
            if current.is_default and not default_deletable:
                raise HardwareRuleBroken(f"deleted the default partition: {op}")
            del by_id[current.nmx_partition_id]
            for gpu in current.gpu_uids:
                out_since.setdefault(gpu, index)
        elif isinstance(op, RemoveGpus):
            if not op.gpu_uids <= current.gpu_uids:
                raise HardwareRuleBroken(f"removed a GPU that is not a member: {op}")
            by_id[current.nmx_partition_id] = replace(current, gpu_uids=current.gpu_uids - op.gpu_uids)
            for gpu in op.gpu_uids:
                out_since.setdefault(gpu, index)
        elif isinstance(op, AddGpus):
            by_id[current.nmx_partition_id] = replace(current, gpu_uids=current.gpu_uids | op.gpu_uids)
    return list(by_id.values()), windows
