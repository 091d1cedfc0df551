"""default_partition_mode = "tray" against the in-process simulator: a domain converts to tray
partitions, released GPUs go back to their tray, a crash mid-conversion is finished by the next pass,
and a site of the previous release restarted in the default mode is left untouched."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession
from typer.testing import CliRunner

from nico.cli import app as cli
from nico.db.enums import InstanceStatus, NvLinkInterfaceStatus
from nico.db.models import FabricIntent, Gpu, Instance, NvlinkDomain, NvlinkInterface
from nico.fabric.backend import DEFAULT_PARTITION_ID
from nico.reconciler.homes import tray_partition_name
from nico.reconciler.operations import Operation
from nico.reconciler.planner import partition_name
from nico.services.nvlink_events import desired_state_changed
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place, seed


def trays_at_home(site: SimSite, domain: uuid.UUID) -> bool:
    """Every GPU of the domain is in its own tray's partition, and the domain default is gone."""
    sim = site.fabric.domain(domain)
    by_name = {p.name: frozenset(p.gpu_uids) for p in site.fabric.partitions(domain)}
    if DEFAULT_PARTITION_ID in site.fabric.members(domain):
        return False
    for (serial, _tray), gpus in sim.compute_nodes().items():
        name = tray_partition_name(gpus[0].slot_id)
        if by_name.get(name) != frozenset(g.gpu_uid for g in gpus):
            return False
        assert serial in sim.chassis_serials
    return True


async def test_a_domain_converts_to_tray_partitions_and_stays_converted(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0, d1 = site.domains
    reconciler = make_reconciler(backend, default_partition_mode="tray")
    results = await reconciler.reconcile([d0])
    assert results[d0].status == "ok"
    # 18 trays: one removal and one create each, the last removal being the default's deletion.
    assert results[d0].operations == 36
    assert trays_at_home(site, d0)
    assert DEFAULT_PARTITION_ID in site.fabric.members(d1)  # only the domain asked for was touched
    assert reconciler.metrics.snapshot.without_home[d0] == 0
    states = set(await session.scalars(select(FabricIntent.state)))
    assert states == {"completed"}
    again = await reconciler.reconcile([d0])
    assert again[d0].operations == 0
    # Back to domain mode on the live site: the default is gone (only the controller makes 32766),
    # so the tray partitions stay the homes; nothing is torn down.
    back = make_reconciler(backend, default_partition_mode="domain")
    assert (await back.reconcile([d0]))[d0].operations == 0
    assert back.metrics.snapshot.without_home[d0] == 0


async def test_released_gpus_go_back_to_their_tray(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    reconciler = make_reconciler(backend, default_partition_mode="tray")
    await reconciler.reconcile([d0])
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    machine = site.machines[d0][3]
    inst = await place(session, site, machine, dict.fromkeys(range(4), lp))
    await reconciler.reconcile([d0])
    instance = await session.get(Instance, inst.id, populate_existing=True)
    assert instance is not None and instance.status == InstanceStatus.READY
    assert len([p for p in site.fabric.partitions(d0) if p.name == partition_name(lp.id)]) == 1
    assert not trays_at_home(site, d0)
    # Detach: the bindings go, and the GPUs go back to their tray's partition.
    await session.execute(
        update(NvlinkInterface)
        .where(NvlinkInterface.instance_id == inst.id)
        .values(status=NvLinkInterfaceStatus.DELETING)
    )
    await desired_state_changed(session, instance_ids=[inst.id])
    await session.commit()
    result = await reconciler.reconcile([d0])
    assert result[d0].status == "ok"
    assert trays_at_home(site, d0)
    assert reconciler.metrics.snapshot.without_home[d0] == 0


class Crash(Exception):
    pass


async def test_a_crash_mid_conversion_is_finished_by_the_next_pass(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    reconciler = make_reconciler(backend, default_partition_mode="tray")
    calls = 0

    async def crash_after_the_fifth_call(op: Operation) -> None:
        nonlocal calls
        calls += 1
        if calls == 5:  # a removal from the default is done, its create not yet
            raise Crash

    reconciler.after_call = crash_after_the_fifth_call
    with pytest.raises(Crash):
        await reconciler.reconcile_domain(d0)
    assert not trays_at_home(site, d0)
    pending = list(await session.scalars(select(FabricIntent.state)))
    assert pending.count("pending") == 36  # all intents were written before the first call
    fresh = make_reconciler(backend, default_partition_mode="tray")
    result = await fresh.reconcile([d0])
    assert result[d0].status == "ok"
    assert trays_at_home(site, d0)
    assert fresh.metrics.snapshot.without_home[d0] == 0
    states = list(await session.scalars(select(FabricIntent.state).execution_options(populate_existing=True)))
    assert "pending" not in states


async def test_a_site_of_the_previous_release_restarts_untouched(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    """A fabric and database made by the previous release (domain default, tenant partitions): the
    new release, in its default mode, neither tears down nor rebuilds anything."""
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    await place(session, site, site.machines[d0][0], dict.fromkeys(range(4), lp))
    await make_reconciler(backend).reconcile([d0])
    before = site.fabric.to_json()
    restarted = make_reconciler(backend)
    assert restarted.config.default_partition_mode == "domain"
    result = await restarted.reconcile(site.domains)
    assert all(r.operations == 0 for r in result.values())
    assert site.fabric.to_json() == before
    assert restarted.metrics.snapshot.without_home[d0] == 0


async def test_gpus_that_cannot_be_homed_are_counted_in_the_gauge_the_database_and_the_admin_cli(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The default partition is deleted behind nico's back in domain mode: GPUs whose slot nico knows
    get their tray partition as home; GPUs of unknown slot cannot be homed, and are counted."""
    d0 = site.domains[0]
    machine = site.machines[d0][0]
    await session.execute(update(Gpu).where(Gpu.machine_id == machine.id).values(slot_id=None))
    await session.commit()
    site.fabric.delete_partition(d0, DEFAULT_PARTITION_ID)
    reconciler = make_reconciler(backend)
    result = await reconciler.reconcile([d0])
    assert result[d0].status == "ok"
    assert reconciler.metrics.snapshot.without_home[d0] == 4
    row = await session.get(NvlinkDomain, d0, populate_existing=True)
    assert row is not None and row.gpus_without_home == 4
    housed = {p.name for p in site.fabric.partitions(d0)}
    assert len([n for n in housed if n.startswith("tray_partition_")]) == 17
    text_out = reconciler.metrics.collect()
    gauge = next(m for m in text_out if m.name == "nico_nvlink_gpus_without_home")
    assert {s.labels["domain"]: s.value for s in gauge.samples} == {str(d0): 4}

    monkeypatch.setenv("NICO_DATABASE_URL", database_url)
    monkeypatch.setenv("NICO_DATA_DIR", str(tmp_path))
    shown = await asyncio.to_thread(CliRunner().invoke, cli, ["admin", "nvlink-domains"])
    assert shown.exit_code == 0, shown.output
    listed = {r["uuid"]: r for r in json.loads(shown.output)}
    assert listed[str(d0)]["gpus_without_home"] == 4


async def test_a_switch_of_mode_converges_on_the_next_routine_full_pass(
    site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    """A domain settled in domain mode has a recorded digest; a routine (not deep) full pass in tray
    mode must still see work there, and the converted domain is quiet afterwards."""
    before = make_reconciler(backend)
    await before.full_pass()
    assert not (await before.full_pass()).results  # settled: routine passes skip every domain
    after = make_reconciler(backend, default_partition_mode="tray", deep_pass_every=100)
    after.full_passes = 1  # a routine pass, not the first (deep) one
    report = await after.full_pass()
    assert not report.deep and set(report.results) == set(site.domains)
    assert all(trays_at_home(site, d) for d in site.domains)
    assert not (await after.full_pass()).results


async def test_an_nvl36x2_domain_converts_with_tray_names_that_carry_the_chassis(
    session: AsyncSession, make_reconciler: MakeReconciler
) -> None:
    """Two chassis of 9 trays in one domain: their slots repeat, so each tray partition's name carries
    its chassis serial; a tenant instance on it is placed and released the same way."""
    site = await seed(session, SimFabric(racks=0, nvl36x2=1, seed=11))
    (domain,) = site.domains
    backend = InProcessBackend(site.fabric, call_timeout=1.0)
    try:
        reconciler = make_reconciler(backend, default_partition_mode="tray")
        assert (await reconciler.reconcile([domain]))[domain].status == "ok"
        sim = site.fabric.domain(domain)
        by_name = {p.name: frozenset(p.gpu_uids) for p in site.fabric.partitions(domain)}
        assert DEFAULT_PARTITION_ID not in site.fabric.members(domain)
        assert len(by_name) == 18
        for (serial, _tray), gpus in sim.compute_nodes().items():
            name = tray_partition_name(gpus[0].slot_id, serial)
            assert by_name[name] == frozenset(g.gpu_uid for g in gpus)
        lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
        first, last = site.machines[domain][0], site.machines[domain][-1]
        assert first.chassis_serial != last.chassis_serial
        for machine in (first, last):
            await place(session, site, machine, dict.fromkeys(range(4), lp))
        await reconciler.reconcile([domain])
        members = {p.name: p.gpu_uids for p in site.fabric.partitions(domain)}
        assert len(members[partition_name(lp.id)]) == 8
        assert reconciler.metrics.snapshot.without_home[domain] == 0
    finally:
        await backend.close()
