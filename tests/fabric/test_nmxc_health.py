"""Health, limits, multicast budgets, notifications and the 2026 RPCs, over real gRPC on loopback
(and the in-process backend where it must agree)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio

from nico.fabric.backend import (
    DEFAULT_PARTITION_ID,
    FabricBackend,
    FabricHealth,
    FabricRejected,
    FabricTopology,
    PartitionCounts,
    PartitionEvent,
    stop_watching,
    watch_events,
)
from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.fabric.nmxc import nmx_c_pb2_grpc as pb_grpc
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxm.client import NmxmBackend
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend
from nico.sim.nmxc_server import NmxcSimulator
from tests.fabric.conftest import CALL_TIMEOUT
from tests.support.waiting import wait_for


@pytest_asyncio.fixture
async def stub(nmxc_sim: NmxcSimulator) -> AsyncIterator[pb_grpc.NMX_ControllerStub]:
    """A raw NVIDIA-style stub on SIM-0001's endpoint, for the RPCs the client does not wrap."""
    channel = grpc.aio.insecure_channel(
        nmxc_sim.url(nmxc_sim.fabric.domain("SIM-0001").domain_uuid).removeprefix("http://")
    )
    yield pb_grpc.NMX_ControllerStub(channel)  # type: ignore[no-untyped-call]
    await channel.close()


async def _free_gpus(backend: FabricBackend, fabric: SimFabric, serial: str, count: int) -> frozenset[int]:
    """Take ``count`` GPUs out of the default partition and return them."""
    target_uuid = fabric.domain(serial).domain_uuid
    uids = frozenset(sorted(fabric.members(serial)[DEFAULT_PARTITION_ID])[:count])
    fabric.remove_gpus(target_uuid, DEFAULT_PARTITION_ID, sorted(uids))
    return uids


# ------------------------------------------------------------------------------------------- health


@pytest.mark.parametrize("which", ["nmxc", "inprocess"])
async def test_health_of_gpus_nodes_switches_and_partitions(
    fabric: SimFabric, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator, inprocess: InProcessBackend, which: str
) -> None:
    backend = nmxc if which == "nmxc" else inprocess
    assert isinstance(backend, FabricHealth) and isinstance(backend, FabricTopology)
    target = nmxc_sim.target("SIM-0001")
    healthy = await backend.domain_health(target)
    assert healthy.healthy
    assert healthy.gpus == {"HEALTHY": 72}
    assert healthy.compute_nodes == {"HEALTHY": 18}
    assert healthy.switch_nodes == {"HEALTHY": 9}
    assert healthy.partitions == {"HEALTHY": 1}
    assert healthy.available_multicast_groups == 1024

    uids = await _free_gpus(backend, fabric, "SIM-0001", 4)
    made = await backend.create_partition(target, "sick", uids)
    sick = sorted(uids)[0]
    fabric.set_gpu_health(sick, "NO_NVLINK")
    gpu = fabric.gpu(sick)
    fabric.set_node_health("SIM-0001", "SIM-0001", 5, "UNHEALTHY")
    fabric.set_switch_node_health("SIM-0001", "SIM-0001", 2, "MISSING_NVLINK")

    assert {g.gpu_uid: g.health for g in await backend.list_gpus(target)}[sick] == "NO_NVLINK"
    nodes = {(n.chassis_serial, n.tray_index): n for n in await backend.list_compute_nodes(target)}
    assert nodes[("SIM-0001", gpu.tray_index)].health == "DEGRADED"  # derived from its GPU
    assert nodes[("SIM-0001", 5)].health == "UNHEALTHY"  # the knob
    assert made.nmx_partition_id in nodes[("SIM-0001", gpu.tray_index)].partition_ids
    switches = {n.tray_index: n for n in await backend.list_switch_nodes(target)}
    assert switches[2].health == "MISSING_NVLINK" and switches[2].num_switches == 2
    partitions = {p.nmx_partition_id: p for p in await backend.list_partitions(target)}
    assert partitions[made.nmx_partition_id].health == "DEGRADED"

    fabric.set_partition_health("SIM-0001", made.nmx_partition_id, "UNHEALTHY")
    summary = await backend.domain_health(target)
    assert not summary.healthy
    assert summary.gpus == {"HEALTHY": 71, "NO_NVLINK": 1}
    assert summary.compute_nodes["UNHEALTHY"] == 1 and summary.compute_nodes["DEGRADED"] == 1
    assert summary.switch_nodes == {"HEALTHY": 8, "MISSING_NVLINK": 1}
    assert summary.partitions["UNHEALTHY"] == 1

    fabric.set_partition_health("SIM-0001", made.nmx_partition_id, None)
    fabric.set_gpu_health(sick, "HEALTHY")
    partitions = {p.nmx_partition_id: p for p in await backend.list_partitions(target)}
    # a switch tray missing NVLinks costs every populated partition bandwidth
    assert partitions[made.nmx_partition_id].health == "DEGRADED_BANDWIDTH"


async def test_health_knobs_reject_what_does_not_exist(fabric: SimFabric) -> None:
    with pytest.raises(ValueError):
        fabric.set_node_health("SIM-0001", "SIM-0001", 18, "UNHEALTHY")
    with pytest.raises(ValueError):
        fabric.set_switch_health("SIM-0001", "SIM-0001", 0, 2, "UNHEALTHY")
    with pytest.raises(ValueError):
        fabric.set_partition_health("SIM-0001", 7, "UNHEALTHY")
    with pytest.raises(ValueError):
        fabric.set_node_health("SIM-0001", "SIM-0001", 0, "NO_NVLINK")  # a GPU state, not a node's


# ------------------------------------------------------------------------------------ notifications


@pytest.mark.parametrize("which", ["nmxc", "inprocess"])
async def test_health_init_done_and_topology_notifications_reach_the_caller(
    fabric: SimFabric, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator, inprocess: InProcessBackend, which: str
) -> None:
    backend = nmxc if which == "nmxc" else inprocess
    target = nmxc_sim.target("SIM-0001")
    received: asyncio.Queue[PartitionEvent] = asyncio.Queue()
    task = watch_events(backend, target, received.put_nowait)
    try:
        await wait_for(lambda: fabric.subscriber_count("SIM-0001") == 1, what="subscription")
        fabric.set_gpu_health(next(iter(fabric.domain("SIM-0001").gpus)), "DEGRADED")
        event = await asyncio.wait_for(received.get(), CALL_TIMEOUT)
        assert (event.kind, event.nmx_partition_id, event.domain_uuid) == ("health", None, target.domain_uuid)

        fabric.set_switch_health("SIM-0001", "SIM-0001", 3, 1, "UNHEALTHY")
        assert (await asyncio.wait_for(received.get(), CALL_TIMEOUT)).kind == "health"
        fabric.set_node_health("SIM-0001", "SIM-0001", 3, "UNHEALTHY")
        assert (await asyncio.wait_for(received.get(), CALL_TIMEOUT)).kind == "health"
        fabric.set_partition_health("SIM-0001", DEFAULT_PARTITION_ID, "DEGRADED")
        assert (await asyncio.wait_for(received.get(), CALL_TIMEOUT)).kind == "health"
        # setting a knob to what it already is tells nobody anything
        fabric.set_partition_health("SIM-0001", DEFAULT_PARTITION_ID, "DEGRADED")

        fabric.reinitialize("SIM-0001")
        assert (await asyncio.wait_for(received.get(), CALL_TIMEOUT)).kind == "topology"
        assert (await asyncio.wait_for(received.get(), CALL_TIMEOUT)).kind == "init_done"
        assert received.empty()
        # another domain's health is not this subscriber's business
        fabric.set_gpu_health(next(iter(fabric.domain("SIM-0002").gpus)), "DEGRADED")
        fabric.set_partition_health("SIM-0001", DEFAULT_PARTITION_ID, None)
        assert (await asyncio.wait_for(received.get(), CALL_TIMEOUT)).kind == "health"
        assert received.empty()
    finally:
        await stop_watching(task)
    await wait_for(lambda: fabric.subscriber_count("SIM-0001") == 0, what="unsubscribe")


async def test_watch_events_accepts_an_async_handler(
    fabric: SimFabric, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator
) -> None:
    target = nmxc_sim.target("SIM-0002")
    woken = asyncio.Event()

    async def wake(event: PartitionEvent) -> None:
        if event.kind == "init_done":
            woken.set()

    task = watch_events(nmxc, target, wake)
    try:
        await wait_for(lambda: fabric.subscriber_count("SIM-0002") == 1, what="subscription")
        fabric.reinitialize("SIM-0002")
        await asyncio.wait_for(woken.wait(), CALL_TIMEOUT)
    finally:
        await stop_watching(task)


async def test_subscribe_starts_with_a_subscription_response(
    nmxc_sim: NmxcSimulator, stub: pb_grpc.NMX_ControllerStub
) -> None:
    call = stub.Subscribe(pb.SubscribeRequest(gateway_id="test"))
    try:
        first = await asyncio.wait_for(call.read(), CALL_TIMEOUT)
        assert first.WhichOneof("notification") == "subscription_response"
        assert first.subscription_response.server_header.return_code == pb.NMX_ST_SUCCESS
        nmxc_sim.fabric.set_gpu_health(next(iter(nmxc_sim.fabric.domain("SIM-0001").gpus)), "DEGRADED_BW")
        note = await asyncio.wait_for(call.read(), CALL_TIMEOUT)
        assert note.WhichOneof("notification") == "health_state_changed"
    finally:
        call.cancel()


# ------------------------------------------------------------------------------ multicast budgets


@pytest.mark.parametrize("which", ["nmxc", "inprocess"])
async def test_multicast_limit_and_resiliency_mode_are_sent_and_the_budget_enforced(
    fabric: SimFabric, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator, inprocess: InProcessBackend, which: str
) -> None:
    backend = nmxc if which == "nmxc" else inprocess
    assert isinstance(backend, FabricHealth) and isinstance(backend, FabricTopology)
    target = nmxc_sim.target("SIM-0001")
    limits = await backend.domain_limits(target)
    assert limits.max_multicast_groups == 1024
    assert limits.max_num_partitions == 4 and limits.max_compute_nodes == 18
    assert limits.line_rate_mbps == 200_000

    uids = sorted(await _free_gpus(backend, fabric, "SIM-0001", 12))
    made = await backend.create_partition(
        target, "mc", frozenset(uids[:4]), resiliency_mode="ADAPTIVE_BANDWIDTH", multicast_groups_limit=1000
    )
    stored = fabric.domain("SIM-0001").partitions[made.nmx_partition_id]
    assert (stored.resiliency_mode, stored.multicast_groups_limit) == (
        pb.NMX_RESILIENCY_MODE_ADAPTIVE_BANDWIDTH,
        1000,
    )
    listed = {p.nmx_partition_id: p for p in await backend.list_partitions(target)}[made.nmx_partition_id]
    assert (listed.resiliency_mode, listed.multicast_groups_limit) == ("ADAPTIVE_BANDWIDTH", 1000)

    with pytest.raises(FabricRejected) as over:
        await backend.create_partition(target, "over", frozenset(uids[4:8]), multicast_groups_limit=28)
    assert over.value.code == "NMX_ST_RESOURCE_EXHAUSTED"
    with pytest.raises(FabricRejected) as odd:
        await backend.create_partition(target, "odd", frozenset(uids[4:8]), multicast_groups_limit=6)
    assert odd.value.code == "NMX_ST_BADPARAM"
    assert len(fabric.partitions("SIM-0001")) == 2  # neither refusal created anything

    fits = await backend.create_partition(target, "fits", frozenset(uids[4:8]), multicast_groups_limit=24)
    assert (await backend.domain_health(target)).available_multicast_groups == 0
    # no limit asked: the controller's default, nothing taken from the budget
    plain = await backend.create_partition(target, "plain", frozenset(uids[8:]))
    assert fabric.domain("SIM-0001").partitions[plain.nmx_partition_id].multicast_groups_limit == 0
    await backend.delete_partition(target, fits)
    assert (await backend.domain_health(target)).available_multicast_groups == 24


async def test_the_budget_is_per_domain(
    fabric: SimFabric, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator
) -> None:
    one, two = nmxc_sim.target("SIM-0001"), nmxc_sim.target("SIM-0002")
    await nmxc.create_partition(
        one, "a", await _free_gpus(nmxc, fabric, "SIM-0001", 1), multicast_groups_limit=1024
    )
    await nmxc.create_partition(
        two, "b", await _free_gpus(nmxc, fabric, "SIM-0002", 1), multicast_groups_limit=1024
    )


async def test_nmxm_refuses_attributes_it_cannot_send(nmxm: NmxmBackend, fabric: SimFabric) -> None:
    from nico.fabric.backend import DomainTarget

    target = DomainTarget(fabric.domain("SIM-0001").domain_uuid)
    uids = await _free_gpus(nmxm, fabric, "SIM-0001", 1)
    with pytest.raises(FabricRejected) as refused:
        await nmxm.create_partition(target, "mc", uids, multicast_groups_limit=16)
    assert refused.value.code == "NOT_SUPPORTED"
    made = await nmxm.create_partition(target, "plain", uids)
    fabric.set_partition_health("SIM-0001", made.nmx_partition_id, "DEGRADED_BANDWIDTH")
    listed = {p.nmx_partition_id: p for p in await nmxm.list_partitions(target)}
    assert listed[made.nmx_partition_id].health == "DEGRADED_BANDWIDTH"


async def test_nmxm_health_fields(nmxm: NmxmBackend, fabric: SimFabric) -> None:
    from nico.fabric.backend import DomainTarget

    assert isinstance(nmxm, FabricHealth) and not isinstance(nmxm, FabricTopology)
    target = DomainTarget(fabric.domain("SIM-0002").domain_uuid)
    sick = sorted(fabric.domain("SIM-0002").gpus)[0]
    fabric.set_gpu_health(sick, "DEGRADED")
    fabric.set_node_health("SIM-0002", "SIM-0002", 9, "UNHEALTHY")
    nodes = await nmxm.list_compute_nodes(target)
    assert len(nodes) == 18 and all(n.partition_ids == {DEFAULT_PARTITION_ID} for n in nodes)
    assert {n.tray_index: n.health for n in nodes}[9] == "UNHEALTHY"
    summary = await nmxm.domain_health(target)
    assert summary.gpus == {"DEGRADED": 1, "HEALTHY": 71}
    assert summary.compute_nodes == {"DEGRADED": 1, "HEALTHY": 16, "UNHEALTHY": 1}
    assert summary.partitions == {"DEGRADED": 1}
    assert summary.switch_nodes == {} and not summary.healthy


# ----------------------------------------------------------------------------- cheap partition reads


@pytest.mark.parametrize("which", ["nmxc", "inprocess"])
async def test_partition_count_and_sizes_agree_with_the_full_list(
    fabric: SimFabric, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator, inprocess: InProcessBackend, which: str
) -> None:
    backend = nmxc if which == "nmxc" else inprocess
    assert isinstance(backend, PartitionCounts)
    target = nmxc_sim.target("SIM-0003")  # the NVL36x2 pair
    uids = sorted(await _free_gpus(backend, fabric, "SIM-0003", 6))
    await backend.create_partition(target, "p1", frozenset(uids[:2]))
    await backend.create_partition(target, "p2", frozenset(uids[2:]))
    full = await backend.list_partitions(target)
    assert await backend.partition_count(target) == len(full) == 3
    assert await backend.partition_sizes(target) == {p.nmx_partition_id: len(p.gpu_uids) for p in full}


# ------------------------------------------------------------------------- the other 2026 RPCs, raw


def _ctx() -> pb.Context:
    return pb.Context(context="")


async def test_compute_node_counts_and_locations(fabric: SimFabric, stub: pb_grpc.NMX_ControllerStub) -> None:
    domain = fabric.domain("SIM-0001")
    default = sorted(fabric.members("SIM-0001")[DEFAULT_PARTITION_ID])
    tray0 = [g.gpu_uid for g in domain.compute_nodes()[("SIM-0001", 0)]]
    tray1 = [g.gpu_uid for g in domain.compute_nodes()[("SIM-0001", 1)]]
    assert set(tray0) <= set(default)
    fabric.remove_gpus("SIM-0001", DEFAULT_PARTITION_ID, tray0 + tray1[:1])
    fabric.create_partition("SIM-0001", "full", tray0)
    fabric.create_partition("SIM-0001", "part", tray1[:1])
    fabric.set_node_health("SIM-0001", "SIM-0001", 7, "UNHEALTHY")

    async def count(**kw: object) -> int:
        reply = await stub.GetComputeNodeCount(pb.GetComputeNodeCountRequest(context=_ctx(), **kw))
        assert reply.server_header.return_code == pb.NMX_ST_SUCCESS
        return int(reply.num_nodes)

    assert await count(attr=pb.NMX_COMPUTE_NODE_ATTR_ALL) == 18
    assert await count(attr=pb.NMX_COMPUTE_NODE_ATTR_FULLY_ALLOCATED) == 1
    assert await count(attr=pb.NMX_COMPUTE_NODE_ATTR_PARTIALLY_ALLOCATED) == 1
    assert await count(attr=pb.NMX_COMPUTE_NODE_ATTR_FREE) == 16
    assert (
        await count(attr=pb.NMX_COMPUTE_NODE_ATTR_ALL, node_health=pb.NMX_COMPUTE_NODE_HEALTH_UNHEALTHY) == 1
    )
    assert await count(attr=pb.NMX_COMPUTE_NODE_ATTR_ALL, chassis_id=2) == 0

    reply = await stub.GetComputeNodeLocationList(
        pb.GetComputeNodeLocationListRequest(context=_ctx(), attr=pb.NMX_COMPUTE_NODE_ATTR_FULLY_ALLOCATED)
    )
    assert [loc.slot_id for loc in reply.loc_list] == [domain.gpus[tray0[0]].slot_id]
    reply = await stub.GetComputeNodeLocationList(
        pb.GetComputeNodeLocationListRequest(context=_ctx(), attr=pb.NMX_COMPUTE_NODE_ATTR_ALL, num_nodes=5)
    )
    assert len(reply.loc_list) == 5


async def test_switch_nodes_and_switches(fabric: SimFabric, stub: pb_grpc.NMX_ControllerStub) -> None:
    fabric.set_switch_health("SIM-0001", "SIM-0001", 4, 1, "UNHEALTHY")
    count = await stub.GetSwitchNodeCount(pb.GetSwitchNodeCountRequest(context=_ctx()))
    assert count.num_nodes == 9
    unhealthy = await stub.GetSwitchNodeCount(
        pb.GetSwitchNodeCountRequest(context=_ctx(), node_health=pb.NMX_SWITCH_NODE_HEALTH_UNHEALTHY)
    )
    assert unhealthy.num_nodes == 1
    locations = await stub.GetSwitchNodeLocationList(pb.GetSwitchNodeLocationListRequest(context=_ctx()))
    slots = [loc.slot_id for loc in locations.loc_list]
    compute_slots = {g.slot_id for g in fabric.gpus("SIM-0001")}
    assert len(slots) == 9 and not set(slots) & compute_slots
    infos = await stub.GetSwitchNodeInfoList(
        pb.GetSwitchNodeInfoListRequest(context=_ctx(), loc_list=[locations.loc_list[4]])
    )
    assert len(infos.node_info_list) == 1
    assert infos.node_info_list[0].node_health == pb.NMX_SWITCH_NODE_HEALTH_UNHEALTHY
    assert infos.node_info_list[0].num_switches == 2
    switches = await stub.GetSwitchInfoList(
        pb.GetSwitchInfoListRequest(context=_ctx(), loc=locations.loc_list[4])
    )
    assert [(s.switch_id, s.health) for s in switches.switch_info_list] == [
        (0, pb.NMX_SWITCH_HEALTH_HEALTHY),
        (1, pb.NMX_SWITCH_HEALTH_UNHEALTHY),
    ]
    everything = await stub.GetSwitchInfoList(pb.GetSwitchInfoListRequest(context=_ctx()))
    assert len(everything.switch_info_list) == 18
    assert len({s.switch_uid for s in everything.switch_info_list}) == 18


async def test_partition_count_and_id_list_filters(
    fabric: SimFabric, stub: pb_grpc.NMX_ControllerStub
) -> None:
    uids = sorted(fabric.members("SIM-0001")[DEFAULT_PARTITION_ID])[:8]
    fabric.remove_gpus("SIM-0001", DEFAULT_PARTITION_ID, uids)
    two = fabric.create_partition("SIM-0001", "two", uids[:2])
    fabric.create_partition("SIM-0001", "six", uids[2:])
    fabric.set_partition_health("SIM-0001", two.partition_id, "UNHEALTHY")
    every = await stub.GetPartitionCount(
        pb.GetPartitionCountRequest(context=_ctx(), info_attr=pb.NMX_PARTITION_INFO_ATTR_ALL)
    )
    assert every.num_partitions == 3
    by_size = await stub.GetPartitionIdList(
        pb.GetPartitionIdListRequest(
            context=_ctx(), info_attr=pb.NMX_PARTITION_INFO_ATTR_NUM_GPUS, num_gpus=2
        )
    )
    assert [(p.partition_id.partition_id, p.num_gpus) for p in by_size.partition_list] == [
        (two.partition_id, 2)
    ]
    sick = await stub.GetPartitionCount(
        pb.GetPartitionCountRequest(
            context=_ctx(), info_attr=pb.NMX_PARTITION_INFO_ATTR_ALL, health=pb.NMX_PARTITION_HEALTH_UNHEALTHY
        )
    )
    assert sick.num_partitions == 1
    capped = await stub.GetPartitionIdList(
        pb.GetPartitionIdListRequest(
            context=_ctx(), info_attr=pb.NMX_PARTITION_INFO_ATTR_ALL, num_partitions=2
        )
    )
    assert len(capped.partition_list) == 2


async def test_topology_and_state_reports(fabric: SimFabric, stub: pb_grpc.NMX_ControllerStub) -> None:
    topology = await stub.GetTopologyInfo(pb.GetTopologyInfoRequest(context=_ctx()))
    kinds = [d.WhichOneof("device") for d in topology.device_topo_info]
    assert kinds.count("gpu_topo_info") == 72 and kinds.count("switch_topo_info") == 18
    gpus = {d.gpu_topo_info.device_uid for d in topology.device_topo_info if d.HasField("gpu_topo_info")}
    assert gpus == set(fabric.domain("SIM-0001").gpus)

    report = await stub.GetStateReport(
        pb.GetStateReportRequest(context=_ctx(), report_type=pb.NMX_REPORT_TYPE_PARTITIONS)
    )
    assert report.WhichOneof("report") == "partitions"
    (default,) = report.partitions.partitions
    assert default.partition_id.partition_id == DEFAULT_PARTITION_ID and len(default.gpus) == 72
    topo = await stub.GetStateReport(
        pb.GetStateReportRequest(context=_ctx(), report_type=pb.NMX_REPORT_TYPE_TOPOLOGY)
    )
    assert len(topo.device_topo_info.device_topo_info) == 90
    bad = await stub.GetStateReport(pb.GetStateReportRequest(context=_ctx()))
    assert bad.server_header.return_code == pb.NMX_ST_BADPARAM


async def test_admin_state_of_a_transceiver(stub: pb_grpc.NMX_ControllerStub) -> None:
    port = pb.TransceiverIdentifier(chassis_serial_number="SIM-0001", slot_id=10, transceiver_num=3)
    before = await stub.GetAdminState(pb.GetAdminStateRequest(context=_ctx(), transceiver_identifier=port))
    assert [e.admin_state for e in before.admin_state_entry] == [pb.NMX_ADMIN_STATE_UP]
    entry = pb.AdminStateEntry(admin_state=pb.NMX_ADMIN_STATE_DOWN, transceiver_identifier=port)
    done = await stub.SetAdminState(pb.SetAdminStateRequest(context=_ctx(), admin_state_entry=entry))
    assert done.server_header.return_code == pb.NMX_ST_SUCCESS
    by_id = pb.TransceiverIdentifier(chassis_id=1, slot_id=10, transceiver_num=3)
    after = await stub.GetAdminState(pb.GetAdminStateRequest(context=_ctx(), transceiver_identifier=by_id))
    assert [e.admin_state for e in after.admin_state_entry] == [pb.NMX_ADMIN_STATE_DOWN]
    listed = await stub.GetAdminState(pb.GetAdminStateRequest(context=_ctx()))
    assert len(listed.admin_state_entry) == 1
    elsewhere = pb.TransceiverIdentifier(chassis_serial_number="SIM-0002", slot_id=10, transceiver_num=3)
    refused = await stub.SetAdminState(
        pb.SetAdminStateRequest(
            context=_ctx(),
            admin_state_entry=pb.AdminStateEntry(
                admin_state=pb.NMX_ADMIN_STATE_DOWN, transceiver_identifier=elsewhere
            ),
        )
    )
    assert refused.server_header.return_code == pb.NMX_ST_BADPARAM


async def test_domain_properties_are_nvl72s(stub: pb_grpc.NMX_ControllerStub) -> None:
    props = await stub.GetDomainProperties(pb.GetDomainPropertiesRequest(context=_ctx()))
    assert (props.max_multicast_groups, props.max_num_partitions, props.max_switch_nodes) == (1024, 4, 9)
    assert props.line_rate_mbps == 200_000
