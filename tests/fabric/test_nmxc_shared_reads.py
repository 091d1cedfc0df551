"""A domain's health read over NMX-C lists its GPUs once (the GPUs' health and the domain's summary
both need them, asked at once), over real gRPC on loopback; and the sharing itself: a failure reaches
every reader, one reader cancelled leaves the others their answer, and a read that ended is never
handed out again."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from nico.fabric.backend import FabricUnavailable
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxc.in_flight import InFlight
from nico.reconciler import health
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator


async def test_a_health_read_lists_the_domains_gpus_once(
    fabric: SimFabric, nmxc: NmxcBackend, nmxc_sim: NmxcSimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = nmxc_sim.target("SIM-0001")
    sick = sorted(g.gpu_uid for g in await nmxc.list_gpus(target))[3]
    fabric.set_gpu_health(sick, "NO_NVLINK")
    calls: Counter[str] = Counter()
    call = nmxc._call

    async def counted(where: Any, rpc: str, request: Any) -> Any:
        calls[rpc] += 1
        return await call(where, rpc, request)

    monkeypatch.setattr(nmxc, "_call", counted)

    read = await health.fetch(nmxc, target.domain_uuid, target, budget=1024)

    assert read is not None and read.summary is not None
    assert read.gpus[sick] == "NO_NVLINK" and len(read.gpus) == 72
    assert read.summary.gpus == {"HEALTHY": 71, "NO_NVLINK": 1}
    assert calls["GetGpuInfoList"] == 1, calls


async def test_reads_at_once_share_one_call_and_its_failure() -> None:
    shared: InFlight[int] = InFlight()
    made = 0
    release = asyncio.Event()

    async def call() -> int:
        nonlocal made
        made += 1
        await release.wait()
        return made

    first = asyncio.create_task(shared.read("d", call))
    second = asyncio.create_task(shared.read("d", call))
    cancelled = asyncio.create_task(shared.read("d", call))
    await asyncio.sleep(0)
    cancelled.cancel()
    release.set()
    assert await first == await second == 1 and made == 1
    assert cancelled.cancelled()
    assert await shared.read("d", call) == 2  # an ended read is not handed out again

    async def failing() -> int:
        await asyncio.sleep(0)
        raise FabricUnavailable("down")

    results = await asyncio.gather(
        shared.read("d", failing), shared.read("d", failing), return_exceptions=True
    )
    assert [type(r) for r in results] == [FabricUnavailable, FabricUnavailable]
    assert await shared.read("d", call) == 3  # the failure is not kept either
