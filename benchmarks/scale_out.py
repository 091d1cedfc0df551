"""Scale-out of the reconciler: one against two ``Reconciler.run()`` processes (as ``nico reconcile``
twice, on its event loop) on a freshly seeded site, with an in-process zero-latency simulator in each
(identical copies: the first pass reads and writes only its own share; after it each process takes
the other's domains from its copy's snapshot, so the copies are one fabric again for the takeover).

Printed, at each size:

- the first full pass with one reconciler, and with two (the later of the two to end), and their
  ratio;
- a tenant's new instance, committed (with its NOTIFY) while the single reconciler's first pass
  scans: the time from its commit to Ready, and whether that came before the first pass ended;
- after the two have finished their first passes, one is killed (SIGKILL): the time until the other
  sees it gone, and until that one's full pass over the whole site ends (the takeover);
- for one and for two, over the first pass: the CPU seconds of nico in each process (its garbage
  collection apart), of its simulator (the benchmark's, not nico's) and of PostgreSQL, and the cores
  the machine's other processes took meanwhile (on a shared machine they decide the wall times: a
  first pass that has the machine to itself is latency-bound, one that shares it is CPU-bound); what
  the database's busy sessions waited for, on average per sample (``running``: nothing, or a CPU);
  the statements that waited for a lock, and those whose results waited longest for the reconciler
  to read them; deadlocks; the rows the database read and wrote (whether two do more than one).

    python benchmarks/scale_out.py [--racks 2000] [--repeat 3]

``--repeat`` runs one then two again, and prints the median ratio. The two processes take their
member slots before either starts its first pass (as two started together would within the first
part of the scan). Uses ``NICO_DATABASE_URL`` (a server where the user may create databases, on this
machine for the CPU figures) or an embedded PostgreSQL in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench_support import GcTime, PostgresCpu, database_server, fresh_database, seed_converged
from prometheus_client import CollectorRegistry
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import NvLinkConfig, Settings
from nico.db.engine import make_engine
from nico.db.enums import InstanceStatus, NvLinkInterfaceStatus
from nico.db.models import Instance, LogicalPartition, Machine, NvlinkInterface
from nico.db.queries import member_watch
from nico.reconciler.members import Members
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.pass_context import DomainResult
from nico.reconciler.runtime import pool_size
from nico.reconciler.scheduler import Reconciler
from nico.services.nvlink_events import desired_state_changed
from nico.serving import collect_less, event_loop
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend

POLL = 0.01
GC = GcTime()
LATENCY = 0.0  # --fabric-latency: seconds each simulated fabric call waits before its answer
SAMPLE_EVERY = 0.05  # seconds between looks at the sessions waiting for locks


class Counted(Reconciler):
    """Counts the loop's locked domain passes (the full pass's, a part at a time, are its results)."""

    locked = 0

    async def reconcile_domain(self, domain: uuid.UUID) -> DomainResult:
        self.locked += 1
        return await super().reconcile_domain(domain)


class TimedBackend(InProcessBackend):
    """The in-process simulator, with the CPU seconds its calls take (the simulator's work, in the
    reconciler's process: not nico's). Its calls never wait (no latency, no faults), so the process's
    CPU time across one is the call's own."""

    seconds = 0.0

    def __getattribute__(self, name: str) -> Any:
        found = super().__getattribute__(name)
        if name.startswith("_") or not asyncio.iscoroutinefunction(found) or LATENCY > 0:
            return found  # (calls that wait let other work run: their CPU time is not theirs)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.process_time()
            try:
                return await found(*args, **kwargs)
            finally:
                TimedBackend.seconds += time.process_time() - began

        return timed


def say(**fields: Any) -> None:
    print(json.dumps({"at": time.time(), **fields}), flush=True)


class SharedFabric:
    """The processes' copies of the fabric made one again, as the one fabric they stand for is: after
    its first pass each process writes its own domains' partitions (a simulator snapshot, in
    ``directory``) and takes every other domain's from the others' snapshots. A reconciler that takes
    over another's domains then finds them as that one left them; with untouched copies its takeover
    converged them all again (a first pass over half the site, not what a takeover costs)."""

    def __init__(self, fabric: SimFabric, members: Members, directory: str) -> None:
        self.fabric, self.members, self.directory = fabric, members, Path(directory)
        self.theirs: list[Path] = []

    def write(self) -> None:
        """This process's domains' partitions, for the others."""
        mine = json.loads(self.fabric.to_json())
        mine["domains"] = {k: v for k, v in mine["domains"].items() if self.members.covers(uuid.UUID(k))}
        path = self.directory / f"{self.members.slot}.json"
        path.with_suffix(".tmp").write_text(json.dumps(mine))
        path.with_suffix(".tmp").replace(path)
        self.theirs = [self.directory / f"{s}.json" for s in self.members.held if s != self.members.slot]

    def take(self) -> bool:
        """The others' domains from their snapshots, once they are all written (False: not yet)."""
        if not all(p.exists() for p in self.theirs):
            return False
        for other in self.theirs:
            snapshot = json.loads(other.read_text())
            # Partitions' NMX-M entity ids come from each copy's own generator (seeded alike): fresh
            # ones where the other's repeat one of a domain this copy keeps.
            kept = {
                p.entity_id
                for d in self.fabric.domains.values()
                if str(d.domain_uuid) not in snapshot["domains"]
                for p in d.partitions.values()
            }
            for domain in snapshot["domains"].values():
                for partition in domain["partitions"]:
                    if partition["entity_id"] in kept:
                        partition["entity_id"] = uuid.uuid4().hex[:24]
            self.fabric.restore(snapshot)
        return True


async def child(url: str, racks: int, peers: int, directory: str) -> None:
    """One reconciler process: joins, waits for ``peers`` members, runs, and reports on stdout (its
    first pass's start and end, who is running, every later full pass) until killed. With peers, its
    copy of the fabric takes the others' domains from them after its first pass (:class:`SharedFabric`),
    and says ``shared``."""
    fabric = SimFabric(racks=racks, seed=racks)
    for domain in fabric.domains if LATENCY > 0 else ():
        fabric.set_faults(domain, latency=LATENCY)
    config = NvLinkConfig(backend="nmxc", reconcile_concurrency=16)
    # As nico reconcile makes it.
    engine = make_engine(url, pool_size=pool_size(Settings(nvlink_config=config)))
    metrics = ReconcilerMetrics(CollectorRegistry(), "nmxc", 120.0)
    reconciler = Counted(engine, TimedBackend(fabric), config, metrics)
    await reconciler.members.join()
    while len(reconciler.members.held) < peers:
        await asyncio.sleep(POLL)
        await reconciler.members.look()
    running = asyncio.create_task(reconciler.run())
    say(event="started")
    cpu, sim, collected = time.process_time(), TimedBackend.seconds, GC.seconds
    passes, held = 0, reconciler.members.held
    sharing = SharedFabric(fabric, reconciler.members, directory) if peers > 1 else None
    while not running.done():
        await asyncio.sleep(POLL)
        if sharing is not None and sharing.theirs and sharing.take():
            sharing = None
            say(event="shared")
        if reconciler.members.held != held:
            held = reconciler.members.held
            say(event="members", held=len(held))
        if reconciler.full_passes != passes and reconciler.last_full is not None:
            passes = reconciler.full_passes
            report = reconciler.last_full
            seconds = report.duration_ms / 1000.0
            locked = reconciler.locked + len(report.results)  # the loop's and the full pass's (in parts)
            busy = sum(1 for r in report.results.values() if r.status == "busy")
            used, simulated = time.process_time() - cpu, TimedBackend.seconds - sim
            say(
                event="pass",
                n=passes,
                seconds=seconds,
                domains=report.domains,
                locked=locked,
                busy=busy,
                cpu=used,
                sim=simulated,
                gc=GC.seconds - collected,
            )
            cpu, sim, collected = time.process_time(), TimedBackend.seconds, GC.seconds
            if sharing is not None and not sharing.theirs:
                sharing.write()
    await running


class Child:
    """A reconciler process and the lines it printed."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, url: str, racks: int, peers: int, directory: str) -> Child:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--child",
            url,
            str(racks),
            str(peers),
            directory,
            str(LATENCY),
            stdout=asyncio.subprocess.PIPE,
        )
        return cls(proc)

    async def next(self, event: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"reconciler process ended before {event!r}")
            found: dict[str, Any] = json.loads(line)
            if found["event"] == event:
                return found

    def kill(self) -> None:
        if self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGKILL)

    async def stop(self) -> None:
        self.kill()
        await self.proc.wait()


async def new_instance(url: str) -> tuple[float, uuid.UUID]:
    """A tenant's instance on a free tray, its GPUs bound to the domain's logical partition, committed
    as the API does (version bump + NOTIFY): its commit time and id."""
    engine = make_engine(url, pool_size=1)
    try:
        async with AsyncSession(engine, expire_on_commit=False) as session:
            machine = (
                await session.scalars(select(Machine).where(Machine.instance_id.is_(None)).limit(1))
            ).one()
            lp = (
                await session.scalars(
                    select(LogicalPartition).where(LogicalPartition.name == f"lp-{machine.domain_uuid}")
                )
            ).one()
            model = (await session.scalars(select(Instance).limit(1))).one()
            instance = Instance(
                tenant_id=model.tenant_id,
                site_id=model.site_id,
                vpc_id=model.vpc_id,
                instance_type_id=model.instance_type_id,
                name=f"new-{machine.id}",
                status=InstanceStatus.PENDING,
            )
            session.add(instance)
            await session.flush()
            machine.instance_id = instance.id
            for device in range(4):
                session.add(
                    NvlinkInterface(
                        instance_id=instance.id,
                        logical_partition_id=lp.id,
                        site_id=model.site_id,
                        device_instance=device,
                        status=NvLinkInterfaceStatus.PENDING,
                    )
                )
            await session.flush()
            made = instance.id
            await desired_state_changed(session, instance_ids=[made])
            await session.commit()
            return time.time(), made
    finally:
        await engine.dispose()


async def ready_at(url: str, instance_id: uuid.UUID, within: float) -> float | None:
    """When (epoch seconds) the instance was first seen Ready, polling; None after ``within``."""
    engine = make_engine(url, pool_size=1)
    deadline = time.time() + within
    try:
        async with AsyncSession(engine) as session:
            while time.time() < deadline:
                found = await session.get(Instance, instance_id, populate_existing=True)
                status = found.status if found is not None else None
                await session.commit()  # the next look sees later commits
                if status == InstanceStatus.READY:
                    return time.time()
                await asyncio.sleep(POLL)
        return None
    finally:
        await engine.dispose()


def machine_busy() -> float:
    """CPU seconds every process of the machine has used so far (all cores, from /proc/stat)."""
    with open("/proc/stat") as stat:
        fields = [int(f) for f in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class Window:
    """CPU seconds over a stretch of the run: PostgreSQL's, and the whole machine's (the cores the
    other processes took meanwhile, beside the reconcilers and their PostgreSQL, say how much of the
    two cores the reconcilers could have had)."""

    def __init__(self, postgres: PostgresCpu) -> None:
        self.postgres = postgres
        self._at, self._pg, self._machine = time.time(), postgres.seconds(), machine_busy()
        self._own = time.process_time()  # this process's (the samplers') is left out
        self.seconds = self.pg = self.machine = 0.0

    def end(self) -> None:
        self.seconds = time.time() - self._at
        self.pg = self.postgres.seconds() - self._pg
        self.machine = machine_busy() - self._machine - (time.process_time() - self._own)

    def others(self, reconcilers: float) -> float:
        """Cores the machine's other processes used (``reconcilers``: the reconcilers' CPU seconds)."""
        return (self.machine - self.pg - reconcilers) / max(self.seconds, 1e-9)


async def postgres_cpu(url: str) -> PostgresCpu:
    """The CPU of the benchmark's PostgreSQL (its server runs here: embedded, or the user's own)."""
    engine = make_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            return PostgresCpu(str((await conn.execute(text("SHOW data_directory"))).scalar_one()))
    finally:
        await engine.dispose()


class Waits:
    """Samples, every :data:`SAMPLE_EVERY` seconds while it runs, what the database's busy sessions do:
    run (on a CPU, or waiting for one), or wait (for a lock another session holds: the reconcilers'
    write-backs queueing behind each other, or a part behind the other's domain locks; for a
    lightweight lock, I/O, ...); and counts the database's deadlocks over it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.samples = 0
        self.busy: dict[str, int] = {}  # sessions seen busy, by what they waited for ("running": nothing)
        self.locked: dict[str, int] = {}  # the statements seen waiting for a lock, by their beginnings
        self.unread: dict[str, int] = {}  # the statements whose results waited for their reader
        self.deadlocks = 0

    async def sample(self, until: asyncio.Event) -> None:
        engine = make_engine(self.url, pool_size=1)
        try:
            async with engine.connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                deadlocks = text("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
                before = (await conn.execute(deadlocks)).scalar_one()
                while not until.is_set():
                    self.samples += 1
                    for kind, event, query in (await conn.execute(text(_BUSY))).all():
                        if query.startswith(_SLOT_WAIT):  # a reconciler waiting for another to go: idle
                            continue
                        waited = f"{kind}:{event}" if kind else "running"
                        self.busy[waited] = self.busy.get(waited, 0) + 1
                        if kind == "Lock":
                            self.locked[query] = self.locked.get(query, 0) + 1
                        elif event == "ClientWrite":
                            self.unread[query] = self.unread.get(query, 0) + 1
                    await asyncio.sleep(SAMPLE_EVERY)
                self.deadlocks = (await conn.execute(deadlocks)).scalar_one() - before
        finally:
            await engine.dispose()

    def figures(self) -> dict[str, Any]:
        """Busy sessions per sample, by what they waited for; the lock waits' statements; deadlocks."""
        per = max(self.samples, 1)
        busy = {k: round(n / per, 2) for k, n in sorted(self.busy.items(), key=lambda kv: -kv[1])}
        unread = dict(sorted(self.unread.items(), key=lambda kv: -kv[1])[:3])
        return {
            "busy_sessions": busy,
            "lock_waits": self.locked,
            "deadlocks": self.deadlocks,
            "unread": unread,
        }


# How a reconciler waits for another's slot (members.py): blocked on its lock for as long as the other
# lives, by design; not a lock wait of the work.
_SLOT_WAIT = member_watch.WAIT_FOR_SLOT.decode()[:60]
_BUSY = (
    "SELECT wait_event_type, wait_event, left(regexp_replace(query, '\\s+', ' ', 'g'), 60) "
    "FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' "
    "AND pid <> pg_backend_pid()"
)


class TableRows:
    """Rows the database read (sequential and index fetches) and wrote (inserted, updated, deleted)
    over a run, from its table statistics, read once the run's sessions are gone (a session reports
    its counts as it ends): whether two reconcilers read or wrote more than one does."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.before: dict[str, tuple[int, int]] = {}

    async def counts(self) -> dict[str, tuple[int, int]]:
        engine = make_engine(self.url, pool_size=1)
        try:
            async with engine.connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                for _ in range(int(10.0 / POLL)):  # ten seconds at most
                    if not await conn.scalar(text(_OTHER_SESSIONS)):
                        break
                    await asyncio.sleep(POLL)
                await conn.execute(text("SELECT pg_stat_clear_snapshot()"))
                return {
                    name: (int(r), int(w)) for name, r, w in (await conn.execute(text(_TABLE_ROWS))).all()
                }
        finally:
            await engine.dispose()

    async def start(self) -> None:
        self.before = await self.counts()

    async def used(self) -> dict[str, Any]:
        """Rows read and written since :meth:`start`, in all and of the three tables read most."""
        after = await self.counts()
        moved = {
            t: (r - self.before.get(t, (0, 0))[0], w - self.before.get(t, (0, 0))[1])
            for t, (r, w) in after.items()
        }
        top = sorted(moved.items(), key=lambda kv: -kv[1][0])[:3]
        return {
            "rows_read": sum(r for r, _ in moved.values()),
            "rows_written": sum(w for _, w in moved.values()),
            "most_read": {t: r for t, (r, _) in top},
        }


_OTHER_SESSIONS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
)
_TABLE_ROWS = (
    "SELECT relname, coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0), "
    "n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables"
)


async def one(server: str, racks: int) -> dict[str, Any]:
    url = fresh_database(server, f"scale_out_one_{racks}")
    seed_converged(url, SimFabric(racks=racks, seed=racks))
    postgres = await postgres_cpu(url)
    rows = TableRows(url)
    await rows.start()
    solo = await Child.start(url, racks, 1, "")
    try:
        started = await solo.next("started")
        window = Window(postgres)
        waits, ended = Waits(url), asyncio.Event()
        sampling = asyncio.create_task(waits.sample(ended))
        await asyncio.sleep(1.0)  # well into the first pass's scan
        committed, instance_id = await new_instance(url)
        ready = await ready_at(url, instance_id, within=120.0)
        first = await solo.next("pass")
        window.end()
        ended.set()
        await sampling
    finally:
        await solo.stop()
    ended = started["at"] + first["seconds"]
    table_rows = await rows.used()
    return {
        "first": first["seconds"],
        "cpu": first["cpu"] - first["sim"],
        "sim": first["sim"],
        "gc": first["gc"],
        "postgres": window.pg,
        "others": window.others(first["cpu"]),
        "busy": first["busy"],
        **waits.figures(),
        "locked": first["locked"],
        **table_rows,
        "new_ready": (ready - committed) if ready is not None else float("nan"),
        "ready_before_end": float(ready is not None and ready < ended),
    }


async def two(server: str, racks: int) -> dict[str, Any]:
    url = fresh_database(server, f"scale_out_two_{racks}")
    seed_converged(url, SimFabric(racks=racks, seed=racks))
    postgres = await postgres_cpu(url)
    directory = tempfile.mkdtemp(prefix="scale-out-fabric")
    rows = TableRows(url)
    await rows.start()
    pair = [await Child.start(url, racks, 2, directory) for _ in range(2)]
    waits, ended = Waits(url), asyncio.Event()
    try:
        for c in pair:
            await c.next("started")
        window = Window(postgres)
        sampling = asyncio.create_task(waits.sample(ended))
        firsts = [await c.next("pass") for c in pair]
        window.end()
        ended.set()
        await sampling
        for c in pair:
            await c.next("shared")
        pair[1].kill()
        killed = time.time()
        seen = await pair[0].next("members")
        takeover = await pair[0].next("pass")
    finally:
        for c in pair:
            await c.stop()
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "first": max(f["seconds"] for f in firsts),
        "firsts": [f["seconds"] for f in firsts],
        "cpu": [f["cpu"] - f["sim"] for f in firsts],
        "sim": [f["sim"] for f in firsts],
        "gc": [f["gc"] for f in firsts],
        "postgres": window.pg,
        "others": window.others(sum(f["cpu"] for f in firsts)),
        "busy": float(sum(f["busy"] for f in firsts)),
        **waits.figures(),
        "shares": float(min(f["domains"] for f in firsts)),
        "locked": float(sum(f["locked"] for f in firsts)),
        **(await rows.used()),
        "seen": seen["at"] - killed,
        "taken_over": takeover["at"] - killed,
        "takeover_pass": takeover["seconds"],
        "takeover_domains": float(takeover["domains"]),
    }


async def main(racks: list[int], repeat: int) -> None:
    server = database_server("scale-out")
    for n in racks:
        ratios = []
        for _ in range(repeat):  # one, then two, again: each ratio from two runs a minute apart
            solo = await one(server, n)
            pair = await two(server, n)
            ratios.append(pair["first"] / solo["first"])
            report(n, solo, pair)
        if repeat > 1:
            each = ", ".join(f"{r:.2f}" for r in ratios)
            print(f"{n} racks: ratio median {statistics.median(ratios):.2f} ({each})", flush=True)


def report(racks: int, solo: dict[str, Any], pair: dict[str, Any]) -> None:
    print(
        f"{racks} racks: first pass one {solo['first']:.2f} s, two {pair['first']:.2f} s "
        f"(smaller share {pair['shares']:.0f} domains; locked passes one {solo['locked']:.0f}, two "
        f"{pair['locked']:.0f}, busy {pair['busy']:.0f}), ratio {pair['first'] / solo['first']:.2f}; "
        f"new instance Ready {solo['new_ready'] * 1000:.0f} ms after its commit"
        f"{' (before the first pass ended)' if solo['ready_before_end'] else ' (AFTER the first pass)'}; "
        f"killed one seen gone after {pair['seen']:.2f} s, its domains passed by "
        f"{pair['taken_over']:.2f} s (that pass {pair['takeover_pass']:.2f} s over "
        f"{pair['takeover_domains']:.0f} domains)",
        flush=True,
    )
    for name, run in (("one", solo), ("two", pair)):
        nico = " + ".join(f"{c:.2f}" for c in run["cpu"]) if name == "two" else f"{run['cpu']:.2f}"
        sim = " + ".join(f"{c:.2f}" for c in run["sim"]) if name == "two" else f"{run['sim']:.2f}"
        sim = "not measured" if LATENCY > 0 else sim
        gc = " + ".join(f"{c:.2f}" for c in run["gc"]) if name == "two" else f"{run['gc']:.2f}"
        print(
            f"  {name}: CPU seconds nico {nico} (collecting garbage {gc}), its simulator {sim}, "
            f"PostgreSQL {run['postgres']:.2f}; "
            f"other processes {run['others']:.2f} cores; busy sessions {run['busy_sessions']}; "
            f"lock waits {run['lock_waits'] or 'none'}; results left unread longest {run['unread']}; "
            f"deadlocks {run['deadlocks']}; rows read "
            f"{run['rows_read']}, written {run['rows_written']} (read most: {run['most_read']})",
            flush=True,
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        LATENCY = float(sys.argv[6])
        collect_less()  # as nico reconcile does, and on its event loop (uvloop when installed)
        with asyncio.Runner(loop_factory=event_loop()) as runner:
            runner.run(child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]))
        sys.exit(0)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--racks", type=int, nargs="+", default=[2000])
    parser.add_argument("--repeat", type=int, default=1, help="one, then two, this many times")
    parser.add_argument(
        "--fabric-latency",
        type=float,
        default=0.0,
        help="seconds each fabric call waits (a first pass bound by round trips, not CPU; the "
        "simulator's CPU is then not measured)",
    )
    args = parser.parse_args()
    LATENCY = args.fabric_latency
    asyncio.run(main(args.racks, args.repeat))
