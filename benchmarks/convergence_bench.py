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
import shutil
import signal
import statistics
import sys
import time
from dataclasses import dataclass
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
from nico.db.engine import libpq_url, make_engine, make_session_factory, transaction
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


# What the meter reports, in the order printed: nico's processes, PostgreSQL's backends by the nico
# process they serve (by application_name, which `nico serve` and `nico reconcile` set), PostgreSQL's
# own processes and the backends of anything else, then the two that only share the machine.
PARTS = ("api", "reconciler", "pg_api", "pg_reconciler", "pg_other", "fabric", "tenants")
APP_PART = {"nico serve": "pg_api", "nico reconcile": "pg_reconciler"}
STATEMENT_LOG_PREFIX = "nico-bench|%a|"  # log_line_prefix: each logged line names its client


class Meter:
    """CPU seconds used so far, by part (:data:`PARTS`), and statements logged by PostgreSQL so far.

    nico's processes are ``nico serve`` (the API, with its workers; and the reconciler too when it runs
    in it) and ``nico reconcile``. PostgreSQL's CPU is summed over this run's postmaster (found by its
    data directory) and every process under it, including the backends that exited (their CPU is in
    the postmaster's children's times once reaped), and split by the application_name of each living
    backend (``pg_stat_activity``; a backend is charged by the name it has when sampled). Statements
    are counted in PostgreSQL's statement log (``log_statement = 'all'``, see :func:`log_statements`):
    every statement a client sent, BEGIN and COMMIT included, each execution of a prepared statement
    once, statements run inside functions not at all."""

    def __init__(
        self, serve: int, reconcile: int | None, data: Path, fabric: int, admin_uri: str, profiled: bool
    ) -> None:
        import psycopg

        self.serve, self.reconcile, self.data, self.fabric = serve, reconcile, data, fabric
        self.profiled = profiled
        self.log = data / "postgres" / "log"
        self.conn = psycopg.connect(admin_uri, autocommit=True, application_name="convergence_bench")
        self.app_of: dict[int, str] = {}  # backend pid -> application_name, as last seen
        self.log_at = self.log.stat().st_size if self.log.exists() else 0
        self.statements: dict[str, int] = dict.fromkeys(("pg_api", "pg_reconciler", "pg_other"), 0)

    def close(self) -> None:
        self.conn.close()

    def signal(self, number: int) -> None:
        """Send nico's processes ``number`` (with ``--profile``: start or write their profiles)."""
        if self.profiled:
            for pid in (self.serve, self.reconcile):
                if pid is not None:
                    os.kill(pid, number)

    def cpu(self) -> dict[str, float]:
        import psutil

        def used(proc: psutil.Process, children: bool = False) -> float:
            with contextlib.suppress(psutil.Error):
                times = proc.cpu_times()
                reaped = times.children_user + times.children_system if children else 0.0
                return float(times.user + times.system + reaped)
            return 0.0

        totals = dict.fromkeys(PARTS, 0.0)
        totals["fabric"] = used(psutil.Process(self.fabric))
        totals["tenants"] = used(psutil.Process(os.getpid()))
        for part, pid in (("api", self.serve), ("reconciler", self.reconcile)):
            if pid is None:
                continue
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(pid)
                totals[part] = sum(used(p) for p in [root, *root.children(recursive=True)])  # --workers
        for row in self.conn.execute("SELECT pid, application_name FROM pg_stat_activity").fetchall():
            self.app_of[row[0]] = row[1] or ""
        for proc in psutil.process_iter(["name", "cmdline"]):
            if (proc.info["name"] or "").startswith("postgres") and str(self.data) in " ".join(
                proc.info["cmdline"] or []
            ):
                totals["pg_other"] += used(proc, children=True)  # itself, and the backends that exited
                for each in proc.children(recursive=True):
                    part = APP_PART.get(self.app_of.get(each.pid, ""), "pg_other")
                    totals[part] += used(each)
        return totals

    def statements_so_far(self) -> dict[str, int]:
        """Statements logged so far, by the part their client belongs to (pg_api, pg_reconciler,
        pg_other: the benchmark's own and anything else)."""
        if not self.log.exists():
            return dict(self.statements)
        with self.log.open("rb") as f:
            f.seek(self.log_at)
            chunk = f.read()
        complete = chunk.rfind(b"\n") + 1  # a line still being written is read next time
        self.log_at += complete
        marker = STATEMENT_LOG_PREFIX.split("%")[0].encode()
        for line in chunk[:complete].split(b"\n"):
            if not line.startswith(marker):
                continue
            _, app, rest = line.decode(errors="replace").split("|", 2)
            if rest.startswith(("LOG:  statement: ", "LOG:  execute ")):
                self.statements[APP_PART.get(app, "pg_other")] += 1
        return dict(self.statements)

    def sample(self) -> tuple[float, dict[str, float], dict[str, int]]:
        return time.monotonic(), self.cpu(), self.statements_so_far()


def log_statements(admin_uri: str) -> None:
    """Have this run's PostgreSQL log every statement with its client's application_name, without
    the parameters (a few microseconds of its CPU per statement: the figures include it)."""
    import psycopg

    with psycopg.connect(admin_uri, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET log_statement = 'all'")
        conn.execute(f"ALTER SYSTEM SET log_line_prefix = '{STATEMENT_LOG_PREFIX}'")
        conn.execute("ALTER SYSTEM SET log_parameter_max_length = 0")
        conn.execute("SELECT pg_reload_conf()")


Sample = tuple[float, dict[str, float], dict[str, int]]


@dataclass
class Phase:
    """One phase's figures: its tenants, latencies, seconds, CPU seconds and statements by part."""

    tenants: int
    latencies: list[float]
    seconds: float
    cpu: dict[str, float]
    statements: dict[str, int]

    @classmethod
    def between(cls, tenants: int, latencies: list[float], before: Sample, after: Sample) -> Phase:
        return cls(
            tenants,
            latencies,
            after[0] - before[0],
            {k: after[1][k] - before[1][k] for k in PARTS},
            {k: after[2][k] - before[2][k] for k in after[2]},
        )


async def run_phases(
    client: httpx.AsyncClient,
    tenants: list[list[tuple[str, dict[str, str]]]],
    counts: list[int],
    observe: str,
    offset: int,
    meter: Meter,
) -> list[Phase]:
    """Each phase's tenants at once: each phase's latencies, CPU and statements."""
    results: list[Phase] = []
    for phase, count in zip(tenants, counts, strict=True):
        latencies: list[float] = []
        streams = [ReadyEvents(client, o, ids["token"]) if observe == "events" else None for o, ids in phase]
        try:
            await asyncio.gather(*(s.open() for s in streams if s is not None))
            before = meter.sample()
            meter.signal(signal.SIGUSR1)
            await asyncio.gather(
                *(
                    tenant_loop(client, o, ids, count, latencies, stream, offset)
                    for (o, ids), stream in zip(phase, streams, strict=True)
                )
            )
            meter.signal(signal.SIGUSR2)
            after = meter.sample()
        finally:
            await asyncio.gather(*(s.close() for s in streams if s is not None))
        results.append(Phase.between(len(phase), latencies, before, after))
    return results


async def idle_phase(meter: Meter, seconds: float) -> Phase:
    """The seeded site with no tenant at work for ``seconds``: what the system burns by itself (the
    reconciler's full passes, health reads, listeners), measured after as long again to settle."""
    await asyncio.sleep(seconds)  # the seeding's last passes end
    before = meter.sample()
    await asyncio.sleep(seconds)
    return Phase.between(0, [], before, meter.sample())


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
    # Each process's connections carry its command as application_name (nico sets it too; a checkout
    # that does not yet is measured the same way), so PostgreSQL's work is split by the process served.
    processes = [
        await asyncio.create_subprocess_exec(
            *nico_command(args, "serve"), *serve, env={**env, "PGAPPNAME": "nico serve"}
        )
    ]
    if args.reconciler == "own-process":
        processes.append(
            await asyncio.create_subprocess_exec(
                *nico_command(args, "reconcile"),
                "reconcile",
                "--metrics-port",
                "0",
                env={**env, "PGAPPNAME": "nico reconcile"},
            )
        )
    return port, processes


def nico_command(args: argparse.Namespace, name: str) -> list[str]:
    """How a nico process starts: ``python -m nico.cli``, under cProfile with ``--profile DIR`` (its
    figures then include the profiler's cost: for finding where the time goes, not for measuring)."""
    if args.profile is None:
        return [sys.executable, "-m", "nico.cli"]
    args.profile.mkdir(parents=True, exist_ok=True)
    return [sys.executable, "-c", PROFILED.format(out=str(args.profile / f"{name}.prof"))]


# ``python -m nico.cli`` profiled by cProfile during each measured phase (SIGUSR1 starts a profile,
# SIGUSR2 writes it to <name>-<n>.prof), counting CPU time (cProfile's default counts wall time,
# which on a busy machine charges a function for the time the process waited for a core).
PROFILED = """import cProfile, runpy, signal, sys, time
sys.argv[0] = "nico"
state = {{"profile": None, "n": 0}}
def start(*_):
    state["profile"] = cProfile.Profile(time.process_time)
    state["profile"].enable()
def stop(*_):
    if state["profile"] is not None:
        state["profile"].disable()
        state["profile"].dump_stats({out!r}.replace(".prof", "-%d.prof" % state["n"]))
        state["n"] += 1
        state["profile"] = None
signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
runpy.run_module("nico.cli", run_name="__main__")
"""


async def run(args: argparse.Namespace) -> None:
    phases = [int(x) for x in args.tenants.split(",")]
    ways = ["events", "poll"] if args.observe == "both" else [args.observe]
    counts = [
        args.baseline_instances if i == 0 and len(phases) > 1 else args.per_tenant for i in range(len(phases))
    ]
    data, database_url = scratch_postgres("nico-convergence-", "nico")
    admin_uri = libpq_url(database_url)
    migrate.upgrade(database_url)
    if args.statement_log:
        log_statements(admin_uri)
    fabric = await FabricProcess.start(args.racks, args.backend)
    port, processes = await start_nico(args, database_url, data, fabric)
    results: dict[str, list[Phase]] = {}
    reconcile = processes[1].pid if len(processes) > 1 else None
    meter = Meter(processes[0].pid, reconcile, data, fabric.process.pid, admin_uri, args.profile is not None)
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
            idle = await idle_phase(meter, args.idle)
            load_before = os.getloadavg()
            for n, way in enumerate(ways):
                results[way] = await run_phases(client, tenants, counts, way, n * max(counts), meter)
            load_after = os.getloadavg()
        print(
            f"{args.backend} backend, {args.racks} racks, "
            f"{args.fabric_latency * 1000:.0f} ms per fabric call, reconciler {args.reconciler}, "
            f"{args.workers} API worker(s); "
            f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
            f"({os.cpu_count()} cores)"
        )
        report(results, idle, args)
        if args.keep_statement_log is not None and meter.log.exists():
            shutil.copyfile(meter.log, args.keep_statement_log)
    finally:
        meter.close()
        for process in processes:
            process.terminate()
            await process.wait()
        await fabric.stop()


def report(results: dict[str, list[Phase]], idle: Phase, args: argparse.Namespace) -> None:
    """The idle system's CPU, then each way's phases, each beside the first phase (the baseline) of the
    same way: latencies, CPU per instance gross and net of the idle system's, statements per instance."""
    own = args.reconciler == "own-process"
    rate = {k: v / idle.seconds for k, v in idle.cpu.items()}  # CPU seconds per second, idle
    per_s = {k: v / idle.seconds for k, v in idle.statements.items()}
    print(
        f"idle (no tenant, {idle.seconds:.1f} s), CPU ms per second: {split(rate, own, 1000)}"
        + (f"; statements per second {statements(per_s, own)}" if args.statement_log else "")
    )
    for way, found in results.items():
        how = "server-push events + one GET" if way == "events" else f"polled every {POLL * 1000:.0f} ms"
        print(f"observed by {how}:")
        base = found[0].latencies
        for phase in found:
            label = "baseline " if phase.tenants == found[0].tenants and len(found) > 1 else "         "
            ratio = ""
            if phase.latencies is not base:
                p50 = _p(phase.latencies, 50) / _p(base, 50)
                p99 = _p(phase.latencies, 99) / _p(base, 99)
                ratio = f"  [p50 x{p50:.1f}, p99 x{p99:.1f} of the baseline]"
            n = max(len(phase.latencies), 1)
            gross = {k: v * 1000 / n for k, v in phase.cpu.items()}
            net = {k: (v - rate[k] * phase.seconds) * 1000 / n for k, v in phase.cpu.items()}
            print(
                f"  {label}{phase.tenants:2d} tenant(s) at once, 201 -> all interfaces Ready: "
                f"{figures(phase.latencies)}{ratio}, {phase.seconds:.1f} s"
            )
            print(f"      CPU ms per instance, gross: {split(gross, own)}")
            print(f"      net of the idle system's:   {split(net, own)}")
            if args.statement_log:
                print(
                    "      statements per instance: "
                    + statements({k: v / n for k, v in phase.statements.items()}, own)
                )


def split(cpu: dict[str, float], own: bool, scale: float = 1.0) -> str:
    """nico's and PostgreSQL's CPU (``scale`` times ``cpu``), their sum, and what shares the machine."""
    v = {k: x * scale for k, x in cpu.items()}
    api = "API" if own else "nico serve (API + reconciler)"
    pg = v["pg_api"] + v["pg_reconciler"] + v["pg_other"]
    nico = v["api"] + v["reconciler"]
    reconciler = f", reconciler {v['reconciler']:.1f}" if own else ""
    return (
        f"nico + PostgreSQL {nico + pg:.1f} = {api} {v['api']:.1f}{reconciler}, PostgreSQL {pg:.1f} "
        f"(for {'the API' if own else 'nico serve'} {v['pg_api']:.1f}, "
        f"the reconciler {v['pg_reconciler']:.1f}, "
        f"itself and others {v['pg_other']:.1f}); "
        f"beside them the simulated fabric {v['fabric']:.1f}, the tenants {v['tenants']:.1f}"
    )


def statements(counts: dict[str, float], own: bool = True) -> str:
    return (
        f"{sum(counts.values()):.1f} ({'the API' if own else 'nico serve'}'s {counts['pg_api']:.1f}, "
        f"the reconciler's {counts['pg_reconciler']:.1f}, others' {counts['pg_other']:.1f})"
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
    parser.add_argument(
        "--idle", type=float, default=5.0, help="seconds of the idle system measured (after as long again)"
    )
    parser.add_argument(
        "--statement-log",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="count statements in PostgreSQL's statement log (its CPU figures include the logging)",
    )
    parser.add_argument("--keep-statement-log", type=Path, help="copy PostgreSQL's log there at the end")
    parser.add_argument("--profile", type=Path, help="run nico's processes under cProfile: DIR/*.prof")
    parser.add_argument("--fabric-host", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    POLL = args.poll
    if args.fabric_host:
        asyncio.run(fabric_host(args.racks, args.backend))
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
