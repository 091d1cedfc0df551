"""``nico admin import``: a NICo site's logical partitions, VPCs and instances of one org taken over
with their ids, nico -> nico over loopback (each with its own database) and from a fabric holding
NICo-named partitions; the first pass after it changes nothing on the fabric and every imported
interface is Ready. Run twice, or after a run that skipped something, it carries on."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry
from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from typer.testing import CliRunner

from nico.adoption.naming import nico_partition_name
from nico.api.auth import issue_dev_token
from nico.cli import app
from nico.config import NvLinkConfig, Settings, load_settings
from nico.db import migrate
from nico.db.engine import make_engine, make_session_factory
from nico.db.models import AllocationConstraint, Instance, LogicalPartition, Machine, NvlinkInterface, Vpc
from nico.fabric.backend import DomainTarget
from nico.fabric.nmxc.client import NmxcBackend
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from tests.conftest import TEST_SECRET
from tests.reconciler.conftest import MakeReconciler
from tests.reconciler.test_adoption import fabric_state, foreign_partition
from tests.support import db as testdb
from tests.support import factories as f
from tests.support.out_of_partition import OutJournal
from tests.support.replica import replica
from tests.support.sim_site import SimSite, place, seed

ORG = "tenant-org"


async def run(*args: str) -> tuple[int, str]:
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args))
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


@dataclass
class Source:
    """The source deployment: its database, settings and seeded site (served by :func:`serving`)."""

    url: str
    settings: Settings
    engine: AsyncEngine
    site: SimSite

    def token(self) -> str:
        return issue_dev_token(self.settings, org=ORG, roles=["TENANT_ADMIN"])


@pytest_asyncio.fixture
async def sim() -> AsyncIterator[tuple[SimFabric, NmxcSimulator]]:
    fabric = SimFabric(racks=2, seed=51)
    async with NmxcSimulator(fabric) as running:
        yield fabric, running


@pytest_asyncio.fixture
async def source(sim: tuple[SimFabric, NmxcSimulator], tmp_path: Path) -> AsyncIterator[Source]:
    """A second nico's database on the same server, seeded with the same racks."""
    fabric, nmxc = sim
    url = testdb.create_database("nico_source")
    await asyncio.to_thread(migrate.upgrade, url)
    settings = load_settings(
        database_url=url, data_dir=tmp_path / "source", auth={"hs256_secret": TEST_SECRET}
    )
    engine = make_engine(url, pool_size=2)
    try:
        async with make_session_factory(engine)() as s:
            site = await seed(s, fabric, nmxc.endpoints)
        yield Source(url, settings, engine, site)
    finally:
        await engine.dispose()
        testdb.drop_database(url)


async def tenant_work(source: Source) -> dict[str, uuid.UUID]:
    """Two logical partitions over both racks, a VPC defaulting to one, four instances."""
    site = source.site
    d0, d1 = site.domains
    async with make_session_factory(source.engine)() as s:
        tenant, at = site.nv.tenant, site.nv.site
        s.add_all([tenant, at])
        a = await f.logical_partition(s, tenant, at, name="train-a")
        b = await f.logical_partition(s, tenant, at, name="train-b")
        vpc = await f.vpc(s, tenant, at, name="vpc-train", default_lp=a)
        await s.commit()
        ids = {"a": a.id, "b": b.id, "vpc": vpc.id}
        site.nv.vpc = vpc
        s.add_all(site.machines[d0][:3] + site.machines[d1][:1])
        await place(s, site, site.machines[d0][0], dict.fromkeys(range(4), a), name="one")
        await place(s, site, site.machines[d0][1], dict.fromkeys(range(4), a), name="two")
        await place(s, site, site.machines[d0][2], {0: b, 1: b}, name="three")
        await place(s, site, site.machines[d1][0], dict.fromkeys(range(4), a), name="four")
    return ids


async def interfaces(session: AsyncSession) -> dict[uuid.UUID, str]:
    rows = (await session.execute(select(NvlinkInterface.id, NvlinkInterface.status))).all()
    return {r[0]: r[1] for r in rows}


async def first_pass_changes_nothing(
    site: SimSite, make_reconciler: MakeReconciler, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = {d: fabric_state(site.fabric, d) for d in site.domains}
    backend = NmxcBackend(NvLinkConfig(backend="nmxc", fabric_call_timeout="2s"))
    journal = OutJournal(site.fabric, backend, monkeypatch)
    try:
        results = await make_reconciler(backend).reconcile(site.domains)
    finally:
        await backend.close()
    assert {d: (r.operations, r.error) for d, r in results.items()} == dict.fromkeys(site.domains, (0, None))
    assert journal.calls == 0
    assert {d: fabric_state(site.fabric, d) for d in site.domains} == before


async def test_nico_to_nico_keeps_every_id_resumes_after_a_failure_and_the_first_pass_sends_nothing(
    sim: tuple[SimFabric, NmxcSimulator],
    source: Source,
    session: AsyncSession,
    cli_env: dict[str, str],
    make_reconciler: MakeReconciler,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fabric, nmxc = sim
    ids = await tenant_work(source)
    src_backend = NmxcBackend(NvLinkConfig(backend="nmxc", fabric_call_timeout="2s"))
    metrics = ReconcilerMetrics(CollectorRegistry(), "nmxc", 120.0)
    src = Reconciler(source.engine, src_backend, NvLinkConfig(backend="nmxc", notify_debounce="2ms"), metrics)
    try:  # the source's reconciler makes its partitions (nico-<LP>) and settles its interfaces
        await src.reconcile(source.site.domains)
    finally:
        await src.close()
        await src_backend.close()
    async with make_session_factory(source.engine)() as s:
        wanted = await interfaces(s)
    assert len(wanted) == 14 and set(wanted.values()) == {"Ready"}

    here = await seed(session, fabric, nmxc.endpoints)
    args = (
        "admin",
        "import",
        "--from",
        url_of := "",
        "--token",
        source.token(),
        "--org",
        ORG,
        "--format",
        "json",
    )
    async with replica(source.settings, source.url) as url:
        args = tuple(url if a == url_of else a for a in args)
        code, out = await run(*[a if a != ORG else "nobody-here" for a in args])
        assert code == 1 and "org nobody-here has no tenant here" in out, out
        # The source fails half-way: its instance list answers an error after the partitions and
        # VPCs were read and imported (each committed on its own).
        async with source.engine.begin() as conn:
            await conn.execute(text("ALTER TABLE instance_interface RENAME TO instance_interface_away"))
        code, out = await run(*args)
        assert code == 1 and "source:" in out and "/instance answered 5" in out, out
        assert set((await session.scalars(select(LogicalPartition.id))).all()) == {ids["a"], ids["b"]}
        assert set((await session.scalars(select(Instance.id))).all()) == set()
        async with source.engine.begin() as conn:
            await conn.execute(text("ALTER TABLE instance_interface_away RENAME TO instance_interface"))

        code, out = await run(*args)  # resumed: what the first run committed is present
        assert code == 0, out
        done = json.loads(out)
        # The seeded VPC of the same name here is the one thing not taken: named for why.
        skipped = [(r["name"], r["why"]) for r in done if r["outcome"] == "skipped"]
        assert skipped == [("vpc-1", "A Vpc with specified name already exists for Tenant")], done
        outcomes = {(r["kind"], r["outcome"]) for r in done if r["name"] != "vpc-1"}
        assert outcomes == {("logical-partition", "present"), ("vpc", "present"), ("instance", "imported")}
        assert {ids["a"], ids["b"], ids["vpc"]} <= {uuid.UUID(r["id"]) for r in done}

        got = await interfaces(session)
        assert set(got) == set(wanted)  # every binding under its id
        vpc = await session.get(Vpc, ids["vpc"])
        assert vpc is not None and vpc.nvlink_logical_partition_id == ids["a"]
        await first_pass_changes_nothing(here, make_reconciler, monkeypatch)
        session.expire_all()
        assert set((await interfaces(session)).values()) == {"Ready"}
        statuses = set((await session.scalars(select(Instance.status))).all())
        assert statuses == {"Ready"}

        code, out = await run(*args)
        assert code == 0, out
        assert {r["outcome"] for r in json.loads(out) if r["name"] != "vpc-1"} == {"present"}


async def test_from_nico_named_partitions_matched_by_gpus_and_resumed_after_a_skip(
    sim: tuple[SimFabric, NmxcSimulator],
    source: Source,
    session: AsyncSession,
    cli_env: dict[str, str],
    make_reconciler: MakeReconciler,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The source says where each GPU is (as NICo reports it); the fabric holds NICo's partitions,
    made over gRPC by a foreign manager; this site's machines have other ids, so only the GPUs
    match instances to machines."""
    fabric, nmxc = sim
    ids = await tenant_work(source)
    async with source.engine.begin() as conn:  # what NICo's site reported for each GPU
        await conn.execute(
            text(
                "UPDATE nvlink_interface n SET status = 'Ready', gpu_uid = g.gpu_uid, "
                "domain_uuid = m.domain_uuid "
                "FROM machine m JOIN gpu g ON g.machine_id = m.id "
                "WHERE m.instance_id = n.instance_id AND g.device_id = n.device_instance + 1"
            )
        )
        rows = (
            await conn.execute(
                text("SELECT logical_partition_id, domain_uuid, gpu_uid FROM nvlink_interface")
            )
        ).all()
    members: dict[tuple[uuid.UUID, uuid.UUID], set[int]] = {}
    for lp, domain, gpu in rows:
        members.setdefault((lp, domain), set()).add(int(gpu))
    foreign = NmxcBackend(NvLinkConfig(backend="nmxc"))
    try:
        for (lp, domain), gpus in sorted(members.items()):
            target = DomainTarget(domain, nmxc.url(domain))
            await foreign_partition(foreign, target, nico_partition_name(lp, frozenset(gpus)), sorted(gpus))
    finally:
        await foreign.close()

    here = await seed(session, fabric, nmxc.endpoints, machine_id_prefix="site2-")
    await session.execute(update(AllocationConstraint).values(constraint_value=3))  # one instance short
    await session.commit()
    async with replica(source.settings, source.url) as url:
        args = ("admin", "import", "--from", url, "--token", source.token(), "--org", ORG, "--format", "json")
        code, out = await run(*args)
        assert code == 0, out
        skipped = [r for r in json.loads(out) if r["outcome"] == "skipped" and r["kind"] == "instance"]
        assert len(skipped) == 1 and "allocations" in skipped[0]["why"], skipped

        await session.execute(update(AllocationConstraint).values(constraint_value=8))
        await session.commit()
        code, out = await run(*args)
        assert code == 0, out
        outcomes = {(r["kind"], r["outcome"]) for r in json.loads(out) if r["name"] != "vpc-1"}
        assert outcomes == {
            ("logical-partition", "present"),
            ("vpc", "present"),
            ("instance", "present"),
            ("instance", "imported"),
        }

    placed = select(Instance.name, Machine.id).join(Machine, Machine.instance_id == Instance.id)
    machines = dict((await session.execute(placed)).all())
    assert machines["one"].startswith("site2-") and len(machines) == 4
    lp_ids = set((await session.scalars(select(LogicalPartition.id))).all())
    assert lp_ids == {ids["a"], ids["b"]}
    await first_pass_changes_nothing(here, make_reconciler, monkeypatch)
    session.expire_all()
    assert set((await interfaces(session)).values()) == {"Ready"}
