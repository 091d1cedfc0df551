"""What the benchmarks share, and the only module they import from one another: the servers they
start (a scratch embedded PostgreSQL, a free loopback port, the environment of ``nico serve``), the
tokens they sign, and the sites they seed (through the public API, or straight into the database when
the seeding itself is not what is measured). They never import ``tests``: the tests keep their own
factories, and a benchmark seeds the way its measurement needs.

The benchmarks run as scripts (``python benchmarks/<name>.py``), so this folder is first on their path.
Importing this module puts the checkout the benchmark belongs to before it, and ``server_env`` hands
it to the servers they start (``PYTHONPATH``): a benchmark measures the code beside it, also when
another checkout is the one installed (an editable install's finder comes after the path), so two
checkouts' figures can be compared run by run.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import os
import shutil
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

CHECKOUT = Path(__file__).resolve().parents[1]
# The checkout's root, when this folder sits in one (not in an installed copy of the benchmarks).
CHECKOUT_PATH = [str(CHECKOUT)] if (CHECKOUT / "nico").is_dir() else []
sys.path[:0] = CHECKOUT_PATH

if TYPE_CHECKING:
    import psycopg
    from sqlalchemy.engine import Connection

    from nico.sim.fabric import SimFabric

# The signing secret of every benchmarked server and of the tokens the benchmarks sign for it.
SECRET = "bench-secret-0123456789abcdef-0123456789"
RACK_TRAYS = 18  # trays (machines) of an NVL72 rack, 4 GPUs each
TENANT_SHARE = 4  # seed_converged: one machine in four holds an instance


# ---------------------------------------------------------------- servers


def scratch_postgres(prefix: str, database: str) -> tuple[Path, str]:
    """An embedded PostgreSQL in a new temporary directory, and the URL of ``database`` there: the
    server is stopped and its files deleted when the benchmark exits (the directory is removed after
    the server's own clean-up, which runs first: atexit is LIFO), so no postmaster outlives a run."""
    from nico.db.embedded import start_embedded_postgres

    data = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, data, ignore_errors=True)
    return data, start_embedded_postgres(data, database, delete_on_exit=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# Tenant limits out of the way of a throughput benchmark (one org making thousands of requests a
# second, with no reconciler to settle its instances): the checks still run, they never refuse.
UNLIMITED_QUOTAS = {
    "NICO_QUOTAS__LOGICAL_PARTITIONS": "1000000000",
    "NICO_QUOTAS__NVLINK_CHANGES_IN_FLIGHT": "1000000000",
    "NICO_QUOTAS__FABRIC_REQUESTS_PER_SECOND": "1000000000",
    "NICO_QUOTAS__FABRIC_REQUEST_BURST": "1000000000",
}


def server_env(database_url: str, data_dir: Path, secret: str, **extra: str) -> dict[str, str]:
    """This process's environment plus what a benchmarked ``nico serve`` needs (quiet logs)."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(CHECKOUT_PATH + [p for p in [os.environ.get("PYTHONPATH")] if p]),
        "NICO_DATABASE_URL": database_url,
        "NICO_DATA_DIR": str(data_dir),
        "NICO_AUTH__HS256_SECRET": secret,
        "NICO_LOG_LEVEL": "WARNING",
        **extra,
    }


async def until_ready(client: httpx.AsyncClient, within: float = 60.0) -> None:
    """Wait until the benchmarked server answers /readyz with 200 (exit after ``within`` seconds)."""
    deadline = time.monotonic() + within
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if (await client.get("/readyz")).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise SystemExit("nico serve did not become ready")
        await asyncio.sleep(0.1)


def database_server(prefix: str) -> str:
    """A server where the benchmark may create databases: ``NICO_DATABASE_URL``'s, or a scratch
    embedded PostgreSQL (see :func:`scratch_postgres`)."""
    from nico.db.engine import normalize_url

    server = os.environ.get("NICO_DATABASE_URL")
    return normalize_url(server) if server else scratch_postgres(prefix, "postgres")[1]


def fresh_database(server: str, name: str) -> str:
    """Database ``name`` on ``server``, dropped if it was there, created and migrated: its URL."""
    import psycopg
    from sqlalchemy.engine import make_url

    from nico.db import migrate
    from nico.db.engine import libpq_url

    with psycopg.connect(libpq_url(server), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(url)
    return url


# ---------------------------------------------------------------- CPU


class PostgresCpu:
    """CPU seconds used so far by the benchmark's PostgreSQL: its postmaster (found by its data
    directory; the backends that ended are counted in its children's times) and its live backends."""

    def __init__(self, data_directory: str) -> None:
        with open(f"{data_directory}/postmaster.pid") as pid_file:
            self.postmaster = int(pid_file.readline())
        self.tick = os.sysconf("SC_CLK_TCK")

    def seconds(self) -> float:
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
                pid, ppid = int(entry), int(fields[1])
                if pid == self.postmaster:
                    total += sum(int(f) for f in fields[11:15])  # its own and its ended children's
                elif ppid == self.postmaster:
                    total += int(fields[11]) + int(fields[12])
        return total / self.tick


class GcTime:
    """Seconds the cyclic garbage collector ran (its collections stop the process), by ``gc.callbacks``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


# ---------------------------------------------------------------- tokens and the public API


def headers_of(database_url: str, org: str, role: str) -> dict[str, str]:
    """The Authorization header of a dev token for ``org`` with ``role``, signed with :data:`SECRET`."""
    from nico.api.auth import issue_dev_token
    from nico.config import load_settings

    settings = load_settings(database_url=database_url, auth={"hs256_secret": SECRET})
    return {"Authorization": "Bearer " + issue_dev_token(settings, org=org, roles=[role])}


async def expect(response: httpx.Response, status: int = 201) -> Any:
    """The response's JSON, or the benchmark stops when its status is not ``status``."""
    if response.status_code != status:
        raise SystemExit(
            f"{response.request.method} {response.request.url}: {response.status_code} {response.text}"
        )
    return response.json()


async def discovered_machines(database_url: str, endpoints: dict[str, str]) -> list[dict[str, Any]]:
    """The machine registrations of every tray the NMX-C ``endpoints`` report."""
    from nico.config import load_settings
    from nico.fabric.nmxc.client import NmxcBackend
    from nico.reconciler.discovery import discover_endpoint

    settings = load_settings(database_url=database_url, auth={"hs256_secret": SECRET})
    backend = NmxcBackend(settings.nvlink_config)
    machines: list[dict[str, Any]] = []
    try:
        for endpoint in sorted(set(endpoints.values())):
            for (serial, tray), found in (await discover_endpoint(backend, endpoint)).items():
                gpus = [
                    {"deviceId": g.device_id, "gpuUid": str(g.guid), "slotId": g.slot_id} for g in found.gpus
                ]
                info = {
                    "domainUuid": str(found.domain_uuid),
                    "chassisSerial": serial,
                    "trayIndex": tray,
                    "gpus": gpus,
                }
                machines.append({"id": f"{serial}-t{tray:02d}", "nvLinkInfo": info})
    finally:
        await backend.close()
    return machines


async def seed_provider(
    client: httpx.AsyncClient, endpoints: dict[str, str], database_url: str
) -> dict[str, str]:
    """Provider, through the API: site, instance type, machines from the fabric, NMX-C endpoints."""
    from nico.db.engine import make_engine, make_session_factory, transaction
    from nico.services import fabric_registry

    provider_headers = headers_of(database_url, "bench-provider", "PROVIDER_ADMIN")
    p = "/v2/org/bench-provider/nico"
    await expect(await client.get(f"{p}/infrastructure-provider/current", headers=provider_headers), 200)
    site_body = {"name": "bench", "capabilities": {"nvLinkPartition": True}}
    site = await expect(await client.post(f"{p}/site", json=site_body, headers=provider_headers))
    gpu = {"type": "GPU", "name": "NVIDIA GB200", "count": 4, "deviceType": "NVLink"}
    itype_body = {"name": "gb200", "siteId": site["id"], "machineCapabilities": [gpu]}
    itype = await expect(await client.post(f"{p}/instance/type", json=itype_body, headers=provider_headers))
    machines = await discovered_machines(database_url, endpoints)
    await expect(
        await client.post(
            f"{p}/machine/registration",
            json={"siteId": site["id"], "instanceTypeId": itype["id"], "machines": machines},
            headers=provider_headers,
        )
    )
    engine = make_engine(database_url, pool_size=1)
    async with transaction(make_session_factory(engine)) as session:
        for serial, url in endpoints.items():
            await fabric_registry.create_endpoint(session, serial, url)
    await engine.dispose()
    return {"site": site["id"], "itype": itype["id"]}


async def seed_tenant(
    client: httpx.AsyncClient, database_url: str, site: dict[str, str], tenant: str, quota: int
) -> dict[str, str]:
    """Tenant, through the API: allocation of ``quota`` machines, VPC, subnet, logical partition."""
    provider_headers = headers_of(database_url, "bench-provider", "PROVIDER_ADMIN")
    tenant_headers = headers_of(database_url, tenant, "TENANT_ADMIN")
    p, t = "/v2/org/bench-provider/nico", f"/v2/org/{tenant}/nico"
    tenant_row = await expect(await client.get(f"{t}/tenant/current", headers=tenant_headers), 200)
    constraint = {
        "resourceType": "InstanceType",
        "resourceTypeId": site["itype"],
        "constraintType": "Reserved",
        "constraintValue": quota,
    }
    allocation = {
        "name": f"bench-{tenant}",
        "tenantId": tenant_row["id"],
        "siteId": site["site"],
        "allocationConstraints": [constraint],
    }
    await expect(await client.post(f"{p}/allocation", json=allocation, headers=provider_headers))
    named = {"name": "bench", "siteId": site["site"]}
    vpc = await expect(await client.post(f"{t}/vpc", json=named, headers=tenant_headers))
    subnet_body = {"name": "bench", "vpcId": vpc["id"]}
    subnet = await expect(await client.post(f"{t}/subnet", json=subnet_body, headers=tenant_headers))
    lp = await expect(await client.post(f"{t}/nvlink-logical-partition", json=named, headers=tenant_headers))
    return {
        "itype": site["itype"],
        "vpc": vpc["id"],
        "subnet": subnet["id"],
        "lp": lp["id"],
        "token": tenant_headers["Authorization"],
    }


def instance_body(ids: dict[str, Any], lp: str) -> dict[str, Any]:
    """An instance of the tenant ``ids`` (from :func:`seed_tenant`) with its four GPUs in ``lp``."""
    return {
        "instanceTypeId": ids["itype"],
        "vpcId": ids["vpc"],
        "ipxeScript": "#!ipxe",
        "interfaces": [{"subnetId": ids["subnet"]}],
        "nvLinkInterfaces": [{"nvLinkLogicalPartitionId": lp, "deviceInstance": d} for d in range(4)],
    }


async def more_partitions(
    client: httpx.AsyncClient, org: str, token: str, site_id: str, count: int
) -> list[str]:
    """``count`` more logical partitions of the tenant ``org`` (``token``: its Authorization header),
    named lp0, lp1, ...: their ids."""
    made = []
    for k in range(count):
        lp = await expect(
            await client.post(
                f"/v2/org/{org}/nico/nvlink-logical-partition",
                json={"name": f"lp{k}", "siteId": site_id},
                headers={"Authorization": token},
            )
        )
        made.append(str(lp["id"]))
    return made


# ---------------------------------------------------------------- sites written straight into the database


def seed_site(url: str, racks: int, tenant_org: str) -> dict[str, str]:
    """Provider data straight into the database: a site of ``racks`` NVL72 racks, a tenant with a
    quota for all of them, a VPC defaulting to a logical partition, a subnet. The ids of the site, the
    instance type (``type``), the VPC, the subnet and the logical partition (``lp``)."""
    from sqlalchemy import create_engine

    engine = create_engine(url)
    ids = {name: uuid.uuid4() for name in ("provider", "site", "type", "tenant", "vpc", "subnet", "lp")}
    with engine.begin() as conn:
        _insert_provider_site(conn, ids)
        machines = _insert_racks(conn, ids, racks)
        _insert_tenant(conn, ids, tenant_org, machines)
    engine.dispose()
    return {name: str(ids[name]) for name in ("site", "type", "vpc", "subnet", "lp")}


def _insert_provider_site(conn: Connection, ids: dict[str, uuid.UUID]) -> None:
    from sqlalchemy import insert

    from nico.db import models as m

    provider, site, itype = ids["provider"], ids["site"], ids["type"]
    conn.execute(insert(m.InfrastructureProvider), [{"id": provider, "org": "bench-provider"}])
    site_row = {"name": "bench-site", "status": "Registered", "nvlink_partition": True}
    conn.execute(insert(m.Site), [{"id": site, "infrastructure_provider_id": provider, **site_row}])
    conn.execute(
        insert(m.InstanceType),
        [{"id": itype, "infrastructure_provider_id": provider, "site_id": site, "name": "gb200"}],
    )
    gpu = {"type": "GPU", "name": "NVIDIA GB200", "count": 4, "device_type": "NVLink"}
    conn.execute(insert(m.MachineCapability), [{"instance_type_id": itype, **gpu}])


def _insert_racks(conn: Connection, ids: dict[str, uuid.UUID], racks: int) -> int:
    """``racks`` NVLink domains of :data:`RACK_TRAYS` machines of 4 GPUs: how many machines."""
    from sqlalchemy import insert

    from nico.db import models as m

    domains = [uuid.uuid4() for _ in range(racks)]
    conn.execute(insert(m.NvlinkDomain), [{"uuid": d, "site_id": ids["site"]} for d in domains])
    machines: list[dict[str, object]] = []
    gpus: list[dict[str, object]] = []
    for r, domain in enumerate(domains):
        for t in range(RACK_TRAYS):
            machine_id = f"bench-r{r:03d}-t{t:02d}"
            machines.append(
                {
                    "id": machine_id,
                    "site_id": ids["site"],
                    "instance_type_id": ids["type"],
                    "status": "Ready",
                    "domain_uuid": domain,
                    "chassis_serial": f"CHS{r:04d}",
                    "tray_index": t,
                }
            )
            gpus.extend(
                {"machine_id": machine_id, "device_id": d, "gpu_uid": (r << 16) | (t << 8) | d, "slot_id": t}
                for d in range(1, 5)
            )
    conn.execute(insert(m.Machine), machines)
    conn.execute(insert(m.Gpu), gpus)
    return len(machines)


def _insert_tenant(conn: Connection, ids: dict[str, uuid.UUID], org: str, quota: int) -> None:
    """The tenant, its allocation of ``quota`` machines, its logical partition, VPC and subnet."""
    from sqlalchemy import insert

    from nico.db import models as m

    tenant, site, itype = ids["tenant"], ids["site"], ids["type"]
    conn.execute(insert(m.Tenant), [{"id": tenant, "org": org}])
    conn.execute(insert(m.TenantSite), [{"tenant_id": tenant, "site_id": site}])
    allocation = uuid.uuid4()
    conn.execute(
        insert(m.Allocation),
        [
            {
                "id": allocation,
                "infrastructure_provider_id": ids["provider"],
                "tenant_id": tenant,
                "site_id": site,
                "name": "bench",
                "status": "Registered",
            }
        ],
    )
    conn.execute(
        insert(m.AllocationConstraint),
        [
            {
                "allocation_id": allocation,
                "resource_type": "InstanceType",
                "resource_type_id": itype,
                "instance_type_id": itype,
                "constraint_type": "Reserved",
                "constraint_value": quota,
            }
        ],
    )
    owned = {"tenant_id": tenant, "site_id": site, "status": "Ready"}
    conn.execute(insert(m.LogicalPartition), [{"id": ids["lp"], "name": "bench-lp", **owned}])
    conn.execute(
        insert(m.Vpc),
        [{"id": ids["vpc"], "name": "bench-vpc", "nvlink_logical_partition_id": ids["lp"], **owned}],
    )
    conn.execute(
        insert(m.Subnet), [{"id": ids["subnet"], "vpc_id": ids["vpc"], "name": "bench-subnet", **owned}]
    )


def copy_rows(conn: psycopg.Connection, table: str, columns: str, rows: Sequence[tuple[object, ...]]) -> None:
    with conn.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


class ConvergedSite:
    """The rows of a site whose fabric already holds what the tenants want, by table (see
    :func:`seed_converged`)."""

    def __init__(self, ids: dict[str, uuid.UUID]) -> None:
        self.ids = ids
        self.rows: dict[str, list[tuple[object, ...]]] = {
            table: []
            for table in ("domains", "endpoints", "lps", "machines", "gpus", "instances", "bindings")
        }

    def add_tray(self, machine_id: str, lp: uuid.UUID, gpus: int | None, *placed: object) -> None:
        """One machine (``placed``: its domain, chassis serial and tray), holding a converged instance
        with ``gpus`` Ready interfaces in ``lp`` unless ``gpus`` is None."""
        ids = self.ids
        instance_id = uuid.uuid4() if gpus is not None else None
        self.rows["machines"].append((machine_id, ids["site"], ids["itype"], *placed, instance_id, "Ready"))
        if gpus is None:
            return
        self.rows["instances"].append(
            (
                instance_id,
                ids["tenant"],
                ids["site"],
                ids["itype"],
                ids["vpc"],
                f"i-{machine_id}",
                "Ready",
                1,
                1,
            )
        )
        for device in range(gpus):
            self.rows["bindings"].append((uuid.uuid4(), instance_id, lp, ids["site"], device, "Ready"))


def seed_converged(url: str, fabric: SimFabric) -> None:
    """Register the fabric's machines, and place converged instances on a quarter of them (one logical
    partition per domain, as the fabric holds them once a pass has run), with COPY."""
    import psycopg

    from nico.db.engine import libpq_url

    ids = {name: uuid.uuid4() for name in ("provider", "site", "itype", "tenant", "vpc")}
    site = ConvergedSite(ids)
    for domain in fabric.domains.values():
        site.rows["domains"].append((domain.domain_uuid, ids["site"]))
        lp = uuid.uuid4()
        site.rows["lps"].append((lp, ids["tenant"], ids["site"], f"lp-{domain.domain_uuid}", "Ready"))
        site.rows["endpoints"] += [(s, f"http://in-process.invalid/{s}") for s in domain.chassis_serials]
        trays: dict[tuple[str, int], list[int]] = {}
        for gpu in domain.gpus.values():
            trays.setdefault((gpu.chassis_serial, gpu.tray_index), []).append(gpu.gpu_uid)
        for index, ((serial, tray), uids) in enumerate(sorted(trays.items())):
            machine_id = f"{serial}-t{tray:02d}"
            holds = len(uids) if index % TENANT_SHARE == 0 else None
            site.add_tray(machine_id, lp, holds, domain.domain_uuid, serial, tray)
            site.rows["gpus"] += [
                (machine_id, domain.gpus[uid].device_id, uid, domain.gpus[uid].slot_id) for uid in uids
            ]
    with psycopg.connect(libpq_url(url)) as conn:
        _insert_converged_owners(conn, ids)
        _copy_converged(conn, site.rows)
        conn.commit()


def _insert_converged_owners(conn: psycopg.Connection, ids: dict[str, uuid.UUID]) -> None:
    conn.execute(
        "INSERT INTO infrastructure_provider (id, org) VALUES (%s, 'bench-provider')", (ids["provider"],)
    )
    conn.execute(
        "INSERT INTO site (id, infrastructure_provider_id, name, status, nvlink_partition) "
        "VALUES (%s, %s, 'bench', 'Registered', true)",
        (ids["site"], ids["provider"]),
    )
    conn.execute(
        "INSERT INTO instance_type (id, infrastructure_provider_id, site_id, name, status) "
        "VALUES (%s, %s, %s, 'gb200', 'Ready')",
        (ids["itype"], ids["provider"], ids["site"]),
    )
    conn.execute("INSERT INTO tenant (id, org) VALUES (%s, 'bench-tenant')", (ids["tenant"],))
    conn.execute(
        "INSERT INTO vpc (id, tenant_id, site_id, name, status, network_virtualization_type) "
        "VALUES (%s, %s, %s, 'vpc', 'Ready', 'ETHERNET_VIRTUALIZER')",
        (ids["vpc"], ids["tenant"], ids["site"]),
    )


def _copy_converged(conn: psycopg.Connection, rows: dict[str, list[tuple[object, ...]]]) -> None:
    """The rows in the order their foreign keys need."""
    copy_rows(conn, "nvlink_domain", "uuid, site_id", rows["domains"])
    copy_rows(conn, "nvlink_nmxc_endpoint", "chassis_serial, endpoint", rows["endpoints"])
    copy_rows(conn, "logical_partition", "id, tenant_id, site_id, name, status", rows["lps"])
    copy_rows(
        conn,
        "instance",
        "id, tenant_id, site_id, instance_type_id, vpc_id, name, status, nvlink_config_version, "
        "nvlink_applied_version",
        rows["instances"],
    )
    copy_rows(
        conn,
        "machine",
        "id, site_id, instance_type_id, domain_uuid, chassis_serial, tray_index, instance_id, status",
        rows["machines"],
    )
    copy_rows(conn, "gpu", "machine_id, device_id, gpu_uid, slot_id", rows["gpus"])
    copy_rows(
        conn,
        "nvlink_interface",
        "id, instance_id, logical_partition_id, site_id, device_instance, status",
        rows["bindings"],
    )
