"""Taking over a live site: fabric changes sent in each step, and how long an import takes.

A site of 16 simulated NVL72 racks where 30% of the GPUs are in partitions another manager made
(NVIDIA Infra Controller's, named ``<LP><first GPU's GUID>``), and that manager's REST API (a second
nico on its own database, served on loopback, holding those logical partitions, one VPC and an
instance on each of those machines with its NVLink interfaces as NICo reports them). nico, with every
machine registered and nothing of the tenant's yet, then:

1. runs a full pass in observe mode (``nvlink_config.mode = "observe"``): changes sent, must be 0;
2. switches to active mode keeping foreign partitions (``nvlink_config.foreign_partitions =
   "keep"``) and runs a full pass: changes sent, must be 0 (the foreign GPUs are held, not moved);
3. imports the tenant's objects from the source (``nico admin import``'s run): the time it took;
4. runs a full pass in active mode: changes sent, must be 0, and every imported interface is Ready.

Steps 1 and 2 need a checkout whose ``nvlink_config`` has ``mode`` and ``foreign_partitions``; in
one without them they are reported as not measured (an active pass there would take the foreign
partitions apart, so the run goes straight to the import).

    python benchmarks/takeover.py [--racks 16] [--share 0.3]

Uses ``NICO_DATABASE_URL`` (a server where the user may create databases) or an embedded PostgreSQL
in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import uvicorn
from bench_support import SECRET, copy_rows, database_server, fresh_database, headers_of
from prometheus_client import CollectorRegistry

from nico.adoption import listing, takeover
from nico.adoption.naming import nico_partition_name
from nico.adoption.source import NicoSource
from nico.config import NvLinkConfig, load_settings
from nico.db.engine import libpq_url, make_engine
from nico.fabric.backend import DEFAULT_PARTITION_ID, DomainTarget, FabricPartition
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.serving import EmbeddedServer
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend

ORG = "bench-tenant"
TAKEOVER_KEYS = {"mode", "foreign_partitions"}  # what steps 1 and 2 need of nvlink_config


class CountingBackend(InProcessBackend):
    """The simulated fabric, counting the change calls made through it."""

    changes = 0

    async def create_partition(self, target: DomainTarget, *args: Any, **kw: Any) -> FabricPartition:
        self.changes += 1
        return await super().create_partition(target, *args, **kw)

    async def add_gpus(self, target: DomainTarget, *args: Any, **kw: Any) -> None:
        self.changes += 1
        await super().add_gpus(target, *args, **kw)

    async def remove_gpus(self, target: DomainTarget, *args: Any, **kw: Any) -> None:
        self.changes += 1
        await super().remove_gpus(target, *args, **kw)

    async def delete_partition(self, target: DomainTarget, partition: FabricPartition) -> None:
        self.changes += 1
        await super().delete_partition(target, partition)


# ---------------------------------------------------------------- the two sites


def foreign_trays(fabric: SimFabric, share: float) -> dict[uuid.UUID, list[tuple[str, int]]]:
    """The trays whose GPUs the other manager holds, per domain: the first trays of each rack, more
    on every other rack, ``share`` of all trays in all."""
    by_domain: dict[uuid.UUID, list[tuple[str, int]]] = {}
    trays_of = {d: sorted({(g.chassis_serial, g.tray_index) for g in fabric.gpus(d)}) for d in fabric.domains}
    total = sum(len(t) for t in trays_of.values())
    wanted = round(total * share)
    for n, (domain, trays) in enumerate(sorted(trays_of.items())):
        left = len(trays_of) - n
        take = min(len(trays), -(-wanted // left))
        by_domain[domain] = trays[:take]
        wanted -= take
    return by_domain


def register(url: str, fabric: SimFabric) -> dict[str, uuid.UUID]:
    """Provider, site, instance type, the tenant with an allocation for every machine, and every rack's
    machines and GPUs: a site before any tenant work."""
    ids = {name: uuid.uuid4() for name in ("provider", "site", "itype", "tenant", "allocation")}
    machines = [
        (f"{g.chassis_serial}-t{g.tray_index:02d}", d, g.chassis_serial, g.tray_index)
        for d in fabric.domains
        for g in fabric.gpus(d)
        if g.device_id == 1
    ]
    with psycopg.connect(libpq_url(url)) as conn:
        run = conn.execute
        run("INSERT INTO infrastructure_provider (id, org) VALUES (%s, 'bench-provider')", (ids["provider"],))
        run(
            "INSERT INTO site (id, infrastructure_provider_id, name, status, nvlink_partition) "
            "VALUES (%s, %s, 'bench', 'Registered', true)",
            (ids["site"], ids["provider"]),
        )
        run(
            "INSERT INTO instance_type (id, infrastructure_provider_id, site_id, name, status) "
            "VALUES (%s, %s, %s, 'gb200', 'Ready')",
            (ids["itype"], ids["provider"], ids["site"]),
        )
        run("INSERT INTO tenant (id, org) VALUES (%s, %s)", (ids["tenant"], ORG))
        run("INSERT INTO tenant_site (tenant_id, site_id) VALUES (%s, %s)", (ids["tenant"], ids["site"]))
        run(
            "INSERT INTO allocation (id, infrastructure_provider_id, tenant_id, site_id, name, status) "
            "VALUES (%s, %s, %s, %s, 'bench', 'Registered')",
            (ids["allocation"], ids["provider"], ids["tenant"], ids["site"]),
        )
        run(
            "INSERT INTO allocation_constraint (allocation_id, resource_type, resource_type_id, "
            "instance_type_id, constraint_type, constraint_value) "
            "VALUES (%s, 'InstanceType', %s, %s, 'Reserved', %s)",
            (ids["allocation"], ids["itype"], ids["itype"], len(machines)),
        )
        copy_rows(conn, "nvlink_domain", "uuid, site_id", [(d, ids["site"]) for d in fabric.domains])
        serials = sorted({s for _, _, s, _ in machines})
        copy_rows(
            conn,
            "nvlink_nmxc_endpoint",
            "chassis_serial, endpoint",
            [(s, f"http://in-process.invalid/{s}") for s in serials],
        )
        copy_rows(
            conn,
            "machine",
            "id, site_id, instance_type_id, domain_uuid, chassis_serial, tray_index, status",
            [(m, ids["site"], ids["itype"], d, s, t, "Ready") for m, d, s, t in machines],
        )
        gpus = [
            (f"{g.chassis_serial}-t{g.tray_index:02d}", g.device_id, g.gpu_uid, g.slot_id)
            for d in fabric.domains
            for g in fabric.gpus(d)
        ]
        copy_rows(conn, "gpu", "machine_id, device_id, gpu_uid, slot_id", gpus)
        conn.commit()
    return ids


def nico_site(
    url: str, fabric: SimFabric, ids: dict[str, uuid.UUID], held: dict[uuid.UUID, list[tuple[str, int]]]
) -> int:
    """The other manager's state: per rack a logical partition holding the held trays (NICo-named
    partition on the fabric, made as that manager makes it), one VPC, an instance per held tray with
    its interfaces Ready as NICo reports them. Returns the number of instances."""
    vpc = uuid.uuid4()
    lps, instances, bindings, assigned = [], [], [], []
    for domain, trays in held.items():
        if not trays:
            continue
        lp = uuid.uuid4()
        lps.append((lp, ids["tenant"], ids["site"], f"job-{domain}", "Ready"))
        members = [g for g in fabric.gpus(domain) if (g.chassis_serial, g.tray_index) in set(trays)]
        fabric.remove_gpus(domain, DEFAULT_PARTITION_ID, [g.gpu_uid for g in members])
        fabric.create_partition(
            domain,
            nico_partition_name(lp, frozenset(g.gpu_uid for g in members)),
            [g.gpu_uid for g in members],
        )
        for serial, tray in trays:
            instance = uuid.uuid4()
            machine = f"{serial}-t{tray:02d}"
            instances.append(
                (instance, ids["tenant"], ids["site"], ids["itype"], vpc, f"i-{machine}", "Ready", 1, 1)
            )
            assigned.append((instance, machine))
            bindings += [
                (uuid.uuid4(), instance, lp, ids["site"], g.device_id - 1, "Ready", domain, g.gpu_uid)
                for g in members
                if (g.chassis_serial, g.tray_index) == (serial, tray)
            ]
    with psycopg.connect(libpq_url(url)) as conn:
        copy_rows(conn, "logical_partition", "id, tenant_id, site_id, name, status", lps)
        conn.execute(
            "INSERT INTO vpc (id, tenant_id, site_id, name, status, network_virtualization_type) "
            "VALUES (%s, %s, %s, 'bench-vpc', 'Ready', 'ETHERNET_VIRTUALIZER')",
            (vpc, ids["tenant"], ids["site"]),
        )
        copy_rows(
            conn,
            "instance",
            "id, tenant_id, site_id, instance_type_id, vpc_id, name, status, nvlink_config_version, "
            "nvlink_applied_version",
            instances,
        )
        with conn.cursor() as cur:
            cur.executemany("UPDATE machine SET instance_id = %s WHERE id = %s", assigned)
        copy_rows(
            conn,
            "nvlink_interface",
            "id, instance_id, logical_partition_id, site_id, device_instance, status, domain_uuid, gpu_uid",
            bindings,
        )
        conn.commit()
    return len(instances)


@contextlib.asynccontextmanager
async def serving(url: str) -> AsyncIterator[str]:
    """The source's API on a loopback port, in this process."""
    from bench_support import free_port

    from nico.api.app import build_context, create_app

    settings = load_settings(
        database_url=url, data_dir=Path(tempfile.mkdtemp()), auth={"hs256_secret": SECRET}
    )
    context = build_context(settings, url)
    port = free_port()
    server = EmbeddedServer(
        uvicorn.Config(
            create_app(settings, context=context), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        await context.close()


# ---------------------------------------------------------------- the steps


async def full_pass(url: str, backend: CountingBackend, **config: str) -> int:
    """One full pass over every domain: the fabric changes it sent."""
    reconciler = Reconciler(
        make_engine(url, pool_size=10),
        backend,
        NvLinkConfig.model_validate({"backend": "nmxc", "reconcile_concurrency": 8, **config}),
        ReconcilerMetrics(CollectorRegistry(), "nmxc", 120.0),
    )
    before = backend.changes
    try:
        report = await reconciler.full_pass()
        assert report.errors == 0, report
    finally:
        await reconciler.close()
        await reconciler.engine.dispose()
    return backend.changes - before


async def ready_interfaces(url: str) -> tuple[int, int]:
    async with await psycopg.AsyncConnection.connect(libpq_url(url)) as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'Ready'), count(*) FROM nvlink_interface"
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


async def measure(racks: int, share: float) -> None:
    server = database_server("nico-takeover-bench-")
    fabric = SimFabric(racks=racks, seed=racks)
    here_url = fresh_database(server, "takeover_here")
    source_url = fresh_database(server, "takeover_source")
    held = foreign_trays(fabric, share)
    register(here_url, fabric)
    instances = nico_site(source_url, fabric, register(source_url, fabric), held)
    gpus = sum(len(d.gpus) for d in fabric.domains.values())
    foreign = sum(len(t) for t in held.values()) * 4
    print(
        f"{racks} racks ({gpus} GPUs), {foreign} GPUs ({foreign / gpus:.0%}) in foreign partitions, "
        f"{instances} instances at the source"
    )
    backend = CountingBackend(fabric)
    if set(NvLinkConfig.model_fields) >= TAKEOVER_KEYS:
        observed = await full_pass(here_url, backend, mode="observe", foreign_partitions="keep")
        print(f"observe mode, full pass: {observed} fabric changes sent (must be 0)")
        active = await full_pass(here_url, backend, mode="active", foreign_partitions="keep")
        print(f"active mode keeping foreign partitions, full pass: {active} fabric changes sent (must be 0)")
    else:
        print(
            "observe and active-keep passes: not measured (this checkout's nvlink_config has no mode / "
            "foreign_partitions)"
        )
    engine = make_engine(here_url, pool_size=4)
    token = headers_of(source_url, ORG, "TENANT_ADMIN")["Authorization"].removeprefix("Bearer ")
    try:
        async with serving(source_url) as url:
            started = time.monotonic()
            listings = await listing.list_with(backend, engine)
            listed = time.monotonic() - started
            source = NicoSource(url, token, ORG)
            try:
                results = await takeover.run_import(engine, source, ORG, listings)
            finally:
                await source.close()
            took = time.monotonic() - started
    finally:
        await engine.dispose()
    counts = takeover.summary(results)
    print(
        f"import: {took:.2f}s for {len(results)} objects ({counts}); of which reading every domain's "
        f"partitions {listed:.2f}s, {(took - listed) / max(len(results), 1) * 1000:.1f} ms per object after"
    )
    after = await full_pass(here_url, backend)
    ready, total = await ready_interfaces(here_url)
    print(
        f"active mode after the import, full pass: {after} fabric changes sent (must be 0); "
        f"{ready}/{total} interfaces Ready"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=16)
    parser.add_argument("--share", type=float, default=0.3, help="share of the GPUs in foreign partitions")
    args = parser.parse_args()
    asyncio.run(measure(args.racks, args.share))


if __name__ == "__main__":
    main()
