"""A soak: mixed tenant work from many clients against a site with fabric faults, then the books.

``nico serve`` (API + reconciler) runs as its own process on embedded PostgreSQL; the simulated
fabric (NMX-C per chassis, or NMX-M) runs in this process, so the fabric's truth can be read at any
moment. For ``--minutes`` (default 10), ``--clients`` tenants each loop over a random mix of: create
an instance bound to one of their logical partitions, create a topology-optimised batch, PATCH an
instance's NVLink interfaces to another partition (GPUs move), delete an instance, create and delete
a spare logical partition (partition churn). Meanwhile a fault cycle runs on the fabric: 20 ms per
call throughout, then in turn a spell of injected errors (10% of calls), a domain's endpoint down
(NMX-C) or the whole manager down (NMX-M), and late NMX-M completions (operations finishing after
the client's timeout).

Every time a client sees an instance with all interfaces Ready it checks the fabric at once: a
Ready interface whose GPU is not in its partition's fabric partition is a **false Ready** (must be
0). After the work stops and the faults clear, the site gets up to two minutes to converge, then the
**drift** between fabric and desired state is counted (GPUs not where their bindings say, GPUs of no
binding outside the default partition, nico partitions nobody wants; must be 0). Prints operations
done, errors by class, p50/p99 per operation, drift, false Ready, and memory (RSS) growth of the
server process and of this one (the fabric) between the first minute and the end.

    python benchmarks/soak.py [--minutes 10] [--clients 8] [--racks 8] [--backend nmxc|nmxm]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import sys
import time
import uuid
from typing import Any

import httpx
import psutil
from bench_support import free_port, scratch_postgres, until_ready
from convergence_bench import SECRET, expect, seed_provider, seed_tenant

from nico.db import migrate
from nico.db.engine import make_engine, make_session_factory, transaction
from nico.fabric.backend import DEFAULT_PARTITION_ID
from nico.reconciler.planner import lp_of_name, partition_name
from nico.services import fabric_registry
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from nico.sim.nmxm_app import NmxmSimulator

LATENCY = 0.02


class Books:
    def __init__(self) -> None:
        self.done: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()
        self.latency: dict[str, list[float]] = collections.defaultdict(list)
        self.false_ready: list[str] = []

    async def timed(self, what: str, call: Any, ok: tuple[int, ...] = (200, 201, 202, 204)) -> Any:
        started = time.monotonic()
        try:
            response: httpx.Response = await call
        except httpx.HTTPError as exc:
            self.errors[f"{what}: {type(exc).__name__}"] += 1
            return None
        self.latency[what].append(time.monotonic() - started)
        if response.status_code not in ok:
            self.errors[f"{what}: HTTP {response.status_code}"] += 1
            return None
        self.done[what] += 1
        try:
            return response.json() if response.content else {}
        except ValueError:
            return {}


def false_ready(fabric: SimFabric, instance: dict[str, Any]) -> list[str]:
    """Interfaces shown Ready whose GPU the fabric does not hold in their partition."""
    wrong = []
    for i in instance["nvLinkInterfaces"]:
        if i["status"] != "Ready" or not i.get("gpuGuid"):
            continue
        uid = int(i["gpuGuid"])
        pid = fabric.partition_of(uid)
        domain = fabric.domains[fabric.gpu(uid).domain_uuid]
        held = domain.partitions.get(pid) if pid is not None else None
        if held is None or held.name != partition_name(uuid.UUID(i["nvLinklogicalPartitionId"])):
            wrong.append(f"{instance['id']}/{i['deviceInstance']}")
    return wrong


async def tenant(
    client: httpx.AsyncClient, books: Books, fabric: SimFabric, org: str, ids: dict[str, Any], until: float
) -> None:
    rng = random.Random(org)
    headers = {"Authorization": ids["token"]}
    base = f"/v2/org/{org}/nico"
    mine: list[str] = []
    n = 0

    def body(lp: str) -> dict[str, Any]:
        return {
            "instanceTypeId": ids["itype"],
            "vpcId": ids["vpc"],
            "ipxeScript": "#!ipxe",
            "interfaces": [{"subnetId": ids["subnet"]}],
            "nvLinkInterfaces": [{"nvLinkLogicalPartitionId": lp, "deviceInstance": d} for d in range(4)],
        }

    while time.monotonic() < until:
        n += 1
        roll = rng.random()
        if roll < 0.3 or not mine:
            got = await books.timed(
                "create",
                client.post(
                    f"{base}/instance",
                    json={**body(rng.choice(ids["lps"])), "name": f"i{n}"},
                    headers=headers,
                ),
                ok=(201,),
            )
            if got:
                mine.append(got["id"])
        elif roll < 0.4:
            got = await books.timed(
                "batch",
                client.post(
                    f"{base}/instance/batch",
                    json={
                        **body(rng.choice(ids["lps"])),
                        "namePrefix": f"b{n}",
                        "count": 2,
                        "topologyOptimized": True,
                    },
                    headers=headers,
                ),
                ok=(201,),
            )
            if got:
                mine.extend(i["id"] for i in got)
        elif roll < 0.6:
            target = rng.choice(mine)
            lp = rng.choice(ids["lps"])
            nv = [{"nvLinkLogicalPartitionId": lp, "deviceInstance": d} for d in range(4)]
            await books.timed(
                "patch",
                client.patch(f"{base}/instance/{target}", json={"nvLinkInterfaces": nv}, headers=headers),
            )
        elif roll < 0.75:
            target = mine.pop(rng.randrange(len(mine)))
            await books.timed("delete", client.delete(f"{base}/instance/{target}", headers=headers))
        elif roll < 0.85:
            lp = await books.timed(
                "partition create",
                client.post(
                    f"{base}/nvlink-logical-partition",
                    json={"name": f"spare-{n}", "siteId": ids["site"]},
                    headers=headers,
                ),
                ok=(201,),
            )
            if lp:
                await books.timed(
                    "partition delete",
                    client.delete(f"{base}/nvlink-logical-partition/{lp['id']}", headers=headers),
                )
        else:
            target = rng.choice(mine)
            got = await books.timed("get", client.get(f"{base}/instance/{target}", headers=headers))
            if (
                got
                and got["nvLinkInterfaces"]
                and all(i["status"] == "Ready" for i in got["nvLinkInterfaces"])
            ):
                books.false_ready.extend(false_ready(fabric, got))
        await asyncio.sleep(rng.uniform(0.0, 0.05))


async def fault_cycle(
    fabric: SimFabric, sim: NmxcSimulator, nmxm: NmxmSimulator | None, until: float
) -> None:
    """20 ms always; in turn every 20 s: errors, an endpoint (or NMX-M) down, late NMX-M completions."""
    rng = random.Random(7)
    spells = ["errors", "down", "late"] if nmxm is not None else ["errors", "down"]
    turn = 0
    while time.monotonic() + 20 < until:
        await asyncio.sleep(10)
        spell = spells[turn % len(spells)]
        turn += 1
        domain = rng.choice(list(fabric.domains))
        if spell == "errors":
            for d in fabric.domains:
                fabric.set_faults(d, error_rate=0.1)
            fabric.set_site_faults(error_rate=0.1)
        elif spell == "down" and nmxm is None:
            await sim.stop_domain(domain)
        elif spell == "down":
            await nmxm.stop()  # type: ignore[union-attr]
        else:
            fabric.set_site_faults(operation_delay=12.0)  # beyond the client's 10 s operation timeout
        await asyncio.sleep(10)
        for d in fabric.domains:
            fabric.set_faults(d, error_rate=0.0)
        fabric.set_site_faults(error_rate=0.0, operation_delay=None)
        if spell == "down" and nmxm is None:
            await sim.start_domain(domain)
        elif spell == "down" and nmxm is not None:
            await nmxm.start()


async def drift(
    client: httpx.AsyncClient, fabric: SimFabric, tenants: list[tuple[str, dict[str, Any]]]
) -> list[str]:
    """Where the fabric differs from what the tenants' instances ask for."""
    wanted: dict[int, uuid.UUID] = {}  # gpu uid -> logical partition
    for org, ids in tenants:
        got = await expect(
            await client.get(
                f"/v2/org/{org}/nico/instance",
                params={"pageSize": 100},
                headers={"Authorization": ids["token"]},
            ),
            200,
        )
        for instance in got:
            for i in instance["nvLinkInterfaces"]:
                if i.get("gpuGuid") and i["status"] != "Deleting":
                    wanted[int(i["gpuGuid"])] = uuid.UUID(i["nvLinklogicalPartitionId"])
    problems = []
    for domain in fabric.domains.values():
        for uid in domain.gpus:
            pid = domain.owner.get(uid)
            partition = domain.partitions.get(pid) if pid is not None else None
            lp = wanted.get(uid)
            if lp is not None and (partition is None or partition.name != partition_name(lp)):
                problems.append(f"GPU {uid} not in the partition of {lp}")
            if lp is None and pid != DEFAULT_PARTITION_ID:
                problems.append(f"GPU {uid} of no binding in partition {pid}")
        for partition in domain.partitions.values():
            lp_id = lp_of_name(partition.name)
            if lp_id is not None and lp_id not in set(wanted.values()):
                problems.append(f"partition {partition.name} nobody wants")
    return problems


def rss(pid: int) -> int:
    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] * 1000 if values else 0.0


async def run(args: argparse.Namespace) -> None:
    data, database_url = scratch_postgres("nico-soak-", "nico")
    migrate.upgrade(database_url)
    fabric = SimFabric(racks=args.racks, seed=16)
    sim = await NmxcSimulator(fabric).start()
    nmxm: NmxmSimulator | None = None
    env = {
        **os.environ,
        "NICO_DATABASE_URL": database_url,
        "NICO_DATA_DIR": str(data),
        "NICO_AUTH__HS256_SECRET": SECRET,
        "NICO_LOG_LEVEL": "ERROR",
        "NICO_NVLINK_CONFIG__MONITOR_RUN_INTERVAL": "20s",
    }
    if args.backend == "nmxm":
        nmxm = await NmxmSimulator(fabric, username="soak", password="soak-password").start()
        engine = make_engine(database_url, pool_size=1)
        async with transaction(make_session_factory(engine)) as session:
            await fabric_registry.set_nmxm_credentials(session, "soak", "soak-password")
        await engine.dispose()
        env["NICO_NVLINK_CONFIG__BACKEND"] = "nmxm"
        env["NICO_NVLINK_CONFIG__NMX_M_ENDPOINT"] = nmxm.url
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "nico.cli", "serve", "--port", str(port), env=env
    )
    books = Books()
    try:
        limits = httpx.Limits(max_connections=args.clients + 4)
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", timeout=60, limits=limits
        ) as client:
            await until_ready(client)
            site = await seed_provider(client, sim.endpoints, database_url)
            machines = args.racks * 18
            tenants: list[tuple[str, dict[str, Any]]] = []
            for t in range(args.clients):
                org = f"soak-t{t:02d}"
                ids: dict[str, Any] = await seed_tenant(
                    client, database_url, site, org, machines // args.clients
                )
                ids["site"] = site["site"]
                headers = {"Authorization": ids["token"]}
                ids["lps"] = [ids["lp"]]
                for k in range(2):
                    lp = await expect(
                        await client.post(
                            f"/v2/org/{org}/nico/nvlink-logical-partition",
                            json={"name": f"lp{k}", "siteId": site["site"]},
                            headers=headers,
                        )
                    )
                    ids["lps"].append(lp["id"])
                tenants.append((org, ids))
            for domain in fabric.domains:
                fabric.set_faults(domain, latency=LATENCY)
            fabric.set_site_faults(latency=LATENCY)
            started = time.monotonic()
            until = started + args.minutes * 60
            memory: dict[str, list[int]] = {"server": [], "fabric (this process)": []}

            async def sample_memory() -> None:
                await asyncio.sleep(min(60, args.minutes * 60 / 3))
                memory["server"].append(rss(server.pid))
                memory["fabric (this process)"].append(rss(os.getpid()))

            sampler = asyncio.create_task(sample_memory())
            await asyncio.gather(
                fault_cycle(fabric, sim, nmxm, until),
                *(tenant(client, books, fabric, org, ids, until) for org, ids in tenants),
            )
            await sampler
            memory["server"].append(rss(server.pid))
            memory["fabric (this process)"].append(rss(os.getpid()))
            worked = time.monotonic() - started
            # Faults are clear: give the reconciler time to converge, then count the drift.
            settle_deadline = time.monotonic() + 120
            while True:
                problems = await drift(client, fabric, tenants)
                if not problems or time.monotonic() > settle_deadline:
                    break
                await asyncio.sleep(1)
            settled = time.monotonic() - started - worked
        print(
            f"soak: {args.backend}, {args.racks} racks, {args.clients} clients, "
            f"{worked / 60:.1f} min of work, "
            f"{LATENCY * 1000:.0f} ms per fabric call, faults cycling"
        )
        print(
            f"operations done: {sum(books.done.values())}  "
            + ", ".join(f"{k} {v}" for k, v in sorted(books.done.items()))
        )
        print(
            f"errors by class: {sum(books.errors.values())}  "
            + (", ".join(f"{k} x{v}" for k, v in sorted(books.errors.items())) or "none")
        )
        for what, values in sorted(books.latency.items()):
            print(
                f"  {what:18} p50 {pct(values, 0.5):7.1f} ms"
                f"  p99 {pct(values, 0.99):7.1f} ms  ({len(values)})"
            )
        print(
            f"drift after {settled:.0f} s of settling: {len(problems)}"
            + (f"  e.g. {problems[:3]}" if problems else "")
        )
        print(
            f"false Ready observed: {len(books.false_ready)}"
            + (f"  e.g. {books.false_ready[:3]}" if books.false_ready else "")
        )
        for who, (first, last) in ((k, (v[0], v[-1])) for k, v in memory.items()):
            print(
                f"memory {who}: {first / 2**20:.0f} MiB -> {last / 2**20:.0f} MiB"
                f" ({(last - first) / 2**20:+.1f} MiB)"
            )
    finally:
        server.terminate()
        await server.wait()
        if nmxm is not None:
            await nmxm.stop()
        await sim.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--racks", type=int, default=8)
    parser.add_argument("--backend", choices=["nmxc", "nmxm"], default="nmxc")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
