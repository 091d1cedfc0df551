"""``PATCH /instance/{id}``: the ordered checks of spec §5.6 and the NVLink replace semantics
(re-issue, the intended no-op, ``[]`` marks everything Deleting, responses without duplicates)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.enums import LogicalPartitionStatus
from nico.db.models import Instance, NvlinkInterface
from nico.reconciler.lifecycle import apply_nvlink_observation
from tests.api.conftest import BASE, error, instance_body
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.state import fingerprint

PATH = f"{BASE}/instance"


def items(partition: uuid.UUID, *indexes: int) -> list[dict[str, Any]]:
    return [{"nvLinkLogicalPartitionId": str(partition), "deviceInstance": i} for i in indexes]


async def new_instance(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, **extra: Any
) -> dict[str, Any]:
    response = await client.post(PATH, json=instance_body(world, **extra), headers=headers)
    assert response.status_code == 201, response.text
    return response.json()


async def rows(session: AsyncSession, instance_id: str) -> list[tuple[str, int, str]]:
    found = await session.scalars(
        select(NvlinkInterface)
        .where(NvlinkInterface.instance_id == uuid.UUID(instance_id))
        .order_by(NvlinkInterface.created, NvlinkInterface.device_instance)
        .execution_options(populate_existing=True)
    )
    return [(str(r.logical_partition_id), r.device_instance, r.status) for r in found]


async def version(session: AsyncSession, instance_id: str) -> int:
    value = await session.scalar(
        select(Instance.nvlink_config_version)
        .where(Instance.id == uuid.UUID(instance_id))
        .execution_options(populate_existing=True)
    )
    assert value is not None
    return value


async def test_rename_appends_configuring_history(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    inst = await new_instance(client, headers, world)
    response = await client.patch(
        f"{PATH}/{inst['id']}", json={"name": "renamed", "userData": "#cloud-config"}, headers=headers
    )
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "renamed" and body["userData"] == "#cloud-config"
    assert body["status"] == "Pending"  # only an NVLink change moves the status
    assert [(h["status"], h["message"]) for h in body["statusHistory"]] == [
        ("Configuring", "received Instance config update request, processing"),
        ("Pending", "received instance creation request, pending"),
    ]


async def test_update_checks_in_order(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    inst = await new_instance(client, headers, world)
    taken = await new_instance(client, headers, world, name="taken")
    url = f"{PATH}/{inst['id']}"

    async def check(target: str, body: Any, status: int, message: str, h: dict[str, str] = headers) -> None:
        before = await fingerprint(session)
        assert error(await client.patch(target, json=body, headers=h)) == (status, message)
        assert await fingerprint(session) == before

    await check(f"{PATH}/bad", {}, 400, "Invalid Instance ID in URL")
    await check(f"{PATH}/{uuid.uuid4()}", {}, 404, "Could not retrieve Instance to update")
    await f.tenant(session, "other-org")
    await session.commit()
    await check(
        f"/v2/org/other-org/nico/instance/{inst['id']}",
        {"name": "mine"},
        403,
        "Org specified in request does not match Org of Tenant associated with Instance",
        bearer(settings, "other-org"),
    )
    response = await client.patch(url, json={"name": "taken"}, headers=headers)
    assert response.status_code == 409 and response.json()["data"] == {"id": taken["id"]}
    assert response.json()["message"] == "Another Instance with specified name already exists for Tenant"
    response = await client.patch(url, json={"triggerReboot": True, "name": "x1"}, headers=headers)
    assert response.json() == {
        "source": "nico",
        "message": "Failed to validate Instance update request data",
        "data": {
            "triggerReboot": "reboot cannot be triggered if Instance attributes are being updated "
            "in the same request"
        },
    }
    world.site.status = "Pending"
    await session.commit()
    await check(url, {"name": "x2"}, 400, "Site is not in Registered state - cannot update Instance")
    world.site.status = "Registered"
    await session.commit()
    assert (await client.delete(url, headers=headers)).status_code == 202  # no bindings: gone at once
    partition = await f.logical_partition(session, world.tenant, world.site, name="lp")
    await session.commit()
    bound = await new_instance(client, headers, world, name="bound", nvLinkInterfaces=items(partition.id, 0))
    assert (await client.delete(f"{PATH}/{bound['id']}", headers=headers)).status_code == 202
    await check(f"{PATH}/{bound['id']}", {"name": "x3"}, 409, "Instance is terminating and cannot be updated")


async def test_nvlink_checks_on_update(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site, name="lp")
    default = await f.logical_partition(session, world.tenant, world.site, name="default")
    pending = await f.logical_partition(
        session, world.tenant, world.site, name="pending", status=LogicalPartitionStatus.PENDING
    )
    other = await f.tenant(session, "other-org")
    theirs = await f.logical_partition(session, other, world.site, name="theirs")
    await session.commit()
    inst = await new_instance(client, headers, world)
    url = f"{PATH}/{inst['id']}"
    unknown = uuid.uuid4()
    data = "specified in request data"
    cases: list[tuple[list[dict[str, Any]], str, Any]] = [
        (items(unknown, 0), f"Could not find NVLink Logical Partition with ID: {unknown} {data}", None),
        (items(theirs.id, 0), f"NVLink Logical Partition: {theirs.id} {data} is not owned by Tenant", None),
        (items(pending.id, 0), f"NVLink Logical Partition: {pending.id} {data} is not in Ready state", None),
        (
            items(partition.id, 0, 0),
            "Failed to validate NVLink interfaces specified in request",
            {"nvLinkInterfaces": "duplicate deviceInstance: 0 specified in NVLink Interfaces"},
        ),
    ]  # fmt: skip
    for body, message, data in cases:
        before = await fingerprint(session)
        response = await client.patch(url, json={"nvLinkInterfaces": body}, headers=headers)
        assert response.status_code == 400
        assert response.json() == {"source": "nico", "message": message, "data": data}
        assert await fingerprint(session) == before
    # With a VPC default, a PATCH is refused once the instance has bindings, without comparing ids.
    world.vpc.nvlink_logical_partition_id = default.id
    await session.commit()
    assert (
        await client.patch(url, json={"nvLinkInterfaces": items(partition.id, 0)}, headers=headers)
    ).status_code == 200
    before = await fingerprint(session)
    response = await client.patch(url, json={"nvLinkInterfaces": items(default.id, 1)}, headers=headers)
    assert error(response) == (
        400,
        "Cannot update NVLink Interfaces if VPC has default NVLink Logical Partition and NVLink Interfaces "
        "already exist for the Instance",
    )
    assert await fingerprint(session) == before


async def test_update_without_nvlink_capability(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=1, trays=1)
    cpu = await f.instance_type(session, world.site, name="cpu", gpus=None)
    await f.rack(session, world.site, cpu, index=4, trays=1)
    await f.allocation(session, world.tenant, world.site, cpu, 1)
    partition = await f.logical_partition(session, world.tenant, world.site, name="lp")
    await session.commit()
    inst = await new_instance(client, headers, world, instanceTypeId=str(cpu.id))
    response = await client.patch(
        f"{PATH}/{inst['id']}", json={"nvLinkInterfaces": items(partition.id, 0)}, headers=headers
    )
    assert error(response) == (
        400,
        "NVLink interfaces cannot be specified if Instance Type or Machine doesn't have "
        "NVLink GPU Capability",
    )


async def test_replace_semantics(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    a = await f.logical_partition(session, world.tenant, world.site, name="lp-a")
    b = await f.logical_partition(session, world.tenant, world.site, name="lp-b")
    await session.commit()
    inst = await new_instance(client, headers, world, nvLinkInterfaces=items(a.id, 0, 1, 2, 3))
    url = f"{PATH}/{inst['id']}"
    start = await version(session, inst["id"])

    # Same multiset in another order, rows Pending: the intended no-op (no new rows, no new version).
    same = await client.patch(url, json={"nvLinkInterfaces": items(a.id, 3, 2, 1, 0)}, headers=headers)
    assert same.status_code == 200
    assert len(same.json()["nvLinkInterfaces"]) == 4  # listed once each, not twice
    assert await rows(session, inst["id"]) == [(str(a.id), i, "Pending") for i in range(4)]
    assert await version(session, inst["id"]) == start
    assert same.json()["status"] == "Pending"

    # Realised on the fabric, then the same request again: still nothing to do.
    gpus = {i: (world.domains[0], 1000 + i) for i in range(4)}
    assert await apply_nvlink_observation(session, uuid.UUID(inst["id"]), start, gpus)
    await session.commit()
    again = await client.patch(url, json={"nvLinkInterfaces": items(a.id, 0, 1, 2, 3)}, headers=headers)
    assert [x["status"] for x in again.json()["nvLinkInterfaces"]] == ["Ready"] * 4
    assert again.json()["status"] == "Ready"

    # 4 -> 2 on another partition: the old ones Deleting, 2 new Pending; the answer lists the new ones.
    swapped = await client.patch(url, json={"nvLinkInterfaces": items(b.id, 1, 0)}, headers=headers)
    assert swapped.status_code == 200
    body = swapped.json()
    assert body["status"] == "Configuring"
    assert [
        (x["nvLinklogicalPartitionId"], x["deviceInstance"], x["status"]) for x in body["nvLinkInterfaces"]
    ] == [
        (str(b.id), 1, "Pending"),
        (str(b.id), 0, "Pending"),
    ]
    assert sorted(await rows(session, inst["id"])) == sorted(
        [(str(a.id), i, "Deleting") for i in range(4)]
        + [(str(b.id), 1, "Pending"), (str(b.id), 0, "Pending")]
    )
    assert await version(session, inst["id"]) == start + 1
    listed = (await client.get(url, headers=headers)).json()["nvLinkInterfaces"]
    assert len(listed) == 6  # GET shows Deleting rows too

    # While Deleting rows remain, the same request re-issues (it is not yet realised).
    reissued = await client.patch(url, json={"nvLinkInterfaces": items(b.id, 0, 1)}, headers=headers)
    assert len(reissued.json()["nvLinkInterfaces"]) == 2
    assert [s for _, _, s in await rows(session, inst["id"])].count("Deleting") == 6

    # null leaves bindings alone; [] marks every binding Deleting.
    untouched = await client.patch(url, json={"nvLinkInterfaces": None, "description": "d"}, headers=headers)
    assert untouched.status_code == 200
    assert [s for _, _, s in await rows(session, inst["id"])].count("Pending") == 2
    cleared = await client.patch(url, json={"nvLinkInterfaces": []}, headers=headers)
    assert cleared.status_code == 200
    assert {s for _, _, s in await rows(session, inst["id"])} == {"Deleting"}
    assert cleared.json()["status"] == "Configuring"
    assert len(cleared.json()["nvLinkInterfaces"]) == 8


@pytest.mark.parametrize("field", ["interfaces", "operatingSystemId", "secondaryVpcIds"])
async def test_unsupported_updates_are_refused(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession, field: str
) -> None:
    inst = await new_instance(client, headers, world)
    value: Any = (
        []
        if field == "interfaces"
        else ([str(uuid.uuid4())] if field == "secondaryVpcIds" else str(uuid.uuid4()))
    )
    before = await fingerprint(session)
    response = await client.patch(f"{PATH}/{inst['id']}", json={field: value}, headers=headers)
    assert response.status_code == 400
    assert response.json()["message"] == "Failed to validate Instance update request data"
    assert field in response.json()["data"]
    assert await fingerprint(session) == before
