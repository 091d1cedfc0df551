"""nico started on a live site: a 16-rack site (in-process simulator) where other managers hold 30% of
the GPUs in partitions of their own (whole trays and half a tray per rack, as Base Command Manager or
an operator would make them) and nico's database wants partitions for a quarter of the machines that
the fabric does not hold yet.

Prints: the fabric changes sent by observe-mode full passes (must be 0) and the changes they plan, by
kind; then, after switching to active with foreign partitions kept, the changes sent, the GPUs of
foreign partitions that moved (must be 0), whether every foreign partition is as it was, the instances
whose GPUs the fabric holds, and how long the first active full pass took.

    python benchmarks/live_site_bench.py [--racks 16] [--foreign-share 0.3]

Uses ``NICO_DATABASE_URL`` (a server where the user may create databases) or an embedded PostgreSQL
in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench_support import RACK_TRAYS, TENANT_SHARE, database_server, fresh_database, seed_converged
from prometheus_client import CollectorRegistry

from nico.config import NvLinkConfig
from nico.db.engine import make_engine
from nico.fabric.backend import DEFAULT_PARTITION_ID
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend

Snapshot = dict[tuple[str, int], frozenset[int]]


def take_foreign(fabric: SimFabric, share: float) -> dict[str, frozenset[int]]:
    """On every rack, GPUs of trays nico leaves free (whole trays, then half of one) moved out of the
    default into two partitions another manager names; returns name -> members."""
    made: dict[str, frozenset[int]] = {}
    for domain in fabric.domains.values():
        trays: dict[int, list[int]] = {}
        for gpu in domain.gpus.values():
            trays.setdefault(gpu.tray_index, []).append(gpu.gpu_uid)
        free = [t for i, t in enumerate(sorted(trays)) if i % TENANT_SHARE != 0]
        wanted = round(len(domain.gpus) * share)
        taken: list[int] = []
        for tray in free:
            taken += sorted(trays[tray])[: wanted - len(taken)]
            if len(taken) >= wanted:
                break
        half = len(taken) // 2
        for suffix, gpus in (("a", taken[:half]), ("b", taken[half:])):
            name = f"bcm-job-{sorted(domain.chassis_serials)[0]}-{suffix}"
            fabric.remove_gpus(domain.domain_uuid, DEFAULT_PARTITION_ID, gpus)
            fabric.create_partition(domain.domain_uuid, name, gpus)
            made[name] = frozenset(gpus)
    return made


def foreign_now(fabric: SimFabric, names: set[str]) -> dict[str, frozenset[int]]:
    return {
        p.name: frozenset(p.gpu_uids) for d in fabric.domains for p in fabric.partitions(d) if p.name in names
    }


def changes_sent(reconciler: Reconciler) -> int:
    samples = [s for m in reconciler.metrics.changes.collect() for s in m.samples]
    return int(sum(s.value for s in samples if s.name.endswith("_total")))


def planned(reconciler: Reconciler) -> dict[str, int]:
    total: dict[str, int] = {}
    for counts in reconciler.metrics.snapshot.planned.values():
        for kind, n in counts.items():
            total[kind] = total.get(kind, 0) + n
    return total


async def run(url: str, racks: int, share: float) -> None:
    fabric = SimFabric(racks=racks, seed=racks)
    seed_converged(url, fabric)
    theirs = take_foreign(fabric, share)
    gpus = sum(len(d.gpus) for d in fabric.domains.values())
    foreign_gpus = sum(len(m) for m in theirs.values())
    machines = racks * RACK_TRAYS
    waiting = machines // TENANT_SHARE
    print(f"site: {racks} racks, {gpus} GPUs, {machines} machines ({waiting} with instances not on it yet)")
    shown = f"{100 * foreign_gpus / gpus:.1f}%"
    print(f"foreign partitions: {len(theirs)}, holding {foreign_gpus} GPUs ({shown})")
    engine = make_engine(url, pool_size=10)
    backend = InProcessBackend(fabric)
    try:
        for mode in ("observe", "active"):
            config = NvLinkConfig(backend="nmxc", mode=mode, reconcile_concurrency=16)
            reconciler = Reconciler(
                engine, backend, config, ReconcilerMetrics(CollectorRegistry(), "nmxc", 120.0)
            )
            started = time.monotonic()
            first = await reconciler.full_pass()
            took = time.monotonic() - started
            await reconciler.full_pass()
            await reconciler.close()
            moved = sum(
                len(theirs[name] ^ members) for name, members in foreign_now(fabric, set(theirs)).items()
            )
            kept = foreign_now(fabric, set(theirs)) == theirs
            print(
                f"{mode}: fabric changes sent {changes_sent(reconciler)}, planned after the passes "
                f"{planned(reconciler)}, foreign GPUs moved {moved}, foreign partitions unchanged: {kept}, "
                f"first full pass {took:.2f} s ({first.reconciled} domains reconciled, {first.errors} errors)"
            )
    finally:
        await backend.close()
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=16)
    parser.add_argument("--foreign-share", type=float, default=0.3)
    args = parser.parse_args()
    server = database_server("nico-live-site")
    url = fresh_database(server, "nico_live_site")
    asyncio.run(run(url, args.racks, args.foreign_share))


if __name__ == "__main__":
    main()
