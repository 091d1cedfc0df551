"""A create's CPU as its tenant grows: ``POST /instance`` for a tenant that already holds ~10, ~1,000
and ~20,000 instances of the type, on ``nico serve`` (no reconciler) and embedded PostgreSQL.

Two databases on one server, seeded alike: ``head`` (migrations to the head) and ``0025`` (the same,
downgraded to revision 0025 once its server has started, as ``nico serve`` upgrades to the head: the
quota check, the creation context and the limit check counted the tenant's instances by reading
each of them). Each runs its own ``nico serve``. For every size the
tenant's instances are added straight into both databases (COPY, settled: not in flight), VACUUM
ANALYZE, then ``--rounds`` rounds in which each server makes ``--creates`` creates one after another
(a few warm-up creates first), CPU of the server process and of PostgreSQL measured around them;
the round's creates are then deleted in the database. Prints CPU ms per create, API and PostgreSQL,
for each database, size and round.

    python benchmarks/tenant_size_bench.py [--sizes 10 1000 20000] [--creates 40] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import psycopg
from bench_support import (
    RACK_TRAYS,
    SECRET,
    UNLIMITED_QUOTAS,
    PostgresCpu,
    copy_rows,
    expect,
    free_port,
    fresh_database,
    headers_of,
    scratch_postgres,
    seed_site,
    server_env,
    until_ready,
)

ORG = "size-tenant"
RACKS = 8  # 144 free machines for the creates: each round's are deleted after it
WARM_UP = 5
VARIANTS = ("0025", "head")


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system) used so far by process ``pid``."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def libpq(url: str) -> str:
    from nico.db.engine import libpq_url

    return libpq_url(url)


def grow_tenant(url: str, ids: dict[str, str], have: int, size: int) -> None:
    """Settled instances of the tenant up to ``size``, each on a machine of its own in racks of
    :data:`RACK_TRAYS` (NVLink domains) beside the free ones."""
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        with conn.transaction():
            tenant = conn.execute("SELECT id FROM tenant WHERE org = %s", (ORG,)).fetchone()
            assert tenant is not None
            rows = [
                (uuid.uuid4(), tenant[0], ids["site"], ids["type"], ids["vpc"], f"held-{n}", "Ready", 1, 1)
                for n in range(have, size)
            ]
            racks = {n // RACK_TRAYS: uuid.uuid4() for n in range(have, size)}  # a rack cut by a size: two
            copy_rows(conn, "nvlink_domain", "uuid, site_id", [(d, ids["site"]) for d in racks.values()])
            copy_rows(
                conn,
                "instance",
                "id, tenant_id, site_id, instance_type_id, vpc_id, name, status, "
                "nvlink_config_version, nvlink_applied_version",
                rows,
            )
            machines = []
            for n, row in zip(range(have, size), rows, strict=True):
                rack = n // RACK_TRAYS
                machines.append(
                    (
                        f"held-{n}",
                        ids["site"],
                        ids["type"],
                        "Ready",
                        row[0],
                        racks[rack],
                        f"HELD-{racks[rack]}",
                        n % RACK_TRAYS,
                    )
                )
            copy_rows(
                conn,
                "machine",
                "id, site_id, instance_type_id, status, instance_id, domain_uuid, chassis_serial, tray_index",
                machines,
            )
            # Quota for all of them and the creates.
            conn.execute("UPDATE allocation_constraint SET constraint_value = 1000000")
        conn.execute("VACUUM ANALYZE")


def clear_creates(url: str) -> None:
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        conn.execute("DELETE FROM instance WHERE name LIKE 'new-%'")  # machines: ON DELETE SET NULL
        conn.execute("VACUUM ANALYZE instance")


async def creates(port: int, url: str, ids: dict[str, str], count: int) -> None:
    body: dict[str, object] = {
        "instanceTypeId": ids["type"],
        "vpcId": ids["vpc"],
        "ipxeScript": "#!ipxe",
        "interfaces": [{"subnetId": ids["subnet"]}],
    }
    headers = headers_of(url, ORG, "TENANT_ADMIN")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        for _ in range(count):
            made = {**body, "name": f"new-{uuid.uuid4().hex[:12]}"}
            await expect(await client.post(f"/v2/org/{ORG}/nico/instance", json=made, headers=headers))


def measure(
    server: subprocess.Popen[bytes],
    port: int,
    url: str,
    ids: dict[str, str],
    count: int,
    postgres: PostgresCpu,
) -> tuple[float, float]:
    """CPU ms per create of the server and of PostgreSQL over ``count`` creates (after a warm-up)."""
    asyncio.run(creates(port, url, ids, WARM_UP))
    api, pg = process_cpu(server.pid), postgres.seconds()
    asyncio.run(creates(port, url, ids, count))
    api, pg = process_cpu(server.pid) - api, postgres.seconds() - pg
    clear_creates(url)
    return api * 1000 / count, pg * 1000 / count


def start_server(url: str, data_dir: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = server_env(url, data_dir, SECRET, **UNLIMITED_QUOTAS)
    nico = str(Path(sys.executable).with_name("nico"))
    server = subprocess.Popen([nico, "serve", "--no-reconciler", "--port", str(port)], env=env)

    async def ready() -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            await until_ready(client)

    asyncio.run(ready())
    return server, port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 1000, 20000])
    parser.add_argument("--creates", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from nico.db import migrate

    data_dir, server_url = scratch_postgres("nico-size-", "postgres")
    urls = {variant: fresh_database(server_url, f"size_{variant}") for variant in VARIANTS}
    ids = {variant: seed_site(url, RACKS, ORG) for variant, url in urls.items()}
    with psycopg.connect(libpq(server_url)) as conn:
        found = conn.execute("SHOW data_directory").fetchone()
    assert found is not None
    postgres = PostgresCpu(str(found[0]))
    servers = {variant: start_server(url, data_dir) for variant, url in urls.items()}
    migrate.downgrade(urls["0025"], "0025")  # after its start: nico serve upgrades to the head
    print(f"{'instances':>9} {'rules':>5} {'round':>5} {'API ms/create':>14} {'PostgreSQL ms/create':>21}")
    try:
        have = 0
        for size in args.sizes:
            for variant, url in urls.items():
                grow_tenant(url, ids[variant], have, size)
            have = size
            for n in range(args.rounds):
                for variant, (server, port) in servers.items():
                    api, pg = measure(server, port, urls[variant], ids[variant], args.creates, postgres)
                    print(f"{size:>9} {variant:>5} {n + 1:>5} {api:>14.2f} {pg:>21.2f}", flush=True)
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
