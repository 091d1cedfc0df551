"""Time from a tenant's 201 to all of an instance's NVLink interfaces Ready, one tenant and many at once.

A site of 16 simulated NVL72 racks (NMX-C gRPC per chassis, or NMX-M REST site-wide, on loopback,
``--fabric-latency`` added to every fabric call) is seeded through the public API; ``nico serve``
(API + reconciler) runs as a separate process on embedded PostgreSQL. Each phase of ``--tenants``
(default ``1,16``: the first phase is the baseline for the others, measured in the same run) has that
many tenants at once, each creating instances one by one (four GPUs bound to one logical partition)
and polling each every 10 ms until Ready. Prints p50, p99 and max per phase, beside the first.

    python benchmarks/convergence_bench.py [--racks 16] [--tenants 1,16] [--per-tenant 7]
        [--baseline-instances 30] [--backend nmxc|nmxm] [--fabric-latency 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from bench_support import free_port, server_env, until_ready

from nico.api.auth import issue_dev_token
from nico.config import load_settings
from nico.db import migrate
from nico.db.embedded import start_embedded_postgres
from nico.db.engine import make_engine, make_session_factory, transaction
from nico.fabric.nmxc.client import NmxcBackend
from nico.reconciler.discovery import discover_endpoint
from nico.services import fabric_registry
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from nico.sim.nmxm_app import NmxmSimulator

SECRET = "convergence-bench-secret-0123456789abcdef"
POLL = 0.01  # seconds between polls of an instance (--poll)


async def expect(response: httpx.Response, status: int = 201) -> Any:
    if response.status_code != status:
        raise SystemExit(
            f"{response.request.method} {response.request.url}: {response.status_code} {response.text}"
        )
    return response.json()


def headers_of(database_url: str, org: str, role: str) -> dict[str, str]:
    settings = load_settings(database_url=database_url, auth={"hs256_secret": SECRET})
    return {"Authorization": "Bearer " + issue_dev_token(settings, org=org, roles=[role])}


async def seed_provider(client: httpx.AsyncClient, sim: NmxcSimulator, database_url: str) -> dict[str, str]:
    """Provider: site, instance type, machines from the fabric, NMX-C endpoints."""
    settings = load_settings(database_url=database_url, auth={"hs256_secret": SECRET})
    provider_headers = headers_of(database_url, "bench-provider", "PROVIDER_ADMIN")
    p = "/v2/org/bench-provider/nico"
    await expect(await client.get(f"{p}/infrastructure-provider/current", headers=provider_headers), 200)
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
    return {"site": site["id"], "itype": itype["id"]}


async def seed_tenant(
    client: httpx.AsyncClient, database_url: str, site: dict[str, str], tenant: str, quota: int
) -> dict[str, str]:
    """Tenant: allocation of ``quota`` machines, VPC, subnet, logical partition."""
    provider_headers = headers_of(database_url, "bench-provider", "PROVIDER_ADMIN")
    tenant_headers = headers_of(database_url, tenant, "TENANT_ADMIN")
    p, t = "/v2/org/bench-provider/nico", f"/v2/org/{tenant}/nico"
    tenant_row = await expect(await client.get(f"{t}/tenant/current", headers=tenant_headers), 200)
    itype = {"id": site["itype"]}
    site = {"id": site["site"]}
    await expect(
        await client.post(
            f"{p}/allocation",
            json={
                "name": f"bench-{tenant}",
                "tenantId": tenant_row["id"],
                "siteId": site["id"],
                "allocationConstraints": [
                    {
                        "resourceType": "InstanceType",
                        "resourceTypeId": itype["id"],
                        "constraintType": "Reserved",
                        "constraintValue": quota,
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


async def tenant_loop(
    client: httpx.AsyncClient, org: str, ids: dict[str, str], count: int, latencies: list[float]
) -> None:
    """Create ``count`` instances one by one, each polled until all its interfaces are Ready."""
    headers = {"Authorization": ids["token"]}
    base = f"/v2/org/{org}/nico"
    for n in range(count):
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
            got = await expect(await client.get(f"{base}/instance/{created['id']}", headers=headers), 200)
            if all(i["status"] == "Ready" for i in got["nvLinkInterfaces"]):
                break
            if time.monotonic() - started > 120:
                raise SystemExit(f"instance {created['id']} not Ready after 120 s")
            await asyncio.sleep(POLL)
        latencies.append(time.monotonic() - started)


def figures(latencies: list[float]) -> str:
    latencies = sorted(latencies)
    p99 = latencies[min(len(latencies) - 1, max(round(0.99 * len(latencies)) - 1, 0))]
    return (
        f"p50 {statistics.median(latencies) * 1000:4.0f} ms, p99 {p99 * 1000:4.0f} ms, "
        f"max {latencies[-1] * 1000:4.0f} ms ({len(latencies)} instances)"
    )


async def run(args: argparse.Namespace) -> None:
    phases = [int(x) for x in args.tenants.split(",")]
    counts = [
        args.baseline_instances if i == 0 and len(phases) > 1 else args.per_tenant for i in range(len(phases))
    ]
    data = Path(tempfile.mkdtemp(prefix="nico-convergence-"))
    atexit.register(shutil.rmtree, data, ignore_errors=True)  # after the server's own clean-up (LIFO)
    database_url = start_embedded_postgres(data, "nico", delete_on_exit=True)
    migrate.upgrade(database_url)
    fabric = SimFabric(racks=args.racks, seed=16)
    sim = await NmxcSimulator(fabric).start()  # also how the machines are discovered for NMX-M
    nmxm: NmxmSimulator | None = None
    env = server_env(database_url, data, SECRET)
    if args.backend == "nmxm":
        nmxm = await NmxmSimulator(fabric, username="bench", password="bench-password").start()
        engine = make_engine(database_url, pool_size=1)
        async with transaction(make_session_factory(engine)) as session:
            await fabric_registry.set_nmxm_credentials(session, "bench", "bench-password")
        await engine.dispose()
        env["NICO_NVLINK_CONFIG__BACKEND"] = "nmxm"
        env["NICO_NVLINK_CONFIG__NMX_M_ENDPOINT"] = nmxm.url
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "nico.cli", "serve", "--port", str(port), env=env
    )
    results: list[tuple[int, list[float]]] = []
    try:
        limits = httpx.Limits(max_connections=max(phases) + 4)
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", timeout=30, limits=limits
        ) as client:
            await until_ready(client)
            site = await seed_provider(client, sim, database_url)
            tenants: list[list[tuple[str, dict[str, str]]]] = []
            for phase, (many, count) in enumerate(zip(phases, counts, strict=True)):
                orgs = [f"bench-p{phase}-t{i:02d}" for i in range(many)]
                tenants.append([(o, await seed_tenant(client, database_url, site, o, count)) for o in orgs])
            # The latency goes on once seeding is done (discovery and seeding are not measured).
            for domain in fabric.domains:
                fabric.set_faults(domain, latency=args.fabric_latency)
            fabric.set_site_faults(latency=args.fabric_latency)
            for phase, count in zip(tenants, counts, strict=True):
                latencies: list[float] = []
                await asyncio.gather(*(tenant_loop(client, o, ids, count, latencies) for o, ids in phase))
                results.append((len(phase), latencies))
        print(
            f"{args.backend} backend, {args.racks} racks, "
            f"{args.fabric_latency * 1000:.0f} ms per fabric call, "
            f"polled every {POLL * 1000:.0f} ms"
        )
        for many, latencies in results:
            label = "baseline " if many == results[0][0] and len(results) > 1 else ""
            print(f"{label}{many:2d} tenant(s) at once, 201 -> all interfaces Ready: {figures(latencies)}")
    finally:
        server.terminate()
        await server.wait()
        if nmxm is not None:
            await nmxm.stop()
        await sim.stop()


def main() -> None:
    global POLL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=16)
    parser.add_argument(
        "--tenants", default="1,16", help="tenants at once per phase; the first is the baseline"
    )
    parser.add_argument("--per-tenant", type=int, default=7, help="instances each tenant creates")
    parser.add_argument("--baseline-instances", type=int, default=30, help="instances of the first phase")
    parser.add_argument("--poll", type=float, default=0.01, help="seconds between polls of an instance")
    parser.add_argument("--backend", choices=["nmxc", "nmxm"], default="nmxc")
    parser.add_argument(
        "--fabric-latency", "--latency", type=float, default=0.02, help="seconds per fabric call"
    )
    args = parser.parse_args()
    POLL = args.poll
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
