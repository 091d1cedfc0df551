"""Time for a site to convert from domain to tray default partitions (spec/nmx-c-2026.md, #1559).

A site of 16 simulated NVL72 racks (a quarter of the machines holding converged tenant instances) is
seeded and reconciled in ``default_partition_mode = "domain"``; then the reconciler restarts in
``"tray"`` mode with 20 ms added to every fabric call, and full passes run until no domain has work
left. Prints the wall time, the fabric calls made, and checks the end state: no domain default, every
tray's GPUs that are in no tenant partition in its ``tray_partition_<slot>``, no GPU without a home.

    python benchmarks/tray_conversion_bench.py [--racks 16] [--latency 0.02] [--concurrency 8]

Uses ``NICO_DATABASE_URL`` (a server where the user may create databases) or an embedded PostgreSQL
in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench_support import database_server, fresh_database, seed_converged
from prometheus_client import CollectorRegistry

from nico.config import NvLinkConfig
from nico.db.engine import make_engine
from nico.fabric.backend import DEFAULT_PARTITION_ID
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend


def reconciler(url: str, fabric: SimFabric, mode: str, concurrency: int) -> Reconciler:
    config = NvLinkConfig(backend="nmxc", reconcile_concurrency=concurrency, default_partition_mode=mode)
    return Reconciler(
        make_engine(url, pool_size=concurrency + 2),
        InProcessBackend(fabric),
        config,
        ReconcilerMetrics(CollectorRegistry(), "nmxc", 120.0),
    )


async def measure(url: str, racks: int, latency: float, concurrency: int) -> None:
    fabric = SimFabric(racks=racks, seed=racks)
    seed_converged(url, fabric)
    before = reconciler(url, fabric, "domain", concurrency)
    try:
        first = await before.full_pass()
        assert first.errors == 0, first
    finally:
        await before.close()
        await before.engine.dispose()
    for domain in fabric.domains:
        fabric.set_faults(domain, latency=latency)
    tray = reconciler(url, fabric, "tray", concurrency)
    operations = passes = 0
    started = time.monotonic()
    try:
        while True:
            report = await tray.full_pass()
            passes += 1
            assert report.errors == 0, report
            done = sum(r.operations for r in report.results.values())
            operations += done
            if not done:
                break
        elapsed = time.monotonic() - started
        homeless = sum(tray.metrics.snapshot.without_home.values())
    finally:
        await tray.close()
        await tray.engine.dispose()
    defaults = [d for d in fabric.domains if DEFAULT_PARTITION_ID in fabric.members(d)]
    partitions = [p for d in fabric.domains for p in fabric.partitions(d)]
    trays = sum(1 for p in partitions if p.name.startswith("tray_partition_"))
    print(
        f"{racks} racks ({racks * 72} GPUs), {latency * 1000:.0f} ms per fabric call, concurrency "
        f"{concurrency}: converted in {elapsed:.2f}s over {passes} full pass(es) (the last one finding "
        f"nothing), {operations} fabric changes; {trays} tray partitions, {len(defaults)} domain "
        f"defaults left, {homeless} GPUs without a home"
    )
    assert not defaults and not homeless


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    url = fresh_database(database_server("nico-tray-"), f"nico_tray_{args.racks}")
    asyncio.run(measure(url, args.racks, args.latency, args.concurrency))


if __name__ == "__main__":
    main()
