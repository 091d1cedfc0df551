"""Fabric changes per PATCH under a flood of PATCHes moving one instance back and forth.

One simulated NVL72 rack (NMX-C gRPC on loopback, in this process) and ``nico serve`` (API and
reconciler) on embedded PostgreSQL. One tenant creates an instance of four GPUs bound to logical
partition A and waits for it to be Ready; then one client sends ``--patches`` PATCHes, each as soon as
the last was answered, moving the four GPUs to B, back to A, to B... Counts what the server answered
(200, 429, ...), the fabric changes the reconciler made meanwhile (the sum of its
``*_changes_applied_total`` counters, read from ``/metrics``), and the seconds until the instance is
Ready in the partition the last accepted PATCH asked for. Prints fabric changes per accepted PATCH.

    python benchmarks/flap_bench.py [--patches 200] [--unlimited-rate]

``--unlimited-rate`` lifts the tenant's request rate (``[quotas]``), to see the reconciler's own
coalescing alone. Runs on any checkout: the baseline of a change is the same script with
``PYTHONPATH`` pointing at the code before it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import time
from typing import Any

import httpx
from bench_support import (
    SECRET,
    UNLIMITED_QUOTAS,
    expect,
    free_port,
    scratch_postgres,
    seed_provider,
    seed_tenant,
    server_env,
    until_ready,
)
from prometheus_client.parser import text_string_to_metric_families

from nico.db import migrate
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator

READY_WITHIN = 60.0


async def fabric_changes(client: httpx.AsyncClient) -> int:
    """Every fabric change call the reconciler has made, whatever its outcome."""
    text = (await client.get("/metrics")).text
    return int(
        sum(
            sample.value
            for family in text_string_to_metric_families(text)
            if family.name.endswith("_changes_applied")
            for sample in family.samples
            if sample.name.endswith("_total")
        )
    )


def bindings(partition: str) -> list[dict[str, Any]]:
    return [{"nvLinkLogicalPartitionId": partition, "deviceInstance": i} for i in range(4)]


async def ready_in(client: httpx.AsyncClient, path: str, token: str, partition: str) -> float:
    """Seconds until every interface of the instance is Ready in ``partition``."""
    started = time.monotonic()
    while time.monotonic() - started < READY_WITHIN:
        found = (await client.get(path, headers={"Authorization": token})).json()
        interfaces = found.get("nvLinkInterfaces") or []
        if len(interfaces) == 4 and all(
            i["status"] == "Ready" and i["nvLinkLogicalPartitionId"] == partition for i in interfaces
        ):
            return time.monotonic() - started
        await asyncio.sleep(0.02)
    raise SystemExit(f"the instance was not Ready in {partition} within {READY_WITHIN:.0f} s")


async def flood(client: httpx.AsyncClient, args: argparse.Namespace, ids: dict[str, Any]) -> None:
    token, t = ids["token"], f"/v2/org/{ids['org']}/nico"
    headers = {"Authorization": token}
    other = await expect(
        await client.post(
            f"{t}/nvlink-logical-partition", json={"name": "lp-b", "siteId": ids["site"]}, headers=headers
        )
    )
    a, b = ids["lp"], other["id"]
    body = {
        "name": "flapper",
        "instanceTypeId": ids["itype"],
        "vpcId": ids["vpc"],
        "ipxeScript": "#!ipxe",
        "interfaces": [{"subnetId": ids["subnet"]}],
        "nvLinkInterfaces": bindings(a),
    }
    instance = await expect(await client.post(f"{t}/instance", json=body, headers=headers))
    path = f"{t}/instance/{instance['id']}"
    await ready_in(client, path, token, a)
    before = await fabric_changes(client)
    answers: collections.Counter[int] = collections.Counter()
    last, started = a, time.monotonic()
    for n in range(args.patches):
        target = b if n % 2 == 0 else a
        response = await client.patch(path, json={"nvLinkInterfaces": bindings(target)}, headers=headers)
        answers[response.status_code] += 1
        if response.status_code == 200:
            last = target
    flooded = time.monotonic() - started
    settled = await ready_in(client, path, token, last)
    changes = await fabric_changes(client) - before
    accepted = answers[200]
    print(
        f"flap: {args.patches} PATCHes in {flooded:.1f} s ({args.patches / flooded:.0f}/s), "
        "one instance A<->B"
    )
    print("  answered:", ", ".join(f"{status}: {count}" for status, count in sorted(answers.items())))
    print(f"  fabric changes: {changes}, per accepted PATCH: {changes / max(accepted, 1):.2f}")
    print(f"  Ready in the last accepted partition {settled:.2f} s after the flood")


async def run(args: argparse.Namespace) -> None:
    data, database_url = scratch_postgres("nico-flap-", "nico")
    migrate.upgrade(database_url)
    sim = await NmxcSimulator(SimFabric(racks=1, seed=7)).start()
    extra = {"NICO_LOG_LEVEL": "ERROR", **(UNLIMITED_QUOTAS if args.unlimited_rate else {})}
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nico.cli",
        "serve",
        "--port",
        str(port),
        env=server_env(database_url, data, SECRET, **extra),
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            await until_ready(client)
            site = await seed_provider(client, sim.endpoints, database_url)
            ids: dict[str, Any] = await seed_tenant(client, database_url, site, "flapper", 2)
            await flood(client, args, {**ids, "org": "flapper", "site": site["site"]})
    finally:
        server.terminate()
        await server.wait()
        await sim.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patches", type=int, default=200)
    parser.add_argument("--unlimited-rate", action="store_true")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
