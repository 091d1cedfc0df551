"""A :class:`~nico.fabric.backend.FabricBackend` straight over a :class:`SimFabric`: no network.

Same rules, return codes and error classification as the NMX-C client against the gRPC simulator,
and the same fault knobs (down, hang past the deadline, injected errors, latency), but no
serialisation or sockets, so the reconciler's tests and scale benchmark can drive thousands of
racks. Listing a domain costs O(partitions of that domain).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Literal

from nico.fabric.backend import (
    DomainHealth,
    DomainHello,
    DomainLimits,
    DomainTarget,
    EndpointNotConfigured,
    EventKind,
    FabricComputeNode,
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
from nico.fabric.return_codes import return_code_error
from nico.sim.fabric import (
    GPUS_PER_TRAY,
    RESILIENCY_MODES,
    SWITCH_PORTS,
    SWITCH_TRAYS,
    SWITCHES_PER_TRAY,
    EndpointDown,
    SimDomain,
    SimError,
    SimFabric,
    SimPartition,
)

SIM_APP_VERSION = "nico-sim"


class InProcessBackend:
    """NMX-C semantics (synchronous calls, partitions addressed by id) over an in-memory site."""

    kind: Literal["nmxc", "nmxm"] = "nmxc"

    def __init__(self, fabric: SimFabric, *, call_timeout: float = 5.0) -> None:
        self.fabric = fabric
        self._timeout = call_timeout
        self.capabilities = nmxc_capabilities(self)

    async def _enter(self, target: DomainTarget) -> SimDomain:
        try:
            domain = self.fabric.domain(target.domain_uuid)
        except KeyError:
            raise EndpointNotConfigured(f"no simulated domain {target.domain_uuid}") from None
        if domain.gate.idle:
            return domain
        where = f"sim:{domain.domain_uuid}"
        try:
            async with asyncio.timeout(self._timeout):
                code = await domain.gate.enter()
        except EndpointDown as exc:
            raise FabricUnavailable(str(exc), code="UNAVAILABLE", endpoint=where) from None
        except TimeoutError:
            raise FabricTimeout(
                f"no answer within {self._timeout}s", code="DEADLINE_EXCEEDED", endpoint=where
            ) from None
        if code is not None:
            raise return_code_error(code, "injected error", endpoint=where)
        return domain

    @staticmethod
    @contextlib.contextmanager
    def _refusals(domain: SimDomain) -> Iterator[None]:
        """The controller's refusals, as the NMX-C client reports them."""
        try:
            yield
        except SimError as exc:
            raise return_code_error(exc.code, exc.message, endpoint=f"sim:{domain.domain_uuid}") from None

    async def hello(self, target: DomainTarget) -> DomainHello:
        domain = await self._enter(target)
        return DomainHello(domain_uuid=domain.domain_uuid, app_version=SIM_APP_VERSION)

    async def list_partitions(self, target: DomainTarget) -> list[FabricPartition]:
        domain = await self._enter(target)
        return [_partition(domain, p) for p in domain.partitions.values()]

    async def create_partition(
        self,
        target: DomainTarget,
        name: str,
        gpu_uids: frozenset[int],
        *,
        resiliency_mode: str | None = None,
        multicast_groups_limit: int | None = None,
    ) -> FabricPartition:
        domain = await self._enter(target)
        mode = 0
        if resiliency_mode is not None:
            if resiliency_mode.upper() not in RESILIENCY_MODES[1:]:
                raise FabricRejected(
                    f"unknown resiliency mode {resiliency_mode!r}", code="BAD_RESILIENCY_MODE"
                )
            mode = RESILIENCY_MODES.index(resiliency_mode.upper())
        with self._refusals(domain):
            created = self.fabric.create_partition(
                domain.domain_uuid,
                name,
                sorted(gpu_uids),
                resiliency_mode=mode,
                multicast_groups_limit=multicast_groups_limit or 0,
            )
        return _partition(domain, created)

    async def partition_count(self, target: DomainTarget) -> int:
        domain = await self._enter(target)
        return len(domain.partitions)

    async def partition_sizes(self, target: DomainTarget) -> dict[int, int]:
        domain = await self._enter(target)
        return {p.partition_id: len(p.gpu_uids) for p in domain.partitions.values()}

    async def list_compute_nodes(self, target: DomainTarget) -> list[FabricComputeNode]:
        domain = await self._enter(target)
        nodes = []
        for (serial, tray), gpus in domain.compute_nodes().items():
            nodes.append(
                FabricComputeNode(
                    chassis_serial=serial,
                    tray_index=tray,
                    slot_id=gpus[0].slot_id,
                    num_gpus=len(gpus),
                    health=domain.node_health_of(serial, tray),
                    partition_ids=frozenset(
                        domain.owner[g.gpu_uid] for g in gpus if g.gpu_uid in domain.owner
                    ),
                )
            )
        return nodes

    async def list_switch_nodes(self, target: DomainTarget) -> list[FabricSwitchNode]:
        domain = await self._enter(target)
        return [
            FabricSwitchNode(
                chassis_serial=serial,
                tray_index=tray,
                slot_id=domain.switch_slots(serial)[tray],
                num_switches=SWITCHES_PER_TRAY,
                health=domain.switch_node_health_of(serial, tray),
                partition_ids=frozenset(domain.partitions),
            )
            for serial in domain.chassis_serials
            for tray in range(SWITCH_TRAYS)
        ]

    async def domain_limits(self, target: DomainTarget) -> DomainLimits:
        domain = await self._enter(target)
        chassis = len(domain.chassis_serials)
        return DomainLimits(
            max_compute_nodes=domain.trays_per_chassis * chassis,
            max_gpus_per_compute_node=GPUS_PER_TRAY,
            max_switch_nodes=SWITCH_TRAYS * chassis,
            line_rate_mbps=200_000,
            min_gpus_per_partition=1,
            max_num_partitions=domain.max_partitions,
            max_num_alids=2048,
            max_multicast_groups=domain.max_multicast_groups,
            max_num_ports=SWITCH_PORTS * SWITCHES_PER_TRAY * SWITCH_TRAYS * chassis,
        )

    async def health_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        return await self.list_gpus(target)

    async def domain_health(self, target: DomainTarget) -> DomainHealth:
        domain = await self._enter(target)
        nodes = await self.list_compute_nodes(target)
        switches = await self.list_switch_nodes(target)
        return DomainHealth(
            domain_uuid=domain.domain_uuid,
            gpus=health_counts(g.health for g in domain.gpus.values()),
            compute_nodes=health_counts(n.health for n in nodes),
            switch_nodes=health_counts(n.health for n in switches),
            partitions=health_counts(domain.partition_health_of(p) for p in domain.partitions.values()),
            controller="HEALTHY",
            control_plane="CONFIGURED",
            available_multicast_groups=domain.max_multicast_groups - domain.multicast_groups_reserved(),
        )

    async def add_gpus(
        self, target: DomainTarget, partition: FabricPartition, gpu_uids: frozenset[int]
    ) -> None:
        await self._update(target, partition, gpu_uids, self.fabric.add_gpus)

    async def remove_gpus(
        self, target: DomainTarget, partition: FabricPartition, gpu_uids: frozenset[int]
    ) -> None:
        await self._update(target, partition, gpu_uids, self.fabric.remove_gpus)

    async def _update(
        self,
        target: DomainTarget,
        partition: FabricPartition,
        gpu_uids: frozenset[int],
        change: Callable[[uuid.UUID, int, list[int]], SimPartition],
    ) -> None:
        if not gpu_uids:
            return
        domain = await self._enter(target)
        with self._refusals(domain):
            change(domain.domain_uuid, partition.nmx_partition_id, sorted(gpu_uids))

    async def delete_partition(self, target: DomainTarget, partition: FabricPartition) -> None:
        domain = await self._enter(target)
        with self._refusals(domain):
            self.fabric.delete_partition(domain.domain_uuid, partition.nmx_partition_id)

    async def list_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        domain = await self._enter(target)
        return [
            FabricGpu(
                gpu_uid=gpu.gpu_uid,
                device_id=gpu.device_id,
                chassis_serial=gpu.chassis_serial,
                tray_index=gpu.tray_index,
                slot_id=gpu.slot_id,
                domain_uuid=gpu.domain_uuid,
                health=gpu.health,
                nmx_partition_id=domain.owner.get(gpu.gpu_uid),
                description=domain.gpu_description,
            )
            for gpu in domain.gpus.values()
        ]

    async def gpu_topology(self, target: DomainTarget) -> list[FabricGpu]:
        """As NMX-C's ``GetTopologyInfo`` reports the GPUs: with their names."""
        return await self.list_gpus(target)

    async def partition_events(self, target: DomainTarget) -> AsyncIterator[PartitionEvent]:
        """Every event of the domain from now on (partition and health changes, topology changes,
        init-done), until the consumer stops iterating."""
        domain = await self._enter(target)
        queue = self.fabric.subscribe(domain.domain_uuid)
        try:
            while True:
                kind, partition_id = await queue.get()
                yield PartitionEvent(
                    domain_uuid=domain.domain_uuid,
                    nmx_partition_id=partition_id,
                    kind=_KINDS.get(kind, "partition"),
                )
        finally:
            self.fabric.unsubscribe(domain.domain_uuid, queue)

    async def close(self) -> None:
        """Nothing to release: there are no connections."""


_KINDS: dict[str, EventKind] = {"health": "health", "topology": "topology", "init_done": "init_done"}


def _partition(domain: SimDomain, partition: SimPartition) -> FabricPartition:
    return FabricPartition(
        nmx_partition_id=partition.partition_id,
        ref=str(partition.partition_id),
        name=partition.name,
        gpu_uids=frozenset(partition.gpu_uids),
        health=domain.partition_health_of(partition),
        resiliency_mode=RESILIENCY_MODES[partition.resiliency_mode],
        multicast_groups_limit=partition.multicast_groups_limit,
    )
