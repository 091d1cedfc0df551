"""Steady-state full reconcile pass at 20, 200 and 2,000 racks (10,000 with ``--sizes ... 10000``)
with an in-process zero-latency simulator: the time of a pass that has nothing to change, the growth
exponent between sizes, and peak memory: the heap of the steady and deep passes, the resident size
before the reconciler starts (the simulator and the seeding) and the peak resident size from then on.
A quarter of the machines hold instances bound to logical partitions (already converged), so the
pass compares real tenant partitions, not only default ones.

The timed passes run untraced; the peak heap comes from one more steady and one more deep pass traced
with tracemalloc (tracing made the passes it timed two to four times slower, until 2026-11-26).

Two kinds of full pass are timed: the routine one (fresh listing of every domain compared with the
digest recorded when the domain last settled) and the deep one that runs every
``deep_pass_every``-th time (every GPU compared, the fabric's GPU inventory audited). Two first passes
too: "first", the first convergence of every domain (the seeded database wants a tenant partition per
domain that the fresh simulator lacks: each domain gets a locked pass with its fabric calls), and
"restart", the first full pass of a new reconciler (its own engine, no digests, read-backs or caches)
started on the same site once it has converged: what restarting an operator's reconciler costs.

    python benchmarks/reconcile_scale.py [--sizes 20 200 2000] [--repeat 3]
    python benchmarks/reconcile_scale.py --sizes 200 2000 10000 --repeat 3
    python benchmarks/reconcile_scale.py --wire [--wire-sizes 20 100] [--per-tray] [--repeat 3]
    python benchmarks/reconcile_scale.py --sizes 2000 --repeat 1 --profile /tmp/prof [--memory]

``--profile DIR`` writes the cProfile statistics (this process's CPU time) of the first, one steady
and the deep pass to ``DIR/<racks>-<kind>.pstats`` and prints their heaviest functions (the figures of
a profiled run are not comparable with an unprofiled one's); ``--memory`` prints the largest allocation
sites (tracemalloc) live after the first pass and after the deep pass.

``--wire`` measures, over real gRPC on loopback (one simulated NMX-C server per rack), what a routine
pass reads per domain: the full ``GetPartitionInfoList`` (every partition with its member GUIDs) against
the cheap ``GetPartitionCount`` + ``GetPartitionIdList`` (ids and GPU counts only): reply bytes per
domain and the time to read every domain once, concurrently.

Uses ``NICO_DATABASE_URL`` (a server where the user may create databases) or an embedded PostgreSQL
in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import itertools
import math
import os
import pstats
import resource
import statistics
import time
import tracemalloc
from collections.abc import Iterator
from typing import NamedTuple

from bench_support import TENANT_SHARE, GcTime, PostgresCpu, database_server, fresh_database, seed_converged
from prometheus_client import CollectorRegistry
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from nico.config import NvLinkConfig, Settings
from nico.db.engine import make_engine
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.runtime import pool_size
from nico.reconciler.scheduler import Reconciler
from nico.serving import collect_less
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend


def _memory(field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (its peak) of this process, in MB (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return math.nan


def _reset_peak_rss() -> None:
    """Start ``VmHWM`` again from the resident size now (Linux: ``clear_refs`` 5), so each size's
    peak is its own."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


PROFILE: str | None = None  # --profile: where the passes' statistics go
MEMORY = False  # --memory: print the largest allocation sites


@contextlib.contextmanager
def profiled(racks: int, kind: str) -> Iterator[None]:
    """cProfile the block when ``--profile`` is given: statistics to a file, the heaviest printed."""
    if PROFILE is None:
        yield
        return
    profile = cProfile.Profile(time.process_time)  # CPU time: waits for PostgreSQL are not the process's
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        os.makedirs(PROFILE, exist_ok=True)
        path = f"{PROFILE}/{racks}-{kind}.pstats"
        profile.dump_stats(path)
        print(f"--- {kind} pass at {racks} racks ({path}): heaviest by own time, then by cumulative")
        stats = pstats.Stats(profile).strip_dirs()
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(40)


async def _postgres_cpu(engine: AsyncEngine) -> PostgresCpu | None:
    """The CPU of the database's server, when it runs on this machine and may say where its data is."""
    try:
        async with engine.connect() as conn:
            data = (await conn.execute(text("SHOW data_directory"))).scalar_one()
        return PostgresCpu(str(data))
    except Exception:  # not a superuser, or another machine's server
        return None


GC = GcTime()
Cpu = tuple[float, float, float]  # CPU seconds of a pass: this process, PostgreSQL, garbage collection


@contextlib.contextmanager
def cpu(kind: str, postgres: PostgresCpu | None, into: dict[str, Cpu]) -> Iterator[None]:
    """This process's CPU seconds, PostgreSQL's and the garbage collector's over the block, into
    ``into[kind]``."""
    own, collecting = time.process_time(), GC.seconds
    theirs = postgres.seconds() if postgres else math.nan
    yield
    theirs = (postgres.seconds() if postgres else math.nan) - theirs
    into[kind] = (time.process_time() - own, theirs, GC.seconds - collecting)


def allocations(title: str, snapshot: tracemalloc.Snapshot | None = None) -> None:
    """The largest allocation sites live now (``--memory``)."""
    if not MEMORY:
        return
    snapshot = snapshot or tracemalloc.take_snapshot()
    print(f"--- largest allocation sites: {title}")
    for stat in snapshot.statistics("lineno")[:25]:
        print(f"  {stat}")


async def peak_heap(reconciler: Reconciler) -> int:
    """The peak heap (tracemalloc) of one more steady and one more deep pass, traced apart from the
    timed ones: tracing every allocation made a pass two to four times slower (the steady and deep
    figures up to 2026-11-26 were timed under it)."""
    tracemalloc.start()
    try:
        steady = await reconciler.full_pass()  # the pass after a deep one is not deep
        reconciler.full_passes = 0
        deep = await reconciler.full_pass()
        assert not steady.deep and deep.deep and not steady.results and not deep.results
        _, peak = tracemalloc.get_traced_memory()
        allocations("after the deep pass")
    finally:
        tracemalloc.stop()
    return peak


class Figures(NamedTuple):
    """One size's figures: seconds of the median steady pass, the deep pass, the first pass (the first
    convergence) and a restarted reconciler's first pass; the peak heap of the steady and deep passes
    (bytes); resident MB before the reconciler starts (simulator and seeding) and the process's peak
    resident MB from then on (the reconciler's passes beside the simulator)."""

    steady: float
    deep: float
    first: float
    restart: float
    peak_heap: int
    rss_before: float
    peak_rss: float


def reconciler_on(url: str, fabric: SimFabric) -> tuple[AsyncEngine, Reconciler]:
    """A reconciler as a process starts one: its own engine, nothing remembered."""
    config = NvLinkConfig(backend="nmxc", reconcile_concurrency=16)
    # As nico reconcile makes it.
    engine = make_engine(url, pool_size=pool_size(Settings(nvlink_config=config)))
    metrics = ReconcilerMetrics(CollectorRegistry(), "nmxc", 120.0)
    return engine, Reconciler(engine, InProcessBackend(fabric), config, metrics)


async def restarted(
    url: str, racks: int, fabric: SimFabric, postgres: PostgresCpu | None, used: dict[str, Cpu]
) -> float:
    """The first full pass (seconds) of a new reconciler on the converged site and the same fabric."""
    engine, reconciler = reconciler_on(url, fabric)
    try:
        with profiled(racks, "restart"), cpu("restart", postgres, used):
            report = await reconciler.full_pass()
        assert report.errors == 0 and not report.results, "a restarted reconciler found work"
        return report.duration_ms / 1000.0
    finally:
        await reconciler.close()
        await engine.dispose()


async def measure(url: str, racks: int, repeat: int) -> Figures:
    """A size's figures (:class:`Figures`)."""
    fabric = SimFabric(racks=racks, seed=racks)
    started = time.monotonic()
    seed_converged(url, fabric)
    seeded = time.monotonic() - started
    gc.collect()
    _reset_peak_rss()
    before = _memory("VmRSS")
    engine, reconciler = reconciler_on(url, fabric)
    postgres = await _postgres_cpu(engine)
    used: dict[str, Cpu] = {}
    try:
        if MEMORY:
            tracemalloc.start()
        with profiled(racks, "first"), cpu("first", postgres, used):
            converge = await reconciler.full_pass()  # first (deep) pass: observations recorded
        assert converge.errors == 0, converge
        gc.collect()
        allocations("after the first pass")
        tracemalloc.stop()
        times = []
        for index in range(repeat):
            with (
                profiled(racks, "steady") if index == 0 else contextlib.nullcontext(),
                cpu(f"steady{index}", postgres, used),
            ):
                report = await reconciler.full_pass()
            assert not report.deep and not report.results, "a steady-state pass found work"
            times.append(report.duration_ms / 1000.0)
        reconciler.full_passes = 0  # the next one is deep
        with profiled(racks, "deep"), cpu("deep", postgres, used):
            deep = await reconciler.full_pass()
        assert deep.deep and not deep.results, "a steady-state deep pass found work"
        peak = await peak_heap(reconciler)
        restart = await restarted(url, racks, fabric, postgres, used)
        steady = [used[f"steady{i}"] for i in range(repeat)]
        shares = {
            "first": used["first"],
            "steady": tuple(statistics.median(s[i] for s in steady) for i in range(3)),
            "deep": used["deep"],
            "restart": used["restart"],
        }
        print(
            f"{racks:>6}: CPU seconds, this process (the simulator's included; of it, garbage collection) / "
            "PostgreSQL: "
            + ", ".join(
                f"{kind} pass {own:.2f} ({collecting:.2f}) / {theirs:.2f}"
                for kind, (own, theirs, collecting) in shares.items()
            ),
            flush=True,
        )
        print(f"{racks:>6}: seeded in {seeded:.1f} s", flush=True)
        return Figures(
            statistics.median(times),
            deep.duration_ms / 1000.0,
            converge.duration_ms / 1000.0,
            restart,
            peak,
            before,
            _memory("VmHWM"),
        )
    finally:
        await reconciler.close()
        await engine.dispose()


async def measure_wire(racks: int, repeat: int, *, per_tray: bool = False) -> dict[str, float]:
    """Full partition listing vs the cheap count + id-list RPCs over loopback gRPC, per domain.
    ``per_tray``: every tray in its own partition (the reference's 2026 tray partitions) instead."""
    from nico.fabric.backend import DEFAULT_PARTITION_ID
    from nico.fabric.nmxc import nmx_c_pb2 as pb
    from nico.fabric.nmxc.client import NmxcBackend
    from nico.sim.nmxc_server import NmxcServicer, NmxcSimulator

    fabric = SimFabric(racks=racks, seed=racks)
    for (
        domain
    ) in fabric.domains.values():  # like seed_converged(): a quarter of the trays in a tenant partition
        trays = sorted(domain.compute_nodes().items())
        if per_tray:
            for (serial, tray), gpus in trays:
                uids = [g.gpu_uid for g in gpus]
                fabric.remove_gpus(domain.domain_uuid, DEFAULT_PARTITION_ID, uids)
                fabric.create_partition(domain.domain_uuid, f"tray_partition_{serial}_{tray}", uids)
            continue
        tenant = [
            g.gpu_uid for index, (_, gpus) in enumerate(trays) if index % TENANT_SHARE == 0 for g in gpus
        ]
        fabric.remove_gpus(domain.domain_uuid, DEFAULT_PARTITION_ID, tenant)
        fabric.create_partition(domain.domain_uuid, f"lp-{domain.domain_uuid}", tenant)
    figures: dict[str, float] = {}
    async with NmxcSimulator(fabric) as sim:
        targets = [sim.target(d) for d in fabric.domains]
        servicer = NmxcServicer(fabric, targets[0].domain_uuid)
        full = await servicer.GetPartitionInfoList(pb.GetPartitionInfoListRequest(), None)
        count = await servicer.GetPartitionCount(
            pb.GetPartitionCountRequest(info_attr=pb.NMX_PARTITION_INFO_ATTR_ALL), None
        )
        ids = await servicer.GetPartitionIdList(
            pb.GetPartitionIdListRequest(info_attr=pb.NMX_PARTITION_INFO_ATTR_ALL), None
        )
        figures["full_bytes"] = full.ByteSize()
        figures["cheap_bytes"] = count.ByteSize() + ids.ByteSize()
        backend = NmxcBackend(NvLinkConfig(), call_timeout=30.0)
        try:
            for target in targets:  # open every channel before timing
                await backend.hello(target)

            async def full_read() -> None:
                await asyncio.gather(*(backend.list_partitions(t) for t in targets))

            async def cheap_read() -> None:
                await asyncio.gather(*(backend.partition_sizes(t) for t in targets))

            for name, read in (("full", full_read), ("cheap", cheap_read)):
                times = []
                for _ in range(repeat):
                    started = time.perf_counter()
                    await read()
                    times.append(time.perf_counter() - started)
                figures[f"{name}_seconds"] = statistics.median(times)
        finally:
            await backend.close()
    return figures


def wire_main(sizes: list[int], repeat: int, per_tray: bool) -> None:
    heading = f"{'racks':>6} {'full bytes/domain':>18} {'cheap bytes/domain':>19}"
    print(f"{heading} {'full read':>10} {'cheap read':>11}")
    for racks in sizes:
        w = asyncio.run(measure_wire(racks, repeat, per_tray=per_tray))
        print(
            f"{racks:>6} {w['full_bytes']:>18.0f} {w['cheap_bytes']:>19.0f} "
            f"{w['full_seconds']:>9.3f}s {w['cheap_seconds']:>10.3f}s"
        )


def main() -> None:
    collect_less()  # the collector's thresholds of nico reconcile (the simulator's work beside it too)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 200, 2000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--wire", action="store_true", help="measure the NMX-C reads over loopback gRPC")
    parser.add_argument("--wire-sizes", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--per-tray", action="store_true", help="--wire: one partition per compute tray")
    parser.add_argument("--profile", metavar="DIR", help="cProfile the first, a steady and the deep pass")
    parser.add_argument("--memory", action="store_true", help="print the largest allocation sites")
    args = parser.parse_args()
    global PROFILE, MEMORY
    PROFILE, MEMORY = args.profile, args.memory
    if args.wire:
        wire_main(args.wire_sizes, args.repeat, args.per_tray)
        return
    server = database_server("nico-scale-")
    heading = f"{'racks':>6} {'GPUs':>8} {'steady pass':>12} {'deep pass':>10} {'first pass':>11}"
    print(f"{heading} {'restart':>8} {'peak heap':>10} {'RSS before':>11} {'peak RSS':>9}")
    results: list[tuple[int, float]] = []
    for racks in args.sizes:
        url = fresh_database(server, f"nico_scale_{racks}")
        f = asyncio.run(measure(url, racks, args.repeat))
        results.append((racks, f.steady))
        figures = f"{f.steady:>11.3f}s {f.deep:>9.2f}s {f.first:>10.2f}s {f.restart:>7.2f}s"
        memory = f"{f.peak_heap / 2**20:>8.1f}MB {f.rss_before:>9.0f}MB {f.peak_rss:>7.0f}MB"
        print(f"{racks:>6} {racks * 72:>8} {figures} {memory}", flush=True)
    for (n1, t1), (n2, t2) in itertools.pairwise(results):
        print(f"growth exponent {n1}->{n2}: {math.log(t2 / t1) / math.log(n2 / n1):.2f}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the process: {rss:.0f} MB")


if __name__ == "__main__":
    main()
