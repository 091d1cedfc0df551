"""Steady-state full reconcile pass at 20, 200 and 2,000 racks (10,000 with ``--sizes ... 10000``)
with an in-process zero-latency simulator: the time of a pass that has nothing to change, the growth
exponent between sizes, and peak memory: the heap of the steady and deep passes, the resident size
before the reconciler starts (the simulator and the seeding) and the peak resident size from then on.
A quarter of the machines hold instances bound to logical partitions (already converged), so the
pass compares real tenant partitions, not only default ones.

Two kinds of full pass are timed: the routine one (fresh listing of every domain compared with the
digest recorded when the domain last settled) and the deep one that runs every
``deep_pass_every``-th time (every GPU compared, the fabric's GPU inventory audited).

    python benchmarks/reconcile_scale.py [--sizes 20 200 2000] [--repeat 3]
    python benchmarks/reconcile_scale.py --sizes 200 2000 10000 --repeat 3
    python benchmarks/reconcile_scale.py --wire [--wire-sizes 20 100] [--per-tray] [--repeat 3]

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
import gc
import itertools
import math
import resource
import statistics
import time
import tracemalloc

from bench_support import TENANT_SHARE, database_server, fresh_database, seed_converged
from prometheus_client import CollectorRegistry

from nico.config import NvLinkConfig
from nico.db.engine import make_engine
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
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


async def measure(url: str, racks: int, repeat: int) -> tuple[float, float, float, int, float, float, float]:
    """Median steady pass, deep pass, first pass (seconds), peak heap of the steady and deep passes
    (bytes), seeding time, resident MB before the reconciler starts (simulator and seeding) and the
    process's peak resident MB from then on (the reconciler's passes beside the simulator)."""
    fabric = SimFabric(racks=racks, seed=racks)
    started = time.monotonic()
    seed_converged(url, fabric)
    seeded = time.monotonic() - started
    gc.collect()
    _reset_peak_rss()
    before = _memory("VmRSS")
    engine = make_engine(url, pool_size=10)
    config = NvLinkConfig(backend="nmxc", reconcile_concurrency=16)
    reconciler = Reconciler(
        engine, InProcessBackend(fabric), config, ReconcilerMetrics(CollectorRegistry(), "nmxc", 120.0)
    )
    try:
        converge = await reconciler.full_pass()  # first (deep) pass: observations recorded
        assert converge.errors == 0, converge
        tracemalloc.start()
        times, cpu = [], []
        for _ in range(repeat):
            used = time.process_time()
            report = await reconciler.full_pass()
            cpu.append(time.process_time() - used)
            assert not report.deep and not report.results, "a steady-state pass found work"
            times.append(report.duration_ms / 1000.0)
        reconciler.full_passes = 0  # the next one is deep
        used = time.process_time()
        deep = await reconciler.full_pass()
        deep_cpu = time.process_time() - used
        assert deep.deep and not deep.results, "a steady-state deep pass found work"
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"{racks:>6}: this process's CPU: steady pass {statistics.median(cpu):.3f} s, "
            f"deep pass {deep_cpu:.2f} s (PostgreSQL's not included)",
            flush=True,
        )
        return (
            statistics.median(times),
            deep.duration_ms / 1000.0,
            converge.duration_ms / 1000.0,
            peak,
            seeded,
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 200, 2000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--wire", action="store_true", help="measure the NMX-C reads over loopback gRPC")
    parser.add_argument("--wire-sizes", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--per-tray", action="store_true", help="--wire: one partition per compute tray")
    args = parser.parse_args()
    if args.wire:
        wire_main(args.wire_sizes, args.repeat, args.per_tray)
        return
    server = database_server("nico-scale-")
    heading = f"{'racks':>6} {'GPUs':>8} {'steady pass':>12} {'deep pass':>10} {'first pass':>11}"
    print(f"{heading} {'peak heap':>10} {'RSS before':>11} {'peak RSS':>9}")
    results: list[tuple[int, float]] = []
    for racks in args.sizes:
        url = fresh_database(server, f"nico_scale_{racks}")
        steady, deep, first, peak, _, before, rss = asyncio.run(measure(url, racks, args.repeat))
        results.append((racks, steady))
        figures = f"{steady:>11.3f}s {deep:>9.2f}s {first:>10.2f}s {peak / 2**20:>8.1f}MB"
        print(f"{racks:>6} {racks * 72:>8} {figures} {before:>9.0f}MB {rss:>7.0f}MB", flush=True)
    for (n1, t1), (n2, t2) in itertools.pairwise(results):
        print(f"growth exponent {n1}->{n2}: {math.log(t2 / t1) / math.log(n2 / n1):.2f}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the process: {rss:.0f} MB")


if __name__ == "__main__":
    main()
