"""``nico admin logical-partition adopt``: a partition another manager made (NICo's ``<LP><GUID>``
naming, or any other) becomes a tenant's logical partition without a single fabric change, and is
then the tenant's to grow; every refusal is one line with nothing written."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from httpx import AsyncClient
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from typer.testing import CliRunner

from nico.adoption import service
from nico.adoption.naming import nico_partition_name
from nico.adoption.views import AdoptRequest, DomainListing, SeenPartition
from nico.cli import app
from nico.config import NvLinkConfig, Settings
from nico.db.models import (
    Instance,
    InstanceType,
    LogicalPartition,
    Machine,
    NvlinkInterface,
    PhysicalPartition,
    Site,
)
from nico.fabric.backend import DEFAULT_PARTITION_ID, DomainTarget, FabricPartition
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxm.client import NmxmBackend
from nico.services import fabric_registry
from nico.services.errors import ServiceError
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from nico.sim.nmxm_app import NmxmSimulator
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.out_of_partition import OutJournal
from tests.support.sim_site import SimSite, place, seed

ORG = "tenant-org"


async def run(*args: str) -> tuple[int, str]:
    """The CLI in a thread: its own event loop must not block the test's (simulator, session)."""
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args))
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


async def foreign_partition(
    nmxc: NmxcBackend, target: DomainTarget, name: str, gpus: list[int]
) -> FabricPartition:
    """A partition made over NMX-C's gRPC as another manager makes one: GPUs out of the default
    partition, then a partition of them."""
    listed = await nmxc.list_partitions(target)
    default = next(p for p in listed if p.nmx_partition_id == DEFAULT_PARTITION_ID)
    await nmxc.remove_gpus(target, default, frozenset(gpus))
    return await nmxc.create_partition(target, name, frozenset(gpus))


@pytest_asyncio.fixture
async def live_site(
    session: AsyncSession, cli_env: dict[str, str]
) -> AsyncIterator[tuple[SimSite, NmxcSimulator]]:
    fabric = SimFabric(racks=2, seed=41)
    async with NmxcSimulator(fabric) as sim:
        yield await seed(session, fabric, sim.endpoints), sim


def fabric_state(fabric: SimFabric, domain: uuid.UUID) -> dict[int, tuple[str, frozenset[int]]]:
    return {p.partition_id: (p.name, frozenset(p.gpu_uids)) for p in fabric.partitions(domain)}


async def test_a_nico_named_partition_is_adopted_under_its_lp_and_the_passes_change_nothing(
    live_site: tuple[SimSite, NmxcSimulator],
    session: AsyncSession,
    make_reconciler: MakeReconciler,
    client: AsyncClient,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    site, sim = live_site
    d0 = site.domains[0]
    trays = site.machines[d0][2:4]
    gpus = sorted(fabric_gpus(site, trays))
    lp = uuid.uuid4()
    nmxc = NmxcBackend(NvLinkConfig(backend="nmxc"))
    try:
        made = await foreign_partition(
            nmxc, DomainTarget(d0, sim.url(d0)), nico_partition_name(lp, frozenset(gpus)), gpus
        )
    finally:
        await nmxc.close()
    before = fabric_state(site.fabric, d0)

    code, out = await run(
        "admin", "lp", "adopt", "--org", ORG, "--domain-uuid", str(d0),
        "--nmx-partition-id", str(made.nmx_partition_id), "--format", "json",
    )  # fmt: skip
    assert code == 0, out
    done = json.loads(out)
    assert done["logical_partition_id"] == str(lp) and not done["done_before"]
    assert sorted(i["machine"] for i in done["instances"]) == sorted(m.id for m in trays)
    assert all(i["device_instances"] == [0, 1, 2, 3] and i["new_instance"] for i in done["instances"])
    record = await session.scalar(
        select(PhysicalPartition).where(PhysicalPartition.logical_partition_id == lp)
    )
    assert record is not None and (record.nmx_partition_id, record.name) == (made.nmx_partition_id, made.name)

    backend = NmxcBackend(NvLinkConfig(backend="nmxc", fabric_call_timeout="2s"))
    journal = OutJournal(site.fabric, backend, monkeypatch)
    reconciler = make_reconciler(backend)
    try:
        for _ in range(2):
            result = (await reconciler.reconcile(site.domains))[d0]
            assert result.operations == 0 and result.error is None
    finally:
        await backend.close()
    assert journal.calls == 0
    assert fabric_state(site.fabric, d0) == before

    headers = bearer(settings, ORG)
    for adopted in done["instances"]:
        got = (await client.get(f"/v2/org/{ORG}/nico/instance/{adopted['instance']}", headers=headers)).json()
        assert got["status"] == "Ready" and got["machineId"] == adopted["machine"]
        links = got["nvLinkInterfaces"]
        assert sorted(i["deviceInstance"] for i in links) == [0, 1, 2, 3]
        assert {i["status"] for i in links} == {"Ready"}
        cliques = {i["nvLinkCliqueId"] for i in links}
        assert len(cliques) == 1 and None not in cliques, cliques
        assert {int(i["gpuGuid"]) for i in links} <= set(gpus)

    code, out = await run(
        "admin", "lp", "adopt", "--org", ORG, "--domain-uuid", str(d0),
        "--nmx-partition-id", str(made.nmx_partition_id),
    )  # fmt: skip
    assert code == 0, out
    assert (
        f"partition {made.nmx_partition_id} ({made.name}) of domain {d0} is already logical partition {lp}"
        in out
    )
    assert "nothing to do" in out
    assert await session.scalar(select(func.count()).select_from(Instance)) == 2


async def test_the_adopted_partition_grows_in_place_when_the_tenant_adds_a_machine(
    live_site: tuple[SimSite, NmxcSimulator], session: AsyncSession, make_reconciler: MakeReconciler
) -> None:
    site, sim = live_site
    d0 = site.domains[0]
    gpus = sorted(fabric_gpus(site, site.machines[d0][:1]))
    nmxc = NmxcBackend(NvLinkConfig(backend="nmxc", fabric_call_timeout="2s"))
    try:
        made = await foreign_partition(nmxc, DomainTarget(d0, sim.url(d0)), "bcm-job-17", gpus)
        code, out = await run(
            "admin", "lp", "adopt", "--org", ORG, "--domain-uuid", str(d0),
            "--nmx-partition-id", str(made.nmx_partition_id), "--name", "job-17",
        )  # fmt: skip
        assert code == 0, out
        assert "adopted partition" in out and "(job-17)" in out and "MACHINE" in out
        for number, why in (
            (9999, "has no partition 9999 on the fabric"),
            (32766, "default or tray partition"),
        ):
            code, out = await run(
                "admin", "lp", "adopt", "--org", ORG, "--domain-uuid", str(d0),
                "--nmx-partition-id", str(number),
            )  # fmt: skip
            assert code == 1 and why in out and len(out.strip().splitlines()) == 1, out
        lp = await session.scalar(select(LogicalPartition).where(LogicalPartition.name == "job-17"))
        assert lp is not None
        await place(session, site, site.machines[d0][5], dict.fromkeys(range(4), lp))
        reconciler = make_reconciler(nmxc)
        await reconciler.reconcile([d0])
    finally:
        await nmxc.close()
    grown = {p.partition_id: p for p in site.fabric.partitions(d0)}[made.nmx_partition_id]
    assert grown.name == "bcm-job-17"
    assert frozenset(grown.gpu_uids) == frozenset(gpus) | fabric_gpus(site, site.machines[d0][5:6])


def fabric_gpus(site: SimSite, machines: list[Machine]) -> frozenset[int]:
    ids = {(m.chassis_serial, m.tray_index) for m in machines}
    return frozenset(
        g.gpu_uid
        for d in site.domains
        for g in site.fabric.gpus(d)
        if (g.chassis_serial, g.tray_index) in ids
    )


# ----------------------------------------------------------------------------------------- refusals


async def counts(session: AsyncSession) -> tuple[int, ...]:
    return tuple(
        [
            await session.scalar(select(func.count()).select_from(model))
            for model in (LogicalPartition, PhysicalPartition, Instance, NvlinkInterface)
        ]
    )


async def refused(session: AsyncSession, request: AdoptRequest, listing: DomainListing) -> str:
    """The service's refusal, with the session rolled back as the command's transaction is."""
    with pytest.raises(ServiceError) as caught:
        await service.adopt(session, request, listing)
    await session.rollback()
    assert "\n" not in caught.value.message
    return caught.value.message


async def test_refusals_change_nothing(session: AsyncSession) -> None:
    fabric = SimFabric(racks=1, seed=43)
    site = await seed(session, fabric, machines_per_domain=16)
    d0 = site.domains[0]
    ids = [m.id for m in site.machines[d0]]
    uids = {m.id: sorted(fabric_gpus(site, [m])) for m in site.machines[d0]}
    site_id, itype_id = site.nv.site.id, site.nv.instance_type.id
    registered = {uid for found in uids.values() for uid in found}
    unknown = sorted(g.gpu_uid for g in fabric.gpus(d0) if g.gpu_uid not in registered)[:4]
    assert len(unknown) == 4
    before = await counts(session)

    def listing(*partitions: SeenPartition) -> DomainListing:
        return DomainListing(d0, partitions)

    def ask(n: int) -> AdoptRequest:
        return AdoptRequest(ORG, d0, n)

    message = await refused(session, ask(5), listing(SeenPartition(5, "5", "ops-a", frozenset(unknown))))
    assert "nico does not know" in message
    assert await counts(session) == before

    a = SeenPartition(6, "6", "ops-b", frozenset(uids[ids[0]]))
    b = SeenPartition(7, "7", "ops-c", frozenset(uids[ids[0]][:1]))
    assert "in two partitions" in await refused(session, ask(6), listing(a, b))
    assert await counts(session) == before

    at, itype = await session.get(Site, site_id), await session.get(InstanceType, itype_id)
    assert at is not None and itype is not None  # the rollbacks expired the seed's rows
    other = await f.tenant(session, "other-org")
    await f.allocation(session, other, at, itype, 2, name="other")
    their_vpc = await f.vpc(session, other, at)
    theirs = Instance(
        tenant_id=other.id, site_id=site_id, vpc_id=their_vpc.id, instance_type_id=itype_id, name="x"
    )
    session.add(theirs)
    await session.flush()
    await session.execute(update(Machine).where(Machine.id == ids[1]).values(instance_id=theirs.id))
    spare = await f.instance_type(session, at, name="spare")
    await session.execute(update(Machine).where(Machine.id == ids[2]).values(instance_type_id=spare.id))
    await session.commit()
    before = await counts(session)

    c = SeenPartition(8, "8", "ops-d", frozenset(uids[ids[1]]) | frozenset(uids[ids[3]]))
    assert "instance of another tenant" in await refused(session, ask(8), listing(c))
    assert await counts(session) == before

    d = SeenPartition(9, "9", "ops-e", frozenset(uids[ids[2]]))
    assert "outside org tenant-org's allocations" in await refused(session, ask(9), listing(d))
    assert await counts(session) == before

    # Every other GPU is fine: the same partition without the bad machine is adopted.
    good = SeenPartition(10, "10", "ops-f", frozenset(uids[ids[3]]))
    done = await service.adopt(session, ask(10), listing(good))
    assert [i.machine_id for i in done.instances] == [ids[3]]


def test_nico_and_nicos_names_give_the_lp() -> None:
    from nico.adoption.naming import lp_of_fabric_name

    lp = uuid.uuid4()
    assert lp_of_fabric_name(nico_partition_name(lp, frozenset({30, 12345678901234}))) == lp
    assert lp_of_fabric_name(f"{lp}30,12345678901234") == lp  # every GUID, as NICo may name it to NMX
    assert lp_of_fabric_name(f"nico-{lp}") == lp
    assert lp_of_fabric_name(f"{lp}30,") is None
    assert lp_of_fabric_name(f"{lp}") is None
    assert lp_of_fabric_name(f"{lp}12a") is None
    assert lp_of_fabric_name("bcm-job-17") is None


async def test_adopted_over_nmxm_under_its_entity_id_and_the_pass_changes_nothing(
    session: AsyncSession,
    cli_env: dict[str, str],
    make_reconciler: MakeReconciler,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NMX-M changes a partition through its entity id: the record keeps that handle, so the
    adopted partition is the LP's under NMX-M too."""
    fabric = SimFabric(racks=1, seed=44)
    site = await seed(session, fabric)
    await fabric_registry.set_nmxm_credentials(session, "nmx", "secret")
    await session.commit()
    d0 = site.domains[0]
    gpus = sorted(fabric_gpus(site, site.machines[d0][:2]))
    async with NmxmSimulator(fabric, username="nmx", password="secret", operation_delay=0.01) as sim:
        monkeypatch.setenv("NICO_NVLINK_CONFIG__BACKEND", "nmxm")
        monkeypatch.setenv("NICO_NVLINK_CONFIG__NMX_M_ENDPOINT", sim.url)
        config = NvLinkConfig(backend="nmxm", nmx_m_endpoint=sim.url, fabric_call_timeout="2s")
        backend = NmxmBackend.from_config(config, "nmx", "secret")
        try:
            made = await foreign_partition(backend, DomainTarget(d0), "operator-made", gpus)
            code, out = await run(
                "admin", "lp", "adopt", "--org", ORG, "--domain-uuid", str(d0),
                "--nmx-partition-id", str(made.nmx_partition_id), "--format", "json",
            )  # fmt: skip
            assert code == 0, out
            before = fabric_state(fabric, d0)
            journal = OutJournal(fabric, backend, monkeypatch)
            result = (await make_reconciler(backend, nmx_m_endpoint=sim.url).reconcile([d0]))[d0]
        finally:
            await backend.close()
    record = await session.scalar(select(PhysicalPartition))
    assert record is not None and record.fabric_ref == made.ref != str(made.nmx_partition_id)
    assert (result.operations, result.error, journal.calls) == (0, None, 0)
    assert fabric_state(fabric, d0) == before
    statuses = (await session.scalars(select(NvlinkInterface.status))).all()
    assert len(statuses) == 8 and set(statuses) == {"Ready"}
