"""Time from a tenant's 201 to all of an instance's NVLink interfaces Ready.

A site of 16 simulated NVL72 racks (NMX-C gRPC on loopback, 20 ms added to every fabric call) is
seeded through the public API; ``nico serve`` (API + reconciler) runs as a separate process on
embedded PostgreSQL. 100 instances are created one by one, each with its four GPUs bound to one
logical partition, and each is polled until Ready. Prints p50 and p99 (the reference polls every
60 s and needs several passes per change).

    python benchmarks/convergence_bench.py [--racks 16] [--instances 100] [--latency 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from bench_support import free_port, server_env

from nico.api.auth import issue_dev_token
from nico.config import load_settings
from nico.db.embedded import start_embedded_postgres
from nico.db.engine import make_engine, make_session_factory, transaction
from nico.fabric.nmxc.client import NmxcBackend
from nico.reconciler.discovery import discover_endpoint
from nico.services import fabric_registry
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator

SECRET = "convergence-bench-secret-0123456789abcdef"


async def expect(response: httpx.Response, status: int = 201) -> Any:
    if response.status_code != status:
        raise SystemExit(
            f"{response.request.method} {response.request.url}: {response.status_code} {response.text}"
        )
    return response.json()


async def seed(
    client: httpx.AsyncClient, sim: NmxcSimulator, database_url: str, tenant: str
) -> dict[str, str]:
    """Provider: site, instance type, machines from the fabric, allocation; tenant: VPC, subnet, LP."""
    settings = load_settings(database_url=database_url, auth={"hs256_secret": SECRET})
    provider_headers = {
        "Authorization": "Bearer " + issue_dev_token(settings, org="bench-provider", roles=["PROVIDER_ADMIN"])
    }
    tenant_headers = {
        "Authorization": "Bearer " + issue_dev_token(settings, org=tenant, roles=["TENANT_ADMIN"])
    }
    p, t = "/v2/org/bench-provider/nico", f"/v2/org/{tenant}/nico"
    await expect(await client.get(f"{p}/infrastructure-provider/current", headers=provider_headers), 200)
    tenant_row = await expect(await client.get(f"{t}/tenant/current", headers=tenant_headers), 200)
    site = await expect(
        await client.post(
            f"{p}/site",
            json={"name": "bench", "capabilities": {"nvLinkPartition": True}},
            headers=provider_headers,
        )
    )
    gpu = {"type": "GPU", "name": "NVIDIA GB200", "count": 4, "deviceType": "NVLink"}
    itype = await expect(
        await client.post(
            f"{p}/instance/type",
            json={"name": "gb200", "siteId": site["id"], "machineCapabilities": [gpu]},
            headers=provider_headers,
        )
    )
    backend = NmxcBackend(settings.nvlink_config)
    machines: list[dict[str, Any]] = []
    try:
        for endpoint in sorted(set(sim.endpoints.values())):
            for (serial, tray), found in (await discover_endpoint(backend, endpoint)).items():
                machines.append(
                    {
                        "id": f"{serial}-t{tray:02d}",
                        "nvLinkInfo": {
                            "domainUuid": str(found.domain_uuid),
                            "chassisSerial": serial,
                            "trayIndex": tray,
                            "gpus": [
                                {"deviceId": g.device_id, "gpuUid": str(g.guid), "slotId": g.slot_id}
                                for g in found.gpus
                            ],
                        },
                    }
                )
    finally:
        await backend.close()
    await expect(
        await client.post(
            f"{p}/machine/registration",
            json={"siteId": site["id"], "instanceTypeId": itype["id"], "machines": machines},
            headers=provider_headers,
        )
    )
    engine = make_engine(database_url, pool_size=1)
    async with transaction(make_session_factory(engine)) as session:
        for serial, url in sim.endpoints.items():
            await fabric_registry.create_endpoint(session, serial, url)
    await engine.dispose()
    await expect(
        await client.post(
            f"{p}/allocation",
            json={
                "name": "bench",
                "tenantId": tenant_row["id"],
                "siteId": site["id"],
                "allocationConstraints": [
                    {
                        "resourceType": "InstanceType",
                        "resourceTypeId": itype["id"],
                        "constraintType": "Reserved",
                        "constraintValue": len(machines),
                    }
                ],
            },
            headers=provider_headers,
        )
    )
    vpc = await expect(
        await client.post(f"{t}/vpc", json={"name": "bench", "siteId": site["id"]}, headers=tenant_headers)
    )
    subnet = await expect(
        await client.post(f"{t}/subnet", json={"name": "bench", "vpcId": vpc["id"]}, headers=tenant_headers)
    )
    lp = await expect(
        await client.post(
            f"{t}/nvlink-logical-partition",
            json={"name": "bench", "siteId": site["id"]},
            headers=tenant_headers,
        )
    )
    return {
        "itype": itype["id"],
        "vpc": vpc["id"],
        "subnet": subnet["id"],
        "lp": lp["id"],
        "token": tenant_headers["Authorization"],
    }


async def run(args: argparse.Namespace) -> None:
    data = Path(tempfile.mkdtemp(prefix="nico-convergence-"))
    atexit.register(shutil.rmtree, data, ignore_errors=True)  # after the server's own clean-up (LIFO)
    database_url = start_embedded_postgres(data, "nico", delete_on_exit=True)
    fabric = SimFabric(racks=args.racks, seed=16)
    sim = await NmxcSimulator(fabric).start()
    for domain in fabric.domains:
        fabric.set_faults(domain, latency=args.latency)
    port = free_port()
    env = server_env(database_url, data, SECRET)
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "nico.cli", "serve", "--port", str(port), env=env
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/readyz")).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise SystemExit("nico serve did not become ready")
                await asyncio.sleep(0.1)
            ids = await seed(client, sim, database_url, "bench-tenant")
            headers = {"Authorization": ids["token"]}
            base = "/v2/org/bench-tenant/nico"
            latencies = []
            for n in range(args.instances):
                body = {
                    "name": f"bench-{n}",
                    "instanceTypeId": ids["itype"],
                    "vpcId": ids["vpc"],
                    "ipxeScript": "#!ipxe",
                    "interfaces": [{"subnetId": ids["subnet"]}],
                    "nvLinkInterfaces": [
                        {"nvLinkLogicalPartitionId": ids["lp"], "deviceInstance": d} for d in range(4)
                    ],
                }
                created = await expect(await client.post(f"{base}/instance", json=body, headers=headers))
                started = time.monotonic()
                while True:
                    got = await expect(
                        await client.get(f"{base}/instance/{created['id']}", headers=headers), 200
                    )
                    if all(i["status"] == "Ready" for i in got["nvLinkInterfaces"]):
                        break
                    if time.monotonic() - started > 120:
                        raise SystemExit(f"instance {created['id']} not Ready after 120 s")
                    await asyncio.sleep(0.005)
                latencies.append(time.monotonic() - started)
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, round(0.99 * len(latencies)) - 1)]
        print(
            f"{args.instances} instances on {args.racks} racks, {args.latency * 1000:.0f} ms per fabric call"
        )
        print(
            f"201 -> all interfaces Ready: p50 {statistics.median(latencies) * 1000:.0f} ms, "
            f"p99 {p99 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
        )
    finally:
        server.terminate()
        await server.wait()
        await sim.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=16)
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.02)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
