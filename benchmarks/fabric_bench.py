"""Fabric client -> simulator round trips, over real loopback sockets; prints the figures.

    python benchmarks/fabric_bench.py [--calls 500] [--racks 200] [--concurrency 32]

The simulators run in a child process (``nico sim nmxc|nmxm``), as a real NMX-C/NMX-M would be a
separate process, so client and server do not share one event loop. Figures:

* NMX-C, one pooled channel to one rack: list_partitions, create_partition and update
  (add_gpus / remove_gpus) round trips per second;
* NMX-M, the same three as complete operations (an update or create is a 202, polls until
  ``completed``, and for create a fresh listing), with operations completing at once;
* the wall time to list every partition of ``--racks`` NVL72 racks, each served by its own NMX-C
  server (one grpc.aio server per domain, all in the child process), through one client with at
  most ``--concurrency`` calls in flight: cold (first contact, channels opened) and warm.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections.abc import Awaitable, Callable

from nico.config import NvLinkConfig
from nico.fabric.backend import DomainTarget, FabricBackend, FabricPartition
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxm.client import NmxmBackend
from nico.sim.fabric import SimFabric


async def start_simulator(*args: str, lines: int) -> tuple[asyncio.subprocess.Process, list[str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "nico.cli", "sim", *args, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    printed = [(await asyncio.wait_for(proc.stdout.readline(), 120)).decode().strip() for _ in range(lines)]
    return proc, printed


async def stop_simulator(proc: asyncio.subprocess.Process) -> None:
    proc.terminate()
    await proc.wait()


async def rate(calls: int, call: Callable[[int], Awaitable[float]]) -> float:
    """Round trips per second over ``calls`` calls; ``call`` returns the seconds it spent timing."""
    spent = 0.0
    for i in range(calls):
        spent += await call(i)
    return calls / spent


async def timed(call: Awaitable[object]) -> float:
    start = time.perf_counter()
    await call
    return time.perf_counter() - start


async def round_trips(backend: FabricBackend, target: DomainTarget, calls: int) -> dict[str, float]:
    default = next(p for p in await backend.list_partitions(target) if p.is_default)
    first, second, third = sorted(default.gpu_uids)[:3]
    await backend.remove_gpus(target, default, frozenset({first, second, third}))

    async def listing(_: int) -> float:
        return await timed(backend.list_partitions(target))

    async def creating(i: int) -> float:
        start = time.perf_counter()
        made = await backend.create_partition(target, f"bench-{i}", frozenset({first}))
        spent = time.perf_counter() - start
        await backend.delete_partition(target, made)
        return spent

    holder = await backend.create_partition(target, "bench-updates", frozenset({second}))
    grown = FabricPartition(holder.nmx_partition_id, holder.ref, holder.name, frozenset({second, third}))

    async def updating(i: int) -> float:
        if i % 2 == 0:
            return await timed(backend.add_gpus(target, holder, frozenset({third})))
        return await timed(backend.remove_gpus(target, grown, frozenset({third})))

    figures = {
        "list": await rate(calls, listing),
        "create": await rate(calls, creating),
        "update": await rate(calls, updating),
    }
    await backend.delete_partition(target, holder)
    return figures


async def nmxc_figures(calls: int) -> dict[str, float]:
    proc, (line,) = await start_simulator("nmxc", "--racks", "1", "--port", "0", lines=1)
    _, _, url, _, domain = line.split()
    client = NmxcBackend(NvLinkConfig())
    try:
        return await round_trips(client, DomainTarget(uuid.UUID(domain.rstrip(")")), url), calls)
    finally:
        await client.close()
        await stop_simulator(proc)


async def nmxm_figures(calls: int) -> dict[str, float]:
    proc, (url,) = await start_simulator("nmxm", "--racks", "1", "--port", "0", lines=1)
    client = NmxmBackend(url, "admin", "admin", poll_interval=0.001)
    try:
        domain = next(iter(SimFabric(1).domains))  # the child's site, from the same default seed
        return await round_trips(client, DomainTarget(domain), calls)
    finally:
        await client.close()
        await stop_simulator(proc)


async def site_listing(racks: int, concurrency: int) -> tuple[float, float, int]:
    proc, lines = await start_simulator("nmxc", "--racks", str(racks), "--port", "0", lines=racks)
    targets = []
    for line in lines:
        _, _, url, _, domain = line.split()
        targets.append(DomainTarget(uuid.UUID(domain.rstrip(")")), url))
    client = NmxcBackend(NvLinkConfig())
    gate = asyncio.Semaphore(concurrency)

    async def one(target: DomainTarget) -> int:
        async with gate:
            return len(await client.list_partitions(target))

    try:
        walls, found = [], 0
        for _ in range(2):
            start = time.perf_counter()
            found = sum(await asyncio.gather(*(one(t) for t in targets)))
            walls.append(time.perf_counter() - start)
        return walls[0], walls[1], found
    finally:
        await client.close()
        await stop_simulator(proc)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="calls per round-trip figure")
    parser.add_argument("--racks", type=int, default=200, help="racks for the site-wide listing")
    parser.add_argument("--concurrency", type=int, default=32, help="calls in flight for the listing")
    args = parser.parse_args()

    nmxc = await nmxc_figures(args.calls)
    print("NMX-C, one channel, round trips/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in nmxc.items()))
    nmxm = await nmxm_figures(args.calls)
    print("NMX-M, complete operations/s:      " + ", ".join(f"{k} {v:,.0f}" for k, v in nmxm.items()))
    cold, warm, found = await site_listing(args.racks, args.concurrency)
    print(
        f"list all partitions of {args.racks} racks ({args.racks} NMX-C servers, {found} partitions, "
        f"concurrency {args.concurrency}): cold {cold * 1000:,.0f} ms, warm {warm * 1000:,.0f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
