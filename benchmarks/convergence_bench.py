"""Time from a tenant's 201 to all of an instance's NVLink interfaces Ready, one tenant and many at once.

A site of 16 simulated NVL72 racks (NMX-C gRPC per chassis, or NMX-M REST site-wide, on loopback,
``--fabric-latency`` added to every fabric call) runs in a process of its own (as ``nico sim`` would)
and is seeded through the public API; ``nico serve`` (API + reconciler) runs as a separate process on
embedded PostgreSQL. So the benchmark process holds only the tenants. Each phase of ``--tenants``
(default ``1,16``: the first phase is the baseline for the others, measured in the same run) has that
many tenants at once, each creating instances one by one (four GPUs bound to one logical partition)
and waiting for each to be Ready:

* ``--observe events`` (default): each tenant follows its own ``GET /nvlink-topology/events`` stream
  (server push); when the instance's last interface is reported Ready, one ``GET`` confirms it (the
  time is the event's arrival; a GET that disagrees keeps the instance waiting);
* ``--observe poll``: each instance is polled with ``GET`` every ``--poll`` seconds (10 ms) until Ready
  (the load of 16 pollers falls on the server being measured);
* ``--observe both``: the same run's phases once per way, events first.

Prints p50, p99 and max per phase, each beside the first phase (the 1-tenant baseline) of the same way,
and the load average.

    python benchmarks/convergence_bench.py [--racks 16] [--tenants 1,16] [--per-tenant 7]
        [--baseline-instances 30] [--backend nmxc|nmxm] [--fabric-latency 0.02]
        [--observe events|poll|both] [--poll 0.01] [--reconciler in-serve|own-process] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from bench_support import (
    SECRET,
    expect,
    free_port,
    scratch_postgres,
    seed_provider,
    seed_tenant,
    server_env,
    until_ready,
)

from nico.cli.export import SseReader
from nico.db import migrate
from nico.db.engine import make_engine, make_session_factory, transaction
from nico.services import fabric_registry
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from nico.sim.nmxm_app import NmxmSimulator

POLL = 0.01  # seconds between polls of an instance (--poll)


class ReadyEvents:
    """One tenant's ``GET /nvlink-topology/events`` stream: when each interface was last seen Ready."""

    def __init__(self, client: httpx.AsyncClient, org: str, token: str) -> None:
        self.client, self.org, self.token = client, org, token
        self.ready: dict[str, dict[str, float]] = {}  # instance id -> interface id -> arrival
        self.changed = asyncio.Event()
        self.started = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self.task = asyncio.create_task(self._follow())
        await asyncio.wait_for(self.started.wait(), 30)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def _follow(self) -> None:
        reader = SseReader()
        async with self.client.stream(
            "GET",
            f"/v2/org/{self.org}/nico/nvlink-topology/events",
            headers={"Authorization": self.token},
            timeout=httpx.Timeout(30, read=None),
        ) as response:
            async for event in reader.events(response):
                if event.event == "hello":
                    self.started.set()
                elif event.event == "placement":
                    data = json.loads(event.data)
                    seen = self.ready.setdefault(data["instanceId"], {})
                    if data["kind"] == "Ready":
                        seen[data["nvLinkInterfaceId"]] = time.monotonic()
                    else:
                        seen.pop(data["nvLinkInterfaceId"], None)
                    self.changed.set()

    async def until_ready(self, instance_id: str, interfaces: int, deadline: float) -> float:
        """When the instance's last interface was reported Ready (all ``interfaces`` of them)."""
        while True:
            self.changed.clear()
            seen = self.ready.get(instance_id, {})
            if len(seen) >= interfaces:
                return max(seen.values())
            if self.task is not None and self.task.done():
                raise SystemExit(f"event stream of {self.org} ended: {self.task.exception()!r}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), max(deadline - time.monotonic(), 0.0))
            if time.monotonic() > deadline:
                raise SystemExit(f"instance {instance_id}: no Ready event for every interface")


def all_ready(instance: dict[str, Any]) -> bool:
    return all(i["status"] == "Ready" for i in instance["nvLinkInterfaces"])


async def tenant_loop(
    client: httpx.AsyncClient,
    org: str,
    ids: dict[str, str],
    count: int,
    latencies: list[float],
    events: ReadyEvents | None,
    offset: int = 0,
) -> None:
    """Create ``count`` instances one by one, each awaited until all its interfaces are Ready (by
    its events, confirmed by one GET; or by polling)."""
    headers = {"Authorization": ids["token"]}
    base = f"/v2/org/{org}/nico"
    for n in range(offset, offset + count):
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
        deadline = started + 120
        url = f"{base}/instance/{created['id']}"
        confirmed = False
        if events is not None:
            at = await events.until_ready(created["id"], len(body["nvLinkInterfaces"]), deadline)
            confirmed = all_ready(await expect(await client.get(url, headers=headers), 200))
            if not confirmed:
                print(f"instance {created['id']}: Ready events the read does not confirm; polling")
        if not confirmed:
            while True:
                if all_ready(await expect(await client.get(url, headers=headers), 200)):
                    at = time.monotonic()
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"instance {created['id']} not Ready after 120 s")
                await asyncio.sleep(POLL)
        latencies.append(at - started)


def figures(latencies: list[float]) -> str:
    latencies = sorted(latencies)
    p99 = latencies[min(len(latencies) - 1, max(round(0.99 * len(latencies)) - 1, 0))]
    return (
        f"p50 {statistics.median(latencies) * 1000:4.0f} ms, p99 {p99 * 1000:4.0f} ms, "
        f"max {latencies[-1] * 1000:4.0f} ms ({len(latencies)} instances)"
    )


async def fabric_host(racks: int, backend: str) -> None:
    """The simulated site in a process of its own (``--fabric-host``): prints its endpoints as one
    JSON line, then obeys ``latency <seconds>`` lines on stdin; stops at the end of stdin."""
    fabric = SimFabric(racks=racks, seed=16)
    sim = await NmxcSimulator(fabric).start()  # also how the machines are discovered for NMX-M
    nmxm: NmxmSimulator | None = None
    if backend == "nmxm":
        nmxm = await NmxmSimulator(fabric, username="bench", password="bench-password").start()
    print(json.dumps({"endpoints": sim.endpoints, "nmxm": nmxm.url if nmxm else None}), flush=True)
    loop = asyncio.get_running_loop()
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            command, _, value = line.strip().partition(" ")
            if command == "latency":
                for domain in fabric.domains:
                    fabric.set_faults(domain, latency=float(value))
                fabric.set_site_faults(latency=float(value))
            print("ok", flush=True)
    finally:
        if nmxm is not None:
            await nmxm.stop()
        await sim.stop()


class FabricProcess:
    """The ``--fabric-host`` child process and its command line."""

    def __init__(self, process: asyncio.subprocess.Process, hello: dict[str, Any]) -> None:
        self.process = process
        self.endpoints: dict[str, str] = hello["endpoints"]
        self.nmxm_url: str | None = hello["nmxm"]

    @classmethod
    async def start(cls, racks: int, backend: str) -> FabricProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--fabric-host",
            "--racks",
            str(racks),
            "--backend",
            backend,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        if not line:
            raise SystemExit("the simulated fabric did not start")
        return cls(process, json.loads(line))

    async def set_latency(self, seconds: float) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"latency {seconds}\n".encode())
        await self.process.stdin.drain()
        await asyncio.wait_for(self.process.stdout.readline(), 30)

    async def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


def cpu_seconds(nico: list[int], data: Path, fabric: int) -> dict[str, float]:
    """CPU seconds used so far by nico's processes, by this run's PostgreSQL (its postmaster, found
    by its data directory, and the backends under it), by the simulated fabric and by the tenants (this
    process): the last two share the machine with the first two."""
    import psutil

    totals = {"nico": 0.0, "postgres": 0.0, "fabric": 0.0, "tenants": 0.0}
    for key, pid in (("fabric", fabric), ("tenants", os.getpid())):
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            totals[key] = times.user + times.system
    for pid in nico:
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(pid)
            for each in [root, *root.children(recursive=True)]:  # API workers (--workers)
                with contextlib.suppress(psutil.Error):
                    times = each.cpu_times()
                    totals["nico"] += times.user + times.system
    for proc in psutil.process_iter(["name", "cmdline"]):
        if (proc.info["name"] or "").startswith("postgres") and str(data) in " ".join(
            proc.info["cmdline"] or []
        ):
            for each in [proc, *proc.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    times = each.cpu_times()
                    totals["postgres"] += times.user + times.system
    return totals


async def run_phases(
    client: httpx.AsyncClient,
    tenants: list[list[tuple[str, dict[str, str]]]],
    counts: list[int],
    observe: str,
    offset: int,
    cpu: Any,
) -> list[tuple[int, list[float], dict[str, float]]]:
    """Each phase's tenants at once; the latencies of each phase and CPU ms per instance."""
    results: list[tuple[int, list[float], dict[str, float]]] = []
    for phase, count in zip(tenants, counts, strict=True):
        latencies: list[float] = []
        before = cpu()
        streams = [ReadyEvents(client, o, ids["token"]) if observe == "events" else None for o, ids in phase]
        try:
            await asyncio.gather(*(s.open() for s in streams if s is not None))
            await asyncio.gather(
                *(
                    tenant_loop(client, o, ids, count, latencies, stream, offset)
                    for (o, ids), stream in zip(phase, streams, strict=True)
                )
            )
        finally:
            await asyncio.gather(*(s.close() for s in streams if s is not None))
        after = cpu()
        per = {k: (after[k] - before[k]) * 1000 / max(len(latencies), 1) for k in after}
        results.append((len(phase), latencies, per))
    return results


async def start_nico(
    args: argparse.Namespace, database_url: str, data: Path, fabric: FabricProcess
) -> tuple[int, list[asyncio.subprocess.Process]]:
    """``nico serve`` (and ``nico reconcile`` beside it with ``--reconciler own-process``) on the
    fabric's backend: its port and the processes."""
    env = server_env(database_url, data, SECRET)
    if fabric.nmxm_url is not None:
        engine = make_engine(database_url, pool_size=1)
        async with transaction(make_session_factory(engine)) as session:
            await fabric_registry.set_nmxm_credentials(session, "bench", "bench-password")
        await engine.dispose()
        env["NICO_NVLINK_CONFIG__BACKEND"] = "nmxm"
        env["NICO_NVLINK_CONFIG__NMX_M_ENDPOINT"] = fabric.nmxm_url
    port = free_port()
    serve = ["serve", "--port", str(port)]
    if args.reconciler == "own-process":
        serve.append("--no-reconciler")
    if args.workers > 1:
        serve += ["--workers", str(args.workers), "--metrics-port", "0"]
    processes = [await asyncio.create_subprocess_exec(sys.executable, "-m", "nico.cli", *serve, env=env)]
    if args.reconciler == "own-process":
        processes.append(
            await asyncio.create_subprocess_exec(
                sys.executable, "-m", "nico.cli", "reconcile", "--metrics-port", "0", env=env
            )
        )
    return port, processes


async def run(args: argparse.Namespace) -> None:
    phases = [int(x) for x in args.tenants.split(",")]
    ways = ["events", "poll"] if args.observe == "both" else [args.observe]
    counts = [
        args.baseline_instances if i == 0 and len(phases) > 1 else args.per_tenant for i in range(len(phases))
    ]
    data, database_url = scratch_postgres("nico-convergence-", "nico")
    migrate.upgrade(database_url)
    fabric = await FabricProcess.start(args.racks, args.backend)
    port, processes = await start_nico(args, database_url, data, fabric)
    results: dict[str, list[tuple[int, list[float], dict[str, float]]]] = {}

    def cpu() -> dict[str, float]:
        return cpu_seconds([p.pid for p in processes], data, fabric.process.pid)

    try:
        limits = httpx.Limits(max_connections=2 * max(phases) + 4)
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", timeout=30, limits=limits
        ) as client:
            await until_ready(client)
            site = await seed_provider(client, fabric.endpoints, database_url)
            tenants: list[list[tuple[str, dict[str, str]]]] = []
            for phase, (many, count) in enumerate(zip(phases, counts, strict=True)):
                orgs = [f"bench-p{phase}-t{i:02d}" for i in range(many)]
                quota = count * len(ways)
                tenants.append([(o, await seed_tenant(client, database_url, site, o, quota)) for o in orgs])
            # The latency goes on once seeding is done (discovery and seeding are not measured).
            await fabric.set_latency(args.fabric_latency)
            load_before = os.getloadavg()
            for n, way in enumerate(ways):
                results[way] = await run_phases(client, tenants, counts, way, n * max(counts), cpu)
            load_after = os.getloadavg()
        print(
            f"{args.backend} backend, {args.racks} racks, "
            f"{args.fabric_latency * 1000:.0f} ms per fabric call, reconciler {args.reconciler}, "
            f"{args.workers} API worker(s); "
            f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
            f"({os.cpu_count()} cores)"
        )
        report(results)
    finally:
        for process in processes:
            process.terminate()
            await process.wait()
        await fabric.stop()


def report(results: dict[str, list[tuple[int, list[float], dict[str, float]]]]) -> None:
    """Each way's phases, each beside the first phase (the baseline) of the same way."""
    for way, found in results.items():
        how = "server-push events + one GET" if way == "events" else f"polled every {POLL * 1000:.0f} ms"
        print(f"observed by {how}:")
        base = found[0][1]
        for many, latencies, per in found:
            label = "baseline " if many == found[0][0] and len(found) > 1 else "         "
            ratio = ""
            if latencies is not base:
                p50, p99 = _p(latencies, 50) / _p(base, 50), _p(latencies, 99) / _p(base, 99)
                ratio = f"  [p50 x{p50:.1f}, p99 x{p99:.1f} of the baseline]"
            print(
                f"  {label}{many:2d} tenant(s) at once, 201 -> all interfaces Ready: "
                f"{figures(latencies)}{ratio}; CPU per instance: nico {per['nico']:.0f} ms, "
                f"PostgreSQL {per['postgres']:.0f} ms (and the simulated fabric {per['fabric']:.0f} ms, "
                f"the tenants {per['tenants']:.0f} ms)"
            )


def _p(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(round(p / 100 * len(ordered)) - 1, 0))]


def main() -> None:
    global POLL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=16)
    parser.add_argument(
        "--tenants", default="1,16", help="tenants at once per phase; the first is the baseline"
    )
    parser.add_argument("--per-tenant", type=int, default=7, help="instances each tenant creates")
    parser.add_argument("--baseline-instances", type=int, default=30, help="instances of the first phase")
    parser.add_argument("--observe", choices=["events", "poll", "both"], default="events")
    parser.add_argument("--poll", type=float, default=0.01, help="seconds between polls of an instance")
    parser.add_argument("--backend", choices=["nmxc", "nmxm"], default="nmxc")
    parser.add_argument(
        "--fabric-latency", "--latency", type=float, default=0.02, help="seconds per fabric call"
    )
    parser.add_argument(
        "--reconciler",
        choices=["in-serve", "own-process"],
        default="in-serve",
        help="the reconciler inside `nico serve`, or `nico serve --no-reconciler` beside `nico reconcile`",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="`nico serve --workers`: API processes beside the reconciler's"
    )
    parser.add_argument("--fabric-host", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    POLL = args.poll
    if args.fabric_host:
        asyncio.run(fabric_host(args.racks, args.backend))
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
