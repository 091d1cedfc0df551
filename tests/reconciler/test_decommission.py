"""Decommission (`nico admin machine force-delete`) through the CLI, seen through the tenant API and on
the simulated fabric: the instance is released with a history entry saying why and goes once its GPUs
are out of the tenant's partition, the machine leaves capacity at once, the command is idempotent, and a
force-delete while the fabric is down is finished by the first pass after it is back."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from typer.testing import CliRunner

from nico.cli.app import app as cli
from nico.config import Settings
from nico.db.models import DomainCapacity, Gpu, Machine, PhysicalPartition
from nico.reconciler.homes import is_tray_partition_name
from nico.reconciler.planner import partition_name
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.sim_site import SimSite, instance_body

BASE = "/v2/org/tenant-org/nico"
RELEASED = "force-deleted by the provider: Instance released"


async def _create(
    client: httpx.AsyncClient, headers: dict[str, str], site: SimSite
) -> tuple[str, dict[str, Any]]:
    """A logical partition and an instance with its four GPUs in it, through the API."""
    lp = await client.post(
        f"{BASE}/nvlink-logical-partition",
        json={"name": "lp", "siteId": str(site.nv.site.id)},
        headers=headers,
    )
    assert lp.status_code == 201, lp.text
    nvlink = [{"nvLinkLogicalPartitionId": lp.json()["id"], "deviceInstance": n} for n in range(4)]
    body = instance_body(site, "doomed", nvlink)
    created = await client.post(f"{BASE}/instance", json=body, headers=headers)
    assert created.status_code == 201, created.text
    return lp.json()["id"], created.json()


async def _capacity(session: AsyncSession, site: SimSite, domain: uuid.UUID) -> tuple[int, int]:
    row = (
        await session.execute(
            select(DomainCapacity.free, DomainCapacity.used)
            .where(
                DomainCapacity.instance_type_id == site.nv.instance_type.id,
                DomainCapacity.domain_uuid == domain,
            )
            .execution_options(populate_existing=True)
        )
    ).one()
    return int(row[0]), int(row[1])


def _force_delete(*args: str, answer: str | None = None) -> Any:
    return CliRunner().invoke(cli, ["admin", "machine", "force-delete", *args], input=answer)


async def _listed(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    listed = await client.get(f"{BASE}/instance", headers=headers)
    assert listed.status_code == 200, listed.text
    return {i["id"]: i for i in listed.json()}


@pytest.mark.parametrize("mode", ["domain", "tray"])
async def test_force_delete_releases_the_instance_and_takes_its_gpus_out_of_the_partition(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
    client: httpx.AsyncClient,
    settings: Settings,
    cli_env: dict[str, str],
    mode: str,
) -> None:
    headers = bearer(settings, "tenant-org")
    reconciler = make_reconciler(backend, default_partition_mode=mode)
    await reconciler.reconcile(site.domains)
    lp_id, instance = await _create(client, headers, site)
    machine_id = instance["machineId"]
    domain = next(d for d, ms in site.machines.items() if any(m.id == machine_id for m in ms))
    await reconciler.reconcile([domain])
    uids = set(await session.scalars(select(Gpu.gpu_uid).where(Gpu.machine_id == machine_id)))
    tenant = next(p for p in site.fabric.partitions(domain) if p.name == partition_name(uuid.UUID(lp_id)))
    assert set(tenant.gpu_uids) == uids
    free, used = await _capacity(session, site, domain)

    refused = await asyncio.to_thread(_force_delete, machine_id, answer="n\n")
    assert (
        refused.exit_code != 0
        and await session.scalar(select(func.count()).select_from(Machine).where(Machine.id == machine_id))
        == 1
    )
    done = await asyncio.to_thread(_force_delete, machine_id, "--yes")
    assert done.exit_code == 0, done.output

    # At once: Terminating with the reason, out of capacity, the GPUs still where they were.
    shown = (await _listed(client, headers))[instance["id"]]
    assert shown["status"] == "Terminating"
    history = await client.get(f"{BASE}/instance/{instance['id']}/status-history", headers=headers)
    assert any(RELEASED in (h["message"] or "") for h in history.json()), history.text
    assert await _capacity(session, site, domain) == (free, used - 1)
    again = await asyncio.to_thread(_force_delete, machine_id, "--yes")
    assert again.exit_code == 0, again.output
    assert await _capacity(session, site, domain) == (free, used - 1)

    await reconciler.reconcile([domain])

    members = {p.name: set(p.gpu_uids) for p in site.fabric.partitions(domain)}
    assert not uids & members.get(partition_name(uuid.UUID(lp_id)), set())
    if mode == "tray":  # home: the tray's partition
        where = {n for n, m in members.items() if uids & m}
        assert (
            len(where) == 1
            and is_tray_partition_name(where.pop())
            and all(uids <= m for m in members.values() if uids & m)
        )
    else:
        assert {site.fabric.partition_of(u) for u in uids} == {32766}
    assert instance["id"] not in await _listed(client, headers)
    gone = await client.get(f"{BASE}/instance/{instance['id']}", headers=headers)
    assert gone.status_code == 404
    assert (
        await session.scalar(select(func.count()).select_from(Machine).where(Machine.id == machine_id)) == 0
    )
    assert await _capacity(session, site, domain) == (free, used - 1)
    await reconciler.reconcile([domain])  # and the fabric stays so
    assert {p.name: set(p.gpu_uids) for p in site.fabric.partitions(domain)} == members
    last = await asyncio.to_thread(_force_delete, machine_id, "--yes")
    assert last.exit_code == 0 and "nothing to do" in last.output


async def test_a_force_delete_while_the_fabric_is_down_is_finished_when_it_is_back(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
    client: httpx.AsyncClient,
    settings: Settings,
    cli_env: dict[str, str],
) -> None:
    headers = bearer(settings, "tenant-org")
    reconciler = make_reconciler(backend)
    lp_id, instance = await _create(client, headers, site)
    machine_id = instance["machineId"]
    domain = next(d for d, ms in site.machines.items() if any(m.id == machine_id for m in ms))
    await reconciler.reconcile([domain])
    uids = set(await session.scalars(select(Gpu.gpu_uid).where(Gpu.machine_id == machine_id)))
    free, used = await _capacity(session, site, domain)
    site.fabric.set_faults(domain, down=True)

    done = await asyncio.to_thread(_force_delete, machine_id, "--yes")
    assert done.exit_code == 0, done.output
    assert await _capacity(session, site, domain) == (free, used - 1)
    results = await reconciler.reconcile([domain])
    assert results[domain].status != "ok"
    assert (await _listed(client, headers))[instance["id"]]["status"] == "Terminating"
    assert {site.fabric.partition_of(u) for u in uids} != {32766}

    site.fabric.set_faults(domain, down=False)
    await reconciler.reconcile([domain])

    assert {site.fabric.partition_of(u) for u in uids} == {32766}
    assert not any(
        uids & set(p.gpu_uids)
        for p in site.fabric.partitions(domain)
        if p.name == partition_name(uuid.UUID(lp_id))
    )
    assert instance["id"] not in await _listed(client, headers)
    assert (
        await session.scalar(select(func.count()).select_from(Machine).where(Machine.id == machine_id)) == 0
    )


async def test_a_machine_without_an_instance_is_removed_at_once_and_its_gpus_leave_nicos_partitions(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
    cli_env: dict[str, str],
) -> None:
    """A free machine whose GPUs sit in one of nico's partitions (left there by a pass that never ran):
    removed at once, and the next pass returns its GPUs to the default as GPUs nico no longer manages."""
    d0 = site.domains[0]
    machine = site.machines[d0][3]
    uids = sorted(await session.scalars(select(Gpu.gpu_uid).where(Gpu.machine_id == machine.id)))
    free, used = await _capacity(session, site, d0)
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    site.fabric.remove_gpus(d0, 32766, uids)
    made = site.fabric.create_partition(d0, partition_name(lp.id), uids)
    session.add(
        PhysicalPartition(
            logical_partition_id=lp.id,
            domain_uuid=d0,
            nmx_partition_id=made.partition_id,
            fabric_ref=str(made.partition_id),
            name=made.name,
        )
    )
    await session.commit()

    done = await asyncio.to_thread(_force_delete, machine.id, "--yes")
    assert done.exit_code == 0, done.output
    assert await _capacity(session, site, d0) == (free - 1, used)
    await make_reconciler(backend).reconcile([d0])

    assert {site.fabric.partition_of(u) for u in uids} == {32766}
