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
from bench_support import free_port, scratch_postgres, server_env

ORG = "tenant-org"
SECRET = "bench-secret-0123456789abcdef-0123456789"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def run(url: str, data_dir: Path, count: int) -> list[float]:
    from nico.api.app import build_context
    from nico.api.auth import issue_dev_token
    from nico.api.context import AppContext
    from nico.cli.export import SseReader
    from nico.config import load_settings
    from tests.support import factories as f
    from tests.support.placement import realise

    settings = load_settings(database_url=url, data_dir=data_dir, auth={"hs256_secret": SECRET})
    ctx: AppContext = build_context(settings, url)
    racks = (count + 17) // 18
    async with ctx.sessions() as session:
        world = await f.nvlink_site(session, racks=racks, trays=18)
        partition = await f.logical_partition(session, world.tenant, world.site)
        await session.commit()
    port = free_port()
    env = server_env(url, data_dir, SECRET)
    nico = str(Path(sys.executable).with_name("nico"))
    server = await asyncio.create_subprocess_exec(
        nico, "serve", "--no-reconciler", "--port", str(port), env=env
    )
    token = issue_dev_token(settings, org=ORG, roles=["TENANT_ADMIN"])
    base = f"http://127.0.0.1:{port}/v2/org/{ORG}/nico"
    latencies: list[float] = []
    try:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if (await client.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or server.returncode is not None:
                    raise SystemExit("nico serve did not start")
                await asyncio.sleep(0.1)
            ids = []
            items = [{"nvLinkLogicalPartitionId": str(partition.id), "deviceInstance": i} for i in range(4)]
            for n in range(count):
                body: dict[str, Any] = {
                    "name": f"node-{n:03d}",
                    "instanceTypeId": str(world.instance_type.id),
                    "vpcId": str(world.vpc.id),
                    "ipxeScript": "#!ipxe",
                    "interfaces": [{"subnetId": str(world.subnet.id)}],
                    "nvLinkInterfaces": items,
                }
                response = await client.post(f"{base}/instance", json=body)
                assert response.status_code == 201, response.text
                ids.append(uuid.UUID(response.json()["id"]))

            arrived: dict[str, float] = {}
            got = asyncio.Event()
            started = asyncio.Event()

            async def follow() -> None:
                reader = SseReader()
                async with client.stream(
                    "GET", f"{base}/nvlink-topology/events", timeout=httpx.Timeout(30, read=None)
                ) as response:
                    async for event in reader.events(response):
                        if event.event == "hello":
                            started.set()
                        elif event.event == "placement":
                            data = json.loads(event.data)
                            if data["kind"] == "Ready":
                                arrived.setdefault(data["instanceId"], time.perf_counter())
                                got.set()

            follower = asyncio.create_task(follow())
            await asyncio.wait_for(started.wait(), 30)
            for n, instance_id in enumerate(ids):
                async with ctx.sessions() as session:
                    await realise(session, instance_id, partition.id, 100 + n // 18)
                    t0 = time.perf_counter()
                    await session.commit()
                async with asyncio.timeout(30):
                    while True:
                        got.clear()
                        if str(instance_id) in arrived:
                            break
                        await got.wait()
                latencies.append(arrived[str(instance_id)] - t0)
            follower.cancel()
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), 30)
        await ctx.close()
    return latencies


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
