"""Health in placement and status, driven by the simulator's GPU health as a reconciler pass reads it:
a create never lands on a tray whose GPUs report anything but healthy (nor on one in Maintenance),
unless `place_on_unhealthy`; the free capacity counts agree with the pick; an instance whose GPU turns
NO_NVLINK keeps its partition, its NVLink interface says why (and stops saying it once healthy again),
and the scheduler feed carries both changes."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.enums import MachineStatus
from nico.db.models import DomainCapacity, Gpu, Machine
from nico.db.queries import feed
from nico.reconciler.planner import partition_name
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support.auth import bearer
from tests.support.sim_site import SimSite, instance_body
from tests.support.waiting import wait_for

BASE = "/v2/org/tenant-org/nico"


async def _uids(session: AsyncSession, machine_id: str) -> list[int]:
    found = await session.scalars(
        select(Gpu.gpu_uid).where(Gpu.machine_id == machine_id).order_by(Gpu.device_id)
    )
    return list(found)


async def _free_counted_and_recounted(session: AsyncSession, site: SimSite) -> tuple[int, int]:
    """Free machines as domain_capacity counts them, and as the pick's rule finds them."""
    counted = await session.scalar(
        select(func.coalesce(func.sum(DomainCapacity.free), 0))
        .where(DomainCapacity.instance_type_id == site.nv.instance_type.id)
        .execution_options(populate_existing=True)
    )
    recounted = await session.scalar(
        select(func.count())
        .select_from(Machine)
        .where(
            Machine.instance_type_id == site.nv.instance_type.id,
            Machine.instance_id.is_(None),
            Machine.status == MachineStatus.READY,
            Machine.is_missing_on_site.is_(False),
            Machine.held_unhealthy.is_(False),
        )
    )
    return int(counted or 0), int(recounted or 0)


async def test_a_create_never_lands_on_an_unhealthy_tray_nor_one_in_maintenance(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
    client: httpx.AsyncClient,
    settings: Settings,
) -> None:
    headers = bearer(settings, "tenant-org")
    everyone = [m for ms in site.machines.values() for m in ms]
    healthy, resting = everyone[-1], everyone[-2]  # the last tray of the last rack, and its neighbour
    for n, machine in enumerate(everyone[:-2]):  # one sick GPU on every other tray
        uid = (await _uids(session, machine.id))[n % 4]
        site.fabric.set_gpu_health(uid, "NO_NVLINK" if n % 2 else "DEGRADED")
    await session.execute(
        update(Machine).where(Machine.id == resting.id).values(status=MachineStatus.MAINTENANCE)
    )
    await session.commit()
    await make_reconciler(backend).reconcile(site.domains)
    counted, recounted = await _free_counted_and_recounted(session, site)
    assert counted == recounted == 1

    first = await client.post(f"{BASE}/instance", json=instance_body(site, "first"), headers=headers)
    assert first.status_code == 201, first.text
    assert first.json()["machineId"] == healthy.id
    second = await client.post(f"{BASE}/instance", json=instance_body(site, "second"), headers=headers)
    assert second.status_code == 409, second.text
    assert await _free_counted_and_recounted(session, site) == (0, 0)

    # The operator lets placement use unhealthy trays: the next health read releases them.
    await make_reconciler(backend, place_on_unhealthy=True).reconcile(site.domains)
    counted, recounted = await _free_counted_and_recounted(session, site)
    assert counted == recounted == len(everyone) - 2
    third = await client.post(f"{BASE}/instance", json=instance_body(site, "third"), headers=headers)
    assert third.status_code == 201, third.text
    assert third.json()["machineId"] not in {healthy.id, resting.id}


async def _interfaces(client: httpx.AsyncClient, headers: dict[str, str], instance_id: str) -> dict[int, Any]:
    listed = await client.get(f"{BASE}/instance/{instance_id}/nvlink-interface", headers=headers)
    assert listed.status_code == 200, listed.text
    return {i["deviceInstance"]: i for i in listed.json()}


async def _health_events(
    session: AsyncSession, site: SimSite, instance_id: str
) -> list[tuple[int, str, str]]:
    """The tenant's stream's events about the instance's GPU health, as the stream sends them (its read
    from the start, once every event so far is final)."""
    read = feed.event_text_after(tenant=True, provider=False, site=False)
    params = {"after_txid": 0, "after_id": 0, "limit": 1000, "tenant": site.nv.tenant.id}
    conn = await session.connection()
    sent: list[str] = []

    async def all_final() -> bool:
        row = (await conn.exec_driver_sql(read, params)).one()
        sent[:] = [row.text or ""]
        return row.pending is None

    await wait_for(all_final, within=30, what="the events final")
    await session.commit()
    bodies = [json.loads(line[6:]) for line in sent[0].splitlines() if line.startswith("data: ")]
    return [
        (b["deviceInstance"], b["kind"], b["nvLinkHealth"])
        for b in bodies
        if b["instanceId"] == instance_id and "nvLinkHealth" in b
    ]


async def test_an_instance_whose_gpu_turns_unhealthy_keeps_its_partition_and_its_interface_says_why(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
    client: httpx.AsyncClient,
    settings: Settings,
) -> None:
    headers = bearer(settings, "tenant-org")
    lp = await client.post(
        f"{BASE}/nvlink-logical-partition",
        json={"name": "lp", "siteId": str(site.nv.site.id)},
        headers=headers,
    )
    nvlink = [{"nvLinkLogicalPartitionId": lp.json()["id"], "deviceInstance": n} for n in range(4)]
    body = instance_body(site, "sick-gpu", nvlink)
    created = await client.post(f"{BASE}/instance", json=body, headers=headers)
    assert created.status_code == 201, created.text
    instance_id, machine_id = created.json()["id"], created.json()["machineId"]
    domain = next(d for d, ms in site.machines.items() if any(m.id == machine_id for m in ms))
    reconciler = make_reconciler(backend)
    await reconciler.reconcile([domain])
    shown = await _interfaces(client, headers, instance_id)
    assert {i["status"] for i in shown.values()} == {"Ready"}
    assert all("statusMessage" not in i for i in shown.values())
    assert await _health_events(session, site, instance_id) == []  # first seen healthy: no news
    uids = await _uids(session, machine_id)
    name = partition_name(uuid.UUID(lp.json()["id"]))

    site.fabric.set_gpu_health(uids[1], "NO_NVLINK")
    await reconciler.reconcile([domain])

    shown = await _interfaces(client, headers, instance_id)
    assert {i["status"] for i in shown.values()} == {"Ready"}
    assert "NO_NVLINK" in shown[1]["statusMessage"] and shown[1]["nvLinkHealth"] == "NO_NVLINK"
    assert all("statusMessage" not in shown[d] for d in (0, 2, 3))
    partition = next(p for p in site.fabric.partitions(domain) if p.name == name)
    assert set(partition.gpu_uids) == set(uids)  # the fabric decides about resiliency: nico keeps it
    assert await _health_events(session, site, instance_id) == [(1, "Ready", "NO_NVLINK")]
    held = await session.scalar(
        select(Machine.held_unhealthy)
        .where(Machine.id == machine_id)
        .execution_options(populate_existing=True)
    )
    assert held is True

    site.fabric.set_gpu_health(uids[1], "HEALTHY")
    await reconciler.reconcile([domain])

    shown = await _interfaces(client, headers, instance_id)
    assert all("statusMessage" not in i for i in shown.values())
    assert await _health_events(session, site, instance_id) == [
        (1, "Ready", "NO_NVLINK"),
        (1, "Ready", "HEALTHY"),
    ]
