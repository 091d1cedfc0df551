"""Tenant API benchmark: ``nico serve`` on embedded PostgreSQL, loaded by a separate process.

Measures, with one server and the same settings, at 16 concurrent keep-alive clients:
(a) ``GET /healthz`` (bare FastAPI), (b) ``GET /instance/{id}``, (c) ``POST /nvlink-logical-partition``,
(d) ``POST /instance/batch`` (count 18, topologyOptimized) on a site of 200 racks of 18 machines with
4 GPUs each. Prints requests/s, p50 and p99 per scenario and the ratio (b)/(a).

    python benchmarks/api_bench.py [--racks 200] [--seconds 5]

The load generator is a small asyncio HTTP/1.1 client (one connection per simulated client) run in
its own process (``--loadgen``), so the client's cost is not charged to the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench_support import free_port, server_env

CLIENTS = 16
ORG = "bench-org"
SECRET = "bench-secret-0123456789abcdef-0123456789"


# ---------------------------------------------------------------- load generator (child process)


async def _client(spec: dict[str, Any], counter: list[int], out: list[float], codes: dict[int, int]) -> None:
    reader, writer = await asyncio.open_connection(spec["host"], spec["port"])
    head = f"Host: bench\r\nAuthorization: Bearer {spec['token']}\r\n"
    deadline = time.perf_counter() + spec["seconds"]
    try:
        while counter[0] < spec["requests"] and time.perf_counter() < deadline:
            n = counter[0]
            counter[0] += 1
            body = spec["body"].replace("{n}", str(n)).encode() if spec["body"] is not None else b""
            request = f"{spec['method']} {spec['path']} HTTP/1.1\r\n{head}"
            if spec["body"] is not None:
                request += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            started = time.perf_counter()
            writer.write(request.encode() + b"\r\n" + body)
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            out.append(time.perf_counter() - started)
            codes[status] = codes.get(status, 0) + 1
    finally:
        writer.close()


async def _load(spec: dict[str, Any]) -> dict[str, Any]:
    counter = [0]
    latencies: list[float] = []
    codes: dict[int, int] = {}
    started = time.perf_counter()
    await asyncio.gather(*(_client(spec, counter, latencies, codes) for _ in range(CLIENTS)))
    elapsed = time.perf_counter() - started
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000 if latencies else 0.0

    return {
        "requests": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50": pct(0.50),
        "p99": pct(0.99),
        "codes": codes,
    }


def run_load(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one scenario in a child process and return its figures."""
    done = subprocess.run(
        [sys.executable, __file__, "--loadgen", json.dumps(spec)], capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# ---------------------------------------------------------------- seeding and the server


def seed(url: str, racks: int) -> dict[str, str]:
    """Provider data straight into the database: a site of ``racks`` NVL72 racks, a tenant with a
    quota for all of them, a VPC defaulting to a logical partition, a subnet."""
    from sqlalchemy import create_engine, insert

    from nico.db import models as m

    engine = create_engine(url)
    provider, site, itype, tenant, vpc, subnet, lp = (uuid.uuid4() for _ in range(7))
    with engine.begin() as conn:
        conn.execute(insert(m.InfrastructureProvider), [{"id": provider, "org": "bench-provider"}])
        conn.execute(
            insert(m.Site),
            [
                {
                    "id": site,
                    "infrastructure_provider_id": provider,
                    "name": "bench-site",
                    "status": "Registered",
                    "nvlink_partition": True,
                }
            ],
        )
        conn.execute(
            insert(m.InstanceType),
            [{"id": itype, "infrastructure_provider_id": provider, "site_id": site, "name": "gb200"}],
        )
        conn.execute(
            insert(m.MachineCapability),
            [
                {
                    "instance_type_id": itype,
                    "type": "GPU",
                    "name": "NVIDIA GB200",
                    "count": 4,
                    "device_type": "NVLink",
                }
            ],
        )
        domains = [uuid.uuid4() for _ in range(racks)]
        conn.execute(insert(m.NvlinkDomain), [{"uuid": d, "site_id": site} for d in domains])
        machines, gpus = [], []
        for r, domain in enumerate(domains):
            for t in range(18):
                machine_id = f"bench-r{r:03d}-t{t:02d}"
                machines.append(
                    {
                        "id": machine_id,
                        "site_id": site,
                        "instance_type_id": itype,
                        "status": "Ready",
                        "nvlink_domain_uuid": domain,
                        "chassis_serial": f"CHS{r:04d}",
                        "tray_index": t,
                    }
                )
                gpus.extend(
                    {
                        "machine_id": machine_id,
                        "device_id": d,
                        "gpu_uid": (r << 16) | (t << 8) | d,
                        "slot_id": t,
                    }
                    for d in range(1, 5)
                )
        conn.execute(insert(m.Machine), machines)
        conn.execute(insert(m.Gpu), gpus)
        conn.execute(insert(m.Tenant), [{"id": tenant, "org": ORG}])
        conn.execute(insert(m.TenantSite), [{"tenant_id": tenant, "site_id": site}])
        allocation = uuid.uuid4()
        conn.execute(
            insert(m.Allocation),
            [
                {
                    "id": allocation,
                    "infrastructure_provider_id": provider,
                    "tenant_id": tenant,
                    "site_id": site,
                    "name": "bench",
                    "status": "Registered",
                }
            ],
        )
        conn.execute(
            insert(m.AllocationConstraint),
            [
                {
                    "allocation_id": allocation,
                    "resource_type": "InstanceType",
                    "resource_type_id": itype,
                    "instance_type_id": itype,
                    "constraint_type": "Reserved",
                    "constraint_value": len(machines),
                }
            ],
        )
        conn.execute(
            insert(m.LogicalPartition),
            [{"id": lp, "tenant_id": tenant, "site_id": site, "name": "bench-lp", "status": "Ready"}],
        )
        conn.execute(
            insert(m.Vpc),
            [
                {
                    "id": vpc,
                    "tenant_id": tenant,
                    "site_id": site,
                    "name": "bench-vpc",
                    "status": "Ready",
                    "nvlink_logical_partition_id": lp,
                }
            ],
        )
        conn.execute(
            insert(m.Subnet),
            [
                {
                    "id": subnet,
                    "tenant_id": tenant,
                    "site_id": site,
                    "vpc_id": vpc,
                    "name": "bench-subnet",
                    "status": "Ready",
                }
            ],
        )
    engine.dispose()
    return {"site": str(site), "type": str(itype), "vpc": str(vpc), "subnet": str(subnet)}


def cpu_seconds(server_pid: int) -> dict[str, float]:
    """CPU seconds used so far by the nico server and by PostgreSQL's processes (all of them: run the
    benchmark on an otherwise quiet machine)."""
    import psutil

    totals = {"server": 0.0, "postgres": 0.0}
    server = psutil.Process(server_pid)
    for proc in [server, *server.children(recursive=True)]:
        times = proc.cpu_times()
        totals["server"] += times.user + times.system
    for proc in psutil.process_iter(["name"]):
        if (proc.info["name"] or "").startswith("postgres"):
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            totals["postgres"] += times.user + times.system
    return totals


def wait_ready(port: int, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"nico serve exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                conn.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if b" 200 " in conn.recv(64):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("nico serve did not become ready")


def http(port: int, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> Any:
    import httpx

    response = httpx.request(
        method, f"http://127.0.0.1:{port}{path}", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    response.raise_for_status()
    return response.json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--scenarios", default="abcd", help="which scenarios to run, e.g. ab")
    args = parser.parse_args()

    from nico.api.auth import issue_dev_token
    from nico.config import load_settings
    from nico.db import migrate
    from nico.db.embedded import start_embedded_postgres

    with tempfile.TemporaryDirectory(prefix="nico-bench-", ignore_cleanup_errors=True) as tmp:
        data_dir = Path(tmp)
        url = start_embedded_postgres(data_dir, "nico_bench")
        migrate.upgrade(url)
        ids = seed(url, args.racks)
        port = free_port()
        # A pool as large as the concurrency: overflow connections are closed on return, so a
        # smaller pool would open (fork a backend, re-plan statements) and close them all the time.
        env = server_env(url, data_dir, SECRET, NICO_DB_POOL_SIZE=str(CLIENTS))
        nico = str(Path(sys.executable).with_name("nico"))
        server = subprocess.Popen([nico, "serve", "--no-reconciler", "--port", str(port)], env=env)
        try:
            wait_ready(port, server)
            settings = load_settings(data_dir=data_dir, auth={"hs256_secret": SECRET})
            token = issue_dev_token(settings, org=ORG, roles=["TENANT_ADMIN"])
            base = f"/v2/org/{ORG}/nico"
            instance = http(
                port,
                "POST",
                f"{base}/instance",
                token,
                {
                    "name": "bench-get",
                    "instanceTypeId": ids["type"],
                    "vpcId": ids["vpc"],
                    "ipxeScript": "x",
                    "interfaces": [{"subnetId": ids["subnet"]}],
                },
            )
            common = {"host": "127.0.0.1", "port": port, "token": token, "seconds": args.seconds}
            batch = json.dumps(
                {
                    "namePrefix": "b{n}",
                    "count": 18,
                    "instanceTypeId": ids["type"],
                    "vpcId": ids["vpc"],
                    "ipxeScript": "x",
                    "interfaces": [{"subnetId": ids["subnet"]}],
                    "topologyOptimized": True,
                }
            )
            scenarios = [
                ("(a) GET /healthz", {"method": "GET", "path": "/healthz", "body": None, "requests": 10**6}),
                (
                    "(b) GET /instance/{id}",
                    {
                        "method": "GET",
                        "path": f"{base}/instance/{instance['id']}",
                        "body": None,
                        "requests": 10**6,
                    },
                ),
                (
                    "(c) POST /nvlink-logical-partition",
                    {
                        "method": "POST",
                        "path": f"{base}/nvlink-logical-partition",
                        "body": json.dumps({"name": "lp-{n}", "siteId": ids["site"]}),
                        "requests": 10**6,
                    },
                ),
                (
                    "(d) POST /instance/batch x18",
                    # Each batch takes a whole rack: stay within the racks left after warm-up.
                    {
                        "method": "POST",
                        "path": f"{base}/instance/batch",
                        "body": batch,
                        "requests": max(args.racks - 2 * CLIENTS - 1, CLIENTS),
                    },
                ),
            ]
            results = {}
            for name, scenario in scenarios:
                if name[1] not in args.scenarios:
                    continue
                spec = {**common, **scenario}
                warm = {**spec, "requests": CLIENTS, "seconds": 10}
                if "{n}" in (spec["body"] or ""):
                    warm["body"] = spec["body"].replace("{n}", "warm-{n}")
                run_load(warm)
                before = cpu_seconds(server.pid)
                results[name] = run_load(spec)
                after = cpu_seconds(server.pid)
                results[name]["cpu_ms"] = {
                    who: (after[who] - before[who]) * 1000 / max(results[name]["requests"], 1)
                    for who in after
                }
        finally:
            server.terminate()
            server.wait(timeout=30)

    print(
        f"{'scenario':36} {'requests':>9} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8}"
        f"  {'CPU ms/request: server postgres':>32}  status codes"
    )
    for name, r in results.items():
        cpu = r["cpu_ms"]
        print(
            f"{name:36} {r['requests']:>9} {r['rps']:>9.1f} {r['p50']:>8.2f} {r['p99']:>8.2f}"
            f"  {cpu['server']:>23.2f} {cpu['postgres']:>8.2f}  {r['codes']}"
        )
    a, b = results.get("(a) GET /healthz"), results.get("(b) GET /instance/{id}")
    if a and b:
        print(f"ratio (b)/(a) requests/s: {b['rps'] / a['rps']:.2f}   (aim >= 0.4)")
    if c := results.get("(c) POST /nvlink-logical-partition"):
        print(f"(c) p99: {c['p99']:.1f} ms   (aim < 50 ms)")
    if d := results.get("(d) POST /instance/batch x18"):
        print(f"(d) p50: {d['p50']:.1f} ms   (aim < 100 ms)")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--loadgen":
        print(json.dumps(asyncio.run(_load(json.loads(sys.argv[2])))))
    else:
        main()
