"""The NMX-M client against the simulated NMX-M over real HTTP on 127.0.0.1: models and paths,
domain attribution, asynchronous operations (failed, cancelled, pending, late), and the fault knobs."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
import pytest

from nico.config import NvLinkConfig
from nico.fabric.backend import (
    DEFAULT_PARTITION_ID,
    AsyncOperations,
    DomainHealth,
    DomainTarget,
    EndpointNotConfigured,
    FabricBackend,
    FabricBusy,
    FabricError,
    FabricGpu,
    FabricPartition,
    FabricRejected,
    FabricTimeout,
    FabricUnavailable,
    OperationPending,
    PartitionNotFound,
)
from nico.fabric.nmxm.client import NmxmBackend
from nico.sim.fabric import SimFabric
from nico.sim.nmxm_app import NmxmSimulator
from tests.fabric.conftest import CALL_TIMEOUT, PASSWORD, SHORT, USER
from tests.support.waiting import wait_for


def target(fabric: SimFabric, serial: str) -> DomainTarget:
    return DomainTarget(domain_uuid=fabric.domain(serial).domain_uuid)


def client(sim: NmxmSimulator, **overrides: float) -> NmxmBackend:
    options = {"operation_timeout": CALL_TIMEOUT, "call_timeout": CALL_TIMEOUT, "poll_interval": 0.01}
    options.update(overrides)
    return NmxmBackend(sim.url, USER, PASSWORD, **options)


async def default_of(nmxm: NmxmBackend, where: DomainTarget) -> FabricPartition:
    return next(p for p in await nmxm.list_partitions(where) if p.is_default)


async def drain(nmxm: NmxmBackend, where: DomainTarget, count: int) -> frozenset[int]:
    default = await default_of(nmxm, where)
    taken = frozenset(sorted(default.gpu_uids)[:count])
    await nmxm.remove_gpus(where, default, taken)
    return taken


async def test_partitions_belong_to_the_domain_of_their_members(fabric: SimFabric, nmxm: NmxmBackend) -> None:
    assert isinstance(nmxm, FabricBackend) and isinstance(nmxm, AsyncOperations)
    for serial in ("SIM-0001", "SIM-0003"):
        listed = await nmxm.list_partitions(target(fabric, serial))
        sim_default = fabric.partitions(serial)[0]
        assert [(p.nmx_partition_id, p.ref, p.name, p.gpu_uids) for p in listed] == [
            (
                DEFAULT_PARTITION_ID,
                sim_default.entity_id,
                "Default Partition",
                frozenset(sim_default.gpu_uids),
            )
        ]
    assert (await nmxm.hello(target(fabric, "SIM-0002"))).domain_uuid == fabric.domain("SIM-0002").domain_uuid


async def test_partition_lifecycle(fabric: SimFabric, nmxm: NmxmBackend, nmxm_sim: NmxmSimulator) -> None:
    here = target(fabric, "SIM-0001")
    free = sorted(await drain(nmxm, here, 3))
    made = await nmxm.create_partition(here, "job", frozenset(free[:2]))
    assert (made.nmx_partition_id, made.name, made.gpu_uids) == (1, "job", frozenset(free[:2]))
    assert made.ref == fabric.partitions("SIM-0001")[0].entity_id
    await nmxm.add_gpus(here, made, frozenset(free[2:]))
    # Updates carry the whole member list, not the difference.
    entity = {uid: g.entity_id for uid, g in fabric.domain("SIM-0001").gpus.items()}
    last = list(nmxm_sim.state.operations.values())[-1]
    assert last.method == "put" and last.body is not None
    assert sorted(last.body["Members"]) == sorted(entity[u] for u in free)
    assert fabric.members("SIM-0001")[1] == frozenset(free)
    grown = next(p for p in await nmxm.list_partitions(here) if p.nmx_partition_id == 1)
    await nmxm.remove_gpus(here, grown, frozenset(free[:1]))
    assert fabric.members("SIM-0001")[1] == frozenset(free[1:])
    await nmxm.delete_partition(here, grown)
    assert [p.nmx_partition_id for p in await nmxm.list_partitions(here)] == [DEFAULT_PARTITION_ID]
    assert fabric.members("SIM-0002") == {DEFAULT_PARTITION_ID: frozenset(fabric.domain("SIM-0002").gpus)}


async def test_an_emptied_partition_stays_attributed_within_the_process(
    fabric: SimFabric, nmxm: NmxmBackend, nmxm_sim: NmxmSimulator
) -> None:
    here = target(fabric, "SIM-0002")
    everything = await drain(nmxm, here, 72)
    assert len(everything) == 72
    listed = await nmxm.list_partitions(here)
    assert [(p.nmx_partition_id, p.gpu_uids) for p in listed] == [(DEFAULT_PARTITION_ID, frozenset())]
    # The documented limit: a process that never saw it with members cannot place it.
    fresh = client(nmxm_sim)
    try:
        assert await fresh.list_partitions(here) == []
    finally:
        await fresh.close()


async def test_gpus_with_their_locations(fabric: SimFabric, nmxm: NmxmBackend) -> None:
    here = target(fabric, "SIM-0003")
    taken = await drain(nmxm, here, 2)
    gpus = {g.gpu_uid: g for g in await nmxm.list_gpus(here)}
    sim = fabric.domain("SIM-0003").gpus
    assert gpus.keys() == sim.keys() and any(uid >= 2**63 for uid in gpus)
    for uid, gpu in gpus.items():
        s = sim[uid]
        assert (gpu.device_id, gpu.chassis_serial, gpu.tray_index, gpu.slot_id, gpu.health) == (
            s.device_id,
            s.chassis_serial,
            s.tray_index,
            s.slot_id,
            "HEALTHY",
        )
        assert gpu.nmx_partition_id == (None if uid in taken else DEFAULT_PARTITION_ID)


async def test_a_fresh_client_maps_gpu_uids_without_listing_first(
    fabric: SimFabric, nmxm: NmxmBackend, nmxm_sim: NmxmSimulator
) -> None:
    here = target(fabric, "SIM-0001")
    free = await drain(nmxm, here, 1)
    fresh = client(nmxm_sim)
    try:
        made = await fresh.create_partition(here, "first-call", free)
        assert made.gpu_uids == free
    finally:
        await fresh.close()


async def test_wrong_credentials_are_refused(fabric: SimFabric, nmxm_sim: NmxmSimulator) -> None:
    intruder = NmxmBackend(nmxm_sim.url, USER, "wrong", call_timeout=CALL_TIMEOUT)
    try:
        with pytest.raises(FabricRejected) as caught:
            await intruder.list_partitions(target(fabric, "SIM-0001"))
        assert caught.value.code == "HTTP_401" and not caught.value.retryable
    finally:
        await intruder.close()


async def test_failed_operations_are_errors_classified_by_their_result(
    fabric: SimFabric, nmxm: NmxmBackend
) -> None:
    here = target(fabric, "SIM-0001")
    free = sorted(await drain(nmxm, here, 4))
    default = await default_of(nmxm, here)
    before = fabric.members("SIM-0001")

    async def refused(call: object) -> FabricError:
        with pytest.raises(FabricError) as caught:
            await call  # type: ignore[misc]
        assert fabric.members("SIM-0001") == before
        return caught.value

    in_use = await refused(nmxm.create_partition(here, "p", frozenset(sorted(default.gpu_uids)[:1])))
    assert (type(in_use), in_use.code) == (FabricRejected, "NMX_ST_RESOURCE_IN_USE")
    for i in range(3):
        await nmxm.create_partition(here, f"p{i}", frozenset(free[i : i + 1]))
    before = fabric.members("SIM-0001")
    taken = await refused(nmxm.create_partition(here, "p0", frozenset(free[3:])))
    assert (type(taken), taken.code) == (FabricRejected, "NMX_ST_PARTITION_NAME_IN_USE")
    full = await refused(nmxm.create_partition(here, "p3", frozenset(free[3:])))
    assert (type(full), full.code) == (FabricRejected, "NMX_ST_RESOURCE_EXHAUSTED")
    unknown = await refused(nmxm.create_partition(here, "p4", frozenset({12345})))
    assert unknown.code == "UNKNOWN_GPU"
    theirs = sorted(fabric.domain("SIM-0002").gpus)[:1]
    foreign = await refused(nmxm.create_partition(here, "p4", frozenset(theirs)))
    assert foreign.code == "GPU_NOT_IN_DOMAIN"
    ghost = FabricPartition(nmx_partition_id=9, ref="0" * 24, name="", gpu_uids=frozenset())
    gone = await refused(nmxm.delete_partition(here, ghost))
    assert isinstance(gone, PartitionNotFound) and gone.code == "NMX_ST_PARTITION_ID_NOT_IN_USE"


async def test_a_cancelled_operation_is_an_error(
    fabric: SimFabric, nmxm: NmxmBackend, nmxm_sim: NmxmSimulator
) -> None:
    here = target(fabric, "SIM-0001")
    free = await drain(nmxm, here, 1)
    fabric.set_faults("SIM-0001", never_complete=True)
    creating = asyncio.create_task(nmxm.create_partition(here, "doomed", free))
    await wait_for(lambda: any(op.status == "in-progress" for op in nmxm_sim.state.operations.values()))
    op = next(op for op in nmxm_sim.state.operations.values() if op.status == "in-progress")
    async with httpx.AsyncClient(base_url=nmxm_sim.url, auth=(USER, PASSWORD)) as raw:
        assert (await raw.delete(f"/nmx/v1/operations/{op.id}")).status_code == 202
    with pytest.raises(FabricBusy) as caught:
        await creating
    assert caught.value.code == "OPERATION_CANCELLED" and caught.value.retryable
    assert await nmxm.operation_state(op.id) == "cancelled"
    assert [p.name for p in fabric.partitions("SIM-0001")] == ["Default Partition"]


async def test_an_operation_that_never_completes_stays_tracked(
    fabric: SimFabric, nmxm: NmxmBackend, nmxm_sim: NmxmSimulator
) -> None:
    here = target(fabric, "SIM-0001")
    free = await drain(nmxm, here, 2)
    fabric.set_faults("SIM-0001", never_complete=True)
    impatient = client(nmxm_sim, operation_timeout=SHORT)
    try:
        with pytest.raises(OperationPending) as caught:
            await impatient.create_partition(here, "slow", free)
        pending = caught.value
        assert pending.retryable and pending.operation_id in nmxm_sim.state.operations
        assert await impatient.operation_state(pending.operation_id) == "in-progress"
        assert [p.name for p in fabric.partitions("SIM-0001")] == ["Default Partition"]
        fabric.set_faults("SIM-0001", never_complete=False)
        await wait_for(lambda: _state_is(impatient, pending.operation_id, "completed"), what="completion")
        adopted = [p for p in await impatient.list_partitions(here) if p.name == "slow"]
        assert [p.gpu_uids for p in adopted] == [free]
    finally:
        await impatient.close()


async def _state_is(nmxm: NmxmBackend, operation_id: str, state: str) -> bool:
    return await nmxm.operation_state(operation_id) == state


async def test_late_completion_leaves_no_ghost(
    fabric: SimFabric, nmxm: NmxmBackend, nmxm_sim: NmxmSimulator
) -> None:
    here = target(fabric, "SIM-0001")
    free = await drain(nmxm, here, 2)
    fabric.set_faults("SIM-0001", operation_delay=SHORT * 2)  # longer than the client waits
    impatient = client(nmxm_sim, operation_timeout=SHORT)
    try:
        with pytest.raises(OperationPending) as caught:
            await impatient.create_partition(here, "late", free)
        await wait_for(
            lambda: _state_is(impatient, caught.value.operation_id, "completed"), what="late completion"
        )
        named = [p for p in await impatient.list_partitions(here) if p.name == "late"]
        assert [p.gpu_uids for p in named] == [free]
        # Issuing the create again instead of adopting is refused: there is exactly one.
        with pytest.raises(FabricRejected) as again:
            await nmxm.create_partition(here, "late", free)
        assert again.value.code == "NMX_ST_PARTITION_NAME_IN_USE"
        assert [p.name for p in fabric.partitions("SIM-0001")].count("late") == 1
    finally:
        await impatient.close()


async def test_poll_failures_do_not_lose_the_operation(
    fabric: SimFabric, nmxm: NmxmBackend, nmxm_sim: NmxmSimulator
) -> None:
    here = target(fabric, "SIM-0001")
    free = await drain(nmxm, here, 1)
    fabric.set_faults("SIM-0001", never_complete=True)
    impatient = client(nmxm_sim, operation_timeout=SHORT * 2)
    try:
        creating = asyncio.create_task(impatient.create_partition(here, "kept", free))
        await wait_for(lambda: len(nmxm_sim.state.operations) == 2, what="the create being accepted")
        fabric.set_site_faults(down=True)
        with pytest.raises(OperationPending) as caught:
            await creating
        assert caught.value.operation_id == list(nmxm_sim.state.operations)[-1]
        fabric.set_site_faults(down=False)
        fabric.set_faults("SIM-0001", never_complete=False)
        assert await impatient.operation_state(caught.value.operation_id) == "completed"
    finally:
        await impatient.close()


async def test_an_unknown_operation(nmxm: NmxmBackend) -> None:
    assert await nmxm.operation_state("f" * 24) == "unknown"


async def test_site_fault_knobs(fabric: SimFabric, nmxm_sim: NmxmSimulator) -> None:
    here = target(fabric, "SIM-0001")
    nmxm = client(nmxm_sim, call_timeout=SHORT)
    try:
        fabric.set_site_faults(down=True)
        with pytest.raises(FabricUnavailable) as down:
            await nmxm.list_partitions(here)
        assert down.value.code == "HTTP_503" and down.value.retryable
        fabric.set_site_faults(down=False, hang=True)
        with pytest.raises(FabricTimeout) as hung:
            await nmxm.list_partitions(here)
        assert hung.value.retryable
        fabric.set_site_faults(hang=False, latency=5.0)
        with pytest.raises(FabricTimeout):
            await nmxm.list_partitions(here)
        # The rest is about answers, not deadlines: a client with the usual deadline, so a slow
        # moment of a busy machine is not taken for a timeout.
        await nmxm.close()
        nmxm = client(nmxm_sim)
        fabric.set_site_faults(latency=0.01)
        assert await nmxm.list_partitions(here)
        fabric.set_site_faults(latency=0.0, error_rate=1.0)
        with pytest.raises(FabricBusy) as injected:
            await nmxm.list_gpus(here)
        assert injected.value.code == "NMX_ST_NOT_READY" and injected.value.retryable
        fabric.set_site_faults(error_rate=0.5)
        outcomes = set()
        for _ in range(40):
            try:
                await nmxm.list_gpus(here)
                outcomes.add("ok")
            except FabricBusy as exc:
                outcomes.add(str(exc.code))
        assert outcomes == {"ok", "NMX_ST_NOT_READY"}
    finally:
        await nmxm.close()


async def test_a_stopped_nmx_m_refuses_then_comes_back(
    fabric: SimFabric, nmxm: NmxmBackend, nmxm_sim: NmxmSimulator
) -> None:
    here = target(fabric, "SIM-0001")
    url = nmxm_sim.url
    await nmxm_sim.stop()
    with pytest.raises(FabricUnavailable) as caught:
        await nmxm.list_partitions(here)
    assert caught.value.code == "UNAVAILABLE"
    await nmxm_sim.start()
    assert nmxm_sim.url == url
    assert await nmxm.list_partitions(here)


async def test_stopping_ends_hung_requests(fabric: SimFabric) -> None:
    sim = await NmxmSimulator(fabric, username=USER, password=PASSWORD).start()
    nmxm = client(sim)
    try:
        fabric.set_site_faults(hang=True)
        listing = asyncio.create_task(nmxm.list_partitions(target(fabric, "SIM-0001")))
        await wait_for(lambda: fabric.site_gate.held == 1, what="the request being held")
        await asyncio.wait_for(sim.stop(), CALL_TIMEOUT)
        with pytest.raises(FabricError):
            await listing
    finally:
        await nmxm.close()


def test_built_from_the_configuration() -> None:
    with pytest.raises(EndpointNotConfigured):
        NmxmBackend.from_config(NvLinkConfig(), USER, PASSWORD)


async def test_from_config_talks_to_the_simulator(fabric: SimFabric, nmxm_sim: NmxmSimulator) -> None:
    config = NvLinkConfig(nmx_m_endpoint=nmxm_sim.url, nmx_m_operation_timeout="2s", allow_insecure=True)
    nmxm = NmxmBackend.from_config(config, USER, PASSWORD)
    try:
        assert await nmxm.list_partitions(target(fabric, "SIM-0001"))
    finally:
        await nmxm.close()


async def test_a_reply_of_the_wrong_shape_is_an_error_not_a_crash() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/nmx/v1/gpus":
            return httpx.Response(200, json=[{"ID": "a"}])  # no DeviceUID
        return httpx.Response(200, json={"not": "a list"})

    garbled = NmxmBackend("http://nmx-m.invalid", USER, PASSWORD, transport=httpx.MockTransport(answer))
    try:
        somewhere = DomainTarget(domain_uuid=SimFabric(1).domain("SIM-0001").domain_uuid)
        for call in (garbled.list_partitions(somewhere), garbled.list_gpus(somewhere)):
            with pytest.raises(FabricBusy) as caught:
                await call
            assert caught.value.code == "BAD_RESPONSE"
    finally:
        await garbled.close()


class CountingTransport(httpx.AsyncBaseTransport):
    """Real HTTP to the simulator, counting the requests by path."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.paths: Counter[str] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths[request.url.path.removeprefix("/nmx/v1")] += 1
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_health_reads_of_many_domains_share_the_site_listings_and_a_read_back_never_does(
    fabric: SimFabric, nmxm_sim: NmxmSimulator
) -> None:
    counting = CountingTransport()
    nmxm = NmxmBackend(nmxm_sim.url, USER, PASSWORD, call_timeout=CALL_TIMEOUT, transport=counting)
    domains = [target(fabric, serial) for serial in ("SIM-0001", "SIM-0002", "SIM-0003")]
    try:

        async def health(where: DomainTarget) -> tuple[list[FabricGpu], DomainHealth]:
            return await nmxm.health_gpus(where), await nmxm.domain_health(where)

        found = await asyncio.gather(*(health(where) for where in domains))
        for where, (gpus, summary) in zip(domains, found, strict=True):
            assert {g.domain_uuid for g in gpus} == {where.domain_uuid} and len(gpus) == 72
            assert summary.gpus == {"HEALTHY": 72} and sum(summary.partitions.values()) == 1
        # Three domains' health, one listing of each kind for the site.
        assert counting.paths == Counter({"/gpus": 1, "/compute-nodes": 1, "/partitions": 1})
        taken = await drain(nmxm, domains[0], 2)  # lists the partitions afresh, then changes one
        assert counting.paths["/partitions"] == 2
        gpus = {g.gpu_uid: g for g in await nmxm.list_gpus(domains[0])}  # lists now, not shared
        assert counting.paths["/gpus"] == 2 and all(gpus[uid].nmx_partition_id is None for uid in taken)
    finally:
        await nmxm.close()
