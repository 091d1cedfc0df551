"""Simulated NMX-C: one grpc.aio server per domain on loopback, serving a :class:`SimFabric`.

A real NMX-C serves one domain per endpoint, so each domain gets its own server; an NVL36x2 domain's
two chassis serials share it. :class:`NmxcSimulator` knows chassis serial -> endpoint URL, can stop
one domain's server (its port then refuses connections) and start it again on the same port, and
optionally serves TLS, with client certificates required for mTLS.

Every RPC of the 2026 NMX_Controller service is answered: partitions (and their cheap counts and id
lists), GPUs, compute nodes, switch trays and switches with their health, topology, state reports,
admin state of transceivers, domain properties and state, and ``Subscribe``, which pushes partition
changes, ``health_state_changed``, topology changes and ``init_done`` as the fabric's knobs change.

Every reply carries a ``ServerHeader`` with the domain uuid and a return code: refusals are answered
as a real controller does, with gRPC status OK and an ``NMX_ST_*`` code in the header. Fault knobs:
``down`` aborts with UNAVAILABLE, ``hang`` never answers, ``error_rate`` answers ``error_code``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast

import grpc

from nico.fabric.backend import DEFAULT_PARTITION_ID, DomainTarget
from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.fabric.nmxc import nmx_c_pb2_grpc as pb_grpc
from nico.sim.fabric import (
    GPU_HEALTH,
    NODE_HEALTH,
    PARTITION_HEALTH,
    SWITCH_HEALTH,
    SWITCH_PORTS,
    SWITCH_TRAYS,
    SWITCHES_PER_TRAY,
    EndpointDown,
    SimDomain,
    SimError,
    SimEvent,
    SimFabric,
    SimGpu,
    SimPartition,
)
from nico.sim.inprocess import SIM_APP_VERSION

log = logging.getLogger(__name__)

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
                partition_info_list=[_partition_info(self.domain, p) for p in chosen],
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
                resiliency_mode=request.attr.resiliency_mode,
                multicast_groups_limit=request.attr.multicast_groups_limit,
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
            nodes = [
                self._node_info(gpus)
                for gpus in self.domain.compute_nodes().values()
                if not request.loc_list or any(_at(gpus[0], loc) for loc in request.loc_list)
            ]
            return pb.GetComputeNodeInfoListResponse(
                server_header=self._header(), context=request.context, node_info_list=nodes
            )

        return await self._serve(context, pb.GetComputeNodeInfoListResponse, build)  # type: ignore[no-any-return]

    def _node_info(self, gpus: list[SimGpu]) -> pb.ComputeNodeInfo:
        first = gpus[0]
        held = sorted({self.domain.owner[g.gpu_uid] for g in gpus if g.gpu_uid in self.domain.owner})
        health = self.domain.node_health_of(first.chassis_serial, first.tray_index)
        return pb.ComputeNodeInfo(
            loc=_location_info(first),
            num_gpus=len(gpus),
            node_health=cast(pb.ComputeNodeHealth, NODE_HEALTH.index(health)),
            partition_id_list=[pb.PartitionId(partition_id=p) for p in held],
        )

    def _nodes(self, attr: int, chassis_id: int, health: int) -> list[list[SimGpu]]:
        """Compute nodes chosen by ``ComputeNodeAttr``, chassis id and health (0: any). A node is
        allocated as far as its GPUs are in partitions other than the default one."""
        chosen = []
        for gpus in self.domain.compute_nodes().values():
            first = gpus[0]
            if chassis_id and first.chassis_id != chassis_id:
                continue
            node_health = self.domain.node_health_of(first.chassis_serial, first.tray_index)
            if health and NODE_HEALTH.index(node_health) != health:
                continue
            allocated = sum(
                1
                for g in gpus
                if self.domain.owner.get(g.gpu_uid, DEFAULT_PARTITION_ID) != DEFAULT_PARTITION_ID
            )
            by_attr: dict[int, bool] = {
                pb.NMX_COMPUTE_NODE_ATTR_FREE: allocated == 0,
                pb.NMX_COMPUTE_NODE_ATTR_FULLY_ALLOCATED: allocated == len(gpus),
                pb.NMX_COMPUTE_NODE_ATTR_PARTIALLY_ALLOCATED: 0 < allocated < len(gpus),
            }
            if by_attr.get(attr, True):
                chosen.append(gpus)
        return chosen

    async def GetComputeNodeCount(
        self, request: pb.GetComputeNodeCountRequest, context: Any
    ) -> pb.GetComputeNodeCountResponse:
        def build() -> pb.GetComputeNodeCountResponse:
            nodes = self._nodes(request.attr, request.chassis_id, request.node_health)
            return pb.GetComputeNodeCountResponse(
                server_header=self._header(), context=request.context, num_nodes=len(nodes)
            )

        return await self._serve(context, pb.GetComputeNodeCountResponse, build)  # type: ignore[no-any-return]

    async def GetComputeNodeLocationList(
        self, request: pb.GetComputeNodeLocationListRequest, context: Any
    ) -> pb.GetComputeNodeLocationListResponse:
        def build() -> pb.GetComputeNodeLocationListResponse:
            nodes = self._nodes(request.attr, request.chassis_id, request.node_health)
            if request.num_nodes:
                nodes = nodes[: request.num_nodes]
            return pb.GetComputeNodeLocationListResponse(
                server_header=self._header(),
                context=request.context,
                loc_list=[_location_info(gpus[0]).location for gpus in nodes],
            )

        return await self._serve(context, pb.GetComputeNodeLocationListResponse, build)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------------------------ switches

    def _switch_nodes(self, health: int) -> list[tuple[str, int]]:
        """(chassis serial, switch tray index) of every switch tray, chosen by health (0: any)."""
        return [
            (serial, tray)
            for serial in self.domain.chassis_serials
            for tray in range(SWITCH_TRAYS)
            if not health or SWITCH_HEALTH.index(self.domain.switch_node_health_of(serial, tray)) == health
        ]

    def _switch_location(self, serial: str, tray: int) -> pb.LocationInfo:
        chassis_id = int(serial.removeprefix("SIM-"))
        slot = self.domain.switch_slots(serial)[tray]
        return pb.LocationInfo(
            chassis_serial_number=serial,
            tray_index=tray,
            location=pb.Location(chassis_id=chassis_id, slot_id=slot, host_id=1),
        )

    def _switch_at(self, loc: pb.Location) -> list[tuple[str, int]]:
        return [
            (serial, tray)
            for serial, tray in self._switch_nodes(0)
            if (not loc.chassis_id or loc.chassis_id == int(serial.removeprefix("SIM-")))
            and (not loc.slot_id or loc.slot_id == self.domain.switch_slots(serial)[tray])
        ]

    def _switch_uid(self, serial: str, tray: int, switch: int) -> int:
        return (int(serial.removeprefix("SIM-")) << 16) | (tray << 4) | switch | (0xB5 << 56)

    async def GetSwitchNodeCount(
        self, request: pb.GetSwitchNodeCountRequest, context: Any
    ) -> pb.GetSwitchNodeCountResponse:
        def build() -> pb.GetSwitchNodeCountResponse:
            nodes = self._switch_nodes(request.node_health)
            if request.num_nodes:
                nodes = nodes[: request.num_nodes]
            return pb.GetSwitchNodeCountResponse(
                server_header=self._header(), context=request.context, num_nodes=len(nodes)
            )

        return await self._serve(context, pb.GetSwitchNodeCountResponse, build)  # type: ignore[no-any-return]

    async def GetSwitchNodeLocationList(
        self, request: pb.GetSwitchNodeLocationListRequest, context: Any
    ) -> pb.GetSwitchNodeLocationListResponse:
        def build() -> pb.GetSwitchNodeLocationListResponse:
            nodes = self._switch_nodes(request.node_health)
            if request.num_nodes:
                nodes = nodes[: request.num_nodes]
            return pb.GetSwitchNodeLocationListResponse(
                server_header=self._header(),
                context=request.context,
                loc_list=[self._switch_location(*node).location for node in nodes],
            )

        return await self._serve(context, pb.GetSwitchNodeLocationListResponse, build)  # type: ignore[no-any-return]

    async def GetSwitchNodeInfoList(
        self, request: pb.GetSwitchNodeInfoListRequest, context: Any
    ) -> pb.GetSwitchNodeInfoListResponse:
        def build() -> pb.GetSwitchNodeInfoListResponse:
            if request.loc_list:
                nodes = [node for loc in request.loc_list for node in self._switch_at(loc)]
            else:
                nodes = self._switch_nodes(0)
            # Every switch carries traffic of every partition of the rack.
            partitions = [pb.PartitionId(partition_id=p) for p in sorted(self.domain.partitions)]
            infos = [
                pb.SwitchNodeInfo(
                    loc=self._switch_location(serial, tray),
                    num_switches=SWITCHES_PER_TRAY,
                    node_health=cast(
                        pb.SwitchNodeHealth,
                        SWITCH_HEALTH.index(self.domain.switch_node_health_of(serial, tray)),
                    ),
                    partition_id_list=partitions,
                )
                for serial, tray in nodes
            ]
            return pb.GetSwitchNodeInfoListResponse(
                server_header=self._header(), context=request.context, node_info_list=infos
            )

        return await self._serve(context, pb.GetSwitchNodeInfoListResponse, build)  # type: ignore[no-any-return]

    async def GetSwitchInfoList(
        self, request: pb.GetSwitchInfoListRequest, context: Any
    ) -> pb.GetSwitchInfoListResponse:
        def build() -> pb.GetSwitchInfoListResponse:
            nodes = self._switch_at(request.loc) if request.HasField("loc") else self._switch_nodes(0)
            switches = [
                pb.SwitchInfo(
                    loc=self._switch_location(serial, tray).location,
                    switch_id=switch,
                    switch_uid=self._switch_uid(serial, tray, switch),
                    num_ports=SWITCH_PORTS,
                    health=cast(
                        pb.SwitchHealth,
                        SWITCH_HEALTH.index(self.domain.switch_health_of(serial, tray, switch)),
                    ),
                )
                for serial, tray in nodes
                for switch in range(SWITCHES_PER_TRAY)
            ]
            if request.num_switches:
                switches = switches[: request.num_switches]
            return pb.GetSwitchInfoListResponse(
                server_header=self._header(), context=request.context, switch_info_list=switches
            )

        return await self._serve(context, pb.GetSwitchInfoListResponse, build)  # type: ignore[no-any-return]

    # ---------------------------------------------------------------------- partition counts and ids

    def _partitions(self, attr: int, num_gpus: int, num_nodes: int, health: int) -> list[SimPartition]:
        chosen = []
        for partition in sorted(self.domain.partitions.values(), key=lambda p: p.partition_id):
            if attr == pb.NMX_PARTITION_INFO_ATTR_NUM_GPUS and len(partition.gpu_uids) != num_gpus:
                continue
            if attr == pb.NMX_PARTITION_INFO_ATTR_NUM_COMPUTE_NODES:
                trays = {
                    (self.domain.gpus[u].chassis_serial, self.domain.gpus[u].tray_index)
                    for u in partition.gpu_uids
                }
                if len(trays) != num_nodes:
                    continue
            if health and PARTITION_HEALTH.index(self.domain.partition_health_of(partition)) != health:
                continue
            chosen.append(partition)
        return chosen

    async def GetPartitionCount(
        self, request: pb.GetPartitionCountRequest, context: Any
    ) -> pb.GetPartitionCountResponse:
        def build() -> pb.GetPartitionCountResponse:
            chosen = self._partitions(request.info_attr, request.num_gpus, request.num_nodes, request.health)
            return pb.GetPartitionCountResponse(
                server_header=self._header(), context=request.context, num_partitions=len(chosen)
            )

        return await self._serve(context, pb.GetPartitionCountResponse, build)  # type: ignore[no-any-return]

    async def GetPartitionIdList(
        self, request: pb.GetPartitionIdListRequest, context: Any
    ) -> pb.GetPartitionIdListResponse:
        def build() -> pb.GetPartitionIdListResponse:
            chosen = self._partitions(request.info_attr, request.num_gpus, request.num_nodes, request.health)
            if request.num_partitions:
                chosen = chosen[: request.num_partitions]
            return pb.GetPartitionIdListResponse(
                server_header=self._header(),
                context=request.context,
                partition_list=[
                    pb.Partition(
                        partition_id=pb.PartitionId(partition_id=p.partition_id), num_gpus=len(p.gpu_uids)
                    )
                    for p in chosen
                ],
            )

        return await self._serve(context, pb.GetPartitionIdListResponse, build)  # type: ignore[no-any-return]

    # --------------------------------------------------------------------------- topology and reports

    def _topology(self) -> list[pb.DeviceTopoInfo]:
        devices = []
        for serial, tray in self._switch_nodes(0):
            for switch in range(SWITCHES_PER_TRAY):
                devices.append(
                    pb.DeviceTopoInfo(
                        switch_topo_info=pb.SwitchTopoInfo(
                            loc=self._switch_location(serial, tray),
                            device_uid=self._switch_uid(serial, tray, switch),
                            device_id=switch,
                            num_ports=SWITCH_PORTS,
                            vendor_id=0x10DE,
                            description="NVLink switch (simulated)",
                            partition_id=[
                                pb.PartitionId(partition_id=p) for p in sorted(self.domain.partitions)
                            ],
                            device_health=cast(
                                pb.SwitchHealth,
                                SWITCH_HEALTH.index(self.domain.switch_health_of(serial, tray, switch)),
                            ),
                        )
                    )
                )
        for gpu in self.domain.gpus.values():
            holder = self.domain.owner.get(gpu.gpu_uid)
            devices.append(
                pb.DeviceTopoInfo(
                    gpu_topo_info=pb.GpuTopoInfo(
                        loc=_location_info(gpu),
                        device_uid=gpu.gpu_uid,
                        device_id=gpu.device_id,
                        num_ports=18,
                        vendor_id=0x10DE,
                        description=self.domain.gpu_description,
                        partition_id=[pb.PartitionId(partition_id=holder)] if holder is not None else [],
                        device_health=cast(pb.GpuHealth, GPU_HEALTH.index(gpu.health)),
                    )
                )
            )
        return devices

    async def GetTopologyInfo(self, request: pb.GetTopologyInfoRequest, context: Any) -> pb.FmTopologyInfo:
        def build() -> pb.FmTopologyInfo:
            return pb.FmTopologyInfo(
                server_header=self._header(), context=request.context, device_topo_info=self._topology()
            )

        return await self._serve(context, pb.FmTopologyInfo, build)  # type: ignore[no-any-return]

    async def GetStateReport(
        self, request: pb.GetStateReportRequest, context: Any
    ) -> pb.GetStateReportResponse:
        def build() -> pb.GetStateReportResponse:
            reply = pb.GetStateReportResponse(server_header=self._header(), context=request.context)
            if request.report_type == pb.NMX_REPORT_TYPE_TOPOLOGY:
                reply.device_topo_info.device_topo_info.extend(self._topology())
            elif request.report_type == pb.NMX_REPORT_TYPE_PARTITIONS:
                for partition in sorted(self.domain.partitions.values(), key=lambda p: p.partition_id):
                    reply.partitions.partitions.append(
                        pb.PartitionReport(
                            partition_id=pb.PartitionId(partition_id=partition.partition_id),
                            gpus=[
                                pb.PartitionGpu(
                                    device_uid=uid, location_info=_location_info(self.domain.gpus[uid])
                                )
                                for uid in sorted(partition.gpu_uids)
                            ],
                        )
                    )
            else:
                raise SimError(pb.NMX_ST_BADPARAM, f"report type {request.report_type}")
            return reply

        return await self._serve(context, pb.GetStateReportResponse, build)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------------------------ admin state

    @staticmethod
    def _transceiver_key(ident: pb.TransceiverIdentifier) -> tuple[str, int, int]:
        chassis = (
            ident.chassis_serial_number
            if ident.WhichOneof("chassisInfo") == "chassis_serial_number"
            else f"SIM-{ident.chassis_id:04d}"
        )
        return chassis, ident.slot_id, ident.transceiver_num

    async def GetAdminState(self, request: pb.GetAdminStateRequest, context: Any) -> pb.GetAdminStateResponse:
        def build() -> pb.GetAdminStateResponse:
            states = self.domain.admin_state
            if request.HasField("transceiver_identifier"):
                key = self._transceiver_key(request.transceiver_identifier)
                if key[0] not in self.domain.chassis_serials:
                    raise SimError(pb.NMX_ST_BADPARAM, f"chassis {key[0]} is not in this domain")
                chosen = {key: states.get(key, pb.NMX_ADMIN_STATE_UP)}
            else:
                chosen = dict(states)
            entries = [
                pb.AdminStateEntry(
                    admin_state=cast(pb.AdminState, state),
                    transceiver_identifier=pb.TransceiverIdentifier(
                        chassis_serial_number=serial, slot_id=slot, transceiver_num=number
                    ),
                )
                for (serial, slot, number), state in sorted(chosen.items())
            ]
            return pb.GetAdminStateResponse(
                server_header=self._header(), context=request.context, admin_state_entry=entries
            )

        return await self._serve(context, pb.GetAdminStateResponse, build)  # type: ignore[no-any-return]

    async def SetAdminState(self, request: pb.SetAdminStateRequest, context: Any) -> pb.SetAdminStateResponse:
        def build() -> pb.SetAdminStateResponse:
            entry = request.admin_state_entry
            if not entry.HasField("transceiver_identifier"):
                raise SimError(pb.NMX_ST_BADPARAM, "no transceiver named")
            if entry.admin_state not in (
                pb.NMX_ADMIN_STATE_UP,
                pb.NMX_ADMIN_STATE_DOWN,
                pb.NMX_ADMIN_STATE_DIAG,
            ):
                raise SimError(pb.NMX_ST_BADPARAM, f"admin state {entry.admin_state}")
            key = self._transceiver_key(entry.transceiver_identifier)
            if key[0] not in self.domain.chassis_serials:
                raise SimError(pb.NMX_ST_BADPARAM, f"chassis {key[0]} is not in this domain")
            self.domain.admin_state[key] = entry.admin_state
            return pb.SetAdminStateResponse(
                server_header=self._header(), context=request.context, admin_state_entry=entry
            )

        return await self._serve(context, pb.SetAdminStateResponse, build)  # type: ignore[no-any-return]

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
                max_switch_nodes=SWITCH_TRAYS * chassis,
                max_switch_nodes_per_chassis=SWITCH_TRAYS,
                max_switches_per_switch_node=SWITCHES_PER_TRAY,
                max_switch_nv_links=SWITCH_PORTS,
                min_gpus_per_partition=1,
                max_num_partitions=self.domain.max_partitions,
                max_num_alids=2048,
                max_multicast_groups=self.domain.max_multicast_groups,
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
                available_multicast_groups=(
                    self.domain.max_multicast_groups - self.domain.multicast_groups_reserved()
                ),
                config_status_description="configured (simulated)",
                nmx_controller_health=pb.NMX_CONTROLLER_HEALTH_HEALTHY,
            )

        return await self._serve(context, pb.DomainStateInfo, build)  # type: ignore[no-any-return]

    async def Subscribe(
        self, request: pb.SubscribeRequest, context: Any
    ) -> AsyncIterator[pb.ServerNotification]:
        """A ``SubscriptionResponse`` first, then one notification per fabric event until the client
        goes away: an ``FmEvent`` partition change per changed partition, ``health_state_changed`` per
        health change, an ``FmEvent`` topology change and ``init_done`` after a re-initialisation."""
        gate = self.domain.gate
        if not gate.idle:
            try:
                await gate.enter()
            except EndpointDown as exc:
                await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        queue = self.fabric.subscribe(self.domain.domain_uuid)
        try:
            await context.send_initial_metadata(())
            yield pb.ServerNotification(
                subscription_response=pb.SubscriptionResponse(server_header=self._header())
            )
            while True:
                yield self._notification(await queue.get())
        finally:
            self.fabric.unsubscribe(self.domain.domain_uuid, queue)

    def _notification(self, event: SimEvent) -> pb.ServerNotification:
        kind, partition_id = event
        if kind == "health":
            return pb.ServerNotification(
                health_state_changed=pb.HealthStateChanged(server_header=self._header())
            )
        if kind == "init_done":
            return pb.ServerNotification(init_done=pb.InitDone(server_header=self._header()))
        if kind == "topology":
            return pb.ServerNotification(
                fm_event=pb.FmEvent(
                    server_header=self._header(), fm_event_topology_change=pb.FmEventTopologyChange()
                )
            )
        change = pb.FmEventPartitionChange(partition_id=pb.PartitionId(partition_id=partition_id or 0))
        return pb.ServerNotification(
            fm_event=pb.FmEvent(server_header=self._header(), fm_event_partition_change=change)
        )


def _partition_info(domain: SimDomain, partition: SimPartition) -> pb.PartitionInfo:
    return pb.PartitionInfo(
        partition_id=pb.PartitionId(partition_id=partition.partition_id),
        name=partition.name,
        num_gpus=len(partition.gpu_uids),
        gpu_uid_list=sorted(partition.gpu_uids),
        health=cast(pb.PartitionHealth, PARTITION_HEALTH.index(domain.partition_health_of(partition))),
        partition_type=pb.NMX_PARTITION_TYPE_GPUUID_BASED,
        attr=pb.PartitionAttr(
            resiliency_mode=cast(pb.ResiliencyMode, partition.resiliency_mode),
            multicast_groups_limit=partition.multicast_groups_limit,
        ),
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
        """Chassis serial -> endpoint URL, for every served chassis (a minipod's chassis: the
        endpoint of its first domain; the others are found by :attr:`domain_endpoints`)."""
        found: dict[str, str] = {}
        for d in self._domains:
            for serial in self.fabric.domain(d).chassis_serials:
                found.setdefault(serial, self.url(d))
        return found

    @property
    def domain_endpoints(self) -> dict[uuid.UUID, str]:
        """Domain uuid -> endpoint URL, for every served domain."""
        return {d: self.url(d) for d in self._domains}

    def target(self, key: uuid.UUID | str) -> DomainTarget:
        """The :class:`DomainTarget` of a domain (by uuid or chassis serial)."""
        domain_uuid = self.fabric.domain(key).domain_uuid
        return DomainTarget(domain_uuid=domain_uuid, endpoint=self.url(domain_uuid))

    async def start(self) -> NmxcSimulator:
        try:
            for domain_uuid in self._domains:
                await self.start_domain(domain_uuid)
        except BaseException:
            await self.stop()  # the domains already listening must not outlive a failed start
            raise
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
        try:
            if self.tls:
                credentials = grpc.ssl_server_credentials(
                    [(self.tls.private_key, self.tls.certificate_chain)],
                    root_certificates=self.tls.client_ca,
                    require_client_auth=self.tls.client_ca is not None,
                )
                port = server.add_secure_port(address, credentials)
            else:
                port = server.add_insecure_port(address)
        except RuntimeError:  # grpcio >= 1.60 raises where older ones returned 0
            port = 0
        if not port:
            await server.stop(grace=None)
            raise OSError(f"cannot listen on {address} (is the port in use?)")
        await server.start()
        self._ports[domain_uuid] = port
        self._servers[domain_uuid] = server

    async def stop_domain(self, key: uuid.UUID | str) -> None:
        """Stop one domain's server: its port refuses connections until :meth:`start_domain`."""
        server = self._servers.pop(self.fabric.domain(key).domain_uuid, None)
        if server is not None:
            # grace=None cancels every RPC; a handler that ignores it must not hold up the stop.
            try:
                await asyncio.wait_for(server.stop(grace=None), timeout=5.0)
            except TimeoutError:
                log.warning("NMX-C simulator for %s did not stop within 5 s", key)

    async def stop(self) -> None:
        for domain_uuid in list(self._servers):
            await self.stop_domain(domain_uuid)

    async def __aenter__(self) -> NmxcSimulator:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
