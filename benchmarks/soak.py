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
from pathlib import Path
from typing import Any

import httpx
import psutil
from bench_support import (
    SECRET,
    UNLIMITED_QUOTAS,
    expect,
    free_port,
    instance_body,
    more_partitions,
    scratch_postgres,
    seed_provider,
    seed_tenant,
    server_env,
    until_ready,
)

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


class Tenant:
    """One client's work: a random mix of operations on its own instances and partitions."""

    def __init__(
        self, client: httpx.AsyncClient, books: Books, fabric: SimFabric, org: str, ids: dict[str, Any]
    ) -> None:
        self.client, self.books, self.fabric, self.ids = client, books, fabric, ids
        self.rng = random.Random(org)
        self.headers = {"Authorization": ids["token"]}
        self.base = f"/v2/org/{org}/nico"
        self.mine: list[str] = []

    def body(self, lp: str) -> dict[str, Any]:
        return instance_body(self.ids, lp)

    async def work(self, until: float) -> None:
        n = 0
        while time.monotonic() < until:
            n += 1
            roll = self.rng.random()
            if roll < 0.3 or not self.mine:
                await self.create(n)
            elif roll < 0.4:
                await self.batch(n)
            elif roll < 0.6:
                await self.patch()
            elif roll < 0.75:
                await self.delete()
            elif roll < 0.85:
                await self.partition_churn(n)
            else:
                await self.check()
            await asyncio.sleep(self.rng.uniform(0.0, 0.05))

    async def create(self, n: int) -> None:
        body = {**self.body(self.rng.choice(self.ids["lps"])), "name": f"i{n}"}
        post = self.client.post(f"{self.base}/instance", json=body, headers=self.headers)
        got = await self.books.timed("create", post, ok=(201,))
        if got:
            self.mine.append(got["id"])

    async def batch(self, n: int) -> None:
        body = {
            **self.body(self.rng.choice(self.ids["lps"])),
            "namePrefix": f"b{n}",
            "count": 2,
            "topologyOptimized": True,
        }
        post = self.client.post(f"{self.base}/instance/batch", json=body, headers=self.headers)
        got = await self.books.timed("batch", post, ok=(201,))
        if got:
            self.mine.extend(i["id"] for i in got)

    async def patch(self) -> None:
        """The instance's GPUs move to another (or the same) partition."""
        target = self.rng.choice(self.mine)
        lp = self.rng.choice(self.ids["lps"])
        nv = [{"nvLinkLogicalPartitionId": lp, "deviceInstance": d} for d in range(4)]
        url = f"{self.base}/instance/{target}"
        await self.books.timed(
            "patch", self.client.patch(url, json={"nvLinkInterfaces": nv}, headers=self.headers)
        )

    async def delete(self) -> None:
        target = self.mine.pop(self.rng.randrange(len(self.mine)))
        await self.books.timed(
            "delete", self.client.delete(f"{self.base}/instance/{target}", headers=self.headers)
        )

    async def partition_churn(self, n: int) -> None:
        """A spare logical partition made and deleted."""
        url = f"{self.base}/nvlink-logical-partition"
        body = {"name": f"spare-{n}", "siteId": self.ids["site"]}
        lp = await self.books.timed(
            "partition create", self.client.post(url, json=body, headers=self.headers), ok=(201,)
        )
        if lp:
            delete = self.client.delete(f"{url}/{lp['id']}", headers=self.headers)
            await self.books.timed("partition delete", delete)

    async def check(self) -> None:
        """Read an instance; when all its interfaces are Ready, the fabric must agree."""
        target = self.rng.choice(self.mine)
        got = await self.books.timed(
            "get", self.client.get(f"{self.base}/instance/{target}", headers=self.headers)
        )
        if got and got["nvLinkInterfaces"] and all(i["status"] == "Ready" for i in got["nvLinkInterfaces"]):
            self.books.false_ready.extend(false_ready(self.fabric, got))


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


async def start_server(
    args: argparse.Namespace, database_url: str, data: Path, nmxm: NmxmSimulator | None
) -> tuple[int, asyncio.subprocess.Process]:
    """``nico serve`` on the fabric's backend: its port and process."""
    env = server_env(
        database_url,
        data,
        SECRET,
        NICO_LOG_LEVEL="ERROR",
        NICO_NVLINK_CONFIG__MONITOR_RUN_INTERVAL="20s",
        **UNLIMITED_QUOTAS,  # the soak counts what the server does under load, not a tenant's rate
    )
    if nmxm is not None:
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
    return port, server


async def seed_tenants(
    client: httpx.AsyncClient, database_url: str, site: dict[str, str], args: argparse.Namespace
) -> list[tuple[str, dict[str, Any]]]:
    """``--clients`` tenants sharing the site's machines, three logical partitions each."""
    tenants: list[tuple[str, dict[str, Any]]] = []
    for t in range(args.clients):
        org = f"soak-t{t:02d}"
        quota = args.racks * 18 // args.clients
        ids: dict[str, Any] = await seed_tenant(client, database_url, site, org, quota)
        ids["site"] = site["site"]
        ids["lps"] = [ids["lp"], *await more_partitions(client, org, ids["token"], site["site"], 2)]
        tenants.append((org, ids))
    return tenants


async def soak(
    client: httpx.AsyncClient,
    args: argparse.Namespace,
    server: asyncio.subprocess.Process,
    fabric: SimFabric,
    sims: tuple[NmxcSimulator, NmxmSimulator | None],
    tenants: list[tuple[str, dict[str, Any]]],
) -> tuple[Books, dict[str, list[int]], float]:
    """The work and the fault cycle for ``--minutes``: the books, the memory samples (after the first
    minute and at the end) and the seconds worked."""
    for domain in fabric.domains:
        fabric.set_faults(domain, latency=LATENCY)
    fabric.set_site_faults(latency=LATENCY)
    books = Books()
    started = time.monotonic()
    until = started + args.minutes * 60
    memory: dict[str, list[int]] = {"server": [], "fabric (this process)": []}

    def sample() -> None:
        memory["server"].append(rss(server.pid))
        memory["fabric (this process)"].append(rss(os.getpid()))

    async def sample_memory() -> None:
        await asyncio.sleep(min(60, args.minutes * 60 / 3))
        sample()

    sampler = asyncio.create_task(sample_memory())
    await asyncio.gather(
        fault_cycle(fabric, *sims, until),
        *(Tenant(client, books, fabric, org, ids).work(until) for org, ids in tenants),
    )
    await sampler
    sample()
    return books, memory, time.monotonic() - started


async def settle(
    client: httpx.AsyncClient, fabric: SimFabric, tenants: list[tuple[str, dict[str, Any]]]
) -> tuple[list[str], float]:
    """Faults are clear: up to two minutes for the reconciler to converge; the drift left and the
    seconds it took."""
    started = time.monotonic()
    while True:
        problems = await drift(client, fabric, tenants)
        if not problems or time.monotonic() > started + 120:
            return problems, time.monotonic() - started
        await asyncio.sleep(1)


def report(books: Books, problems: list[str], settled: float, memory: dict[str, list[int]]) -> None:
    print(
        f"operations done: {sum(books.done.values())}  "
        + ", ".join(f"{k} {v}" for k, v in sorted(books.done.items()))
    )
    print(
        f"errors by class: {sum(books.errors.values())}  "
        + (", ".join(f"{k} x{v}" for k, v in sorted(books.errors.items())) or "none")
    )
    for what, values in sorted(books.latency.items()):
        print(f"  {what:18} p50 {pct(values, 0.5):7.1f} ms  p99 {pct(values, 0.99):7.1f} ms  ({len(values)})")
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


async def run(args: argparse.Namespace) -> None:
    data, database_url = scratch_postgres("nico-soak-", "nico")
    migrate.upgrade(database_url)
    fabric = SimFabric(racks=args.racks, seed=16)
    sim = await NmxcSimulator(fabric).start()
    nmxm: NmxmSimulator | None = None
    if args.backend == "nmxm":
        nmxm = await NmxmSimulator(fabric, username="soak", password="soak-password").start()
    port, server = await start_server(args, database_url, data, nmxm)
    try:
        limits = httpx.Limits(max_connections=args.clients + 4)
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", timeout=60, limits=limits
        ) as client:
            await until_ready(client)
            site = await seed_provider(client, sim.endpoints, database_url)
            tenants = await seed_tenants(client, database_url, site, args)
            books, memory, worked = await soak(client, args, server, fabric, (sim, nmxm), tenants)
            problems, settled = await settle(client, fabric, tenants)
        print(
            f"soak: {args.backend}, {args.racks} racks, {args.clients} clients, "
            f"{worked / 60:.1f} min of work, "
            f"{LATENCY * 1000:.0f} ms per fabric call, faults cycling"
        )
        report(books, problems, settled, memory)
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
