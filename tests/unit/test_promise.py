"""A pass that finds its read-back as its calls promised makes no second plan
(``promise.nothing_left``): that shortcut must never hide work. On model fabrics of both default
partition modes, foreign partitions kept or evicted, left behind by earlier passes cut short and by
another manager's partition, whenever the shortcut says nothing is left, planning the read-back
yields no operation and blocks nothing; and a read-back that differs from the promise in one member,
or a call that did not complete, is never taken for it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from nico.fabric.backend import FabricPartition
from nico.reconciler.executor import Outcome
from nico.reconciler.operations import CreatePartition
from nico.reconciler.planner import DomainDesire, partition_name, plan
from nico.reconciler.promise import nothing_left
from tests.support.model_fabric import apply
from tests.unit.test_homes import DOMAIN, LPS, site

Case = tuple[DomainDesire, list[FabricPartition]]


@st.composite
def domains(draw: st.DrawFn) -> Case:
    """A desire, and the fabric earlier passes (some cut short) and another manager left."""
    trays, slotless, serials = (
        draw(st.integers(1, 4)),
        draw(st.sampled_from([0, 0, 1, 4])),
        draw(st.integers(1, 2)),
    )
    gpus, homes, fabric = site(trays, slotless, serials)
    foreign = draw(st.sampled_from(["keep", "evict"]))
    owned: set[str] = set()
    wanted = st.one_of(st.none(), st.sampled_from(LPS))

    unmanaged = draw(st.sets(st.sampled_from(gpus), max_size=2))  # machines nico does not know

    def desire() -> DomainDesire:
        mode = draw(st.sampled_from(["domain", "tray"]))
        wants = {g: draw(wanted) for g in gpus if g not in unmanaged}
        return DomainDesire(DOMAIN, wants, frozenset(owned), mode, homes, foreign=foreign)

    for _ in range(draw(st.integers(0, 3))):
        ops = plan(desire(), fabric).operations
        owned.update(op.name for op in ops if isinstance(op, CreatePartition) and op.lp is not None)
        fabric, _ = apply(fabric, ops[: draw(st.integers(0, len(ops)))])
    if draw(st.booleans()):  # another manager takes GPUs into a partition of its own
        taken = frozenset(draw(st.sets(st.sampled_from(gpus), min_size=1, max_size=4)))
        fabric = [replace(p, gpu_uids=p.gpu_uids - taken) for p in fabric]
        # ... named as nico names a logical partition's (which that partition then cannot have)
        names = {p.name for p in fabric} | owned
        name = draw(st.sampled_from(["bcm-job-1", *(n for n in map(partition_name, LPS) if n not in names)]))
        fabric.append(FabricPartition(900, "900", name, taken))
    return desire(), fabric


def done(ops: list[object]) -> list[Outcome]:
    return [Outcome(op, "completed") for op in ops]  # type: ignore[arg-type]


@settings(max_examples=500, deadline=None)
@given(domains())
def test_a_read_back_as_promised_leaves_nothing_to_plan(case: Case) -> None:
    desire, before = case
    result = plan(desire, before)
    after, _ = apply(before, result.operations)
    if not nothing_left(result, done(result.operations), before, after):
        return
    created = {op.name for op in result.operations if isinstance(op, CreatePartition)}
    again = plan(replace(desire, owned_names=desire.owned_names | created), after)
    assert again.operations == [] and not again.blocked, (result.operations, again)


@settings(max_examples=300, deadline=None)
@given(domains(), st.data())
def test_a_read_back_off_the_promise_or_a_call_not_completed_is_planned_again(
    case: Case, data: st.DataObject
) -> None:
    desire, before = case
    result = plan(desire, before)
    if not result.operations:
        return
    after, _ = apply(before, result.operations)
    outcomes = done(result.operations)
    failed = data.draw(st.integers(0, len(outcomes) - 1))
    outcomes[failed] = replace(outcomes[failed], status="failed")
    assert not nothing_left(result, outcomes, before, after)
    # One GPU more or less in one partition of the read-back than the calls promised.
    holders = [i for i, p in enumerate(after) if p.gpu_uids]
    if not holders:
        return
    index = data.draw(st.sampled_from(holders))
    gpu = data.draw(st.sampled_from(sorted(after[index].gpu_uids)))
    off = [*after[:index], replace(after[index], gpu_uids=after[index].gpu_uids - {gpu}), *after[index + 1 :]]
    assert not nothing_left(result, done(result.operations), before, off)


def test_a_swap_sent_home_first_is_planned_again() -> None:
    """Two re-made partitions trading GPUs where no home is on the fabric to wait in: the GPUs go
    home first (deferred), so the read-back of that plan, kept as promised, still leaves work."""
    gpus, homes, _ = site(2, 0, 1)
    first, second = frozenset(gpus[:4]), frozenset(gpus[4:])
    a, b = LPS[0], LPS[1]
    names = {lp: f"nico-{lp}" for lp in (a, b)}
    fabric = [FabricPartition(1, "1", names[a], first), FabricPartition(2, "2", names[b], second)]
    wants = dict.fromkeys(first, b) | dict.fromkeys(second, a)
    wants[gpus[0]] = wants[gpus[4]] = None  # each partition is made again (it keeps none of its GPUs)
    desire = DomainDesire(DOMAIN, wants, frozenset(names.values()), "tray", homes, foreign="keep")
    result = plan(desire, fabric)
    after, _ = apply(fabric, result.operations)
    assert result.deferred, "the swap's GPUs are sent home first"
    assert not nothing_left(result, done(result.operations), fabric, after)
    again = plan(desire, after)
    assert again.operations, "what the deferred GPUs still need"
