"""How the executor groups a plan into steps (waves of paired moves made at once, the rest alone):
pure, no fabric. A wave never reorders what two of its units touch in common."""

from __future__ import annotations

import uuid

from nico.fabric.backend import FabricPartition
from nico.reconciler.executor import PARALLEL_ADDITIONS, _steps, _Unit
from nico.reconciler.operations import AddGpus, CreatePartition, DeletePartition, Operation, RemoveGpus


def partition(pid: int, *gpus: int) -> FabricPartition:
    return FabricPartition(pid, str(pid), f"p{pid}", frozenset(gpus))


DEFAULT = partition(32766, *range(100))


def out_of(source: FabricPartition, *gpus: int) -> RemoveGpus:
    return RemoveGpus(source, frozenset(gpus), "default" if source is DEFAULT else "owned")


def create(name: str, *gpus: int) -> CreatePartition:
    return CreatePartition(name, uuid.uuid4(), frozenset(gpus))


def into(target: FabricPartition, *gpus: int) -> AddGpus:
    return AddGpus(target, frozenset(gpus), "owned")


def test_instances_placed_from_the_default_are_one_wave() -> None:
    plan: list[Operation] = [out_of(DEFAULT, 1), create("a", 1), out_of(DEFAULT, 2), create("b", 2)]
    assert _steps(plan) == [[_Unit((0,), 1), _Unit((2,), 3)]]


def test_a_create_gathering_gpus_of_two_sources_is_one_unit() -> None:
    one, two = partition(1, 5), partition(2, 6)
    plan: list[Operation] = [out_of(one, 5), out_of(two, 6), create("c", 5, 6)]
    assert _steps(plan) == [[_Unit((0, 1), 2)]]


def test_a_unit_touching_what_the_wave_changes_starts_a_new_wave() -> None:
    target = partition(7, 70)
    plan: list[Operation] = [
        out_of(DEFAULT, 1),
        into(target, 1),  # target gains
        out_of(target, 70),  # then loses: after the addition above, in a wave of its own
        create("d", 70),
        out_of(DEFAULT, 2),
        into(target, 2),  # target again, which the wave above removes from: a third wave
        out_of(DEFAULT, 3),
        create("f", 3),  # touches nothing of that wave: joins it
    ]
    assert _steps(plan) == [[_Unit((0,), 1)], [_Unit((2,), 3)], [_Unit((4,), 5), _Unit((6,), 7)]]


def test_deletions_and_removals_going_nowhere_run_alone_between_waves() -> None:
    gone = partition(3, 30)
    plan: list[Operation] = [
        DeletePartition(gone, "owned"),
        out_of(DEFAULT, 9),  # goes nowhere: the next addition does not take GPU 9
        out_of(DEFAULT, 1),
        create("e", 1),
    ]
    assert _steps(plan) == [0, 1, [_Unit((2,), 3)]]


def test_a_wave_holds_at_most_parallel_additions() -> None:
    plan: list[Operation] = []
    for n in range(PARALLEL_ADDITIONS + 1):
        plan += [out_of(DEFAULT, n), create(f"x{n}", n)]
    steps = _steps(plan)
    assert [len(s) for s in steps if isinstance(s, list)] == [PARALLEL_ADDITIONS, 1]
