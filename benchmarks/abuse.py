"""Abuse from outside: one tenant misbehaves against a running ``nico demo`` while another org reads.

``nico demo --racks 2`` (API, reconciler and the simulated NMX-C fabric in one process, embedded
PostgreSQL) is started as a child process on a loopback port. For each abuse, bounded in size and
time, the script prints the server's RSS before and after, the worst latency of another org's GET
(``GET /site`` of the demo's provider, one request after another on its own connection while the abuse
runs) and what the abuser was answered (statuses, or how its connections ended):

* big headers: 10 connections at once, each sending a 32 MB header, three times;
* slow headers: 50 connections sending their head a byte every 200 ms;
* huge arrays: 130,000 ``nvLinkInterfaces`` (9 MB), then the largest bodies the limits admit (1 MiB
  of list items, of unknown keys, of escaped strings, of labels), each with the server's CPU per
  request, the figure that must stay under 50 ms;
* partition flood: logical partitions created back to back for 20 s (at most 1,000);
* PATCH flood: one instance's four NVLink interfaces moved between two partitions, 200 times.

    python benchmarks/abuse.py [--racks 2] [--port 0] [--only "huge arrays,PATCH flood"]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
from bench_support import SECRET, free_port, headers_of, server_env

TENANT, PROVIDER = "demo", "demo-provider"
T, P = f"/v2/org/{TENANT}/nico", f"/v2/org/{PROVIDER}/nico"
MiB = 1024 * 1024
ABUSES = ("big headers", "slow headers", "huge arrays", "partition flood", "PATCH flood")


class Server:
    """The demo process: its port, its process (RSS, CPU) and the tokens of both orgs."""

    def __init__(self, port: int, process: subprocess.Popen[bytes], data: Path) -> None:
        self.port, self.process, self.data = port, process, data
        self.ps = psutil.Process(process.pid)
        url = f"postgresql://unused@127.0.0.1:1/{data.name}"
        self.tenant = headers_of(url, TENANT, "TENANT_ADMIN")
        self.provider = headers_of(url, PROVIDER, "PROVIDER_ADMIN")
        self.base = f"http://127.0.0.1:{port}"

    def rss_mib(self) -> float:
        return float(self.ps.memory_info().rss) / MiB

    def cpu_seconds(self) -> float:
        times = self.ps.cpu_times()
        return float(times.user + times.system)


@contextlib.contextmanager
def demo(racks: int, port: int) -> Any:
    with tempfile.TemporaryDirectory(prefix="nico-abuse-") as tmp:
        data = Path(tmp)
        env = server_env("", data, SECRET)
        env.pop("NICO_DATABASE_URL")  # the demo's own embedded PostgreSQL, in its data directory
        command = [sys.executable, "-m", "nico.cli", "demo", "--racks", str(racks), "--port", str(port)]
        log = (data / "demo.log").open("wb")
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield Server(port, process, data)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
            log.close()


async def until_ready(server: Server, within: float = 180.0) -> None:
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(base_url=server.base) as client:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"{T}/site", headers=server.tenant)).status_code == 200:
                    return
            if server.process.poll() is not None:
                raise SystemExit(f"nico demo stopped: see {server.data / 'demo.log'}")
            await asyncio.sleep(0.2)
    raise SystemExit("nico demo did not become ready")


def _read_until_stopped(base: str, headers: dict[str, str], ready: Any, stop: Any, out: Any) -> None:
    """In a process of its own (the abuser's client CPU must not delay it): GETs until ``stop``, the
    first (connection set-up) not counted."""
    latencies = []
    with httpx.Client(base_url=base, timeout=120) as client:
        client.get(f"{P}/site", headers=headers)
        ready.set()
        while not stop.is_set():
            started = time.perf_counter()
            response = client.get(f"{P}/site", headers=headers)
            latencies.append(time.perf_counter() - started)
            assert response.status_code == 200, response.text
            time.sleep(0.02)
    out.put(latencies)


@contextlib.contextmanager
def bystander(server: Server) -> Iterator[list[float]]:
    """The provider's ``GET /site``, one after another, while the block runs: the latencies (s)."""
    context = multiprocessing.get_context("fork")
    ready, stop, out = context.Event(), context.Event(), context.Queue()
    arguments = (server.base, server.provider, ready, stop, out)
    reader = context.Process(target=_read_until_stopped, args=arguments)
    reader.start()
    if not ready.wait(timeout=60):
        raise SystemExit("the other org's reader did not start")
    latencies: list[float] = []
    try:
        yield latencies
    finally:
        stop.set()
        latencies.extend(out.get(timeout=180))
        reader.join(timeout=30)


async def measure(server: Server, name: str, abuse: Callable[[], Awaitable[str]]) -> dict[str, Any]:
    before, cpu = server.rss_mib(), server.cpu_seconds()
    started = time.perf_counter()
    with bystander(server) as latencies:
        answered = await abuse()
    row = {
        "abuse": name,
        "rss_before": before,
        "rss_after": server.rss_mib(),
        "worst_get_ms": 1000 * max(latencies, default=0.0),
        "gets": len(latencies),
        "seconds": time.perf_counter() - started,
        "server_cpu_s": server.cpu_seconds() - cpu,
        "answered": answered,
    }
    print(
        f"{name:16} RSS {row['rss_before']:6.1f} -> {row['rss_after']:6.1f} MiB | other org's GET worst "
        f"{row['worst_get_ms']:7.1f} ms over {row['gets']} | {row['seconds']:5.1f} s, server CPU "
        f"{row['server_cpu_s']:5.2f} s | abuser: {answered}",
        flush=True,
    )
    return row


def tally(outcomes: list[str]) -> str:
    return ", ".join(f"{count} x {what}" for what, count in collections.Counter(outcomes).most_common())


async def raw_status(reader: asyncio.StreamReader) -> str:
    """The status of the first response on a raw connection, or how the connection ended."""
    try:
        line = await asyncio.wait_for(reader.readline(), timeout=60)
    except TimeoutError:  # before OSError, of which it is a subclass
        return "no answer in 60 s"
    except (ConnectionError, OSError):
        return "reset"
    return line.split()[1].decode() if line.startswith(b"HTTP/") else "closed"


async def big_header(server: Server) -> str:
    async def one() -> str:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        chunk = b"a" * 65536

        async def send() -> None:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ")
            for _ in range(512):  # 32 MB
                writer.write(chunk)
                await writer.drain()
            writer.write(b"\r\n\r\n")
            await writer.drain()

        sender = asyncio.create_task(send())
        status = await raw_status(reader)
        with contextlib.suppress(ConnectionError, OSError):
            await sender
        writer.close()
        return status

    outcomes = []
    for _ in range(3):  # three rounds of ten at once
        outcomes += await asyncio.gather(*(one() for _ in range(10)))
    return tally(outcomes)


async def slow_header(server: Server) -> str:
    async def one() -> str:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        started = time.perf_counter()

        async def trickle() -> None:
            head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 600 + b"\r\n\r\n"
            for byte in head:  # 2 minutes at this pace: the server must not wait that long
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.2)

        sender = asyncio.create_task(trickle())
        status = await raw_status(reader)
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
            await sender
        writer.close()
        return f"{status} after {round(time.perf_counter() - started)} s"

    return tally(list(await asyncio.gather(*(one() for _ in range(50)))))


def compact(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def hostile_bodies(context: dict[str, str]) -> dict[str, tuple[str, str, bytes]]:
    """The largest hostile bodies: name -> (method, path, raw JSON body)."""
    lp = context["lp_a"]
    item = {"nvLinkLogicalPartitionId": lp, "deviceInstance": 0}
    base = {  # refused by a rule after the whole body is read (the name): the cost of reading it
        "name": "",
        "instanceTypeId": context["itype"],
        "vpcId": context["vpc"],
        "ipxeScript": "#!ipxe",
        "interfaces": [{"subnetId": context["subnet"]}],
    }

    def fill(make: Callable[[int], Any], key: str, limit: int = MiB - 512) -> bytes:
        """``base`` with ``key`` holding as many items as fit in ``limit`` bytes."""
        low, high = 1, 2_000_000
        while low < high:
            mid = (low + high + 1) // 2
            size = len(compact({**base, key: make(mid)}))
            low, high = (mid, high) if size <= limit else (low, mid - 1)
        return compact({**base, key: make(low)})

    instance = f"{T}/instance/{context['instance']}"
    return {
        "130k nvLinkIfc": (
            "POST",
            f"{T}/instance",
            compact({**base, "nvLinkInterfaces": [{"nvLinkLogicalPartitionId": lp}] * 130_000}),
        ),
        "1 MiB nvLinkIfc": ("POST", f"{T}/instance", fill(lambda n: [item] * n, "nvLinkInterfaces")),
        "1 MiB PATCH list": ("PATCH", instance, fill(lambda n: [item] * n, "nvLinkInterfaces")),
        "1 MiB unknown key": ("POST", f"{T}/instance", fill(lambda n: list(range(n)), "junk")),
        "1 MiB escapes": ("POST", f"{T}/instance", fill(lambda n: ["\u00e9"] * n, "junk2")),
        "1 MiB emoji escapes": (
            "POST",
            f"{T}/instance",
            fill(lambda n: ["\U0001f600"] * n, "junk3"),
        ),
        "1 MiB labels": ("POST", f"{T}/instance", fill(lambda n: {f"k{i}": "v" for i in range(n)}, "labels")),
        "1 MiB sshKeyGrps": ("PATCH", instance, fill(lambda n: ["x"] * n, "sshKeyGroupIds")),
    }


async def huge_arrays(server: Server, bodies: dict[str, tuple[str, str, bytes]]) -> str:
    outcomes = []
    async with httpx.AsyncClient(base_url=server.base, timeout=120) as client:
        for name, (method, path, body) in bodies.items():
            headers = server.tenant | {"Content-Type": "application/json"}
            rounds, cpu = (20 if len(body) <= MiB else 3), server.cpu_seconds()
            statuses = set()
            for _ in range(rounds):
                response = await client.request(method, path, content=body, headers=headers)
                statuses.add(response.status_code)
            per_request = 1000 * (server.cpu_seconds() - cpu) / rounds
            size = len(body) / MiB
            outcomes.append(
                f"{name} ({size:.1f} MiB): {'/'.join(map(str, sorted(statuses)))} {per_request:.1f} ms CPU"
            )
    return "; ".join(outcomes)


async def partition_flood(server: Server) -> str:
    statuses: list[str] = []
    deadline = time.monotonic() + 20
    async with httpx.AsyncClient(base_url=server.base, timeout=120) as client:
        site = (await client.get(f"{T}/site", headers=server.tenant)).json()[0]["id"]
        while time.monotonic() < deadline and len(statuses) < 1000:
            body = {"name": f"flood-{uuid.uuid4().hex[:12]}", "siteId": site}
            response = await client.post(f"{T}/nvlink-logical-partition", json=body, headers=server.tenant)
            statuses.append(str(response.status_code))
    return tally(statuses)


async def patch_flood(server: Server, context: dict[str, str]) -> str:
    statuses: list[str] = []
    path = f"{T}/instance/{context['instance']}"
    async with httpx.AsyncClient(base_url=server.base, timeout=120) as client:
        for n in range(200):
            lp = context["lp_b" if n % 2 == 0 else "lp_a"]
            items = [{"nvLinkLogicalPartitionId": lp, "deviceInstance": i} for i in range(4)]
            response = await client.patch(path, json={"nvLinkInterfaces": items}, headers=server.tenant)
            statuses.append(str(response.status_code))
    return tally(statuses)


async def tenant_context(server: Server) -> dict[str, str]:
    """What the abuser owns: a VPC, a subnet, two partitions, an instance bound to the first."""
    async with httpx.AsyncClient(base_url=server.base, timeout=60) as client:

        async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            response = await client.post(f"{T}{path}", json=body, headers=server.tenant)
            if response.status_code != 201:
                raise SystemExit(f"POST {path}: {response.status_code} {response.text}")
            result: dict[str, Any] = response.json()
            return result

        site = (await client.get(f"{T}/site", headers=server.tenant)).json()[0]["id"]
        types = await client.get(f"{T}/instance/type", params={"siteId": site}, headers=server.tenant)
        vpc = await post("/vpc", {"name": "abuse", "siteId": site})
        subnet = await post("/subnet", {"name": "abuse", "vpcId": vpc["id"]})
        lp_a = await post("/nvlink-logical-partition", {"name": "abuse-a", "siteId": site})
        lp_b = await post("/nvlink-logical-partition", {"name": "abuse-b", "siteId": site})
        items = [{"nvLinkLogicalPartitionId": lp_a["id"], "deviceInstance": i} for i in range(4)]
        instance = await post(
            "/instance",
            {
                "name": "abuse-0",
                "instanceTypeId": types.json()[0]["id"],
                "vpcId": vpc["id"],
                "ipxeScript": "#!ipxe",
                "interfaces": [{"subnetId": subnet["id"]}],
                "nvLinkInterfaces": items,
            },
        )
    return {
        "itype": types.json()[0]["id"],
        "vpc": vpc["id"],
        "subnet": subnet["id"],
        "lp_a": lp_a["id"],
        "lp_b": lp_b["id"],
        "instance": instance["id"],
    }


def binding_figure() -> None:
    """In this process, past the body limit: how long binding 130,000 ``nvLinkInterfaces`` takes to be
    refused (the list's length is checked before any item is validated)."""
    from pydantic import ValidationError

    from nico.instance.schemas import InstanceCreateRequest

    item = {"nvLinkLogicalPartitionId": str(uuid.uuid4()), "deviceInstance": 0}
    data = {"name": "x", "nvLinkInterfaces": [item] * 130_000}
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        with contextlib.suppress(ValidationError):
            InstanceCreateRequest.model_validate(data)
        timings.append(time.perf_counter() - started)
    print(
        f"binding 130,000 nvLinkInterfaces: refused in {1000 * min(timings):.3f} ms (best of 5)", flush=True
    )


async def run(server: Server, only: set[str]) -> list[dict[str, Any]]:
    await until_ready(server)
    context = await tenant_context(server)
    bodies = hostile_bodies(context)  # built before the measurement: building them takes seconds
    print(
        f"nico demo pid {server.process.pid} on port {server.port}; RSS {server.rss_mib():.1f} MiB",
        flush=True,
    )
    abuses: dict[str, Callable[[], Awaitable[str]]] = {
        "big headers": lambda: big_header(server),
        "slow headers": lambda: slow_header(server),
        "huge arrays": lambda: huge_arrays(server, bodies),
        "partition flood": lambda: partition_flood(server),
        "PATCH flood": lambda: patch_flood(server, context),
    }
    return [await measure(server, name, abuse) for name, abuse in abuses.items() if name in only]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--racks", type=int, default=2)
    parser.add_argument("--port", type=int, default=0, help="0: a free one")
    parser.add_argument("--only", default=",".join(ABUSES), help=f"some of: {', '.join(ABUSES)}")
    args = parser.parse_args()
    os.environ.setdefault("NICO_LOG_LEVEL", "WARNING")
    binding_figure()
    with demo(args.racks, args.port or free_port()) as server:
        asyncio.run(run(server, set(args.only.split(","))))


if __name__ == "__main__":
    main()
