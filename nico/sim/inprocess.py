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
    DomainHello,
    DomainTarget,
    EndpointNotConfigured,
    FabricGpu,
    FabricPartition,
    FabricTimeout,
    FabricUnavailable,
    PartitionEvent,
)
from nico.fabric.return_codes import return_code_error
from nico.sim.fabric import EndpointDown, SimDomain, SimError, SimFabric, SimPartition

SIM_APP_VERSION = "nico-sim"


class InProcessBackend:
    """NMX-C semantics (synchronous calls, partitions addressed by id) over an in-memory site."""

    kind: Literal["nmxc", "nmxm"] = "nmxc"

    def __init__(self, fabric: SimFabric, *, call_timeout: float = 5.0) -> None:
        self.fabric = fabric
        self._timeout = call_timeout

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
        return [_partition(p) for p in domain.partitions.values()]

    async def create_partition(
        self, target: DomainTarget, name: str, gpu_uids: frozenset[int]
    ) -> FabricPartition:
        domain = await self._enter(target)
        with self._refusals(domain):
            return _partition(self.fabric.create_partition(domain.domain_uuid, name, sorted(gpu_uids)))

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
            change(domain.domain_uuid, partition.partition_id, sorted(gpu_uids))

    async def delete_partition(self, target: DomainTarget, partition: FabricPartition) -> None:
        domain = await self._enter(target)
        with self._refusals(domain):
            self.fabric.delete_partition(domain.domain_uuid, partition.partition_id)

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
                partition_id=domain.owner.get(gpu.gpu_uid),
            )
            for gpu in domain.gpus.values()
        ]

    async def partition_events(self, target: DomainTarget) -> AsyncIterator[PartitionEvent]:
        """Every partition change of the domain from now on, until the consumer stops iterating."""
        domain = await self._enter(target)
        queue = self.fabric.subscribe(domain.domain_uuid)
        try:
            while True:
                partition_id = await queue.get()
                yield PartitionEvent(domain_uuid=domain.domain_uuid, partition_id=partition_id)
        finally:
            self.fabric.unsubscribe(domain.domain_uuid, queue)

    async def close(self) -> None:
        """Nothing to release: there are no connections."""


def _partition(partition: SimPartition) -> FabricPartition:
    return FabricPartition(
        partition_id=partition.partition_id,
        ref=str(partition.partition_id),
        name=partition.name,
        gpu_uids=frozenset(partition.gpu_uids),
    )
