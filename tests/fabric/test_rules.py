"""Each hardware rule, through the backend protocol, refused with the controller's return code and
classified the same way by the NMX-C client (over real gRPC) and by the in-process backend."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from nico.fabric.backend import (
    DEFAULT_PARTITION_ID,
    DomainTarget,
    FabricBackend,
    FabricBusy,
    FabricError,
    FabricPartition,
    FabricRejected,
    FabricTimeout,
    PartitionNotFound,
)
from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.fabric.return_codes import code_from_name, code_name, return_code_error
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator


@dataclass
class Site:
    backend: FabricBackend
    fabric: SimFabric
    target: Callable[[str], DomainTarget]

    async def default(self, serial: str) -> FabricPartition:
        return next(p for p in await self.backend.list_partitions(self.target(serial)) if p.is_default)

    async def drain(self, serial: str, count: int) -> frozenset[int]:
        """Take ``count`` GPUs out of the rack's default partition."""
        default = await self.default(serial)
        taken = frozenset(sorted(default.gpu_uids)[:count])
        await self.backend.remove_gpus(self.target(serial), default, taken)
        return taken


@pytest.fixture(params=["nmxc", "inprocess"])
def site(request: pytest.FixtureRequest, fabric: SimFabric) -> Site:
    if request.param == "nmxc":
        sim: NmxcSimulator = request.getfixturevalue("nmxc_sim")
        return Site(request.getfixturevalue("nmxc"), fabric, sim.target)
    return Site(
        request.getfixturevalue("inprocess"),
        fabric,
        lambda serial: DomainTarget(domain_uuid=fabric.domain(serial).domain_uuid),
    )


async def _gpu_in_default(site: Site) -> Awaitable[object]:
    default = await site.default("SIM-0001")
    return site.backend.create_partition(
        site.target("SIM-0001"), "p", frozenset(sorted(default.gpu_uids)[:1])
    )


async def _gpu_of_another_domain(site: Site) -> Awaitable[object]:
    mine, theirs = await site.drain("SIM-0001", 1), await site.drain("SIM-0002", 1)
    return site.backend.create_partition(site.target("SIM-0001"), "p", mine | theirs)


async def _unknown_gpu(site: Site) -> Awaitable[object]:
    mine = await site.drain("SIM-0001", 1)
    return site.backend.create_partition(site.target("SIM-0001"), "p", mine | {2**64 - 1})


async def _name_taken(site: Site) -> Awaitable[object]:
    free = sorted(await site.drain("SIM-0001", 2))
    await site.backend.create_partition(site.target("SIM-0001"), "p", frozenset(free[:1]))
    return site.backend.create_partition(site.target("SIM-0001"), "p", frozenset(free[1:]))


async def _too_many_partitions(site: Site) -> Awaitable[object]:
    free = sorted(await site.drain("SIM-0001", 4))  # the cap is 4, the default partition counted
    for i in range(3):
        await site.backend.create_partition(site.target("SIM-0001"), f"p{i}", frozenset(free[i : i + 1]))
    return site.backend.create_partition(site.target("SIM-0001"), "p3", frozenset(free[3:]))


async def _delete_unknown(site: Site) -> Awaitable[object]:
    ghost = FabricPartition(nmx_partition_id=42, ref="42", name="", gpu_uids=frozenset())
    return site.backend.delete_partition(site.target("SIM-0001"), ghost)


async def _add_to_unknown(site: Site) -> Awaitable[object]:
    free = await site.drain("SIM-0001", 1)
    ghost = FabricPartition(nmx_partition_id=42, ref="42", name="", gpu_uids=frozenset())
    return site.backend.add_gpus(site.target("SIM-0001"), ghost, free)


async def _add_gpu_in_use(site: Site) -> Awaitable[object]:
    free = sorted(await site.drain("SIM-0001", 1))
    made = await site.backend.create_partition(site.target("SIM-0001"), "p", frozenset(free))
    default = await site.default("SIM-0001")
    return site.backend.add_gpus(site.target("SIM-0001"), made, frozenset(sorted(default.gpu_uids)[:1]))


async def _remove_gpu_not_in_partition(site: Site) -> Awaitable[object]:
    free = sorted(await site.drain("SIM-0001", 2))
    made = await site.backend.create_partition(site.target("SIM-0001"), "p", frozenset(free[:1]))
    return site.backend.remove_gpus(site.target("SIM-0001"), made, frozenset(free[1:]))


RULES = [
    (_gpu_in_default, FabricRejected, "NMX_ST_RESOURCE_IN_USE"),
    (_gpu_of_another_domain, FabricRejected, "NMX_ST_BADPARAM"),
    (_unknown_gpu, FabricRejected, "NMX_ST_BADPARAM"),
    (_name_taken, FabricRejected, "NMX_ST_PARTITION_NAME_IN_USE"),
    (_too_many_partitions, FabricRejected, "NMX_ST_RESOURCE_EXHAUSTED"),
    (_delete_unknown, PartitionNotFound, "NMX_ST_PARTITION_ID_NOT_IN_USE"),
    (_add_to_unknown, PartitionNotFound, "NMX_ST_PARTITION_ID_NOT_IN_USE"),
    (_add_gpu_in_use, FabricRejected, "NMX_ST_RESOURCE_IN_USE"),
    (_remove_gpu_not_in_partition, FabricRejected, "NMX_ST_RESOURCE_NOT_IN_USE"),
]


@pytest.mark.parametrize(("arrange", "error", "code"), RULES, ids=[r[0].__name__.strip("_") for r in RULES])
async def test_rule_is_refused_with_its_return_code(
    site: Site,
    arrange: Callable[[Site], Awaitable[Awaitable[object]]],
    error: type[FabricError],
    code: str,
) -> None:
    call = await arrange(site)
    before = {d: site.fabric.members(d) for d in site.fabric.domains}
    with pytest.raises(FabricError) as caught:
        await call
    assert type(caught.value) is error
    assert caught.value.code == code
    assert not caught.value.retryable
    assert {d: site.fabric.members(d) for d in site.fabric.domains} == before


async def test_partition_lifecycle(site: Site) -> None:
    target = site.target("SIM-0001")
    free = sorted(await site.drain("SIM-0001", 3))
    made = await site.backend.create_partition(target, "job", frozenset(free[:2]))
    assert (made.name, made.gpu_uids, made.nmx_partition_id) == ("job", frozenset(free[:2]), 1)
    await site.backend.add_gpus(target, made, frozenset(free[2:]))
    await site.backend.remove_gpus(target, made, frozenset(free[:1]))
    listed = {p.nmx_partition_id: p for p in await site.backend.list_partitions(target)}
    assert listed[1].gpu_uids == frozenset(free[1:]) == site.fabric.members("SIM-0001")[1]
    assert listed[DEFAULT_PARTITION_ID].gpu_uids == frozenset(site.fabric.domain("SIM-0001").gpus) - set(free)
    await site.backend.delete_partition(target, listed[1])
    assert 1 not in site.fabric.members("SIM-0001")
    assert all(site.fabric.partition_of(uid) is None for uid in free)
    # Other domains are untouched.
    assert site.fabric.members("SIM-0002") == {
        DEFAULT_PARTITION_ID: frozenset(site.fabric.domain("SIM-0002").gpus)
    }


async def test_gpus_as_the_fabric_reports_them(site: Site) -> None:
    target = site.target("SIM-0003")  # the NVL36x2 pair: one domain, two chassis serials
    taken = await site.drain("SIM-0003", 1)
    degraded = sorted(site.fabric.domain("SIM-0003").gpus)[-1]
    site.fabric.set_gpu_health(degraded, "DEGRADED")
    gpus = {g.gpu_uid: g for g in await site.backend.list_gpus(target)}
    sim = site.fabric.domain("SIM-0003").gpus
    assert gpus.keys() == sim.keys()
    assert any(uid >= 2**63 for uid in gpus)
    for uid, gpu in gpus.items():
        expected = sim[uid]
        assert (gpu.device_id, gpu.chassis_serial, gpu.tray_index, gpu.slot_id, gpu.domain_uuid) == (
            expected.device_id,
            expected.chassis_serial,
            expected.tray_index,
            expected.slot_id,
            expected.domain_uuid,
        )
        assert gpu.nmx_partition_id == (None if uid in taken else DEFAULT_PARTITION_ID)
        assert gpu.health == ("DEGRADED" if uid == degraded else "HEALTHY")
    assert {g.chassis_serial for g in gpus.values()} == {"SIM-0003", "SIM-0004"}


async def test_hello_names_the_domain(site: Site) -> None:
    for serial in ("SIM-0001", "SIM-0004"):
        hello = await site.backend.hello(site.target(serial))
        assert hello.domain_uuid == site.fabric.domain(serial).domain_uuid
        assert hello.app_version == "nico-sim"


RETRYABLE_TIMEOUT = {"TIMEOUT"}
RETRYABLE_BUSY = {
    "GENERIC_ERROR",
    "UNINITIALIZED",
    "NOT_CONFIGURED",
    "CONNECTION_NOT_VALID",
    "NVLINK_ERROR",
    "RESOURCE_NOT_READY",
    "NOT_READY",
    "NMX_CONTROLLER_INTERNAL_ERROR",
    "NMX_CONTROLLER_DB_ERROR",
    "NMX_CONTROLLER_DB_CORRUPTION",
    "NMX_CONTROLLER_INVALID_CONFIG_FILE",
}
NOT_FOUND = {"PARTITION_ID_NOT_IN_USE", "PARTITION_NAME_NOT_IN_USE"}


def test_every_return_code_is_classified() -> None:
    for number in pb.StReturnCode.values():
        if number == pb.NMX_ST_SUCCESS:
            continue
        name = code_name(number)
        short = name.removeprefix("NMX_ST_")
        error = return_code_error(number, "call")
        assert error.code == name and code_from_name(name) == number
        if short in RETRYABLE_TIMEOUT:
            assert type(error) is FabricTimeout and error.retryable
        elif short in RETRYABLE_BUSY:
            assert type(error) is FabricBusy and error.retryable
        elif short in NOT_FOUND:
            assert type(error) is PartitionNotFound and not error.retryable
        else:
            assert type(error) is FabricRejected and not error.retryable, name
    unknown = return_code_error(99, "call")
    assert (type(unknown), unknown.code) == (FabricRejected, "NMX_ST_99")
    assert code_from_name("HTTP_404") is None
