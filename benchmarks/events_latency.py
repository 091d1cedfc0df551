"""Ready -> event latency of ``GET /nvlink-topology/events`` (issue 14).

Starts embedded PostgreSQL and ``nico serve --no-reconciler`` (a separate process, as in production),
creates N instances (default 100) of 4 NVLink interfaces each through the API, opens the tenant's
event stream, then makes the instances' interfaces Ready one instance at a time as the reconciler
does (a physical partition with its NMX partition id, then ``apply_nvlink_observation``, committed).
Latency = from just before that commit to the arrival of the instance's first Ready event at the
SSE client; it includes the commit itself. Prints p50, p99 and max.

    python benchmarks/events_latency.py [--instances 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from bench_support import (
    SECRET,
    UNLIMITED_QUOTAS,
    expect,
    free_port,
    headers_of,
    scratch_postgres,
    seed_site,
    server_env,
)
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from nico.cli.export import SseReader
from nico.db.engine import make_engine, make_session_factory
from nico.db.models import Gpu, Instance, Machine, PhysicalPartition
from nico.reconciler.lifecycle import apply_nvlink_observation

ORG = "tenant-org"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def realise(session: AsyncSession, instance_id: uuid.UUID, logical: uuid.UUID, fabric_id: int) -> None:
    """What a reconciler's pass writes once the fabric holds the instance: the logical partition's
    physical partition in the instance's domain (made on first use, NMX partition id ``fabric_id``),
    then every binding of the instance Ready with its GPU."""
    machine = await session.scalar(select(Machine).where(Machine.instance_id == instance_id))
    assert machine is not None and machine.domain_uuid is not None
    domain = machine.domain_uuid
    held = await session.scalar(
        select(PhysicalPartition.id).where(
            PhysicalPartition.logical_partition_id == logical, PhysicalPartition.domain_uuid == domain
        )
    )
    if held is None:
        session.add(
            PhysicalPartition(
                logical_partition_id=logical,
                domain_uuid=domain,
                nmx_partition_id=fabric_id,
                fabric_ref=str(fabric_id),
                name=f"{logical}{fabric_id}",
            )
        )
        await session.flush()
    gpus = {
        g.device_id - 1: (domain, g.gpu_uid)
        for g in await session.scalars(select(Gpu).where(Gpu.machine_id == machine.id))
    }
    version = await session.scalar(select(Instance.nvlink_config_version).where(Instance.id == instance_id))
    assert version is not None
    assert await apply_nvlink_observation(session, instance_id, version, gpus)


async def create_instances(client: httpx.AsyncClient, ids: dict[str, str], count: int) -> list[uuid.UUID]:
    """``count`` instances, each with its 4 GPUs bound to the logical partition."""
    items = [{"nvLinkLogicalPartitionId": ids["lp"], "deviceInstance": i} for i in range(4)]
    created = []
    for n in range(count):
        body: dict[str, Any] = {
            "name": f"node-{n:03d}",
            "instanceTypeId": ids["type"],
            "vpcId": ids["vpc"],
            "ipxeScript": "#!ipxe",
            "interfaces": [{"subnetId": ids["subnet"]}],
            "nvLinkInterfaces": items,
        }
        response = await expect(await client.post(f"/v2/org/{ORG}/nico/instance", json=body))
        created.append(uuid.UUID(response["id"]))
    return created


class FirstReady:
    """The tenant's event stream: when each instance's first Ready event arrived."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.arrived: dict[str, float] = {}
        self.got = asyncio.Event()
        self.started = asyncio.Event()

    async def follow(self) -> None:
        reader = SseReader()
        url = f"/v2/org/{ORG}/nico/nvlink-topology/events"
        async with self.client.stream("GET", url, timeout=httpx.Timeout(30, read=None)) as response:
            async for event in reader.events(response):
                if event.event == "hello":
                    self.started.set()
                elif event.event == "placement":
                    data = json.loads(event.data)
                    if data["kind"] == "Ready":
                        self.arrived.setdefault(data["instanceId"], time.perf_counter())
                        self.got.set()

    async def arrival(self, instance_id: uuid.UUID) -> float:
        async with asyncio.timeout(30):
            while True:
                self.got.clear()
                if str(instance_id) in self.arrived:
                    return self.arrived[str(instance_id)]
                await self.got.wait()


async def until_serving(client: httpx.AsyncClient, server: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            if (await client.get("/readyz")).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or server.returncode is not None:
            raise SystemExit("nico serve did not start")
        await asyncio.sleep(0.1)


async def measure(
    client: httpx.AsyncClient, sessions: async_sessionmaker[AsyncSession], ids: dict[str, str], count: int
) -> list[float]:
    """Create the instances, open the stream, then make each Ready: the latency of each."""
    created = await create_instances(client, ids, count)
    stream = FirstReady(client)
    follower = asyncio.create_task(stream.follow())
    await asyncio.wait_for(stream.started.wait(), 30)
    latencies: list[float] = []
    for n, instance_id in enumerate(created):
        async with sessions() as session:
            await realise(session, instance_id, uuid.UUID(ids["lp"]), 100 + n // 18)
            t0 = time.perf_counter()
            await session.commit()
        latencies.append(await stream.arrival(instance_id) - t0)
    follower.cancel()
    return latencies


async def run(url: str, data_dir: Path, count: int) -> list[float]:
    ids = seed_site(url, (count + 17) // 18, ORG)
    port = free_port()
    nico = str(Path(sys.executable).with_name("nico"))
    server = await asyncio.create_subprocess_exec(
        nico,
        "serve",
        "--no-reconciler",
        "--port",
        str(port),
        env=server_env(url, data_dir, SECRET, **UNLIMITED_QUOTAS),
    )
    engine = make_engine(url, pool_size=2)
    headers = headers_of(url, ORG, "TENANT_ADMIN")
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30
        ) as client:
            await until_serving(client, server)
            return await measure(client, make_session_factory(engine), ids, count)
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), 30)
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=100)
    args = parser.parse_args()
    from nico.db import migrate

    data_dir, url = scratch_postgres("nico-bench-", "nico_bench")
    migrate.upgrade(url)
    latencies = asyncio.run(run(url, data_dir, args.instances))
    ms = [v * 1000 for v in latencies]
    print(
        f"Ready -> SSE event over {len(ms)} instances: p50 {pct(ms, 50):.1f} ms, p99 {pct(ms, 99):.1f} ms, "
        f"max {max(ms):.1f} ms, mean {statistics.mean(ms):.1f} ms"
    )


if __name__ == "__main__":
    main()
