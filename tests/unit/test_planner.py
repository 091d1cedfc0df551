"""Planner properties: applying the plan to the observed fabric (under the hardware rules) yields the
desired state, never touches GPUs nico does not manage, and planning again yields nothing; with
foreign partitions kept, no operation touches a partition nico did not make."""

from __future__ import annotations

import uuid
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from nico.fabric.backend import DEFAULT_PARTITION_ID, FabricPartition
from nico.reconciler.operations import (
    AddGpus,
    CreatePartition,
    DeletePartition,
    Operation,
    RemoveGpus,
    op_gpus,
    reason,
)
from nico.reconciler.planner import (
    DomainDesire,
    classify,
    held,
    lp_of_name,
    partition_name,
    plan,
    satisfied,
    without_home,
)
from tests.support.model_fabric import apply
from tests.unit.test_homes import _check_pairing

LPS = [uuid.UUID(int=n) for n in range(1, 5)]
DOMAIN = uuid.UUID(int=99)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[DomainDesire, list[FabricPartition]]:
    gpus = list(range(1000, 1000 + draw(st.integers(1, 24))))
    managed = set(draw(st.lists(st.sampled_from(gpus), unique=True)))
    # Where each GPU sits now: 0 = default, 1..4 = owned partition of LPS[i-1], 5..6 = unknown
    # partitions, 7 = a nico-named partition with no record (a ghost), None = no partition.
    places = draw(st.lists(st.one_of(st.none(), st.integers(0, 7)), min_size=len(gpus), max_size=len(gpus)))
    with_default = draw(st.booleans())
    members: dict[int, set[int]] = {}
    for gpu, place in zip(gpus, places, strict=True):
        if place == 0 and not with_default:
            place = None
        if place is not None:
            members.setdefault(place, set()).add(gpu)
    empty_extra = draw(st.sets(st.integers(1, 7), max_size=2))  # partitions that exist but are empty
    partitions: list[FabricPartition] = []
    for place in sorted(set(members) | empty_extra | ({0} if with_default else set())):
        uids = frozenset(members.get(place, set()))
        if place == 0:
            partitions.append(FabricPartition(DEFAULT_PARTITION_ID, "32766", "Default", uids))
        elif place <= 4:
            partitions.append(FabricPartition(place, str(place), partition_name(LPS[place - 1]), uids))
        elif place <= 6:
            partitions.append(FabricPartition(place + 100, str(place + 100), f"someone-else-{place}", uids))
        else:
            partitions.append(FabricPartition(200, "200", partition_name(uuid.UUID(int=77)), uids))
    # nico knows some of its partitions (records or intents), and maybe names with no partition.
    known = draw(st.sets(st.sampled_from([partition_name(lp) for lp in LPS])))
    desire = {gpu: draw(st.one_of(st.none(), st.sampled_from(LPS))) for gpu in sorted(managed)}
    foreign = draw(st.sampled_from(["keep", "evict"]))
    return DomainDesire(DOMAIN, desire, frozenset(known), foreign=foreign), partitions


def owned_after(desire: DomainDesire, ops: list[Operation]) -> frozenset[str]:
    """What nico knows after the write-back: its partitions, and every partition it created."""
    return desire.owned_names | {op.name for op in ops if isinstance(op, CreatePartition)}


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_applying_the_plan_yields_the_desired_state(case: tuple[DomainDesire, list[FabricPartition]]) -> None:
    desire, observed = case
    result = plan(desire, observed)
    ops = result.operations
    after, _ = apply(observed, ops, default_deletable=False)
    seen = classify(after, owned_after(desire, ops))
    was = {g: p.nmx_partition_id for p in observed for g in p.gpu_uids}
    for gpu, lp in desire.gpus.items():
        if gpu in result.held:
            assert seen.location[gpu].nmx_partition_id == was[gpu], "a held GPU moved"
        elif lp in result.blocked:
            assert gpu not in seen.location, "a GPU of a blocked partition must wait outside every partition"
        else:
            assert satisfied(gpu, lp, seen), (gpu, lp, ops)
    # A blocked LP is blocked only by a partition that holds GPUs nico does not manage.
    for lp in result.blocked:
        holder = next(p for p in after if p.name == partition_name(lp))
        assert holder.gpu_uids - set(desire.gpus) or desire.foreign == "keep"


def foreign_partitions(desire: DomainDesire, observed: list[FabricPartition]) -> dict[int, frozenset[int]]:
    """Partitions nico did not make (an empty one carrying nico's name is a ghost, not foreign): id ->
    members."""
    seen = classify(observed, desire.owned_names, desire.adopted)
    return {p.nmx_partition_id: p.gpu_uids for p in seen.unknown if p.gpu_uids or lp_of_name(p.name) is None}


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_kept_foreign_partitions_are_never_touched_and_their_gpus_are_housed(
    case: tuple[DomainDesire, list[FabricPartition]],
) -> None:
    """foreign_partitions = keep: no operation names a partition nico did not make, so each keeps its
    members; the managed GPUs in them are held (reported, never placed elsewhere) and count as
    housed."""
    desire, observed = case
    desire = replace(desire, foreign="keep")
    result = plan(desire, observed)
    theirs = foreign_partitions(desire, observed)
    for op in result.operations:
        if not isinstance(op, CreatePartition):
            assert op.partition.nmx_partition_id not in theirs, op
    after, _ = apply(observed, result.operations, default_deletable=False)
    assert {p.nmx_partition_id: p.gpu_uids for p in after if p.nmx_partition_id in theirs} == theirs
    managed_inside = {g for members in theirs.values() for g in members if g in desire.gpus}
    assert set(result.held) == managed_inside
    seen = classify(after, owned_after(desire, result.operations))
    assert not without_home(desire, seen) & managed_inside


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_unmanaged_gpus_are_touched_only_to_leave_nicos_own_partitions(
    case: tuple[DomainDesire, list[FabricPartition]],
) -> None:
    """GPUs of machines nico does not know stay where they are, except those found in nico's own
    partitions (machines force-deleted while placed): they go back to the default partition."""
    desire, observed = case
    ops = plan(desire, observed).operations
    seen = classify(observed, desire.owned_names)
    # By fabric id: a deletion split per destination carries a copy of its partition.
    ours = {p.nmx_partition_id for p in seen.owned.values()}
    in_ours = {g for p in seen.owned.values() for g in p.gpu_uids if g not in desire.gpus}
    for op in ops:
        if isinstance(op, RemoveGpus | DeletePartition) and op.partition.nmx_partition_id not in ours:
            touched = op.partition.gpu_uids if isinstance(op, DeletePartition) else op.gpu_uids
            assert touched <= set(desire.gpus), op
    after, _ = apply(observed, ops, default_deletable=False)
    before = {
        g: p.nmx_partition_id
        for p in observed
        for g in p.gpu_uids
        if g not in desire.gpus and g not in in_ours
    }
    now = {
        g: p.nmx_partition_id for p in after for g in p.gpu_uids if g not in desire.gpus and g not in in_ours
    }
    assert before == now
    default = next((p for p in after if p.is_default), None)
    for gpu in in_ours:
        holder = next((p for p in after if gpu in p.gpu_uids), None)
        assert holder is default


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_planning_again_yields_nothing(case: tuple[DomainDesire, list[FabricPartition]]) -> None:
    desire, observed = case
    ops = plan(desire, observed).operations
    after, _ = apply(observed, ops, default_deletable=False)
    again = plan(replace(desire, owned_names=owned_after(desire, ops)), after)
    assert again.operations == [], again


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_paired_order_within_capacity_and_no_needless_operations(
    case: tuple[DomainDesire, list[FabricPartition]],
) -> None:
    """Domain mode pairs like tray mode (issue 12, #6644): a GPU taken out of a partition is placed
    by the addition its removal feeds, with nothing unrelated between (only GPUs with no home — the
    default partition gone — may wait), and a GPU added to an existing partition was taken out by the
    operation right before. Capacity (the domain's partition count and multicast budget, the reason
    removals used to come first): a create that no deletion feeds comes after every deletion. Each
    GPU is taken out of a partition, and added to one, once; one create per logical partition; the default
    partition is never deleted."""
    desire, observed = case
    ops = plan(desire, observed).operations
    default_present = any(p.is_default for p in observed)
    _check_pairing(ops, frozenset() if default_present else frozenset(desire.gpus))
    for j, op in enumerate(ops):
        if isinstance(op, AddGpus):
            for i, earlier in enumerate(ops[:j]):
                if isinstance(earlier, RemoveGpus | DeletePartition) and op_gpus(earlier) & op.gpu_uids:
                    assert i == j - 1, ("a GPU waited for its addition", ops)
    deleted = [i for i, op in enumerate(ops) if isinstance(op, DeletePartition)]
    for j, op in enumerate(ops):
        if isinstance(op, CreatePartition):
            fed = any(isinstance(o, DeletePartition) and o.partition.gpu_uids & op.gpu_uids for o in ops)
            fed = fed or any(
                isinstance(o, RemoveGpus)
                and o.gpu_uids & op.gpu_uids
                and any(
                    isinstance(d, DeletePartition)
                    and d.partition.nmx_partition_id == o.partition.nmx_partition_id
                    for d in ops
                )
                for o in ops
            )
            if not fed:
                assert all(i < j for i in deleted), ("a create before a deletion", ops)
    # (A GPU swapped between re-made partitions may wait in the default: in and out of it once.)
    out = [
        (op.partition.name, g)
        for op in ops
        if isinstance(op, RemoveGpus | DeletePartition)
        for g in op_gpus(op)
    ]
    into = [
        (op.name if isinstance(op, CreatePartition) else op.partition.name, g)
        for op in ops
        if isinstance(op, AddGpus | CreatePartition)
        for g in op_gpus(op)
    ]
    assert len(out) == len(set(out)) and len(into) == len(set(into)), ops
    deletions = [op.partition.nmx_partition_id for op in ops if isinstance(op, DeletePartition)]
    assert len(deletions) == len(set(deletions))
    assert not any(isinstance(op, DeletePartition) and op.partition.is_default for op in ops)
    lps = [op.lp for op in ops if isinstance(op, CreatePartition)]
    assert len(lps) == len(set(lps))
    # Every operation comes with the planner's reason (what `nico admin nvlink-plan` prints).
    assert all(reason(op) for op in ops)


def test_a_move_between_partitions_happens_in_one_pass() -> None:
    a, b = LPS[0], LPS[1]
    observed = [
        FabricPartition(DEFAULT_PARTITION_ID, "32766", "Default", frozenset({3, 4})),
        FabricPartition(1, "1", partition_name(a), frozenset({1, 2})),
        FabricPartition(2, "2", partition_name(b), frozenset({5})),
    ]
    desire = DomainDesire(
        DOMAIN, {1: b, 2: a, 3: None, 4: b, 5: b}, frozenset({partition_name(a), partition_name(b)})
    )
    ops = plan(desire, observed).operations
    # One addition per source: each GPU is out of every partition for one operation.
    assert ops == [
        RemoveGpus(observed[1], frozenset({1}), "owned", a),
        AddGpus(observed[2], frozenset({1}), "owned", b),
        RemoveGpus(observed[0], frozenset({4}), "default", None),
        AddGpus(observed[2], frozenset({4}), "owned", b),
    ]


def test_released_gpus_go_back_to_default_and_an_emptied_partition_is_deleted() -> None:
    a = LPS[0]
    observed = [
        FabricPartition(DEFAULT_PARTITION_ID, "32766", "Default", frozenset()),
        FabricPartition(9, "9", partition_name(a), frozenset({1, 2})),
    ]
    ops = plan(DomainDesire(DOMAIN, {1: None, 2: None}, frozenset({partition_name(a)})), observed).operations
    assert ops == [
        DeletePartition(observed[1], "owned", a),
        AddGpus(observed[0], frozenset({1, 2}), "default", None),
    ]


def test_an_unrecorded_nico_partition_is_not_adopted_but_emptied_of_managed_gpus() -> None:
    a = LPS[0]
    ghost = FabricPartition(4, "4", partition_name(a), frozenset({1, 2}))
    result = plan(DomainDesire(DOMAIN, {1: a, 2: None}, frozenset(), foreign="evict"), [ghost])
    assert result.operations == [
        DeletePartition(ghost, "unknown", None),
        CreatePartition(partition_name(a), a, frozenset({1})),
    ]


def test_a_ghost_holding_foreign_gpus_blocks_its_name_and_says_so() -> None:
    a = LPS[0]
    ghost = FabricPartition(4, "4", partition_name(a), frozenset({1, 50}))  # 50 is not nico's
    result = plan(DomainDesire(DOMAIN, {1: a}, frozenset(), foreign="evict"), [ghost])
    assert result.operations == [RemoveGpus(ghost, frozenset({1}), "unknown", None)]
    assert a in result.blocked and "does not manage" in result.blocked[a]


def test_gpus_of_a_force_deleted_machine_leave_nicos_partition_for_the_default() -> None:
    a = LPS[0]
    default = FabricPartition(DEFAULT_PARTITION_ID, "32766", "Default", frozenset())
    mine = FabricPartition(3, "3", partition_name(a), frozenset({1, 60}))  # 60's machine was deleted
    result = plan(DomainDesire(DOMAIN, {1: a}, frozenset({partition_name(a)})), [default, mine])
    assert result.operations == [
        RemoveGpus(mine, frozenset({60}), "owned", a),
        AddGpus(default, frozenset({60}), "default", None),
    ]


def test_a_recorded_intent_adopts_the_partition_it_created() -> None:
    a = LPS[0]
    made = FabricPartition(4, "4", partition_name(a), frozenset({1, 2}))
    assert not plan(DomainDesire(DOMAIN, {1: a, 2: a}, frozenset({partition_name(a)})), [made])


def test_a_partition_taken_over_from_another_manager_keeps_its_name_and_grows_in_place() -> None:
    a = LPS[0]
    default = FabricPartition(DEFAULT_PARTITION_ID, "32766", "Default", frozenset({3}))
    theirs = FabricPartition(7, "7", f"{a}1234567890", frozenset({1, 2}))  # NICo's name for it
    desire = DomainDesire(DOMAIN, {1: a, 2: a, 3: a}, frozenset(), adopted={theirs.name: a})
    assert plan(desire, [default, theirs]).operations == [
        RemoveGpus(default, frozenset({3}), "default", None),
        AddGpus(theirs, frozenset({3}), "owned", a),
    ]
    # Without the record, the same partition is someone else's: nico takes its GPUs out.
    unrecorded = plan(replace(desire, adopted={}, foreign="evict"), [default, theirs]).operations
    assert DeletePartition(theirs, "unknown", None) in unrecorded
    # Kept (the reconciler's default), it stays whole and its GPUs are held.
    kept = plan(replace(desire, adopted={}, foreign="keep"), [default, theirs])
    assert all(getattr(op, "partition", None) != theirs for op in kept.operations)
    assert kept.held == {1: theirs.name, 2: theirs.name}


def test_a_machine_half_in_a_foreign_partition_keeps_that_half_and_its_other_gpus_stay_home() -> None:
    default = FabricPartition(DEFAULT_PARTITION_ID, "32766", "Default", frozenset({3, 4}))
    theirs = FabricPartition(9, "9", "bcm-job-17", frozenset({1, 2}))
    desire = DomainDesire(DOMAIN, {1: None, 2: None, 3: None, 4: None}, frozenset(), foreign="keep")
    result = plan(desire, [default, theirs])
    assert result.operations == [] and result.held == {1: "bcm-job-17", 2: "bcm-job-17"}
    assert not without_home(desire, classify([default, theirs], frozenset()))


def test_a_tenant_gpu_in_a_kept_partition_waits_while_its_partition_is_made_of_the_others() -> None:
    a = LPS[0]
    default = FabricPartition(DEFAULT_PARTITION_ID, "32766", "Default", frozenset({3, 4}))
    theirs = FabricPartition(9, "9", "bcm-job-17", frozenset({1, 2}))
    desire = DomainDesire(DOMAIN, {1: a, 2: None, 3: a, 4: a}, frozenset(), foreign="keep")
    result = plan(desire, [default, theirs])
    assert result.operations == [
        RemoveGpus(default, frozenset({3, 4}), "default", None),
        CreatePartition(partition_name(a), a, frozenset({3, 4})),
    ]
    assert result.held == {1: "bcm-job-17", 2: "bcm-job-17"} and not result.blocked


def test_tray_conversion_counts_a_gpu_in_a_kept_partition_as_housed() -> None:
    """Tray mode deletes the domain default once every GPU in it has a tray home; a GPU of unknown
    slot held by another manager's partition is housed there and does not keep the default alive."""
    default = FabricPartition(DEFAULT_PARTITION_ID, "32766", "Default", frozenset({1, 2}))
    theirs = FabricPartition(9, "9", "bcm-job-17", frozenset({3}))
    homes = {1: "tray_partition_1", 2: "tray_partition_1"}  # GPU 3's slot is unknown
    desire = DomainDesire(DOMAIN, dict.fromkeys((1, 2, 3)), frozenset(), "tray", homes, foreign="keep")
    ops = plan(desire, [default, theirs]).operations
    assert ops == [
        DeletePartition(default, "default", None),
        CreatePartition("tray_partition_1", None, frozenset({1, 2})),
    ]


def test_a_kept_partition_with_nicos_name_blocks_its_logical_partition_and_says_why() -> None:
    a = LPS[0]
    default = FabricPartition(DEFAULT_PARTITION_ID, "32766", "Default", frozenset({2}))
    other_nico = FabricPartition(4, "4", partition_name(a), frozenset({1}))  # another deployment's
    result = plan(DomainDesire(DOMAIN, {1: None, 2: a}, frozenset(), foreign="keep"), [default, other_nico])
    assert all(getattr(op, "partition", None) != other_nico for op in result.operations)
    assert result.held == {1: partition_name(a)}
    assert "nico did not make" in result.blocked[a] and "foreign_partitions = keep" in result.blocked[a]


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_without_home_in_domain_mode_is_the_per_gpu_home_rule(
    case: tuple[DomainDesire, list[FabricPartition]],
) -> None:
    """Domain mode with a default partition skips each GPU's home lookup: the GPUs it finds without a
    home are those the general rule finds (not kept, and in no partition, or outside nico's partitions
    and not home by satisfied())."""
    desire, observed = case
    seen = classify(observed, desire.owned_names, desire.adopted)
    tenant = {id(p) for p in seen.owned.values()}
    kept = held(desire, seen)
    by_rule = frozenset(
        gpu
        for gpu in desire.gpus
        if gpu not in kept
        and (
            seen.location.get(gpu) is None
            or (id(seen.location[gpu]) not in tenant and not satisfied(gpu, None, seen, desire))
        )
    )
    assert without_home(desire, seen) == by_rule
