"""The in-process backend: the same fault knobs and classification as over the network, and events."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest

from nico.fabric.backend import (
    DEFAULT_PARTITION_ID,
    DomainTarget,
    EndpointNotConfigured,
    FabricBusy,
    FabricTimeout,
    FabricUnavailable,
    PartitionEvent,
    PartitionEvents,
)
from nico.fabric.nmxc import nmx_c_pb2 as pb
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend
from tests.fabric.conftest import CALL_TIMEOUT, SHORT
from tests.support.waiting import wait_for


def here(fabric: SimFabric, serial: str = "SIM-0001") -> DomainTarget:
    return DomainTarget(domain_uuid=fabric.domain(serial).domain_uuid)


async def test_fault_knobs(fabric: SimFabric) -> None:
    backend = InProcessBackend(fabric, call_timeout=SHORT)
    fabric.set_faults("SIM-0001", down=True)
    with pytest.raises(FabricUnavailable):
        await backend.list_partitions(here(fabric))
    fabric.set_faults("SIM-0001", down=False, hang=True)
    with pytest.raises(FabricTimeout) as hung:
        await backend.list_partitions(here(fabric))
    assert hung.value.code == "DEADLINE_EXCEEDED"
    assert fabric.gate("SIM-0001").held == 0
    assert await backend.list_partitions(here(fabric, "SIM-0002"))
    fabric.set_faults("SIM-0001", hang=False, error_rate=1.0, error_code=pb.NMX_ST_RESOURCE_NOT_READY)
    with pytest.raises(FabricBusy) as busy:
        await backend.list_gpus(here(fabric))
    assert busy.value.code == "NMX_ST_RESOURCE_NOT_READY"
    fabric.set_faults("SIM-0001", error_rate=0.0, latency=0.01)
    assert len(await backend.list_gpus(here(fabric))) == 72


async def test_an_unknown_domain_has_no_endpoint(fabric: SimFabric) -> None:
    with pytest.raises(EndpointNotConfigured):
        await InProcessBackend(fabric).hello(DomainTarget(domain_uuid=uuid.uuid4()))


async def test_events(fabric: SimFabric, inprocess: InProcessBackend) -> None:
    assert isinstance(inprocess, PartitionEvents)
    target = here(fabric)
    received: asyncio.Queue[PartitionEvent] = asyncio.Queue()

    async def collect() -> None:
        async for event in inprocess.partition_events(target):
            await received.put(event)

    task = asyncio.create_task(collect())
    try:
        await wait_for(lambda: fabric.subscriber_count("SIM-0001") == 1, what="subscription")
        default = next(p for p in await inprocess.list_partitions(target) if p.is_default)
        await inprocess.remove_gpus(target, default, frozenset(sorted(default.gpu_uids)[:1]))
        event = await asyncio.wait_for(received.get(), CALL_TIMEOUT)
        assert event == PartitionEvent(target.domain_uuid, DEFAULT_PARTITION_ID)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert fabric.subscriber_count("SIM-0001") == 0
