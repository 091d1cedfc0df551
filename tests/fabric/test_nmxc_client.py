"""The NMX-C client against the simulated NMX-C over real gRPC on 127.0.0.1: wire behaviour, pooled
channels, deadlines, every fault knob and its classification, Subscribe, and TLS / mTLS."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import grpc
import pytest

from nico.config import NvLinkConfig
from nico.fabric.backend import (
    DEFAULT_PARTITION_ID,
    DomainTarget,
    EndpointNotConfigured,
    FabricBusy,
    FabricError,
    FabricRejected,
    FabricTimeout,
    FabricUnavailable,
    PartitionEvent,
    PartitionEvents,
)
from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.fabric.nmxc import nmx_c_pb2_grpc as pb_grpc
from nico.fabric.nmxc.client import NmxcBackend
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator, ServerTls
from tests.fabric.conftest import CALL_TIMEOUT, SHORT
from tests.support.pki import TestCa
from tests.support.waiting import wait_for


@contextlib.asynccontextmanager
async def raw_stub(url: str) -> AsyncIterator[pb_grpc.NMX_ControllerStub]:
    async with grpc.aio.insecure_channel(url.removeprefix("http://")) as channel:
        yield pb_grpc.NMX_ControllerStub(channel)


# ------------------------------------------------------------------------------------- wire behaviour


async def test_simulator_speaks_the_nmx_c_wire(fabric: SimFabric, nmxc_sim: NmxcSimulator) -> None:
    domain = fabric.domain("SIM-0001")
    async with raw_stub(nmxc_sim.url(domain.domain_uuid)) as stub:
        hello = await stub.Hello(pb.ClientHello(gateway_id="x", major_version=1))
        assert hello.server_header.return_code == pb.NMX_ST_VERSION_MISMATCH

        free = sorted(domain.gpus)[:2]
        fabric.remove_gpus("SIM-0001", DEFAULT_PARTITION_ID, free)
        ids = [pb.GpuResourceId(gpu_uid=u) for u in free[:1]]
        made = await stub.CreatePartition(
            pb.CreatePartitionRequest(
                name="a", gpu_resource_id=ids, partition_id=pb.PartitionId(partition_id=900)
            )
        )
        assert (made.server_header.return_code, made.partition_id.partition_id) == (pb.NMX_ST_SUCCESS, 900)
        again = await stub.CreatePartition(
            pb.CreatePartitionRequest(
                name="b",
                gpu_resource_id=[pb.GpuResourceId(gpu_uid=free[1])],
                partition_id=pb.PartitionId(partition_id=900),
            )
        )
        assert again.server_header.return_code == pb.NMX_ST_PARTITION_ID_IN_USE
        by_location = await stub.CreatePartition(
            pb.CreatePartitionRequest(
                name="c", gpu_resource_id=[pb.GpuResourceId(gpu_location=pb.GpuLocation())]
            )
        )
        assert by_location.server_header.return_code == pb.NMX_ST_NOT_SUPPORTED

        mismatch = await stub.DeletePartition(
            pb.DeletePartitionRequest(
                partition_id=pb.PartitionId(partition_id=DEFAULT_PARTITION_ID), name="a"
            )
        )
        assert mismatch.server_header.return_code == pb.NMX_ST_PARTITION_ID_NAME_MISMATCH

        in_900 = await stub.GetGpuInfoList(
            pb.GetGpuInfoListRequest(
                attr=pb.NMX_GPU_ATTR_PARTITION_ID, partition_id=pb.PartitionId(partition_id=900)
            )
        )
        assert [g.gpu_uid for g in in_900.gpu_info_list] == free[:1]
        only_a = await stub.GetPartitionInfoList(pb.GetPartitionInfoListRequest(partition_name_list=["a"]))
        assert [(p.partition_id.partition_id, list(p.gpu_uid_list)) for p in only_a.partition_info_list] == [
            (900, free[:1])
        ]
        assert only_a.partition_info_list[0].partition_type == pb.NMX_PARTITION_TYPE_GPUUID_BASED

        by_name = await stub.DeletePartition(pb.DeletePartitionRequest(name="a"))
        assert (by_name.server_header.return_code, by_name.partition_id.partition_id) == (
            pb.NMX_ST_SUCCESS,
            900,
        )
        gone = await stub.DeletePartition(pb.DeletePartitionRequest(name="a"))
        assert gone.server_header.return_code == pb.NMX_ST_PARTITION_NAME_NOT_IN_USE

        props = await stub.GetDomainProperties(pb.GetDomainPropertiesRequest())
        assert (props.max_num_partitions, props.max_compute_nodes, props.max_gpus_per_compute_node) == (
            4,
            18,
            4,
        )
        assert props.server_header.domain_uuid == str(domain.domain_uuid)
        state = await stub.GetDomainStateInfo(pb.GetDomainStateInfoRequest())
        assert state.control_plane_state == pb.NMX_CONTROL_PLANE_STATE_CONFIGURED
        nodes = await stub.GetComputeNodeInfoList(pb.GetComputeNodeInfoListRequest())
        assert len(nodes.node_info_list) == 18
        assert {n.num_gpus for n in nodes.node_info_list} == {4}


async def test_nvl36x2_serials_share_one_endpoint(nmxc_sim: NmxcSimulator) -> None:
    endpoints = nmxc_sim.endpoints
    assert endpoints["SIM-0003"] == endpoints["SIM-0004"]
    assert len(set(endpoints.values())) == 3


async def test_a_reply_from_another_domain_is_refused(nmxc: NmxcBackend, nmxc_sim: NmxcSimulator) -> None:
    wrong = DomainTarget(
        domain_uuid=nmxc_sim.target("SIM-0002").domain_uuid, endpoint=nmxc_sim.target("SIM-0001").endpoint
    )
    with pytest.raises(FabricRejected) as caught:
        await nmxc.list_partitions(wrong)
    assert caught.value.code == "DOMAIN_MISMATCH"
    # Hello is how a domain is discovered: it reports what the endpoint serves instead.
    assert (await nmxc.hello(wrong)).domain_uuid == nmxc_sim.target("SIM-0001").domain_uuid


async def test_a_domain_without_endpoint(nmxc: NmxcBackend, nmxc_sim: NmxcSimulator) -> None:
    with pytest.raises(EndpointNotConfigured):
        await nmxc.list_partitions(DomainTarget(domain_uuid=nmxc_sim.target("SIM-0001").domain_uuid))
    with pytest.raises(EndpointNotConfigured):
        await nmxc.hello(
            DomainTarget(domain_uuid=nmxc_sim.target("SIM-0001").domain_uuid, endpoint="ftp://x:1")
        )


# ------------------------------------------------------------------------------------------ channels


class CountingProxy:
    """A TCP relay on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.accepted = 0
        self.open = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.open -= 1

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()


async def test_one_channel_per_endpoint_reused_across_calls_and_domains(nmxc_sim: NmxcSimulator) -> None:
    a, b = nmxc_sim.target("SIM-0003"), nmxc_sim.target("SIM-0004")  # one endpoint, two chassis serials
    assert a.endpoint is not None
    port = int(a.endpoint.rsplit(":", 1)[1])
    proxy = CountingProxy(port)
    url = await proxy.start()
    client = NmxcBackend(NvLinkConfig(), call_timeout=CALL_TIMEOUT)
    try:
        for _ in range(10):
            await client.list_partitions(DomainTarget(a.domain_uuid, url))
            await client.hello(DomainTarget(b.domain_uuid, url + "/"))
        await client.list_gpus(DomainTarget(a.domain_uuid, url))
        assert proxy.accepted == 1
    finally:
        await client.close()
    await wait_for(lambda: proxy.open == 0, what="the pooled connection closed by close()")
    await proxy.stop()
    with pytest.raises(FabricUnavailable):
        await client.hello(DomainTarget(a.domain_uuid, url))


# ---------------------------------------------------------------------------------------- fault knobs


async def test_hang_hits_the_deadline_and_recovers(fabric: SimFabric, nmxc_sim: NmxcSimulator) -> None:
    client = NmxcBackend(NvLinkConfig(), call_timeout=SHORT)
    try:
        target = nmxc_sim.target("SIM-0001")
        fabric.set_faults("SIM-0001", hang=True)
        with pytest.raises(FabricTimeout) as caught:
            await client.list_partitions(target)
        assert caught.value.code == "DEADLINE_EXCEEDED" and caught.value.retryable
        # One hung chassis does not stall the others.
        assert await client.list_partitions(nmxc_sim.target("SIM-0002"))
        fabric.set_faults("SIM-0001", hang=False)
        assert await client.list_partitions(target)
    finally:
        await client.close()


async def test_latency_past_the_deadline_times_out(fabric: SimFabric, nmxc_sim: NmxcSimulator) -> None:
    client = NmxcBackend(NvLinkConfig(fabric_call_timeout="300ms"))
    try:
        target = nmxc_sim.target("SIM-0001")
        fabric.set_faults("SIM-0001", latency=0.01)
        assert await client.list_partitions(target)
        fabric.set_faults("SIM-0001", latency=5.0)
        with pytest.raises(FabricTimeout):
            await client.list_partitions(target)
    finally:
        await client.close()


async def test_down_flag_is_unavailable(
    fabric: SimFabric, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator
) -> None:
    fabric.set_faults("SIM-0002", down=True)
    with pytest.raises(FabricUnavailable) as caught:
        await nmxc.hello(nmxc_sim.target("SIM-0002"))
    assert caught.value.code == "UNAVAILABLE" and caught.value.retryable
    fabric.set_faults("SIM-0002", down=False)
    assert await nmxc.hello(nmxc_sim.target("SIM-0002"))


async def test_a_stopped_chassis_refuses_then_comes_back(nmxc: NmxcBackend, nmxc_sim: NmxcSimulator) -> None:
    target = nmxc_sim.target("SIM-0001")
    assert await nmxc.list_partitions(target)
    await nmxc_sim.stop_domain("SIM-0001")
    with pytest.raises(FabricUnavailable):
        await nmxc.list_partitions(target)
    assert await nmxc.list_partitions(nmxc_sim.target("SIM-0002"))
    await nmxc_sim.start_domain("SIM-0001")
    assert nmxc_sim.target("SIM-0001") == target
    await wait_for(lambda: _succeeds(nmxc.list_partitions(target)), what="the restarted chassis answering")


async def test_a_long_outage_does_not_delay_the_first_call_after_it(
    nmxc: NmxcBackend, nmxc_sim: NmxcSimulator
) -> None:
    """gRPC's reconnect backoff grows 1.6x per failed attempt (1 s, 1.6 s, 2.6 s, 4.1 s, ... up to
    120 s by default): a client that kept calling through an outage would wait out the current step
    after the controller is back, 11-17 s after a minute's outage. The client caps the backoff."""
    target = nmxc_sim.target("SIM-0001")
    assert await nmxc.list_partitions(target)
    await nmxc_sim.stop_domain("SIM-0001")
    loop = asyncio.get_running_loop()
    outage_ends = loop.time() + 7.0  # long enough for the default backoff to pass 4 s
    while loop.time() < outage_ends:
        assert not await _succeeds(nmxc.list_partitions(target))
        await asyncio.sleep(0.2)
    await nmxc_sim.start_domain("SIM-0001")
    await wait_for(lambda: _succeeds(nmxc.list_partitions(target)), within=2.0, what="the first call after")


async def _succeeds(call: Awaitable[object]) -> bool:
    try:
        await call
    except FabricUnavailable:
        return False
    return True


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (pb.NMX_ST_NOT_READY, FabricBusy),
        (pb.NMX_ST_TIMEOUT, FabricTimeout),
        (pb.NMX_ST_NMX_CONTROLLER_DB_ERROR, FabricBusy),
        (pb.NMX_ST_GENERIC_ERROR, FabricBusy),
    ],
)
async def test_injected_errors_are_errors_never_successes(
    fabric: SimFabric, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator, code: int, error: type[FabricError]
) -> None:
    target = nmxc_sim.target("SIM-0001")
    default = next(p for p in await nmxc.list_partitions(target) if p.is_default)
    fabric.set_faults("SIM-0001", error_rate=1.0, error_code=code)
    for call in (
        nmxc.hello(target),
        nmxc.list_partitions(target),
        nmxc.list_gpus(target),
        nmxc.remove_gpus(target, default, frozenset(sorted(default.gpu_uids)[:1])),
    ):
        with pytest.raises(error) as caught:
            await call
        assert caught.value.retryable and caught.value.code == pb.StReturnCode.Name(code)
    assert len(fabric.members("SIM-0001")[DEFAULT_PARTITION_ID]) == 72


async def test_error_rate_fails_a_share_of_calls(
    fabric: SimFabric, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator
) -> None:
    fabric.set_faults("SIM-0001", error_rate=0.5)
    outcomes = []
    for _ in range(40):
        try:
            await nmxc.list_partitions(nmxc_sim.target("SIM-0001"))
            outcomes.append("ok")
        except FabricBusy as exc:
            outcomes.append(exc.code)
    assert set(outcomes) == {"ok", "NMX_ST_NOT_READY"}


# -------------------------------------------------------------------------------------------- events


async def _collect(events: AsyncIterator[PartitionEvent], into: asyncio.Queue[PartitionEvent]) -> None:
    async for event in events:
        await into.put(event)


async def test_subscribe_reports_changes_and_reconnects(
    fabric: SimFabric, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator
) -> None:
    assert isinstance(nmxc, PartitionEvents)
    target = nmxc_sim.target("SIM-0001")
    received: asyncio.Queue[PartitionEvent] = asyncio.Queue()
    task = asyncio.create_task(_collect(nmxc.partition_events(target), received))
    try:
        await wait_for(lambda: fabric.subscriber_count("SIM-0001") == 1, what="subscription")
        default = next(p for p in await nmxc.list_partitions(target) if p.is_default)
        free = frozenset(sorted(default.gpu_uids)[:1])
        await nmxc.remove_gpus(target, default, free)
        made = await nmxc.create_partition(target, "evt", free)
        assert await asyncio.wait_for(received.get(), CALL_TIMEOUT) == PartitionEvent(
            target.domain_uuid, DEFAULT_PARTITION_ID
        )
        assert await asyncio.wait_for(received.get(), CALL_TIMEOUT) == PartitionEvent(
            target.domain_uuid, made.nmx_partition_id
        )

        await nmxc_sim.stop_domain("SIM-0001")
        await nmxc_sim.start_domain("SIM-0001")
        resync = await asyncio.wait_for(received.get(), CALL_TIMEOUT * 2)
        assert resync == PartitionEvent(target.domain_uuid, None, kind="resync")
        await wait_for(lambda: fabric.subscriber_count("SIM-0001") == 1, what="resubscription")
        await nmxc.delete_partition(target, made)
        assert await asyncio.wait_for(received.get(), CALL_TIMEOUT) == PartitionEvent(
            target.domain_uuid, made.nmx_partition_id
        )
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await wait_for(lambda: fabric.subscriber_count("SIM-0001") == 0, what="the server seeing the cancel")


async def test_closing_the_client_ends_the_event_stream(fabric: SimFabric, nmxc_sim: NmxcSimulator) -> None:
    client = NmxcBackend(NvLinkConfig(), call_timeout=CALL_TIMEOUT)
    received: asyncio.Queue[PartitionEvent] = asyncio.Queue()
    task = asyncio.create_task(_collect(client.partition_events(nmxc_sim.target("SIM-0002")), received))
    await wait_for(lambda: fabric.subscriber_count("SIM-0002") == 1, what="subscription")
    await client.close()
    await asyncio.wait_for(task, CALL_TIMEOUT)  # ends by itself, no cancel needed
    assert received.empty()


# ----------------------------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    ca, other_ca = TestCa(), TestCa("another CA")
    server = ca.issue("nmxc", ips=("127.0.0.1",))
    named = ca.issue("nmxc.sim.test", dns=("nmxc.sim.test",))
    client = ca.issue("nico", client=True)
    stranger = other_ca.issue("stranger", client=True)
    root = tmp_path_factory.mktemp("pki")
    files = {
        "ca": ca.cert_pem,
        "other_ca": other_ca.cert_pem,
        "server.crt": server.cert_pem,
        "server.key": server.key_pem,
        "named.crt": named.cert_pem,
        "named.key": named.key_pem,
        "client.crt": client.cert_pem,
        "client.key": client.key_pem,
        "stranger.crt": stranger.cert_pem,
        "stranger.key": stranger.key_pem,
    }
    paths = {}
    for name, data in files.items():
        (root / name).write_bytes(data)
        paths[name] = root / name
    return paths


async def _hello_over_tls(fabric: SimFabric, tls: ServerTls, config: NvLinkConfig) -> object:
    async with NmxcSimulator(fabric, tls=tls, domains=[fabric.domain("SIM-0001").domain_uuid]) as sim:
        target = sim.target("SIM-0001")
        assert target.endpoint is not None and target.endpoint.startswith("https://")
        client = NmxcBackend(config, call_timeout=CALL_TIMEOUT)
        try:
            return await client.hello(target)
        except FabricError as exc:
            return exc
        finally:
            await client.close()


async def test_tls_with_the_configured_ca(fabric: SimFabric, pki: dict[str, Path]) -> None:
    tls = ServerTls(pki["server.crt"].read_bytes(), pki["server.key"].read_bytes())
    ok = await _hello_over_tls(fabric, tls, NvLinkConfig(nmx_c_tls_ca_cert_path=pki["ca"]))
    assert getattr(ok, "domain_uuid", None) == fabric.domain("SIM-0001").domain_uuid
    wrong_ca = await _hello_over_tls(fabric, tls, NvLinkConfig(nmx_c_tls_ca_cert_path=pki["other_ca"]))
    assert isinstance(wrong_ca, FabricUnavailable)


async def test_tls_authority_names_the_server_certificate(fabric: SimFabric, pki: dict[str, Path]) -> None:
    tls = ServerTls(pki["named.crt"].read_bytes(), pki["named.key"].read_bytes())
    named = NvLinkConfig(nmx_c_tls_ca_cert_path=pki["ca"], nmx_c_tls_authority="nmxc.sim.test")
    ok = await _hello_over_tls(fabric, tls, named)
    assert getattr(ok, "domain_uuid", None) == fabric.domain("SIM-0001").domain_uuid
    unnamed = await _hello_over_tls(fabric, tls, NvLinkConfig(nmx_c_tls_ca_cert_path=pki["ca"]))
    assert isinstance(unnamed, FabricUnavailable)


async def test_mtls_requires_a_client_certificate_from_the_trusted_ca(
    fabric: SimFabric, pki: dict[str, Path]
) -> None:
    tls = ServerTls(
        pki["server.crt"].read_bytes(), pki["server.key"].read_bytes(), client_ca=pki["ca"].read_bytes()
    )
    with_cert = NvLinkConfig(
        nmx_c_tls_ca_cert_path=pki["ca"],
        nmx_c_tls_client_cert_path=pki["client.crt"],
        nmx_c_tls_client_key_path=pki["client.key"],
    )
    ok = await _hello_over_tls(fabric, tls, with_cert)
    assert getattr(ok, "domain_uuid", None) == fabric.domain("SIM-0001").domain_uuid
    without = await _hello_over_tls(fabric, tls, NvLinkConfig(nmx_c_tls_ca_cert_path=pki["ca"]))
    assert isinstance(without, FabricUnavailable)
    stranger = NvLinkConfig(
        nmx_c_tls_ca_cert_path=pki["ca"],
        nmx_c_tls_client_cert_path=pki["stranger.crt"],
        nmx_c_tls_client_key_path=pki["stranger.key"],
    )
    assert isinstance(await _hello_over_tls(fabric, tls, stranger), FabricUnavailable)


async def test_unreadable_tls_files_are_a_permanent_error(fabric: SimFabric, pki: dict[str, Path]) -> None:
    tls = ServerTls(pki["server.crt"].read_bytes(), pki["server.key"].read_bytes())
    missing = await _hello_over_tls(
        fabric, tls, NvLinkConfig(nmx_c_tls_ca_cert_path=pki["ca"].with_name("nope"))
    )
    assert isinstance(missing, FabricRejected) and missing.code == "TLS_CONFIG"
