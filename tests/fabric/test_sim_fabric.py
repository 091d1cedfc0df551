"""The simulated site: shapes, determinism, and the controller's rules with their return codes."""

from __future__ import annotations

import pytest

from nico.fabric.backend import DEFAULT_PARTITION_ID
from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.sim.fabric import SimError, SimFabric


def test_racks_have_the_gb200_shapes() -> None:
    fabric = SimFabric(1, nvl36x2=1)
    nvl72, nvl36x2 = fabric.domains.values()
    assert nvl72.chassis_serials == ("SIM-0001",)
    assert nvl36x2.chassis_serials == ("SIM-0002", "SIM-0003")
    for domain in (nvl72, nvl36x2):
        assert len(domain.gpus) == 72
        trays = {(g.chassis_serial, g.tray_index) for g in domain.gpus.values()}
        assert len(trays) == 18
        assert {g.device_id for g in domain.gpus.values()} == {1, 2, 3, 4}
    assert {g.tray_index for g in nvl72.gpus.values()} == set(range(18))
    assert {g.tray_index for g in nvl36x2.gpus.values()} == set(range(9))
    assert fabric.domain("SIM-0003") is nvl36x2


def test_same_seed_same_site_and_guids_span_the_unsigned_range() -> None:
    def shape(f: SimFabric) -> list[tuple[object, ...]]:
        return [(d.domain_uuid, d.chassis_serials, sorted(d.gpus)) for d in f.domains.values()]

    assert shape(SimFabric(3, seed=5)) == shape(SimFabric(3, seed=5))
    assert shape(SimFabric(3, seed=5)) != shape(SimFabric(3, seed=6))
    # Adding racks does not renumber the existing ones.
    assert shape(SimFabric(4, seed=5))[:3] == shape(SimFabric(3, seed=5))
    uids = [u for d in SimFabric(3, seed=5).domains.values() for u in d.gpus]
    assert len(set(uids)) == len(uids) == 216
    assert all(0 < u < 2**64 for u in uids)
    assert sum(u >= 2**63 for u in uids) > 50 and sum(u < 2**63 for u in uids) > 50


def test_every_gpu_starts_in_the_default_partition() -> None:
    fabric = SimFabric(2)
    for domain in fabric.domains.values():
        assert fabric.members(domain.domain_uuid) == {DEFAULT_PARTITION_ID: frozenset(domain.gpus)}


def _drained(fabric: SimFabric, serial: str, count: int) -> list[int]:
    """Take ``count`` GPUs of a rack out of its default partition and return them."""
    uids = sorted(fabric.domain(serial).gpus)[:count]
    fabric.remove_gpus(serial, DEFAULT_PARTITION_ID, uids)
    return uids


def _code(call: object) -> int:
    with pytest.raises(SimError) as caught:
        call()  # type: ignore[operator]
    return caught.value.code


def test_controller_assigns_the_lowest_free_id_and_reuses_freed_ones() -> None:
    fabric = SimFabric(1, max_partitions=10)
    a, b, c = ([uid] for uid in _drained(fabric, "SIM-0001", 3))
    assert fabric.create_partition("SIM-0001", "a", a).partition_id == 1
    assert fabric.create_partition("SIM-0001", "b", b).partition_id == 2
    fabric.delete_partition("SIM-0001", 1)
    assert fabric.create_partition("SIM-0001", "c", c).partition_id == 1


def test_requested_ids() -> None:
    fabric = SimFabric(1, max_partitions=10)
    a, b, c = ([uid] for uid in _drained(fabric, "SIM-0001", 3))
    assert fabric.create_partition("SIM-0001", "a", a, partition_id=77).partition_id == 77
    assert (
        _code(lambda: fabric.create_partition("SIM-0001", "b", b, partition_id=77))
        == pb.NMX_ST_PARTITION_ID_IN_USE
    )
    assert _code(lambda: fabric.create_partition("SIM-0001", "b", b, partition_id=0)) == pb.NMX_ST_BADPARAM
    assert (
        _code(lambda: fabric.create_partition("SIM-0001", "b", b, partition_id=32767)) == pb.NMX_ST_BADPARAM
    )
    # 32766 is never assigned but may be asked for, once the default partition is gone.
    assert (
        _code(lambda: fabric.create_partition("SIM-0001", "b", b, partition_id=32766))
        == pb.NMX_ST_PARTITION_ID_IN_USE
    )
    fabric.delete_partition("SIM-0001", DEFAULT_PARTITION_ID)
    assert fabric.create_partition("SIM-0001", "Default", c, partition_id=32766).is_default


def test_the_default_partition_may_be_emptied_and_deleted() -> None:
    fabric = SimFabric(1)
    everything = sorted(fabric.domain("SIM-0001").gpus)
    fabric.remove_gpus("SIM-0001", DEFAULT_PARTITION_ID, everything)
    assert fabric.members("SIM-0001") == {DEFAULT_PARTITION_ID: frozenset()}
    fabric.delete_partition("SIM-0001", DEFAULT_PARTITION_ID)
    assert fabric.members("SIM-0001") == {}
    assert all(fabric.partition_of(u) is None for u in everything)


def test_partitions_are_found_by_id_by_name_or_both() -> None:
    fabric = SimFabric(1, max_partitions=10)
    made = fabric.create_partition("SIM-0001", "job", _drained(fabric, "SIM-0001", 2))
    assert fabric.resolve("SIM-0001", 0, "job") is made
    assert fabric.resolve("SIM-0001", made.partition_id, "job") is made
    assert _code(lambda: fabric.resolve("SIM-0001", 0, "nope")) == pb.NMX_ST_PARTITION_NAME_NOT_IN_USE
    assert _code(lambda: fabric.resolve("SIM-0001", 9, "")) == pb.NMX_ST_PARTITION_ID_NOT_IN_USE
    mismatch = _code(lambda: fabric.resolve("SIM-0001", DEFAULT_PARTITION_ID, "job"))
    assert mismatch == pb.NMX_ST_PARTITION_ID_NAME_MISMATCH
    assert _code(lambda: fabric.resolve("SIM-0001", 0, "")) == pb.NMX_ST_BADPARAM


def test_bad_gpu_lists_and_names() -> None:
    fabric = SimFabric(2)
    mine = _drained(fabric, "SIM-0001", 2)
    theirs = _drained(fabric, "SIM-0002", 1)
    assert _code(lambda: fabric.create_partition("SIM-0001", "x", [])) == pb.NMX_ST_BADPARAM
    assert _code(lambda: fabric.create_partition("SIM-0001", "x", [mine[0], mine[0]])) == pb.NMX_ST_BADPARAM
    assert _code(lambda: fabric.create_partition("SIM-0001", "x", [*mine, *theirs])) == pb.NMX_ST_BADPARAM
    assert _code(lambda: fabric.create_partition("SIM-0001", "x" * 245, mine)) == pb.NMX_ST_BADPARAM
    assert _code(lambda: fabric.create_partition("SIM-0001", "tab\there", mine)) == pb.NMX_ST_BADPARAM
    assert fabric.create_partition("SIM-0001", "x" * 244, mine).name == "x" * 244


def test_a_refused_change_changes_nothing() -> None:
    fabric = SimFabric(1, max_partitions=10)
    free = _drained(fabric, "SIM-0001", 2)
    made = fabric.create_partition("SIM-0001", "p", free[:1])
    before = fabric.members("SIM-0001")
    in_default = sorted(fabric.domain("SIM-0001").gpus.keys() - set(free))[0]
    assert _code(lambda: fabric.add_gpus("SIM-0001", made.partition_id, [free[1], in_default])) == (
        pb.NMX_ST_RESOURCE_IN_USE
    )
    assert _code(lambda: fabric.set_members("SIM-0001", made.partition_id, [free[1], in_default])) == (
        pb.NMX_ST_RESOURCE_IN_USE
    )
    assert _code(lambda: fabric.remove_gpus("SIM-0001", made.partition_id, [free[0], free[1]])) == (
        pb.NMX_ST_RESOURCE_NOT_IN_USE
    )
    assert fabric.members("SIM-0001") == before


def test_set_members_replaces_the_list() -> None:
    fabric = SimFabric(1, max_partitions=10)
    free = _drained(fabric, "SIM-0001", 3)
    made = fabric.create_partition("SIM-0001", "p", free[:2])
    fabric.set_members("SIM-0001", made.partition_id, free[1:])
    assert fabric.members("SIM-0001")[made.partition_id] == frozenset(free[1:])
    assert fabric.partition_of(free[0]) is None
    fabric.set_members("SIM-0001", made.partition_id, [])
    assert fabric.members("SIM-0001")[made.partition_id] == frozenset()


def test_a_snapshot_restores_the_site_as_it_was_left() -> None:
    fabric = SimFabric(2, nvl36x2=1, seed=7, max_partitions=10)
    first, pair = fabric.domain("SIM-0001"), fabric.domain("SIM-0002")
    uids = _drained(fabric, "SIM-0001", 8)
    made = fabric.create_partition("SIM-0001", "nico-lp-a", uids[:4])
    fabric.create_partition("SIM-0001", "", uids[4:6])
    fabric.delete_partition("SIM-0002", DEFAULT_PARTITION_ID)  # an emptied site is recorded too
    sick = sorted(pair.gpus)[0]
    fabric.set_gpu_health(sick, "DEGRADED")

    again = SimFabric.from_json(fabric.to_json())

    assert (again.racks, again.nvl36x2, again.seed, again.max_partitions) == (2, 1, 7, 10)
    assert list(again.domains) == list(fabric.domains)
    for key in fabric.domains:
        assert again.members(key) == fabric.members(key)
        assert [
            (p.partition_id, p.name, p.entity_id, p.created_at, p.updated_at) for p in again.partitions(key)
        ] == [
            (p.partition_id, p.name, p.entity_id, p.created_at, p.updated_at) for p in fabric.partitions(key)
        ]
    assert again.gpu(sick).health == "DEGRADED"
    assert again.partition_of(uids[6]) is None  # drained, in no partition
    assert again.partition_by_entity(made.entity_id) is not None
    # The restored controller keeps its rules: names stay taken, ids are assigned from the lowest free.
    with pytest.raises(SimError) as caught:
        again.create_partition("SIM-0001", "nico-lp-a", [uids[6]])
    assert caught.value.code == pb.NMX_ST_PARTITION_NAME_IN_USE
    third = again.create_partition("SIM-0001", "", [uids[6]])
    assert third.partition_id == 3
    assert third.entity_id not in {p.entity_id for d in fabric.domains for p in fabric.partitions(d)}
    assert again.to_json() != fabric.to_json()
    assert first.domain_uuid in again.domains


def test_a_larger_site_of_the_same_seed_takes_a_smaller_snapshot() -> None:
    small = SimFabric(1, seed=3)
    uids = _drained(small, "SIM-0001", 4)
    small.create_partition("SIM-0001", "lp", uids)
    large = SimFabric(2, seed=3)
    large.restore(small.to_json())
    assert large.members("SIM-0001") == small.members("SIM-0001")
    assert large.members("SIM-0002") == {DEFAULT_PARTITION_ID: frozenset(large.domain("SIM-0002").gpus)}


def test_a_snapshot_of_another_site_changes_nothing() -> None:
    bigger = SimFabric(2, seed=3)
    _drained(bigger, "SIM-0002", 4)
    other_seed = SimFabric(1, seed=4)
    for fabric, text in (
        (SimFabric(1, seed=3), bigger.to_json()),  # a domain this site lacks
        (SimFabric(1, seed=3), other_seed.to_json()),
        (SimFabric(1, seed=3), "{}"),
        (SimFabric(1, seed=3), "not json"),
    ):
        before = fabric.to_json()
        with pytest.raises(ValueError):
            fabric.restore(text)
        assert fabric.to_json() == before


def test_a_snapshot_that_puts_a_gpu_in_two_partitions_is_refused() -> None:
    import json

    fabric = SimFabric(1, seed=2)
    uids = _drained(fabric, "SIM-0001", 2)
    fabric.create_partition("SIM-0001", "a", uids)
    data = json.loads(fabric.to_json())
    partitions = next(iter(data["domains"].values()))["partitions"]
    partitions[1]["gpus"].append(partitions[0]["gpus"][0])
    with pytest.raises(ValueError, match="two partitions"):
        SimFabric.from_json(json.dumps(data))
