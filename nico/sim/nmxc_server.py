"""Simulated NMX-C: one grpc.aio server per domain on loopback, serving a :class:`SimFabric`.

A real NMX-C serves one domain per endpoint, so each domain gets its own server; an NVL36x2 domain's
two chassis serials share it. :class:`NmxcSimulator` knows chassis serial -> endpoint URL, can stop
one domain's server (its port then refuses connections) and start it again on the same port, and
optionally serves TLS, with client certificates required for mTLS.

Every reply carries a ``ServerHeader`` with the domain uuid and a return code: refusals are answered
as a real controller does, with gRPC status OK and an ``NMX_ST_*`` code in the header. Fault knobs:
``down`` aborts with UNAVAILABLE, ``hang`` never answers, ``error_rate`` answers ``error_code``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

import grpc

from nico.fabric.backend import DomainTarget
from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.fabric.nmxc import nmx_c_pb2_grpc as pb_grpc
from nico.sim.fabric import GPU_HEALTH, EndpointDown, SimError, SimFabric, SimGpu, SimPartition
from nico.sim.inprocess import SIM_APP_VERSION

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ServerTls:
    """PEM material for a TLS endpoint; with ``client_ca`` set, clients must present a certificate
    signed by it (mTLS)."""

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None


class NmxcServicer(pb_grpc.NMX_ControllerServicer):
    """The NMX_Controller service of one domain."""

    def __init__(self, fabric: SimFabric, domain_uuid: uuid.UUID) -> None:
        self.fabric = fabric
        self.domain = fabric.domain(domain_uuid)

    def _header(self, code: int = pb.NMX_ST_SUCCESS) -> pb.ServerHeader:
        return pb.ServerHeader(
            domain_uuid=str(self.domain.domain_uuid),
            app_uuid=str(self.domain.app_uuid),
            app_ver=SIM_APP_VERSION,
            return_code=cast(pb.StReturnCode, code),
        )

    async def _serve(self, context: Any, reply_type: type[Any], build: Callable[[], Any]) -> Any:
        """Apply the fault knobs, then answer with ``build()`` or with the refusal it raises."""
        gate = self.domain.gate
        if not gate.idle:
            try:
                injected = await gate.enter()
            except EndpointDown as exc:
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            if injected is not None:
                return reply_type(server_header=self._header(injected))
        try:
            return build()
        except SimError as exc:
            return reply_type(server_header=self._header(exc.code))

    async def Hello(self, request: pb.ClientHello, context: Any) -> pb.ServerHello:
        def build() -> pb.ServerHello:
            if request.major_version != pb.PROTO_MSG_MAJOR_VERSION:
                raise SimError(pb.NMX_ST_VERSION_MISMATCH, f"major version {request.major_version}")
            return pb.ServerHello(
                server_header=self._header(),
                capabilities=["GPUUID_BASED_PARTITIONS"],
                host_os_details="nico simulator",
                major_version=pb.PROTO_MSG_MAJOR_VERSION,
                minor_version=pb.PROTO_MSG_MINOR_VERSION,
            )

        return await self._serve(context, pb.ServerHello, build)  # type: ignore[no-any-return]

    async def GetPartitionInfoList(
        self, request: pb.GetPartitionInfoListRequest, context: Any
    ) -> pb.GetPartitionInfoListResponse:
        def build() -> pb.GetPartitionInfoListResponse:
            ids = {p.partition_id for p in request.partition_id_list}
            names = set(request.partition_name_list)
            chosen = [
                p
                for p in self.domain.partitions.values()
                if (not ids and not names) or p.partition_id in ids or (p.name and p.name in names)
            ]
            return pb.GetPartitionInfoListResponse(
                server_header=self._header(),
                context=request.context,
                partition_info_list=[_partition_info(p) for p in chosen],
            )

        return await self._serve(context, pb.GetPartitionInfoListResponse, build)  # type: ignore[no-any-return]

    async def CreatePartition(
        self, request: pb.CreatePartitionRequest, context: Any
    ) -> pb.CreatePartitionResponse:
        def build() -> pb.CreatePartitionResponse:
            kinds = {r.WhichOneof("resourceId") for r in request.gpu_resource_id}
            if "gpu_location" in kinds:
                raise SimError(pb.NMX_ST_NOT_SUPPORTED, "location-based partitions are not simulated")
            if None in kinds:
                raise SimError(pb.NMX_ST_BADPARAM, "a GPU resource id without a GPU")
            created = self.fabric.create_partition(
                self.domain.domain_uuid,
                request.name,
                [r.gpu_uid for r in request.gpu_resource_id],
                request.partition_id.partition_id if request.HasField("partition_id") else None,
            )
            return pb.CreatePartitionResponse(
                server_header=self._header(),
                context=request.context,
                partition_id=pb.PartitionId(partition_id=created.partition_id),
            )

        return await self._serve(context, pb.CreatePartitionResponse, build)  # type: ignore[no-any-return]

    async def DeletePartition(
        self, request: pb.DeletePartitionRequest, context: Any
    ) -> pb.DeletePartitionResponse:
        def build() -> pb.DeletePartitionResponse:
            deleted = self.fabric.delete_partition(
                self.domain.domain_uuid, request.partition_id.partition_id, request.name
            )
            return pb.DeletePartitionResponse(
                server_header=self._header(),
                context=request.context,
                partition_id=pb.PartitionId(partition_id=deleted.partition_id),
            )

        return await self._serve(context, pb.DeletePartitionResponse, build)  # type: ignore[no-any-return]

    async def AddGpusToPartition(
        self, request: pb.UpdatePartitionRequest, context: Any
    ) -> pb.UpdatePartitionResponse:
        return await self._update(request, context, self.fabric.add_gpus)

    async def RemoveGpusFromPartition(
        self, request: pb.UpdatePartitionRequest, context: Any
    ) -> pb.UpdatePartitionResponse:
        return await self._update(request, context, self.fabric.remove_gpus)

    async def _update(
        self,
        request: pb.UpdatePartitionRequest,
        context: Any,
        change: Callable[[uuid.UUID, int, list[int], str], SimPartition],
    ) -> pb.UpdatePartitionResponse:
        def build() -> pb.UpdatePartitionResponse:
            if request.location_list:
                raise SimError(pb.NMX_ST_NOT_SUPPORTED, "location-based partitions are not simulated")
            changed = change(
                self.domain.domain_uuid,
                request.partition_id.partition_id,
                list(request.gpu_uid),
                request.name,
            )
            return pb.UpdatePartitionResponse(
                server_header=self._header(),
                context=request.context,
                partition_id=pb.PartitionId(partition_id=changed.partition_id),
            )

        return await self._serve(context, pb.UpdatePartitionResponse, build)  # type: ignore[no-any-return]

    async def GetGpuInfoList(
        self, request: pb.GetGpuInfoListRequest, context: Any
    ) -> pb.GetGpuInfoListResponse:
        def build() -> pb.GetGpuInfoListResponse:
            gpus = list(self.domain.gpus.values())
            if request.attr == pb.NMX_GPU_ATTR_LOCATION:
                gpus = [g for g in gpus if _at(g, request.loc)]
            elif request.attr == pb.NMX_GPU_ATTR_PARTITION_ID:
                wanted = request.partition_id.partition_id
                gpus = [g for g in gpus if self.domain.owner.get(g.gpu_uid) == wanted]
            if request.gpu_health:
                gpus = [g for g in gpus if GPU_HEALTH.index(g.health) == request.gpu_health]
            if request.num_gpus:
                gpus = gpus[: request.num_gpus]
            return pb.GetGpuInfoListResponse(
                server_header=self._header(),
                context=request.context,
                gpu_info_list=[self._gpu_info(g) for g in gpus],
            )

        return await self._serve(context, pb.GetGpuInfoListResponse, build)  # type: ignore[no-any-return]

    def _gpu_info(self, gpu: SimGpu) -> pb.GpuInfo:
        info = pb.GpuInfo(
            loc=_location_info(gpu),
            gpu_id=gpu.device_id,
            gpu_uid=gpu.gpu_uid,
            gpu_health=cast(pb.GpuHealth, GPU_HEALTH.index(gpu.health)),
        )
        holder = self.domain.owner.get(gpu.gpu_uid)
        if holder is not None:
            info.partition_id.partition_id = holder
        return info

    async def GetComputeNodeInfoList(
        self, request: pb.GetComputeNodeInfoListRequest, context: Any
    ) -> pb.GetComputeNodeInfoListResponse:
        def build() -> pb.GetComputeNodeInfoListResponse:
            trays: dict[tuple[str, int], list[SimGpu]] = {}
            for gpu in self.domain.gpus.values():
                trays.setdefault((gpu.chassis_serial, gpu.tray_index), []).append(gpu)
            nodes = []
            for gpus in trays.values():
                first = gpus[0]
                if request.loc_list and not any(_at(first, loc) for loc in request.loc_list):
                    continue
                held = sorted({self.domain.owner[g.gpu_uid] for g in gpus if g.gpu_uid in self.domain.owner})
                nodes.append(
                    pb.ComputeNodeInfo(
                        loc=_location_info(first),
                        num_gpus=len(gpus),
                        node_health=pb.NMX_COMPUTE_NODE_HEALTH_HEALTHY,
                        partition_id_list=[pb.PartitionId(partition_id=p) for p in held],
                    )
                )
            return pb.GetComputeNodeInfoListResponse(
                server_header=self._header(), context=request.context, node_info_list=nodes
            )

        return await self._serve(context, pb.GetComputeNodeInfoListResponse, build)  # type: ignore[no-any-return]

    async def GetDomainProperties(
        self, request: pb.GetDomainPropertiesRequest, context: Any
    ) -> pb.DomainProperties:
        def build() -> pb.DomainProperties:
            chassis = len(self.domain.chassis_serials)
            trays = self.domain.trays_per_chassis
            return pb.DomainProperties(
                server_header=self._header(),
                context=request.context,
                max_compute_nodes=trays * chassis,
                max_compute_nodes_per_chassis=trays,
                max_gpus_per_compute_node=4,
                max_gpu_nv_links=18,
                line_rate_mbps=200_000,
                max_switch_nodes=9,
                max_switch_nodes_per_chassis=9 // chassis,
                max_switches_per_switch_node=2,
                max_switch_nv_links=72,
                max_num_partitions=self.domain.max_partitions,
                max_num_alids=2048,
                max_multicast_groups=1024,
                max_num_ports=648,
            )

        return await self._serve(context, pb.DomainProperties, build)  # type: ignore[no-any-return]

    async def GetDomainStateInfo(
        self, request: pb.GetDomainStateInfoRequest, context: Any
    ) -> pb.DomainStateInfo:
        def build() -> pb.DomainStateInfo:
            return pb.DomainStateInfo(
                server_header=self._header(),
                context=request.context,
                control_plane_state=pb.NMX_CONTROL_PLANE_STATE_CONFIGURED,
                available_multicast_groups=1024,
                config_status_description="configured (simulated)",
                nmx_controller_health=pb.NMX_CONTROLLER_HEALTH_HEALTHY,
            )

        return await self._serve(context, pb.DomainStateInfo, build)  # type: ignore[no-any-return]

    async def Subscribe(
        self, request: pb.SubscribeRequest, context: Any
    ) -> AsyncIterator[pb.ServerNotification]:
        """One ``FmEvent`` partition change per changed partition, until the client goes away."""
        gate = self.domain.gate
        if not gate.idle:
            try:
                await gate.enter()
            except EndpointDown as exc:
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        queue = self.fabric.subscribe(self.domain.domain_uuid)
        try:
            await context.send_initial_metadata(())
            while True:
                partition_id = await queue.get()
                change = pb.FmEventPartitionChange(partition_id=pb.PartitionId(partition_id=partition_id))
                yield pb.ServerNotification(
                    fm_event=pb.FmEvent(server_header=self._header(), fm_event_partition_change=change)
                )
        finally:
            self.fabric.unsubscribe(self.domain.domain_uuid, queue)


def _partition_info(partition: SimPartition) -> pb.PartitionInfo:
    return pb.PartitionInfo(
        partition_id=pb.PartitionId(partition_id=partition.partition_id),
        name=partition.name,
        num_gpus=len(partition.gpu_uids),
        gpu_uid_list=sorted(partition.gpu_uids),
        health=pb.NMX_PARTITION_HEALTH_HEALTHY,
        partition_type=pb.NMX_PARTITION_TYPE_GPUUID_BASED,
    )


def _location_info(gpu: SimGpu) -> pb.LocationInfo:
    return pb.LocationInfo(
        chassis_serial_number=gpu.chassis_serial,
        tray_index=gpu.tray_index,
        location=pb.Location(chassis_id=gpu.chassis_id, slot_id=gpu.slot_id, host_id=gpu.host_id),
    )


def _at(gpu: SimGpu, loc: pb.Location) -> bool:
    """Whether the GPU is at ``loc``; zero fields of ``loc`` match anything."""
    return (
        (not loc.chassis_id or loc.chassis_id == gpu.chassis_id)
        and (not loc.slot_id or loc.slot_id == gpu.slot_id)
        and (not loc.host_id or loc.host_id == gpu.host_id)
    )


class NmxcSimulator:
    """The NMX-C servers of a simulated site, one per domain, on 127.0.0.1.

    ``base_port`` 0 picks free ports; otherwise domain *i* (in site order) listens on
    ``base_port + i``. A stopped domain keeps its port for :meth:`start_domain`. ``host`` is
    loopback unless a container must be reached from others (``nico sim nmxc --host 0.0.0.0``).
    """

    def __init__(
        self,
        fabric: SimFabric,
        *,
        base_port: int = 0,
        tls: ServerTls | None = None,
        domains: list[uuid.UUID] | None = None,
        host: str = LOOPBACK,
    ) -> None:
        self.fabric = fabric
        self.tls = tls
        self.host = host
        self._domains = domains if domains is not None else list(fabric.domains)
        self._ports = {d: (base_port + i if base_port else 0) for i, d in enumerate(self._domains)}
        self._servers: dict[uuid.UUID, grpc.aio.Server] = {}

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def url(self, domain_uuid: uuid.UUID) -> str:
        port = self._ports[domain_uuid]
        if not port:
            raise RuntimeError(f"the server of domain {domain_uuid} has not started yet")
        return f"{self.scheme}://{self.host}:{port}"

    @property
    def endpoints(self) -> dict[str, str]:
        """Chassis serial -> endpoint URL, for every served chassis."""
        return {
            serial: self.url(d) for d in self._domains for serial in self.fabric.domain(d).chassis_serials
        }

    def target(self, key: uuid.UUID | str) -> DomainTarget:
        """The :class:`DomainTarget` of a domain (by uuid or chassis serial)."""
        domain_uuid = self.fabric.domain(key).domain_uuid
        return DomainTarget(domain_uuid=domain_uuid, endpoint=self.url(domain_uuid))

    async def start(self) -> NmxcSimulator:
        for domain_uuid in self._domains:
            await self.start_domain(domain_uuid)
        return self

    async def start_domain(self, key: uuid.UUID | str) -> None:
        domain_uuid = self.fabric.domain(key).domain_uuid
        if domain_uuid in self._servers:
            return
        server = grpc.aio.server(
            options=[
                # Subscribe streams are long and quiet: let clients keep them alive with pings.
                ("grpc.http2.min_ping_interval_without_data_ms", 5000),
                ("grpc.keepalive_permit_without_calls", 1),
            ]
        )
        servicer = NmxcServicer(self.fabric, domain_uuid)
        pb_grpc.add_NMX_ControllerServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
        address = f"{self.host}:{self._ports[domain_uuid]}"
        if self.tls:
            credentials = grpc.ssl_server_credentials(
                [(self.tls.private_key, self.tls.certificate_chain)],
                root_certificates=self.tls.client_ca,
                require_client_auth=self.tls.client_ca is not None,
            )
            port = server.add_secure_port(address, credentials)
        else:
            port = server.add_insecure_port(address)
        if not port:
            raise OSError(f"cannot listen on {address}")
        await server.start()
        self._ports[domain_uuid] = port
        self._servers[domain_uuid] = server

    async def stop_domain(self, key: uuid.UUID | str) -> None:
        """Stop one domain's server: its port refuses connections until :meth:`start_domain`."""
        server = self._servers.pop(self.fabric.domain(key).domain_uuid, None)
        if server is not None:
            await server.stop(grace=None)

    async def stop(self) -> None:
        for domain_uuid in list(self._servers):
            await self.stop_domain(domain_uuid)

    async def __aenter__(self) -> NmxcSimulator:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
