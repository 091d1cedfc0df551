"""Chaos: two API replicas and two reconcilers under tenant load while processes die and the fabric
fails, then the books: was any acknowledged write lost, is the fabric what nico says it is.

Everything is a separate process on loopback: Debian's PostgreSQL server (a throwaway cluster,
``.ci/postgres-server``), ``nico sim nmxc --control-port`` (the fabric, faults set through its
control API), ``nico serve --no-reconciler`` twice and ``nico reconcile`` twice. For ``--duration``
seconds (120; ``--quick``: 60) ``--tenants`` tenants create instances, create batches, PATCH
instances' NVLink interfaces between their logical partitions and delete instances through both
replicas (tenant limits lifted, so the load is not refused), while a timeline of faults runs:
SIGKILL and SIGTERM of each replica and each reconciler (each restarted at once; a fault waits until
every service is up again, so each is one failure, as a rolling restart or a disruption budget
allows), one endpoint down for 30 s, two tray replacements (a tray holding an instance, a tray
without), a machine force-deleted (``nico admin machine force-delete``, the instance it names as
released leaves the books), and a replica and a reconciler killed together. A tenant's connection a
replica refuses goes to the other one, as a load balancer sends it (nothing was sent). When the load
stops, the endpoint goes down for 30 s once more on the quiet site, where no tenant's change wakes
the domain after its return.

A probe tenant's instance is PATCHed at each reconciler fault and at the outage: the **recovery
time** is from the fault (or, for the outage, from the endpoint's return) until that change is
Ready in the API and on the fabric; for a replica, until it answers ``/readyz`` again; for a tray
swap, until nico holds the new GUIDs (and the instance's interfaces are Ready in their partitions);
for the force-delete, until the machine is gone and its GPUs are out of nico's partitions.

After the load stops the site gets up to ``--settle`` seconds to converge, then the script prints:
requests by status class; **acknowledged writes lost** (each 2xx create, PATCH and delete against the
final API state; an outcome not known, a dropped connection, accepts either state); **double
assignments** (an instance on no or two machines, a GPU in two instances or two fabric partitions);
**ghosts** (nico-named fabric partitions no Ready binding wants) and **drift** (GPUs not where nico's
bindings say), read from the fabric through NMX-C gRPC with nico's own client; **false Ready** (an
interface Ready whose GPU is not in its partition on the fabric, during the run and at the end);
the recovery times; the SIGTERM exits; and the intents left open in ``fabric_intent``. The first
five must be 0.

    python benchmarks/chaos.py [--duration 120] [--quick] [--racks 4] [--tenants 4] [--settle 120]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import functools
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
from bench_support import (
    CHECKOUT,
    SECRET,
    UNLIMITED_QUOTAS,
    expect,
    free_port,
    instance_body,
    more_partitions,
    seed_provider,
    seed_tenant,
    server_env,
    until_ready,
)

from nico.config import load_settings
from nico.db import migrate
from nico.db.engine import libpq_url, normalize_url
from nico.fabric.backend import DomainTarget, FabricPartition
from nico.fabric.nmxc.client import NmxcBackend
from nico.reconciler.planner import lp_of_name, partition_name

OUTAGE = 30.0  # seconds one endpoint stays down
WITHIN = 90.0  # the longest a recovery is waited for


# ---------------------------------------------------------------- processes


def debian_postgres(folder: Path) -> str:
    """A throwaway cluster of Debian's PostgreSQL server (``.ci/postgres-server``) on a loopback
    port: its URL; stopped and deleted when the benchmark exits."""
    script = CHECKOUT / ".ci" / "postgres-server"
    subprocess.run(["bash", str(script), "start", str(folder)], check=True, stdout=subprocess.DEVNULL)
    import atexit

    atexit.register(subprocess.run, ["bash", str(script), "stop", str(folder)], check=False)
    return normalize_url((folder / "url").read_text().strip())


@dataclasses.dataclass
class Service:
    argv: list[str]
    env: dict[str, str]
    log: Path
    proc: asyncio.subprocess.Process | None = None
    port: int | None = None

    async def start(self) -> None:
        with self.log.open("a") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, env=self.env, stdout=subprocess.DEVNULL, stderr=log
            )

    async def signal(self, sig: signal.Signals) -> tuple[int | None, float]:
        """Send ``sig`` and wait (10 s at most) for the exit: its code (None: still running) and the
        seconds it took."""
        assert self.proc is not None
        started = time.monotonic()
        self.proc.send_signal(sig)
        try:
            code: int | None = await asyncio.wait_for(self.proc.wait(), 10.0)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            code = None
        return code, time.monotonic() - started


async def answers(client: httpx.AsyncClient, path: str) -> bool:
    return (await client.get(path)).status_code == 200


class Fleet:
    """The replicas and reconcilers, by name, restartable."""

    def __init__(self, database_url: str, folder: Path) -> None:
        env = server_env(
            database_url,
            folder / "data",
            SECRET,
            NICO_LOG_LEVEL="WARNING",
            **UNLIMITED_QUOTAS,
        )
        nico = [sys.executable, "-m", "nico.cli"]
        self.services: dict[str, Service] = {}
        for name in ("replica-a", "replica-b"):
            port = free_port()
            argv = [*nico, "serve", "--no-reconciler", "--port", str(port)]
            self.services[name] = Service(argv, env, folder / f"{name}.log", port=port)
        for name in ("reconciler-1", "reconciler-2"):
            # Its /metrics answers once it is past start-up: how the benchmark knows it is up.
            port = free_port()
            argv = [*nico, "reconcile", "--metrics-port", str(port)]
            self.services[name] = Service(argv, env, folder / f"{name}.log", port=port)
        self.env = env
        self.sigterm_exits: list[tuple[str, int | None, float]] = []

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.services[name].port}"

    async def start(self) -> None:
        for service in self.services.values():
            await service.start()

    async def bounce(self, name: str, sig: signal.Signals) -> None:
        """``sig`` to one service, then start it again."""
        code, took = await self.services[name].signal(sig)
        if sig == signal.SIGTERM:
            self.sigterm_exits.append((name, code, took))
        await self.services[name].start()

    async def ready(self, names: list[str]) -> bool:
        """Wait until the services ``names`` are up (False: not within 90 s): a replica answers
        ``/readyz`` with 200, a reconciler serves ``/metrics``."""
        for name in names:
            path = "/readyz" if name.startswith("replica") else "/metrics"
            async with httpx.AsyncClient(base_url=self.url(name), timeout=5) as client:
                if not await until(functools.partial(answers, client, path)):
                    return False
        return True

    async def stop(self) -> None:
        for service in self.services.values():
            if service.proc is not None and service.proc.returncode is None:
                await service.signal(signal.SIGTERM)


async def start_simulator(racks: int, folder: Path) -> tuple[asyncio.subprocess.Process, dict[str, str], str]:
    """``nico sim nmxc`` in its own process: the process, chassis serial -> endpoint, control URL."""
    proc = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "nico.cli", "sim", "nmxc", "--racks", str(racks), "--port", "0"],
        *["--control-port", str(free_port()), "--seed", "25"],
        env=server_env("", folder, SECRET),
        stdout=subprocess.PIPE,
        stderr=(folder / "sim.log").open("a"),
    )
    assert proc.stdout is not None
    endpoints: dict[str, str] = {}
    while True:
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        if not line:
            raise SystemExit("nico sim nmxc exited")
        if line.startswith("control -> "):
            return proc, endpoints, line.split()[-1].removesuffix("/control")
        serial, _, rest = line.partition(" -> ")
        endpoints[serial] = rest.split()[0]


# ---------------------------------------------------------------- what the fabric and the database hold


class Fabric:
    """The fabric as a foreign NMX-C client sees it: nico's own client over the sim's gRPC."""

    def __init__(self, database_url: str, endpoints: dict[str, str], domains: dict[str, uuid.UUID]) -> None:
        settings = load_settings(database_url=database_url, auth={"hs256_secret": SECRET})
        self.backend = NmxcBackend(settings.nvlink_config)
        self.targets = [DomainTarget(domains[s], url) for s, url in sorted(endpoints.items())]
        self.unread: set[str] = set()  # domains that did not answer the last read

    async def partitions(self) -> list[FabricPartition]:
        """Every partition of every domain (a domain that does not answer within 5 s is skipped)."""
        found: list[FabricPartition] = []
        unread = set()
        for target in self.targets:
            try:
                found += await asyncio.wait_for(self.backend.list_partitions(target), 5.0)
            except Exception:  # a domain down right now is part of the chaos
                unread.add(str(target.domain_uuid))
        self.unread = unread
        return found

    async def where(self) -> dict[int, list[str]]:
        """GPU GUID -> names of the partitions holding it."""
        held: dict[int, list[str]] = collections.defaultdict(list)
        for partition in await self.partitions():
            for uid in partition.gpu_uids:
                held[uid].append(partition.name)
        return held


def query(database_url: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def bindings(database_url: str) -> list[tuple[int, uuid.UUID, uuid.UUID, str]]:
    """nico's records: (GPU GUID, logical partition, instance, status) of every bound interface."""
    return query(
        database_url,
        "SELECT gpu_uid, logical_partition_id, instance_id, status FROM nvlink_interface"
        " WHERE gpu_uid IS NOT NULL",
    )


def double_assignments(database_url: str, held: dict[int, list[str]]) -> list[str]:
    """Instances on no machine or two, GPUs bound to two instances, GPUs in two fabric partitions."""
    rows = query(
        database_url,
        "SELECT 'instance ' || i.id || ' on no machine' FROM instance i"
        " WHERE NOT EXISTS (SELECT 1 FROM machine m WHERE m.instance_id = i.id)"
        " UNION ALL SELECT 'instance ' || instance_id || ' on two machines' FROM machine"
        "  WHERE instance_id IS NOT NULL GROUP BY instance_id HAVING count(*) > 1"
        " UNION ALL SELECT 'GPU ' || gpu_uid || ' bound to two instances' FROM nvlink_interface"
        "  WHERE gpu_uid IS NOT NULL GROUP BY gpu_uid HAVING count(DISTINCT instance_id) > 1",
    )
    found = [r[0] for r in rows]
    found += [f"GPU {uid} in {names}" for uid, names in held.items() if len(names) > 1]
    return found


def ghosts_and_drift(
    rows: list[tuple[int, uuid.UUID, uuid.UUID, str]], partitions: list[FabricPartition]
) -> tuple[list[str], list[str]]:
    """Ghosts: nico-named fabric partitions holding GPUs no live binding puts there (or empty ones of
    a partition nico binds nothing to). Drift: GPUs bound in nico but not in their partition on the
    fabric."""
    wanted = {uid: lp for uid, lp, _, status in rows if status != "Deleting"}
    lps = set(wanted.values())
    where: dict[int, str] = {}
    ghosts = []
    for partition in partitions:
        lp = lp_of_name(partition.name)
        if lp is None:
            continue
        where.update(dict.fromkeys(partition.gpu_uids, partition.name))
        strays = [uid for uid in partition.gpu_uids if wanted.get(uid) != lp]
        if strays or lp not in lps:
            ghosts.append(f"{partition.name}: {len(strays)} GPU(s) nobody binds there")
    drift = [
        f"GPU {uid} of {lp} in {where.get(uid)}"
        for uid, lp in wanted.items()
        if where.get(uid) != partition_name(lp)
    ]
    return ghosts, drift


def false_ready(instance: dict[str, Any], held: dict[int, list[str]], unread: set[str]) -> list[str]:
    """Interfaces Ready whose GPU the fabric does not hold in their partition (in domains that were
    read)."""
    return [
        f"{instance['id']}/{i['deviceInstance']}"
        for i in instance["nvLinkInterfaces"]
        if i["status"] == "Ready"
        and i.get("nvLinkDomainId") not in unread
        and (
            not i.get("gpuGuid")
            or partition_name(uuid.UUID(i["nvLinkLogicalPartitionId"])) not in held.get(int(i["gpuGuid"]), [])
        )
    ]


# ---------------------------------------------------------------- the tenants' load and its ledger


@dataclasses.dataclass
class Write:
    kind: str  # create, patch, delete
    lp: str | None  # the partition every interface was asked into (create, patch)
    acked: bool  # answered 2xx; False: the outcome is not known (the connection dropped, a 5xx)


class Books:
    """Requests by status class, and every write to an instance in the order it was made."""

    def __init__(self) -> None:
        self.classes: collections.Counter[str] = collections.Counter()
        self.writes: dict[str, list[Write]] = collections.defaultdict(list)
        self.owner: dict[str, tuple[str, dict[str, str]]] = {}  # instance -> its URL base, headers
        self.false_ready: list[str] = []
        self.unknown_creates = 0

    async def send(
        self, clients: list[httpx.AsyncClient], method: str, url: str, **kwargs: Any
    ) -> httpx.Response | None:
        """The request through the first replica of ``clients`` that takes the connection, as a load
        balancer sends it (a refused connection carried nothing: the next replica is tried)."""
        for client in clients:
            try:
                response = await client.request(method, url, **kwargs)
            except httpx.ConnectError:
                self.classes["refused (sent to the other replica)"] += 1
                continue
            except httpx.HTTPError as exc:
                self.classes[f"no answer ({type(exc).__name__})"] += 1
                return None
            self.classes[f"{response.status_code // 100}xx"] += 1
            if not response.is_success:
                self.classes[str(response.status_code)] += 1
            return response
        self.classes["no replica took the connection"] += 1
        return None

    def wrote(self, instance: str, kind: str, lp: str | None, response: httpx.Response | None) -> None:
        if response is None or response.status_code >= 500:
            self.writes[instance].append(Write(kind, lp, acked=False))
        elif response.is_success:
            self.writes[instance].append(Write(kind, lp, acked=True))


class Tenant:
    """One tenant's loop: creates, batches, PATCHes between its partitions, deletes, reads."""

    def __init__(self, clients: list[httpx.AsyncClient], books: Books, fabric: Fabric, org: str, ids: Any):
        self.clients, self.books, self.fabric, self.ids = clients, books, fabric, ids
        self.rng = random.Random(org)
        self.headers = {"Authorization": ids["token"]}
        self.base = f"/v2/org/{org}/nico/instance"
        self.mine: list[str] = []

    async def ask(self, method: str, url: str, **kwargs: Any) -> httpx.Response | None:
        clients = self.rng.sample(self.clients, len(self.clients))
        return await self.books.send(clients, method, url, headers=self.headers, **kwargs)

    def nvlink(self, lp: str) -> list[dict[str, Any]]:
        return [{"nvLinkLogicalPartitionId": lp, "deviceInstance": d} for d in range(4)]

    async def work(self, until: float) -> None:
        n = 0
        while time.monotonic() < until:
            n += 1
            roll = self.rng.random()
            full = len(self.mine) >= self.ids["quota"] - 2
            if not self.mine or (roll < 0.25 and not full):
                await self.create(n)
            elif roll < 0.35 and not full:
                await self.batch(n)
            elif roll < 0.7:
                await self.patch()
            elif roll < 0.9 or full:
                await self.delete()
            else:
                await self.check()
            await asyncio.sleep(self.rng.uniform(0.0, 0.05))

    async def create(self, n: int) -> None:
        lp = self.rng.choice(self.ids["lps"])
        body = {**instance_body(self.ids, lp), "name": f"i{n}"}
        got = await self.ask("POST", self.base, json=body)
        if got is not None and got.status_code == 201:
            self.mine.append(got.json()["id"])
            self.books.owner[self.mine[-1]] = (self.base, self.headers)
            self.books.wrote(self.mine[-1], "create", lp, got)
        elif got is None or got.status_code >= 500:
            self.books.unknown_creates += 1

    async def batch(self, n: int) -> None:
        lp = self.rng.choice(self.ids["lps"])
        body = {**instance_body(self.ids, lp), "namePrefix": f"b{n}", "count": 2, "topologyOptimized": True}
        got = await self.ask("POST", f"{self.base}/batch", json=body)
        if got is not None and got.status_code == 201:
            for instance in got.json():
                self.mine.append(instance["id"])
                self.books.owner[instance["id"]] = (self.base, self.headers)
                self.books.wrote(instance["id"], "create", lp, got)
        elif got is None or got.status_code >= 500:
            self.books.unknown_creates += 2

    async def patch(self) -> None:
        target, lp = self.rng.choice(self.mine), self.rng.choice(self.ids["lps"])
        got = await self.ask("PATCH", f"{self.base}/{target}", json={"nvLinkInterfaces": self.nvlink(lp)})
        self.books.wrote(target, "patch", lp, got)

    async def delete(self) -> None:
        target = self.mine.pop(self.rng.randrange(len(self.mine)))
        self.books.wrote(target, "delete", None, await self.ask("DELETE", f"{self.base}/{target}"))

    async def check(self) -> None:
        """Read an instance; when its interfaces are all Ready, the fabric must agree."""
        got = await self.ask("GET", f"{self.base}/{self.rng.choice(self.mine)}")
        if got is None or got.status_code != 200:
            return
        instance = got.json()
        if instance["nvLinkInterfaces"] and all(i["status"] == "Ready" for i in instance["nvLinkInterfaces"]):
            held = await self.fabric.where()
            self.books.false_ready += false_ready(instance, held, self.fabric.unread)


# ---------------------------------------------------------------- the faults and their recoveries


async def until(check: Callable[[], Awaitable[bool]], within: float = WITHIN) -> bool:
    """Poll ``check`` every 0.1 s until it holds (True) or ``within`` seconds pass (False)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if await check():
                return True
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.1)
    return False


class Probe:
    """The probe tenant's instance, moved between its two partitions to time a recovery."""

    def __init__(self, clients: list[httpx.AsyncClient], fabric: Fabric, org: str, ids: Any) -> None:
        self.clients, self.fabric, self.ids = clients, fabric, ids
        self.headers = {"Authorization": ids["token"]}
        self.base = f"/v2/org/{org}/nico/instance"
        self.instance = ""
        self.lp = ids["lps"][0]
        self.lock = asyncio.Lock()

    async def ask(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """The request through whichever replica answers (a replica may be down right now)."""
        for _ in range(int(WITHIN * 10)):
            for client in self.clients:
                try:
                    return await client.request(method, url, headers=self.headers, **kwargs)
                except httpx.HTTPError:
                    continue
            await asyncio.sleep(0.1)
        raise SystemExit("no replica answered the probe for 90 s")

    async def create(self) -> None:
        body = {**instance_body(self.ids, self.lp), "name": "probe"}
        self.instance = (await expect(await self.ask("POST", self.base, json=body)))["id"]
        if not await until(self.ready):
            raise SystemExit("the probe instance never became Ready")

    def nvlink(self) -> list[dict[str, Any]]:
        return [{"nvLinkLogicalPartitionId": self.lp, "deviceInstance": d} for d in range(4)]

    async def move(self) -> None:
        """PATCH the probe to its other partition."""
        self.lp = self.ids["lps"][1] if self.lp == self.ids["lps"][0] else self.ids["lps"][0]
        url = f"{self.base}/{self.instance}"
        await expect(await self.ask("PATCH", url, json={"nvLinkInterfaces": self.nvlink()}), 200)

    async def domain(self) -> str:
        got = await expect(await self.ask("GET", f"{self.base}/{self.instance}"), 200)
        return str(got["nvLinkInterfaces"][0]["nvLinkDomainId"])

    async def ready(self) -> bool:
        """Every interface Ready in the probe's partition, in the API and on the fabric."""
        got = (await self.ask("GET", f"{self.base}/{self.instance}")).json()
        nv = got["nvLinkInterfaces"]
        if not all(i["status"] == "Ready" and i["nvLinkLogicalPartitionId"] == self.lp for i in nv):
            return False
        held = await self.fabric.where()
        return not false_ready(got, held, set())


class Chaos:
    """The timeline of faults; each records its recovery time (None: not recovered within 90 s)."""

    def __init__(self, fleet: Fleet, probe: Probe, control: str, database_url: str) -> None:
        self.fleet, self.probe, self.control, self.database_url = fleet, probe, control, database_url
        self.recoveries: list[tuple[str, float | None]] = []
        self.released: set[str] = set()  # instances released by the force-delete
        self.notes: list[str] = []
        self.busy: set[str] = set()  # machines a fault already used
        self.down_domain = ""
        self.started = time.monotonic()

    def record(self, what: str, started: float, ok: bool) -> None:
        at = f"at {started - self.started:5.1f} s: {what}"
        self.recoveries.append((at, time.monotonic() - started if ok else None))

    async def replica(self, name: str, sig: signal.Signals) -> None:
        """A replica killed or stopped once the other is ready (as a rolling restart or a disruption
        budget allows): the time until it answers again."""
        await self.fleet.ready(list(self.fleet.services))
        started = time.monotonic()
        await self.fleet.bounce(name, sig)
        ok = await self.fleet.ready([name])
        self.record(f"{sig.name} {name} (until /readyz; nico serve restarted)", started, ok)

    async def reconciler(self, names: list[str], sig: signal.Signals) -> None:
        async with self.probe.lock:
            await self.fleet.ready(list(self.fleet.services))
            await asyncio.gather(*(self.fleet.bounce(n, sig) for n in names))
            await self.probe.move()
            started = time.monotonic()
            ok = await until(self.probe.ready)
            what = f"{sig.name} {' + '.join(names)} (from a PATCH after it until Ready on the fabric)"
            self.record(what, started, ok)

    async def outage(self, when: str = "under load") -> None:
        async with self.probe.lock, httpx.AsyncClient(base_url=self.control, timeout=10) as control:
            self.down_domain = await self.probe.domain()
            site = (await control.get("/control")).json()
            serial = next(c["chassisSerial"] for c in site["chassis"] if c["domainUuid"] == self.down_domain)
            await expect(
                await control.post("/control/fault", json={"chassisSerial": serial, "kind": "down"}), 200
            )
            await self.probe.move()
            await asyncio.sleep(OUTAGE)
            await expect(await control.delete("/control/fault", params={"chassisSerial": serial}), 200)
            started = time.monotonic()
            ok = await until(self.probe.ready)
            what = f"endpoint down {OUTAGE:.0f} s {when} (from its return until a PATCH is Ready)"
            self.record(what, started, ok)

    def machine(self, with_instance: bool) -> tuple[str, str, int, str | None]:
        """A machine of a load tenant (or a free one) outside the domain taken down: id, chassis
        serial, tray, instance."""
        rows = query(
            self.database_url,
            "SELECT m.id, m.chassis_serial, m.tray_index, m.instance_id::text FROM machine m"
            " WHERE (m.instance_id IS NOT NULL) = %s AND m.status <> 'Decommissioned'"
            " AND m.domain_uuid::text <> %s ORDER BY m.id",
            with_instance,
            self.down_domain,
        )
        for row in rows:
            if row[0] not in self.busy and row[3] != self.probe.instance:
                self.busy.add(row[0])
                return row[0], row[1], row[2], row[3]
        raise SystemExit(f"no machine {'with' if with_instance else 'without'} an instance to use")

    async def replace_tray(self, with_instance: bool) -> None:
        machine, serial, tray, _ = self.machine(with_instance)
        body = {"chassisSerial": serial, "trayIndex": tray}
        async with httpx.AsyncClient(base_url=self.control, timeout=10) as control:
            started = time.monotonic()
            new = {
                int(g)
                for g in (await expect(await control.post("/control/replace-tray", json=body), 200))[
                    "newGuids"
                ]
            }

        async def recorded() -> bool:
            held = {
                r[0]
                for r in query(self.database_url, "SELECT gpu_uid FROM gpu WHERE machine_id = %s", machine)
            }
            if held != new:
                return False
            rows = [r for r in bindings(self.database_url) if r[0] in new]
            where = await self.probe.fabric.where()
            return all(s == "Ready" and partition_name(lp) in where.get(uid, []) for uid, lp, _, s in rows)

        what = "with an instance" if with_instance else "without an instance"
        self.record(
            f"tray replaced {what} (until recorded, Ready on the fabric)", started, await until(recorded)
        )

    async def force_delete(self) -> None:
        machine, _, _, picked = self.machine(with_instance=True)
        old = {
            r[0] for r in query(self.database_url, "SELECT gpu_uid FROM gpu WHERE machine_id = %s", machine)
        }
        command = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "nico.cli", "admin", "machine", "force-delete", machine, "--yes"],
            env=self.fleet.env,
            stdout=subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"nico admin machine force-delete {machine} failed")
        # The instance it released, as it says: the one found a moment ago may have been deleted and
        # another placed on the machine while the command started.
        for line in out.decode().splitlines():
            if line.startswith("instance ") and line.endswith(" released"):
                self.released.add(line.split()[1])
        self.notes.append(
            f"force-delete {machine}: picked holding {picked}, released {self.released or None}"
        )
        started = time.monotonic()  # the database changed: from here on it is the reconcilers' work

        async def gone() -> bool:
            if query(self.database_url, "SELECT 1 FROM machine WHERE id = %s", machine):
                return False
            where = await self.probe.fabric.where()
            return not any(lp_of_name(n) for uid in old for n in where.get(uid, []))

        self.record(
            f"machine force-deleted (the command {started - command:.1f} s; from its exit until removed, "
            "GPUs out of nico's partitions)",
            started,
            await until(gone),
        )

    def timeline(self, duration: float) -> list[tuple[float, Callable[[], Awaitable[None]]]]:
        return [
            (0.05, lambda: self.replica("replica-a", signal.SIGKILL)),
            (0.12, lambda: self.reconciler(["reconciler-1"], signal.SIGKILL)),
            (0.20, self.outage),
            (0.25, lambda: self.replica("replica-b", signal.SIGTERM)),
            (0.50, lambda: self.reconciler(["reconciler-2"], signal.SIGTERM)),
            (0.55, lambda: self.replace_tray(with_instance=True)),
            (0.62, lambda: self.replace_tray(with_instance=False)),
            (0.70, self.force_delete),
            (0.75, lambda: self.replica("replica-a", signal.SIGTERM)),
            (0.80, lambda: self.reconciler(["reconciler-1"], signal.SIGTERM)),
            (0.90, lambda: self.reconciler(["reconciler-2", "replica-b"], signal.SIGKILL)),
        ]

    async def run(self, duration: float) -> None:
        started = self.started = time.monotonic()

        async def at(fraction: float, fault: Callable[[], Awaitable[None]]) -> None:
            await asyncio.sleep(max(0.0, started + fraction * duration - time.monotonic()))
            await fault()

        await asyncio.gather(*(at(f, fault) for f, fault in self.timeline(duration)))


# ---------------------------------------------------------------- the books at the end


def lost(writes: list[Write], final: dict[str, Any] | None) -> str | None:
    """Why the final state contradicts the last acknowledged write (None: it does not, or a write
    after it has an outcome not known)."""
    acked = [i for i, w in enumerate(writes) if w.acked]
    if not acked or any(not w.acked for w in writes[acked[-1] + 1 :]):
        return None
    write = writes[acked[-1]]
    if write.kind == "delete":
        return None if final is None else f"delete acknowledged, instance {final['status']}"
    if final is None:
        return f"{write.kind} acknowledged, instance gone"
    if final["status"] == "Terminating":
        return f"{write.kind} acknowledged, instance Terminating"
    wrong = [
        i["deviceInstance"] for i in final["nvLinkInterfaces"] if i["nvLinkLogicalPartitionId"] != write.lp
    ]
    return f"{write.kind} to {write.lp} acknowledged, interfaces {wrong} elsewhere" if wrong else None


async def lost_writes(client: httpx.AsyncClient, books: Books, released: set[str]) -> list[str]:
    """Every instance written to, read back through the API against its ledger."""
    found = []
    for instance, writes in books.writes.items():
        if instance in released:
            continue
        base, headers = books.owner[instance]
        got = await client.get(f"{base}/{instance}", headers=headers)
        final = got.json() if got.status_code == 200 else None
        if got.status_code not in (200, 404):
            found.append(f"{instance}: read answered {got.status_code}")
        elif (why := lost(writes, final)) is not None:
            ledger = " ".join(f"{w.kind}{'' if w.acked else '?'}" for w in writes)
            found.append(f"{instance}: {why} (its writes: {ledger})")
    return found


@dataclasses.dataclass
class End:
    ghosts: list[str]
    drift: list[str]
    false_ready: list[str]
    double: list[str]
    unsettled: int  # interfaces not Ready, instances Terminating
    intents: dict[str, int]


async def end_state(database_url: str, fabric: Fabric) -> End:
    rows = bindings(database_url)
    partitions = await fabric.partitions()
    held: dict[int, list[str]] = collections.defaultdict(list)
    for partition in partitions:
        for uid in partition.gpu_uids:
            held[uid].append(partition.name)
    ghosts, drift = ghosts_and_drift(rows, partitions)
    wrong = [
        f"GPU {uid}" for uid, lp, _, s in rows if s == "Ready" and partition_name(lp) not in held.get(uid, [])
    ]
    unsettled = query(
        database_url,
        "SELECT (SELECT count(*) FROM nvlink_interface WHERE status <> 'Ready')"
        " + (SELECT count(*) FROM instance WHERE status = 'Terminating')",
    )[0][0]
    intents = dict(query(database_url, "SELECT state, count(*) FROM fabric_intent GROUP BY state"))
    return End(ghosts, drift, wrong, double_assignments(database_url, held), unsettled, intents)


async def settle(database_url: str, fabric: Fabric, within: float) -> tuple[End, float]:
    """Up to ``within`` seconds for the site to converge: the end state and the seconds it took."""
    started = time.monotonic()
    while True:
        end = await end_state(database_url, fabric)
        done = not (end.ghosts or end.drift or end.false_ready or end.unsettled or end.intents.get("pending"))
        if done or time.monotonic() > started + within:
            return end, time.monotonic() - started
        await asyncio.sleep(1)


def show(what: str, found: list[str]) -> str:
    return f"{what}: {len(found)}" + (f"  e.g. {found[:3]}" if found else "")


def report(books: Books, chaos: Chaos, end: End, lost_found: list[str], settled: float) -> None:
    total = sum(v for k, v in books.classes.items() if not k.isdigit())
    print(f"requests: {total}  " + ", ".join(f"{k} {v}" for k, v in sorted(books.classes.items())))
    acked = sum(w.acked for writes in books.writes.values() for w in writes)
    unknown = sum(not w.acked for writes in books.writes.values() for w in writes) + books.unknown_creates
    print(
        f"acknowledged writes: {acked} (outcome not known: {unknown}; released by the force-delete: "
        f"{len(chaos.released)})"
    )
    print(show("acknowledged writes lost", lost_found))
    print(show("double assignments", end.double))
    print(f"settled after {settled:.1f} s; not settled: {end.unsettled}")
    print(show("ghosts", end.ghosts))
    print(show("drift", end.drift))
    print(show("false Ready during the run", books.false_ready))
    print(show("false Ready at the end", end.false_ready))
    print("recovery after each fault:")
    for what, seconds in chaos.recoveries:
        print(f"  {what:78} {'not recovered' if seconds is None else f'{seconds:6.2f} s'}")
    for name, code, took in chaos.fleet.sigterm_exits:
        print(f"  SIGTERM {name}: exit {code} after {took:.2f} s")
    for note in chaos.notes:
        print(note)
    print(
        f"fabric intents by state: {dict(sorted(end.intents.items()))}; "
        f"left open: {end.intents.get('pending', 0)}, abandoned: {end.intents.get('abandoned', 0)}"
    )


# ---------------------------------------------------------------- the run


async def seed(
    client: httpx.AsyncClient, database_url: str, endpoints: dict[str, str], args: argparse.Namespace
) -> list[tuple[str, dict[str, Any]]]:
    """Provider and machines from the fabric, then ``--tenants`` tenants and the probe tenant (the
    last), each with three logical partitions."""
    site = await seed_provider(client, endpoints, database_url)
    tenants: list[tuple[str, dict[str, Any]]] = []
    orgs = [f"chaos-t{t:02d}" for t in range(args.tenants)] + ["chaos-probe"]
    for org in orgs:
        quota = 2 if org == "chaos-probe" else (args.racks * 18 - 8) // args.tenants
        ids: dict[str, Any] = {**await seed_tenant(client, database_url, site, org, quota), "quota": quota}
        ids["lps"] = [ids["lp"], *await more_partitions(client, org, ids["token"], site["site"], 2)]
        tenants.append((org, ids))
    return tenants


def domains_of(database_url: str) -> dict[str, uuid.UUID]:
    """Chassis serial -> domain, as discovery recorded them."""
    return dict(query(database_url, "SELECT DISTINCT chassis_serial, domain_uuid FROM machine"))


async def load_and_chaos(
    fleet: Fleet, fabric: Fabric, control: str, database_url: str, tenants: list[tuple[str, Any]], args: Any
) -> tuple[Books, Chaos]:
    """The tenants' load for ``--duration`` seconds beside the fault timeline (whose last recoveries
    may outlast the load)."""
    books = Books()
    limits = httpx.Limits(max_connections=args.tenants + 4)
    async with (
        httpx.AsyncClient(base_url=fleet.url("replica-a"), timeout=30, limits=limits) as a,
        httpx.AsyncClient(base_url=fleet.url("replica-b"), timeout=30, limits=limits) as b,
    ):
        probe = Probe([a, b], fabric, *tenants[-1])
        await probe.create()
        chaos = Chaos(fleet, probe, control, database_url)
        until_at = time.monotonic() + args.duration
        await asyncio.gather(
            chaos.run(args.duration),
            *(Tenant([a, b], books, fabric, org, ids).work(until_at) for org, ids in tenants[:-1]),
        )
        # Once more with the tenants gone: nothing but the reconcilers' own retries and passes (and
        # the event stream's reopening) brings the domain back after the endpoint's return.
        await chaos.outage(when="on a quiet site")
    return books, chaos


async def run(args: argparse.Namespace) -> None:
    folder = Path(tempfile.gettempdir()) / f"nico-chaos-{os.getpid()}"
    database_url = debian_postgres(folder / "pg")
    migrate.upgrade(database_url)
    sim, endpoints, control = await start_simulator(args.racks, folder)
    fleet = Fleet(database_url, folder)
    try:
        await fleet.start()
        async with httpx.AsyncClient(base_url=fleet.url("replica-a"), timeout=60) as client:
            await until_ready(client)
            tenants = await seed(client, database_url, endpoints, args)
            fabric = Fabric(database_url, endpoints, domains_of(database_url))
            started = time.monotonic()
            books, chaos = await load_and_chaos(fleet, fabric, control, database_url, tenants, args)
            worked = time.monotonic() - started
            end, settled = await settle(database_url, fabric, args.settle)
            await until_ready(client)
            lost_found = await lost_writes(client, books, chaos.released)
        print(
            f"chaos: {args.racks} racks, {args.tenants} tenants, {worked:.0f} s of load and faults "
            f"(2 replicas, 2 reconcilers, Debian PostgreSQL, NMX-C simulator; logs in {folder})"
        )
        report(books, chaos, end, lost_found, settled)
        await fabric.backend.close()
    finally:
        await fleet.stop()
        sim.terminate()
        await sim.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=120.0, help="Seconds of load and faults.")
    parser.add_argument("--quick", action="store_true", help="60 s of load and faults.")
    parser.add_argument("--racks", type=int, default=4)
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--settle", type=float, default=120.0, help="Seconds the site gets to converge.")
    args = parser.parse_args()
    if args.quick:
        args.duration = 60.0
    # A SIGTERM stops the run as Ctrl-C does: the servers it started are stopped on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
