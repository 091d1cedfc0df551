"""NMX-C client: :class:`NmxcBackend`, the fabric backend over NMX-C gRPC (one endpoint per chassis).

The endpoint comes with each call in ``DomainTarget.endpoint`` (the reconciler resolves chassis
serial -> URL from its registry). One channel per endpoint URL is opened on first use and reused by
every later call, for every domain behind that endpoint, until :meth:`NmxcBackend.close`.
``https://`` endpoints use TLS with the configured CA (else the system roots), client certificate
and key (mTLS) and authority (the name the server certificate must carry); ``http://`` or no scheme
is plaintext HTTP/2.

Beyond the partition calls of :class:`~nico.fabric.backend.FabricBackend` it reads health
(GPUs, compute nodes, switch trays, partitions, the controller: :meth:`NmxcBackend.domain_health`),
the domain's limits (``GetDomainProperties``: the multicast budget), and the cheap partition reads
(``GetPartitionCount``, ``GetPartitionIdList``: ids and sizes without member lists).
``partition_events`` passes on health, init-done, topology and control-plane notifications too.

Every RPC has a deadline (``fabric_call_timeout``). A gRPC failure and every reply whose
``return_code`` is not SUCCESS become a :class:`~nico.fabric.backend.FabricError` that says whether a
retry may help. Replies that name a different domain than the target are refused as well, so a
registry row pointing at the wrong controller can never be mistaken for the right one.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import grpc

from nico.config import NvLinkConfig
from nico.fabric.backend import (
    DomainHealth,
    DomainHello,
    DomainLimits,
    DomainTarget,
    EndpointNotConfigured,
    EventKind,
    FabricBusy,
    FabricComputeNode,
    FabricError,
    FabricGpu,
    FabricPartition,
    FabricRejected,
    FabricSwitchNode,
    FabricTimeout,
    FabricUnavailable,
    PartitionEvent,
    health_counts,
    nmxc_capabilities,
)
from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.fabric.nmxc import nmx_c_pb2_grpc as pb_grpc
from nico.fabric.nmxc.in_flight import InFlight
from nico.fabric.return_codes import SUCCESS, return_code_error

log = logging.getLogger(__name__)

GATEWAY_ID = "nico"
_HEALTH_PREFIX = "NMX_GPU_HEALTH_"
CLOSE_WAIT = 5.0  # seconds close() waits for a channel
# Reconnect delays of a broken Subscribe stream: quick first (a restarted controller is back soon),
# capped so a dead one is not hammered.
_RESUBSCRIBE_FIRST = 0.05
_RESUBSCRIBE_MAX = 5.0
# The channel's own reconnect backoff (gRPC's default grows 1.6x per failure up to 120 s, so after a
# long outage the first call that could succeed waits out the step: 11-17 s measured). Capped at
# 1 s, a controller that is back is reached within a second; a dead one sees one connect a second.
_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

_RETRY_LATER = {
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.DATA_LOSS,
}


class NmxcBackend:
    """:class:`~nico.fabric.backend.FabricBackend` and ``PartitionEvents`` over NMX-C gRPC."""

    kind: Literal["nmxc", "nmxm"] = "nmxc"

    def __init__(
        self,
        config: NvLinkConfig,
        *,
        gateway_id: str = GATEWAY_ID,
        call_timeout: float | None = None,
    ) -> None:
        self._config = config
        self._gateway_id = gateway_id
        self._timeout = (
            call_timeout if call_timeout is not None else config.fabric_call_timeout.total_seconds()
        )
        self._channels: dict[str, tuple[grpc.aio.Channel, Any]] = {}
        self._tls: grpc.ChannelCredentials | None = None
        self._closed = False
        self._gpu_lists: InFlight[list[FabricGpu]] = InFlight()
        self.capabilities = nmxc_capabilities(self)

    # ------------------------------------------------------------------------------------- channels

    def _stub(self, endpoint: str | None) -> tuple[str, Any]:
        if not endpoint or not endpoint.strip():
            raise EndpointNotConfigured("no NMX-C endpoint for this domain")
        if self._closed:
            raise FabricUnavailable("the NMX-C client is closed", code="CLOSED", endpoint=endpoint)
        key = endpoint.strip().rstrip("/")
        pooled = self._channels.get(key)
        if pooled is None:
            channel = self._open(key)
            pooled = (channel, pb_grpc.NMX_ControllerStub(channel))  # type: ignore[no-untyped-call]
            self._channels[key] = pooled
        return key, pooled[1]

    def _open(self, endpoint: str) -> grpc.aio.Channel:
        parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EndpointNotConfigured(f"not an NMX-C endpoint URL: {endpoint!r}", endpoint=endpoint)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise EndpointNotConfigured(f"bad port in {endpoint!r}", endpoint=endpoint) from None
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        target = f"{host}:{port}"
        options = list(_CHANNEL_OPTIONS)
        if parts.scheme == "http":
            return grpc.aio.insecure_channel(target, options=options)
        if self._config.nmx_c_tls_authority:
            options.append(("grpc.ssl_target_name_override", self._config.nmx_c_tls_authority))
        return grpc.aio.secure_channel(target, self._credentials(endpoint), options=options)

    def _credentials(self, endpoint: str) -> grpc.ChannelCredentials:
        if self._tls is None:
            config = self._config
            try:
                self._tls = grpc.ssl_channel_credentials(
                    root_certificates=_read(config.nmx_c_tls_ca_cert_path),
                    private_key=_read(config.nmx_c_tls_client_key_path),
                    certificate_chain=_read(config.nmx_c_tls_client_cert_path),
                )
            except OSError as exc:
                raise FabricRejected(
                    f"cannot read the NMX-C TLS files: {exc}", code="TLS_CONFIG", endpoint=endpoint
                ) from None
        return self._tls

    async def close(self) -> None:
        self._closed = True
        channels, self._channels = self._channels, {}
        for endpoint, (channel, _) in channels.items():
            # grpc's aio close can wait forever on a stream the server never ends; bound it.
            try:
                await asyncio.wait_for(channel.close(grace=None), timeout=CLOSE_WAIT)
            except TimeoutError:
                log.warning("NMX-C channel to %s did not close within %.0f s", endpoint, CLOSE_WAIT)

    # ---------------------------------------------------------------------------------------- calls

    async def _call(self, target: DomainTarget, rpc: str, request: Any) -> Any:
        endpoint, stub = self._stub(target.endpoint)
        try:
            return await getattr(stub, rpc)(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as exc:
            raise _status_error(exc, rpc, endpoint) from None

    async def _ask(self, target: DomainTarget, rpc: str, request: Any) -> Any:
        """Call ``rpc`` and refuse its reply unless it is a SUCCESS from the target's controller."""
        reply = await self._call(target, rpc, request)
        self._check(target, rpc, reply.server_header)
        return reply

    def _check(self, target: DomainTarget, rpc: str, header: pb.ServerHeader) -> None:
        """Refuse a reply that is not SUCCESS or that comes from another domain's controller."""
        if header.return_code != SUCCESS:
            raise return_code_error(header.return_code, f"NMX-C {rpc}", endpoint=target.endpoint)
        served = _uuid(header.domain_uuid)
        if served is not None and served != target.domain_uuid:
            raise FabricRejected(
                f"NMX-C {rpc}: endpoint serves domain {served}, not {target.domain_uuid}",
                code="DOMAIN_MISMATCH",
                endpoint=target.endpoint,
            )

    def _context(self) -> pb.Context:
        return pb.Context(context="")

    async def hello(self, target: DomainTarget) -> DomainHello:
        request = pb.ClientHello(
            gateway_id=self._gateway_id,
            major_version=pb.PROTO_MSG_MAJOR_VERSION,
            minor_version=pb.PROTO_MSG_MINOR_VERSION,
        )
        reply = await self._call(target, "Hello", request)
        header = reply.server_header
        if header.return_code != SUCCESS:
            raise return_code_error(header.return_code, "NMX-C Hello", endpoint=target.endpoint)
        domain = _uuid(header.domain_uuid)
        if domain is None:
            raise FabricRejected(
                f"NMX-C Hello: no domain uuid in {header.domain_uuid!r}",
                code="BAD_DOMAIN_UUID",
                endpoint=target.endpoint,
            )
        return DomainHello(domain_uuid=domain, app_version=header.app_ver)

    async def list_partitions(self, target: DomainTarget) -> list[FabricPartition]:
        request = pb.GetPartitionInfoListRequest(context=self._context(), gateway_id=self._gateway_id)
        reply = await self._ask(target, "GetPartitionInfoList", request)
        return [
            FabricPartition(
                nmx_partition_id=info.partition_id.partition_id,
                ref=str(info.partition_id.partition_id),
                name=info.name,
                gpu_uids=frozenset(info.gpu_uid_list),
                health=_name(pb.PartitionHealth, info.health, "NMX_PARTITION_HEALTH_"),
                resiliency_mode=(
                    _name(pb.ResiliencyMode, info.attr.resiliency_mode, "NMX_RESILIENCY_MODE_")
                    if info.HasField("attr")
                    else None
                ),
                multicast_groups_limit=info.attr.multicast_groups_limit if info.HasField("attr") else None,
            )
            for info in reply.partition_info_list
        ]

    async def create_partition(
        self,
        target: DomainTarget,
        name: str,
        gpu_uids: frozenset[int],
        *,
        resiliency_mode: str | None = None,
        multicast_groups_limit: int | None = None,
    ) -> FabricPartition:
        request = pb.CreatePartitionRequest(
            context=self._context(),
            name=name,
            gpu_resource_id=[pb.GpuResourceId(gpu_uid=uid) for uid in sorted(gpu_uids)],
            gateway_id=self._gateway_id,
        )
        if resiliency_mode is not None:
            try:
                mode = pb.ResiliencyMode.Value(f"NMX_RESILIENCY_MODE_{resiliency_mode.upper()}")
            except ValueError:
                raise FabricRejected(
                    f"unknown resiliency mode {resiliency_mode!r}", code="BAD_RESILIENCY_MODE"
                ) from None
            request.attr.resiliency_mode = mode
        if multicast_groups_limit is not None:
            if not 0 <= multicast_groups_limit < 2**32:
                raise FabricRejected(
                    f"multicast_groups_limit {multicast_groups_limit} out of range", code="BAD_LIMIT"
                )
            request.attr.multicast_groups_limit = multicast_groups_limit
        reply = await self._ask(target, "CreatePartition", request)
        partition_id = reply.partition_id.partition_id
        return FabricPartition(
            nmx_partition_id=partition_id,
            ref=str(partition_id),
            name=name,
            gpu_uids=frozenset(gpu_uids),
            resiliency_mode=resiliency_mode.upper() if resiliency_mode is not None else None,
            multicast_groups_limit=multicast_groups_limit,
        )

    # ------------------------------------------------------------------------ cheap partition reads

    async def partition_count(self, target: DomainTarget) -> int:
        """How many partitions the domain has (``GetPartitionCount``: one small reply)."""
        request = pb.GetPartitionCountRequest(
            context=self._context(), info_attr=pb.NMX_PARTITION_INFO_ATTR_ALL, gateway_id=self._gateway_id
        )
        reply = await self._ask(target, "GetPartitionCount", request)
        return int(reply.num_partitions)

    async def partition_sizes(self, target: DomainTarget) -> dict[int, int]:
        """Partition id -> GPU count of every partition (``GetPartitionIdList``: no member lists)."""
        request = pb.GetPartitionIdListRequest(
            context=self._context(), info_attr=pb.NMX_PARTITION_INFO_ATTR_ALL, gateway_id=self._gateway_id
        )
        reply = await self._ask(target, "GetPartitionIdList", request)
        return {p.partition_id.partition_id: int(p.num_gpus) for p in reply.partition_list}

    async def partitions_by_id(self, target: DomainTarget, partition_ids: list[int]) -> list[FabricPartition]:
        """Only the named partitions, with their members (``GetPartitionInfoList`` by id list)."""
        if not partition_ids:
            return []
        request = pb.GetPartitionInfoListRequest(
            context=self._context(),
            partition_id_list=[pb.PartitionId(partition_id=i) for i in partition_ids],
            gateway_id=self._gateway_id,
        )
        reply = await self._ask(target, "GetPartitionInfoList", request)
        return [
            FabricPartition(
                nmx_partition_id=info.partition_id.partition_id,
                ref=str(info.partition_id.partition_id),
                name=info.name,
                gpu_uids=frozenset(info.gpu_uid_list),
                health=_name(pb.PartitionHealth, info.health, "NMX_PARTITION_HEALTH_"),
            )
            for info in reply.partition_info_list
        ]

    # ----------------------------------------------------------------------------- health and limits

    async def list_compute_nodes(self, target: DomainTarget) -> list[FabricComputeNode]:
        request = pb.GetComputeNodeInfoListRequest(context=self._context(), gateway_id=self._gateway_id)
        reply = await self._ask(target, "GetComputeNodeInfoList", request)
        return [
            FabricComputeNode(
                num_gpus=node.num_gpus,
                **_node_fields(node, pb.ComputeNodeHealth, "NMX_COMPUTE_NODE_HEALTH_"),
            )
            for node in reply.node_info_list
        ]

    async def list_switch_nodes(self, target: DomainTarget) -> list[FabricSwitchNode]:
        request = pb.GetSwitchNodeInfoListRequest(context=self._context(), gateway_id=self._gateway_id)
        reply = await self._ask(target, "GetSwitchNodeInfoList", request)
        return [
            FabricSwitchNode(
                num_switches=node.num_switches,
                **_node_fields(node, pb.SwitchNodeHealth, "NMX_SWITCH_NODE_HEALTH_"),
            )
            for node in reply.node_info_list
        ]

    async def domain_limits(self, target: DomainTarget) -> DomainLimits:
        request = pb.GetDomainPropertiesRequest(context=self._context(), gateway_id=self._gateway_id)
        reply = await self._ask(target, "GetDomainProperties", request)
        return DomainLimits(
            max_compute_nodes=reply.max_compute_nodes,
            max_gpus_per_compute_node=reply.max_gpus_per_compute_node,
            max_switch_nodes=reply.max_switch_nodes,
            line_rate_mbps=reply.line_rate_mbps,
            min_gpus_per_partition=reply.min_gpus_per_partition,
            max_num_partitions=reply.max_num_partitions,
            max_num_alids=reply.max_num_alids,
            max_multicast_groups=reply.max_multicast_groups,
            max_num_ports=reply.max_num_ports,
        )

    async def health_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        """The domain's GPUs (NMX-C lists one domain: nothing to share)."""
        return await self.list_gpus(target)

    async def domain_health(self, target: DomainTarget) -> DomainHealth:
        """Health counts of the domain's GPUs, compute nodes, switch trays and partitions, and the
        controller's state, read concurrently."""
        state_request = pb.GetDomainStateInfoRequest(context=self._context(), gateway_id=self._gateway_id)
        gpus, nodes, switches, partitions, state = await asyncio.gather(
            self.list_gpus(target),
            self.list_compute_nodes(target),
            self.list_switch_nodes(target),
            self.list_partitions(target),
            self._call(target, "GetDomainStateInfo", state_request),
        )
        self._check(target, "GetDomainStateInfo", state.server_header)
        return DomainHealth(
            domain_uuid=target.domain_uuid,
            gpus=health_counts(g.health for g in gpus),
            compute_nodes=health_counts(n.health for n in nodes),
            switch_nodes=health_counts(n.health for n in switches),
            partitions=health_counts(p.health for p in partitions),
            controller=_name(pb.NmxControllerHealth, state.nmx_controller_health, "NMX_CONTROLLER_HEALTH_"),
            control_plane=_name(pb.ControlPlaneState, state.control_plane_state, "NMX_CONTROL_PLANE_STATE_"),
            available_multicast_groups=state.available_multicast_groups,
        )

    async def add_gpus(
        self, target: DomainTarget, partition: FabricPartition, gpu_uids: frozenset[int]
    ) -> None:
        if gpu_uids:
            await self._update(target, "AddGpusToPartition", partition, gpu_uids)

    async def remove_gpus(
        self, target: DomainTarget, partition: FabricPartition, gpu_uids: frozenset[int]
    ) -> None:
        if gpu_uids:
            await self._update(target, "RemoveGpusFromPartition", partition, gpu_uids)

    async def _update(
        self, target: DomainTarget, rpc: str, partition: FabricPartition, gpu_uids: frozenset[int]
    ) -> None:
        request = pb.UpdatePartitionRequest(
            context=self._context(),
            partition_id=pb.PartitionId(partition_id=partition.nmx_partition_id),
            gpu_uid=sorted(gpu_uids),
            gateway_id=self._gateway_id,
            reroute=True,
        )
        await self._ask(target, rpc, request)

    async def delete_partition(self, target: DomainTarget, partition: FabricPartition) -> None:
        request = pb.DeletePartitionRequest(
            context=self._context(),
            partition_id=pb.PartitionId(partition_id=partition.nmx_partition_id),
            gateway_id=self._gateway_id,
        )
        await self._ask(target, "DeletePartition", request)

    async def list_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        """The domain's GPUs; a listing asked for while the same one is on its way shares its call
        (:mod:`nico.fabric.nmxc.in_flight`)."""
        key = (target.endpoint, target.domain_uuid)
        return list(await self._gpu_lists.read(key, lambda: self._list_gpus(target)))

    async def _list_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        request = pb.GetGpuInfoListRequest(
            context=self._context(), attr=pb.NMX_GPU_ATTR_ALL, gateway_id=self._gateway_id
        )
        reply = await self._ask(target, "GetGpuInfoList", request)
        domain = _uuid(reply.server_header.domain_uuid) or target.domain_uuid
        return [
            FabricGpu(
                gpu_uid=info.gpu_uid,
                device_id=info.gpu_id,
                chassis_serial=info.loc.chassis_serial_number,
                tray_index=info.loc.tray_index,
                slot_id=info.loc.location.slot_id,
                domain_uuid=domain,
                health=_health(info.gpu_health),
                nmx_partition_id=info.partition_id.partition_id if info.HasField("partition_id") else None,
            )
            for info in reply.gpu_info_list
        ]

    async def gpu_topology(self, target: DomainTarget) -> list[FabricGpu]:
        """Every GPU of the domain from ``GetTopologyInfo``: its ``GpuTopoInfo`` carries the GPU's
        name (``description``, e.g. "NVIDIA GB300") besides its device id and location (the slot is
        ``loc.location.slot_id``)."""
        request = pb.GetTopologyInfoRequest(context=self._context(), gateway_id=self._gateway_id)
        reply = await self._ask(target, "GetTopologyInfo", request)
        domain = _uuid(reply.server_header.domain_uuid) or target.domain_uuid
        found = []
        for device in reply.device_topo_info:
            if device.WhichOneof("device") != "gpu_topo_info":
                continue
            info = device.gpu_topo_info
            found.append(
                FabricGpu(
                    gpu_uid=info.device_uid,
                    device_id=info.device_id,
                    chassis_serial=info.loc.chassis_serial_number,
                    tray_index=info.loc.tray_index,
                    slot_id=info.loc.location.slot_id,
                    domain_uuid=domain,
                    health=_health(info.device_health),
                    nmx_partition_id=info.partition_id[0].partition_id if info.partition_id else None,
                    description=info.description.strip(),
                )
            )
        return found

    # --------------------------------------------------------------------------------------- events

    async def partition_events(self, target: DomainTarget) -> AsyncIterator[PartitionEvent]:
        """What the controller reports (``Subscribe``), for as long as the consumer iterates:
        partition changes, ``health_state_changed`` (kind ``health``), ``init_done``, topology and
        control-plane ``FmEvent``s; cancelling or closing the iterator ends the stream cleanly.
        Each arrives as soon as the controller sends it (no batching), so a consumer such as
        :func:`~nico.fabric.backend.watch_events` reacts well within a second.

        When the stream breaks (controller restarted, network) it is re-established with backoff;
        once it is, one event with ``nmx_partition_id=None`` says "changes may have been missed: re-read
        the domain". It ends when the backend is closed.
        """
        request = pb.SubscribeRequest(gateway_id=self._gateway_id, notify_on_self_change=True)
        delay = _RESUBSCRIBE_FIRST
        broken = False
        while not self._closed:
            try:
                endpoint, stub = self._stub(target.endpoint)
            except FabricUnavailable:
                return
            call = stub.Subscribe(request)
            try:
                await call.initial_metadata()
                if broken and not call.done():
                    broken = False
                    delay = _RESUBSCRIBE_FIRST
                    yield PartitionEvent(domain_uuid=target.domain_uuid, nmx_partition_id=None, kind="resync")
                async for note in call:
                    event = _event(note, target)
                    if event is not None:
                        yield event
            except grpc.aio.AioRpcError as exc:
                if self._closed:
                    return
                log.info("NMX-C Subscribe to %s broke: %s", endpoint, exc.code().name)
            except asyncio.CancelledError:
                # close() cancels the call locally, which grpc reports as a cancellation; only a
                # cancellation of the consuming task itself must propagate.
                task = asyncio.current_task()
                if self._closed and task is not None and not task.cancelling():
                    return
                raise
            finally:
                call.cancel()
            broken = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RESUBSCRIBE_MAX)


_FM_EVENTS: dict[str, EventKind] = {
    "fm_event_topology_change": "topology",
    "fm_event_control_plane_state_change": "control_plane",
}
_NOTIFICATIONS: dict[str, EventKind] = {
    "health_state_changed": "health",
    "init_done": "init_done",
    "domain_state_info": "control_plane",
}


def _event(note: pb.ServerNotification, target: DomainTarget) -> PartitionEvent | None:
    kind = note.WhichOneof("notification")
    if kind in _NOTIFICATIONS:
        return PartitionEvent(domain_uuid=target.domain_uuid, kind=_NOTIFICATIONS[kind])
    if kind == "fm_event":
        event = note.fm_event.WhichOneof("event")
        if event in _FM_EVENTS:
            return PartitionEvent(domain_uuid=target.domain_uuid, kind=_FM_EVENTS[event])
        if event != "fm_event_partition_change":
            return None
        change = note.fm_event.fm_event_partition_change
        partition_id = change.partition_id.partition_id if change.HasField("partition_id") else None
        return PartitionEvent(domain_uuid=target.domain_uuid, nmx_partition_id=partition_id)
    if kind in ("create_partition_response", "delete_partition_response", "update_partition_response"):
        response = getattr(note, kind)
        return PartitionEvent(
            domain_uuid=target.domain_uuid, nmx_partition_id=response.partition_id.partition_id
        )
    return None


def _status_error(exc: grpc.aio.AioRpcError, rpc: str, endpoint: str) -> FabricError:
    status = exc.code()
    message = f"NMX-C {rpc} at {endpoint}: {status.name} {exc.details() or ''}".rstrip()
    if status == grpc.StatusCode.UNAVAILABLE:
        return FabricUnavailable(message, code=status.name, endpoint=endpoint)
    if status == grpc.StatusCode.DEADLINE_EXCEEDED:
        return FabricTimeout(message, code=status.name, endpoint=endpoint)
    if status in _RETRY_LATER:
        return FabricBusy(message, code=status.name, endpoint=endpoint)
    return FabricRejected(message, code=status.name, endpoint=endpoint)


@functools.lru_cache(maxsize=4096)  # every reply names its domain: parsed once a domain
def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def _health(value: int) -> str:
    return _name(pb.GpuHealth, value, _HEALTH_PREFIX)


def _node_fields(node: Any, health: Any, prefix: str) -> dict[str, Any]:
    """What a compute node and a switch tray report alike: where it is, its health, its partitions."""
    return {
        "chassis_serial": node.loc.chassis_serial_number,
        "tray_index": node.loc.tray_index,
        "slot_id": node.loc.location.slot_id,
        "health": _name(health, node.node_health, prefix),
        "partition_ids": frozenset(p.partition_id for p in node.partition_id_list),
    }


@functools.lru_cache(maxsize=1024)  # a few names, asked for every partition and GPU of every listing
def _name(enum: Any, value: int, prefix: str) -> str:
    """An enum number as its name without the prefix; numbers this proto does not know: UNKNOWN."""
    try:
        return str(enum.Name(value)).removeprefix(prefix)
    except ValueError:
        return "UNKNOWN"


def _read(path: Path | None) -> bytes | None:
    return path.read_bytes() if path is not None else None
