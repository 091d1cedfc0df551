"""Home partitions: every GPU always has a home (#6644), in both default partition modes.

A model fabric (the hardware rules of a real controller: a GPU in at most one partition, names unique,
the default partition deletable) is driven through random sequences of tenant changes, passes cut
short by a crash, mode switches, partitions lost behind nico's back and partitions another manager
makes; each complete pass must leave every managed GPU in its tenant partition or its home (or, kept,
in the other manager's partition), and no pass may leave a GPU outside every partition for longer than
the removal that feeds its next addition. With foreign partitions kept, no operation touches one."""

from __future__ import annotations

import uuid
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from nico.fabric.backend import DEFAULT_PARTITION_ID, FabricPartition
from nico.reconciler.homes import home_names, home_target, home_targets, tray_partition_name
from nico.reconciler.operations import (
    AddGpus,
    CreatePartition,
    DeletePartition,
    Operation,
    RemoveGpus,
    op_gpus,
)
from nico.reconciler.planner import (
    Classified,
    DomainDesire,
    classify,
    held,
    partition_name,
    plan,
    satisfied,
    without_home,
)
from tests.support.model_fabric import apply

LPS = [uuid.UUID(int=n) for n in range(1, 4)]
DOMAIN = uuid.UUID(int=99)
GPUS_PER_TRAY = 4


def site(trays: int, slotless: int, serials: int) -> tuple[list[int], dict[int, str], list[FabricPartition]]:
    """GPUs of ``trays`` trays over ``serials`` chassis (slot unknown for the first ``slotless``
    GPUs), all in the default partition as a controller starts."""
    rows = []
    uid = 1000
    for tray in range(trays):
        for _ in range(GPUS_PER_TRAY):
            serial = f"S{tray % serials}"
            rows.append((uid, serial, tray // serials + 1 if uid - 1000 >= slotless else None))
            uid += 1
    gpus = [r[0] for r in rows]
    default = FabricPartition(DEFAULT_PARTITION_ID, "32766", "Default Partition", frozenset(gpus))
    return gpus, home_names(rows), [default]


Step = tuple[str, object]


@st.composite
def sequences(draw: st.DrawFn) -> tuple[int, int, int, str, str, list[Step]]:
    trays = draw(st.integers(1, 5))
    slotless = draw(st.sampled_from([0, 0, 0, 1, 4]))
    serials = draw(st.integers(1, 2))
    mode = draw(st.sampled_from(["domain", "tray"]))
    foreign = draw(st.sampled_from(["keep", "evict"]))
    n = trays * GPUS_PER_TRAY
    step = st.one_of(
        st.tuples(
            st.just("want"), st.lists(st.one_of(st.none(), st.sampled_from(LPS)), min_size=n, max_size=n)
        ),
        st.tuples(st.just("release"), st.sets(st.integers(0, n - 1))),
        st.tuples(st.just("switch"), st.sampled_from(["domain", "tray"])),
        st.tuples(st.just("crash"), st.integers(0, 40)),
        st.tuples(st.just("lose"), st.integers(0, 10)),
        # Another manager (NICo, BCM, an operator) takes GPUs into a partition of its own.
        st.tuples(st.just("foreign"), st.sets(st.integers(0, n - 1), min_size=1, max_size=6)),
    )
    return trays, slotless, serials, mode, foreign, draw(st.lists(step, min_size=1, max_size=12))


PASSES = {"count": 0, "sequences": 0}


@settings(max_examples=300, deadline=None)
@given(sequences())
def test_every_gpu_always_has_a_home(case: tuple[int, int, int, str, str, list[Step]]) -> None:
    trays, slotless, serials, mode, foreign, steps = case
    PASSES["sequences"] += 1
    gpus, homes, fabric = site(trays, slotless, serials)
    wants: dict[int, uuid.UUID | None] = dict.fromkeys(gpus)
    owned: set[str] = set()
    mode_now = mode

    def desire() -> DomainDesire:
        return DomainDesire(DOMAIN, dict(wants), frozenset(owned), mode_now, homes, foreign=foreign)  # type: ignore[arg-type]

    def theirs() -> dict[int, frozenset[int]]:
        """The other manager's partitions as they stand: id -> members."""
        return {p.nmx_partition_id: p.gpu_uids for p in fabric if p.name.startswith("bcm-job-")}

    def full_pass(limit: int | None = None, strict: bool = False) -> None:
        nonlocal fabric
        result = plan(desire(), fabric)
        ops = result.operations
        if foreign == "keep":
            kept = theirs()
            assert not [op for op in ops if _partition_id(op) in kept], ("touched a foreign partition", ops)
        default_present = any(p.is_default for p in fabric)
        nowhere = {g for g in gpus if home_target(g, mode_now, homes, default_present) is None}  # type: ignore[arg-type]
        # Intents are recorded before any call: a crash still leaves the created names known.
        owned.update(op.name for op in ops if isinstance(op, CreatePartition) and op.lp is not None)
        fabric, windows = apply(fabric, ops if limit is None else ops[:limit])
        if strict:
            assert all(w <= 1 for w in windows), (windows, ops)
        # Both modes: a GPU leaving a partition is placed by the addition its removal feeds, in the
        # very next operation — or, for a create (it takes all its GPUs at once), after the removals
        # feeding it, one per source partition.
        _check_pairing(ops, frozenset(nowhere))
        assert _longest_wait(ops, frozenset(nowhere)) <= 1 + _extra_sources(ops), _show(ops)
        PASSES["count"] += 1

    def settle() -> None:
        nonlocal fabric
        for _ in range(3):
            full_pass()
        seen = classify(fabric, frozenset(owned))
        d = desire()
        assert not plan(d, fabric).operations
        assert without_home(d, seen) == frozenset() or _no_home_possible(d, seen), (fabric, d)
        kept = held(d, seen)
        for gpu, lp in d.gpus.items():
            if lp is None and gpu not in kept:
                assert satisfied(gpu, None, seen, d)
        if foreign == "evict":
            assert not held(replace(d, foreign="keep"), seen), "evict mode leaves no managed GPU in theirs"

    full_pass()
    for kind, arg in steps:
        if kind == "want":
            assert isinstance(arg, list)
            wants = dict(zip(gpus, arg, strict=True))
            full_pass()
        elif kind == "release":
            assert isinstance(arg, set)
            for index in arg:
                wants[gpus[index]] = None
            full_pass()
        elif kind == "switch":
            assert isinstance(arg, str)
            before = classify(fabric, frozenset(owned))
            # A switch alone moves GPUs only between homes: each is out for one operation at most.
            quiet = without_home(desire(), before) == frozenset() and not plan(desire(), fabric).blocked
            mode_now = arg
            full_pass(strict=quiet)
        elif kind == "crash":
            assert isinstance(arg, int)
            full_pass(limit=arg)
        elif kind == "lose":
            assert isinstance(arg, int)
            # A partition vanishes behind nico's back (#6644: a lost tray partition isolates its GPUs).
            if fabric:
                gone = sorted(fabric, key=lambda p: p.nmx_partition_id)[arg % len(fabric)]
                fabric = [p for p in fabric if p is not gone]
        elif kind == "foreign":
            assert isinstance(arg, set)
            fabric = _taken_by_another_manager(fabric, frozenset(gpus[i] for i in arg))
        before = theirs()
        settle()
        if foreign == "keep":
            assert theirs() == before, "a foreign partition changed"


def _partition_id(op: Operation) -> int | None:
    return None if isinstance(op, CreatePartition) else op.partition.nmx_partition_id


def _taken_by_another_manager(fabric: list[FabricPartition], gpus: frozenset[int]) -> list[FabricPartition]:
    """``fabric`` after another manager moved ``gpus`` into a new partition of its own."""
    left = [replace(p, gpu_uids=p.gpu_uids - gpus) for p in fabric]
    new_id = max([p.nmx_partition_id for p in fabric if not p.is_default] + [500]) + 1
    return [*left, FabricPartition(new_id, str(new_id), f"bcm-job-{new_id}", gpus)]


def _no_home_possible(desire: DomainDesire, seen: Classified) -> bool:
    """The default gone (lost behind nico's back) and a GPU of unknown slot: it cannot be given a home
    (the controller alone makes partition 32766); the reconciler still counts it."""
    return seen.default is None and any(g not in desire.homes for g in desire.gpus)


def _check_pairing(ops: list[Operation], nowhere: frozenset[int] = frozenset()) -> None:
    """Between a removal and the addition taking its GPUs (home or tenant partition) only removals
    feeding that addition: GPUs swapped between tenant partitions that are re-made wait in their home,
    not across the cycle. Only GPUs with no home at all (``nowhere``: slot unknown and the default
    lost) may wait."""
    for j, op in enumerate(ops):
        if not isinstance(op, AddGpus | CreatePartition):
            continue
        need = op_gpus(op)
        i = j - 1
        while i >= 0 and isinstance(ops[i], RemoveGpus | DeletePartition) and op_gpus(ops[i]) & need:
            i -= 1
        feeders = set().union(*(op_gpus(o) for o in ops[i + 1 : j])) if j - i > 1 else set()
        removals = [o for o in ops[: i + 1] if isinstance(o, RemoveGpus | DeletePartition)]
        earlier = set().union(*(op_gpus(o) for o in removals))
        assert not (need & earlier - feeders - nowhere), "a GPU waited across unrelated operations: " + str(
            _show(ops)
        )


def _longest_wait(ops: list[Operation], nowhere: frozenset[int] = frozenset()) -> int:
    """The most operations a GPU (not of ``nowhere``) spends out of every partition, from its removal
    to its addition (0: none leaves a partition and comes back)."""
    out: dict[int, int] = {}
    longest = 0
    for index, op in enumerate(ops):
        for gpu in op_gpus(op) - nowhere:
            if isinstance(op, RemoveGpus | DeletePartition):
                out.setdefault(gpu, index)
            elif gpu in out:
                longest = max(longest, index - out.pop(gpu))
    return longest


def _extra_sources(ops: list[Operation]) -> int:
    """The most source partitions beyond the first that feed one create of ``ops``."""
    extra = 0
    for j, op in enumerate(ops):
        if isinstance(op, CreatePartition):
            sources = {
                o.partition.nmx_partition_id
                for o in ops[:j]
                if isinstance(o, RemoveGpus | DeletePartition) and op_gpus(o) & op.gpu_uids
            }
            extra = max(extra, len(sources) - 1)
    return extra


def _show(ops: list[Operation]) -> list[tuple[str, str, list[int]]]:
    return [
        (type(o).__name__, o.name if isinstance(o, CreatePartition) else o.partition.name, sorted(op_gpus(o)))
        for o in ops
    ]


def test_switch_to_tray_mode_converts_a_domain_tray_by_tray() -> None:
    gpus, homes, fabric = site(3, 0, 1)
    desire = DomainDesire(DOMAIN, dict.fromkeys(gpus), frozenset(), "tray", homes)
    ops = plan(desire, fabric).operations
    tray = [sorted(gpus[i : i + 4]) for i in (0, 4, 8)]
    assert _show(ops) == [
        ("RemoveGpus", "Default Partition", tray[0]),
        ("CreatePartition", tray_partition_name(1), tray[0]),
        ("RemoveGpus", "Default Partition", tray[1]),
        ("CreatePartition", tray_partition_name(2), tray[1]),
        ("DeletePartition", "Default Partition", tray[2]),
        ("CreatePartition", tray_partition_name(3), tray[2]),
    ]
    after, windows = apply(fabric, ops)
    assert windows == [1] * 12
    assert not plan(desire, after).operations
    # And back: the default cannot be re-made by nico, so the tray partitions stay the homes.
    back = replace(desire, mode="domain")
    assert not plan(back, after).operations


def test_a_released_gpu_goes_back_to_its_tray_and_a_lost_tray_partition_is_recreated() -> None:
    gpus, homes, fabric = site(2, 0, 1)
    desire = DomainDesire(DOMAIN, dict.fromkeys(gpus), frozenset(), "tray", homes)
    fabric, _ = apply(fabric, plan(desire, fabric).operations)
    lp = LPS[0]
    used = replace(desire, gpus={**desire.gpus, gpus[0]: lp, gpus[5]: lp})
    fabric, _ = apply(fabric, plan(used, fabric).operations)
    owned = used.owned_names | {f"nico-{lp}"}
    released = replace(desire, owned_names=owned)
    ops = plan(released, fabric).operations
    fabric, windows = apply(fabric, ops)
    seen = classify(fabric, owned)
    assert seen.location[gpus[0]] is seen.homes[tray_partition_name(1)]
    assert seen.location[gpus[5]] is seen.homes[tray_partition_name(2)]
    assert max(windows) <= 1
    lost = [p for p in fabric if p.name != tray_partition_name(2)]
    assert without_home(released, classify(lost, owned)) == frozenset(gpus[4:8])
    ops = plan(released, lost).operations
    assert ops == [CreatePartition(tray_partition_name(2), None, frozenset(gpus[4:8]))]


def test_nvl36x2_tray_names_carry_the_chassis() -> None:
    _, homes, _ = site(4, 0, 2)
    assert sorted(set(homes.values())) == [
        "tray_partition_S0_1",
        "tray_partition_S0_2",
        "tray_partition_S1_1",
        "tray_partition_S1_2",
    ]


def test_a_gpu_of_unknown_slot_keeps_the_domain_default_alive() -> None:
    gpus, homes, fabric = site(2, 1, 1)
    desire = DomainDesire(DOMAIN, dict.fromkeys(gpus), frozenset(), "tray", homes)
    after, _ = apply(fabric, plan(desire, fabric).operations)
    seen = classify(after, frozenset())
    assert seen.default is not None and seen.default.gpu_uids == {gpus[0]}
    assert without_home(desire, seen) == frozenset()


def test_a_swap_between_re_made_partitions_waits_in_the_homes() -> None:
    """Two tenant partitions trade all their GPUs: each is deleted and re-made under its own name, so
    one create must wait for the other's delete. The GPUs that would wait across that cycle (out of
    every partition for three operations) go to their tray partition first and leave it right before
    the create that takes them: no GPU is out of every partition for more than one operation."""
    gpus, homes, fabric = site(2, 0, 1)
    a, b = LPS[0], LPS[1]
    owned = frozenset({partition_name(a), partition_name(b)})
    idle = DomainDesire(DOMAIN, dict.fromkeys(gpus), owned, "tray", homes)
    fabric, _ = apply(fabric, plan(idle, fabric).operations)
    used = replace(idle, gpus={**idle.gpus, gpus[0]: a, gpus[1]: a, gpus[4]: b, gpus[5]: b})
    fabric, _ = apply(fabric, plan(used, fabric).operations)
    swapped = replace(idle, gpus={**idle.gpus, gpus[0]: b, gpus[1]: b, gpus[4]: a, gpus[5]: a})
    ops = plan(swapped, fabric).operations
    assert _show(ops) == [
        ("DeletePartition", partition_name(b), [gpus[4], gpus[5]]),
        ("AddGpus", tray_partition_name(2), [gpus[4], gpus[5]]),
        ("DeletePartition", partition_name(a), [gpus[0], gpus[1]]),
        ("CreatePartition", partition_name(b), [gpus[0], gpus[1]]),
        ("RemoveGpus", tray_partition_name(2), [gpus[4], gpus[5]]),
        ("CreatePartition", partition_name(a), [gpus[4], gpus[5]]),
    ]
    after, windows = apply(fabric, ops)
    assert windows and max(windows) == 1, windows
    seen = classify(after, owned)
    assert all(satisfied(g, lp, seen, swapped) for g, lp in swapped.gpus.items())
    assert not plan(swapped, after).operations


def test_a_swap_with_no_home_partition_to_wait_in_goes_home_first_and_finishes_next_pass() -> None:
    """Tray mode, two trays each wholly in a tenant partition (so neither tray partition was ever made)
    trading partitions: the GPUs that would wait across the cycle are sent to a new tray partition, and
    the next pass takes them from there: every GPU out of every partition for one operation."""
    gpus, homes, fabric = site(2, 0, 1)
    a, b = LPS[0], LPS[1]
    owned = frozenset({partition_name(a), partition_name(b)})
    used = DomainDesire(DOMAIN, {g: a if g in gpus[:4] else b for g in gpus}, owned, "tray", homes)
    fabric, _ = apply(fabric, plan(used, fabric).operations)
    assert sorted(p.name for p in fabric) == [partition_name(a), partition_name(b)]
    swapped = replace(used, gpus={g: b if g in gpus[:4] else a for g in gpus})
    first = plan(swapped, fabric).operations
    assert _show(first) == [
        ("DeletePartition", partition_name(b), gpus[4:]),
        ("CreatePartition", tray_partition_name(2), gpus[4:]),
        ("DeletePartition", partition_name(a), gpus[:4]),
        ("CreatePartition", partition_name(b), gpus[:4]),
    ]
    fabric, windows = apply(fabric, first)
    second = plan(swapped, fabric).operations
    assert _show(second) == [
        ("RemoveGpus", tray_partition_name(2), gpus[4:]),
        ("CreatePartition", partition_name(a), gpus[4:]),
    ]
    fabric, more = apply(fabric, second)
    assert max(windows + more) == 1
    seen = classify(fabric, owned)
    assert all(satisfied(g, lp, seen, swapped) for g, lp in swapped.gpus.items())
    assert not plan(swapped, fabric).operations


def test_domain_mode_a_swap_and_a_release_keep_every_gpu_at_home_but_for_one_operation() -> None:
    """Domain mode (no tray partition on the fabric) pairs like tray mode: two re-made tenant partitions
    trading GPUs park the GPUs that would wait across the cycle in the domain default; a released GPU
    goes back to the default in the very next operation. Before, every removal came first: a swap left
    GPUs out of every partition for three operations."""
    gpus, homes, fabric = site(2, 0, 1)
    a, b, c = LPS
    owned = frozenset({partition_name(a), partition_name(b), partition_name(c)})
    idle = DomainDesire(DOMAIN, dict.fromkeys(gpus), owned, "domain", homes)
    used = replace(idle, gpus={**idle.gpus, gpus[0]: a, gpus[1]: a, gpus[4]: b, gpus[5]: b, gpus[6]: c})
    fabric, _ = apply(fabric, plan(used, fabric).operations)
    swapped = replace(idle, gpus={**idle.gpus, gpus[0]: b, gpus[1]: b, gpus[4]: a, gpus[5]: a})
    ops = plan(swapped, fabric).operations
    assert _show(ops) == [
        ("DeletePartition", partition_name(c), [gpus[6]]),
        ("AddGpus", "Default Partition", [gpus[6]]),
        ("DeletePartition", partition_name(b), [gpus[4], gpus[5]]),
        ("AddGpus", "Default Partition", [gpus[4], gpus[5]]),
        ("DeletePartition", partition_name(a), [gpus[0], gpus[1]]),
        ("CreatePartition", partition_name(b), [gpus[0], gpus[1]]),
        ("RemoveGpus", "Default Partition", [gpus[4], gpus[5]]),
        ("CreatePartition", partition_name(a), [gpus[4], gpus[5]]),
    ]
    after, windows = apply(fabric, ops)
    assert windows == [1] * 7, windows
    seen = classify(after, owned)
    assert all(satisfied(g, lp, seen, swapped) for g, lp in swapped.gpus.items())
    assert not plan(swapped, after).operations


@given(
    st.integers(1, 4),
    st.sampled_from([0, 1, 4]),
    st.integers(1, 2),
    st.sampled_from(["domain", "tray"]),
    st.booleans(),
)
def test_the_homes_of_every_gpu_at_once_are_each_gpus_home(
    trays: int, slotless: int, serials: int, mode: str, default_present: bool
) -> None:
    """``home_targets`` (a plan's homes, made at once) answers as ``home_target`` does for each GPU."""
    gpus, homes, _ = site(trays, slotless, serials)
    each = {g: home_target(g, mode, homes, default_present) for g in gpus}  # type: ignore[arg-type]
    assert home_targets(gpus, mode, homes, default_present) == each  # type: ignore[arg-type]
