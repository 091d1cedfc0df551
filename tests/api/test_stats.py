"""The reference's read operations nico serves since issue 13 part 5: the provider's GPU,
instance-type and tenant stats, machine capabilities, and an instance's status history and
interfaces. Every expected number is counted here from the site's rows, independently of the SQL
under test."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import httpx
import pytest
import pytest_asyncio
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.enums import CapabilityType, MachineStatus
from nico.db.models import InstanceInterface, Machine, MachineCapability, StatusDetail
from tests.api.conftest import BASE, error, instance_body
from tests.support import factories as f
from tests.support.auth import bearer

PROVIDER_BASE = "/v2/org/provider-org/nico"
BUCKET = {
    MachineStatus.INITIALIZING: "initializing",
    MachineStatus.ERROR: "error",
    MachineStatus.MAINTENANCE: "maintenance",
    MachineStatus.IN_USE: "inUse",
}


def bucket(machine: Machine) -> str:
    if machine.status == MachineStatus.READY:
        return "inUse" if machine.instance_id is not None else "ready"
    return BUCKET.get(MachineStatus(machine.status), "unknown")


def counts(machines: list[Machine]) -> dict[str, int]:
    tally = Counter(bucket(m) for m in machines)
    keys = ("initializing", "ready", "inUse", "error", "maintenance", "unknown")
    return {"total": len(machines), **{k: tally.get(k, 0) for k in keys}}


@pytest.fixture
def provider(settings: Settings) -> dict[str, str]:
    return bearer(settings, "provider-org", "PROVIDER_ADMIN")


@pytest_asyncio.fixture
async def busy(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> list[dict[str, Any]]:
    """The world with GPUs described, two untyped machines, three instances, and machines in
    maintenance, error and initializing."""
    for machine in world.machines:
        session.add(
            MachineCapability(machine_id=machine.id, type=CapabilityType.GPU, name="NVIDIA GB200", count=4)
        )
    spare = await f.rack(session, world.site, None, index=5, trays=2)
    for machine in spare:
        session.add(
            MachineCapability(machine_id=machine.id, type=CapabilityType.GPU, name="NVIDIA GB300", count=4)
        )
    session.add(
        MachineCapability(
            machine_id=spare[0].id, type=CapabilityType.CPU, name="Grace", count=2, cores=72, threads=72
        )
    )
    await session.commit()
    made = []
    for n in range(3):
        response = await client.post(
            f"{BASE}/instance", json=instance_body(world, name=f"i-{n}"), headers=headers
        )
        assert response.status_code == 201, response.text
        made.append(response.json())
    free = list(
        await session.scalars(
            select(Machine.id)
            .where(Machine.instance_type_id == world.instance_type.id, Machine.instance_id.is_(None))
            .order_by(Machine.id)
        )
    )
    for machine_id, status in zip(free, (MachineStatus.MAINTENANCE, MachineStatus.ERROR), strict=False):
        await session.execute(update(Machine).where(Machine.id == machine_id).values(status=status))
    await session.execute(
        update(Machine).where(Machine.id == spare[1].id).values(status=MachineStatus.INITIALIZING)
    )
    await session.commit()
    return made


async def machines_now(session: AsyncSession, world: f.NvlinkSite) -> list[Machine]:
    rows = await session.scalars(
        select(Machine).where(Machine.site_id == world.site.id).execution_options(populate_existing=True)
    )
    return list(rows)


async def test_gpu_stats_count_gpus_and_machines_per_gpu_name(
    client: httpx.AsyncClient,
    provider: dict[str, str],
    world: f.NvlinkSite,
    busy: list,
    session: AsyncSession,
) -> None:
    response = await client.get(
        f"{PROVIDER_BASE}/machine/gpu/stats", params={"siteId": str(world.site.id)}, headers=provider
    )
    assert response.status_code == 200, response.text
    caps = list(
        await session.scalars(
            select(MachineCapability).where(
                MachineCapability.type == "GPU", MachineCapability.machine_id.is_not(None)
            )
        )
    )
    expected: dict[str, dict[str, int]] = {}
    for cap in caps:
        item = expected.setdefault(cap.name, {"gpus": 0, "machines": 0})
        item["gpus"] += cap.count or 0
        item["machines"] += 1
    assert {i["name"]: {"gpus": i["gpus"], "machines": i["machines"]} for i in response.json()} == expected
    assert expected == {
        "NVIDIA GB200": {"gpus": 32, "machines": 8},
        "NVIDIA GB300": {"gpus": 8, "machines": 2},
    }


async def test_instance_type_stats_and_summary_match_the_machines(
    client: httpx.AsyncClient,
    provider: dict[str, str],
    world: f.NvlinkSite,
    busy: list,
    session: AsyncSession,
) -> None:
    params = {"siteId": str(world.site.id)}
    machines = await machines_now(session, world)
    typed = [m for m in machines if m.instance_type_id == world.instance_type.id]
    used = [m for m in typed if m.instance_id is not None]
    allocated = world.allocation and 8  # the world's allocation reserves all eight typed machines

    stats = (
        await client.get(f"{PROVIDER_BASE}/machine/instance-type/stats", params=params, headers=provider)
    ).json()
    assert len(stats) == 1
    item = stats[0]
    assert item["id"] == str(world.instance_type.id) and item["name"] == world.instance_type.name
    assert item["assignedMachineStats"] == counts(typed)
    assert item["assignedMachineStats"]["inUse"] == 3 and item["assignedMachineStats"]["maintenance"] == 1
    assert item["usedMachineStats"] == counts(used)
    assert item["allocated"] == allocated and item["maxAllocatable"] == max(len(typed) - allocated, 0)
    [share] = item["tenants"]
    assert share["org"] == world.tenant.org and share["allocated"] == allocated
    assert share["usedMachineStats"] == counts(used)

    summary = (
        await client.get(
            f"{PROVIDER_BASE}/machine/instance-type/stats/summary", params=params, headers=provider
        )
    ).json()
    untyped = [m for m in machines if m.instance_type_id is None]
    assert summary == {"assigned": counts(typed), "unassigned": counts(untyped)}
    assert summary["unassigned"]["initializing"] == 1

    tenants = (
        await client.get(f"{PROVIDER_BASE}/tenant/instance-type/stats", params=params, headers=provider)
    ).json()
    assert [(t["id"], t["org"]) for t in tenants] == [(str(world.tenant.id), world.tenant.org)]
    [per_type] = tenants[0]["instanceTypes"]
    assert per_type["instanceTypeId"] == str(world.instance_type.id)
    assert per_type["allocated"] == allocated and per_type["usedMachineStats"] == counts(used)


@pytest.mark.parametrize(
    "path",
    [
        "/machine/gpu/stats",
        "/machine/instance-type/stats",
        "/machine/instance-type/stats/summary",
        "/tenant/instance-type/stats",
    ],
)
async def test_stats_refusals(
    client: httpx.AsyncClient,
    settings: Settings,
    provider: dict[str, str],
    world: f.NvlinkSite,
    headers: dict[str, str],
    session: AsyncSession,
    path: str,
) -> None:
    url = PROVIDER_BASE + path
    assert (await client.get(url, params={"siteId": str(world.site.id)}, headers=headers)).status_code == 403
    assert error(await client.get(url, headers=provider))[0] == 400
    assert error(await client.get(url, params={"siteId": str(uuid.uuid4())}, headers=provider))[0] == 404
    other = await f.provider(session, "other-provider")
    elsewhere = await f.site(session, other, name="elsewhere")
    await session.commit()
    status, message = error(await client.get(url, params={"siteId": str(elsewhere.id)}, headers=provider))
    assert status == 403 and "doesn't belong" in message
    nobody = bearer(settings, "no-provider-org", "PROVIDER_ADMIN")
    lost = url.replace("/org/provider-org/", "/org/no-provider-org/")
    status, message = error(await client.get(lost, params={"siteId": str(world.site.id)}, headers=nobody))
    assert (status, message) == (404, "Infrastructure Provider not found in org")


async def test_machine_capabilities_are_distinct_filtered_and_paged(
    client: httpx.AsyncClient,
    provider: dict[str, str],
    world: f.NvlinkSite,
    busy: list,
    session: AsyncSession,
) -> None:
    url = f"{PROVIDER_BASE}/machine-capability"
    rows = list(
        await session.scalars(select(MachineCapability).where(MachineCapability.machine_id.is_not(None)))
    )
    distinct = {(r.type, r.name, r.count) for r in rows}
    everything = await client.get(url, headers=provider)
    assert everything.status_code == 200, everything.text
    assert {(c["type"], c["name"], c["count"]) for c in everything.json()} == distinct
    assert len(everything.json()) == len(distinct) == 3
    assert json.loads(everything.headers["X-Pagination"])["total"] == 3
    gpus = (await client.get(url, params={"type": "GPU"}, headers=provider)).json()
    assert {c["name"] for c in gpus} == {"NVIDIA GB200", "NVIDIA GB300"}
    untyped = (await client.get(url, params={"hasInstanceType": "false"}, headers=provider)).json()
    assert {c["name"] for c in untyped} == {"NVIDIA GB300", "Grace"}
    cpu = [c for c in untyped if c["type"] == "CPU"]
    assert cpu == [{"type": "CPU", "name": "Grace", "cores": 72, "threads": 72, "count": 2}]
    page = await client.get(
        url, params={"pageSize": 1, "pageNumber": 2, "orderBy": "NAME_ASC"}, headers=provider
    )
    assert [c["name"] for c in page.json()] == ["NVIDIA GB200"]  # Grace, GB200, GB300
    assert json.loads(page.headers["X-Pagination"])["total"] == 3
    assert error(await client.get(url, params={"count": "many"}, headers=provider))[0] == 400
    assert error(await client.get(url, params={"type": "Quantum"}, headers=provider))[0] == 400


async def test_instance_status_history_and_interfaces(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    created = (await client.post(f"{BASE}/instance", json=instance_body(world), headers=headers)).json()
    instance_id = uuid.UUID(created["id"])
    history = await client.get(f"{BASE}/instance/{instance_id}/status-history", headers=headers)
    assert history.status_code == 200, history.text
    rows = list(
        await session.scalars(
            select(StatusDetail)
            .where(StatusDetail.instance_id == instance_id)
            .order_by(StatusDetail.id.desc())
        )
    )
    assert [(h["status"], h["message"]) for h in history.json()] == [(r.status, r.message) for r in rows]
    assert json.loads(history.headers["X-Pagination"])["total"] == len(rows) > 0

    interfaces = await client.get(f"{BASE}/instance/{instance_id}/interface", headers=headers)
    assert interfaces.status_code == 200, interfaces.text
    stored = list(
        await session.scalars(select(InstanceInterface).where(InstanceInterface.instance_id == instance_id))
    )
    assert [(i["id"], i["subnetId"], i["status"]) for i in interfaces.json()] == [
        (str(r.id), str(r.subnet_id), r.status) for r in stored
    ]
    first = interfaces.json()[0]
    assert first["instanceId"] == str(instance_id) and first["isPhysical"] is stored[0].is_physical
    none = await client.get(
        f"{BASE}/instance/{instance_id}/interface", params={"status": "Deleting"}, headers=headers
    )
    assert none.json() == [] and json.loads(none.headers["X-Pagination"])["total"] == 0
    assert (
        error(
            await client.get(
                f"{BASE}/instance/{instance_id}/interface", params={"status": "Nope"}, headers=headers
            )
        )[0]
        == 400
    )

    await f.tenant(session, "someone-else")
    await session.commit()
    for path in ("status-history", "interface"):
        assert error(await client.get(f"{BASE}/instance/{uuid.uuid4()}/{path}", headers=headers))[0] == 404
        stranger = bearer(settings, "someone-else")
        status, _ = error(
            await client.get(f"/v2/org/someone-else/nico/instance/{instance_id}/{path}", headers=stranger)
        )
        assert status == 403
        provider = bearer(settings, "provider-org", "PROVIDER_ADMIN")
        assert (
            await client.get(f"/v2/org/provider-org/nico/instance/{instance_id}/{path}", headers=provider)
        ).status_code == 403
