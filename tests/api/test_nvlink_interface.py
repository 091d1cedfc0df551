"""``GET /nvlink-interface`` and ``GET /instance/{id}/nvlink-interface``: the checks of spec §4.4,
filters, relations, pagination without truncation, and tenant scoping (the reference leaks)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.models import Instance
from nico.reconciler.lifecycle import apply_nvlink_observation
from tests.api.conftest import BASE, error, instance_body
from tests.support import factories as f
from tests.support.auth import bearer

PATH = f"{BASE}/nvlink-interface"


def items(partition: uuid.UUID, *indexes: int) -> list[dict[str, Any]]:
    return [{"nvLinkLogicalPartitionId": str(partition), "deviceInstance": i} for i in indexes]


async def bound_instances(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, partition: uuid.UUID, count: int
) -> list[dict[str, Any]]:
    out = []
    for n in range(count):
        body = instance_body(world, name=f"inst-{n}", nvLinkInterfaces=items(partition, 0, 1, 2, 3))
        response = await client.post(f"{BASE}/instance", json=body, headers=headers)
        assert response.status_code == 201, response.text
        out.append(response.json())
    return out


async def test_list_filters_relations_and_no_truncation(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    other_lp = await f.logical_partition(session, world.tenant, world.site, name="lp-2")
    await session.commit()
    instances = await bound_instances(client, headers, world, partition.id, 6)
    first = instances[0]
    response = await client.get(PATH, headers=headers)
    assert len(response.json()) == 20
    assert json.loads(response.headers["X-Pagination"])["total"] == 24
    page2 = await client.get(PATH, params={"pageNumber": 2}, headers=headers)
    assert len(page2.json()) == 4
    everything = (await client.get(PATH, params={"pageSize": 100}, headers=headers)).json()
    assert len({i["id"] for i in everything}) == 24
    assert set(everything[0]) == {
        "id",
        "instanceId",
        "nvLinkLogicalPartitionId",
        "nvLinklogicalPartitionId",  # deprecated spelling, emitted while the setting says so
        "nvLinkDomainId",
        "deviceInstance",
        "gpuGuid",
        "status",
        "nvLinkCliqueId",
        "created",
        "updated",
    }
    assert everything[0]["nvLinkCliqueId"] is None  # not Ready yet
    scoped = await client.get(f"{BASE}/instance/{first['id']}/nvlink-interface", headers=headers)
    assert {i["instanceId"] for i in scoped.json()} == {first["id"]} and len(scoped.json()) == 4
    by_query = await client.get(PATH, params={"instanceId": first["id"]}, headers=headers)
    assert len(by_query.json()) == 4
    empty = await client.get(PATH, params={"nvLinkLogicalPartitionId": str(other_lp.id)}, headers=headers)
    assert empty.json() == []
    by_site = await client.get(PATH, params={"siteId": str(world.site.id), "pageSize": 50}, headers=headers)
    assert len(by_site.json()) == 24

    # The reconciler reports the first instance realised: its rows carry domain and GPU GUID.
    gpus = {i: (world.domains[1], 2**64 - 1 - i) for i in range(4)}
    version = await session.scalar(
        select(Instance.nvlink_config_version).where(Instance.id == uuid.UUID(first["id"]))
    )
    assert version is not None
    assert await apply_nvlink_observation(session, uuid.UUID(first["id"]), version, gpus)
    await session.commit()
    ready = (await client.get(PATH, params={"status": "Ready"}, headers=headers)).json()
    assert len(ready) == 4 and {i["gpuGuid"] for i in ready} == {str(2**64 - 1 - i) for i in range(4)}
    by_domain = await client.get(PATH, params={"nvLinkDomainId": str(world.domains[1])}, headers=headers)
    assert len(by_domain.json()) == 4
    desc = (await client.get(PATH, params={"orderBy": "STATUS_DESC", "pageSize": 5}, headers=headers)).json()
    assert desc[0]["status"] == "Ready"

    params = [
        ("instanceId", first["id"]),
        ("includeRelation", "Instance"),
        ("includeRelation", "NVLinkLogicalPartition"),
    ]
    related = (await client.get(PATH, params=params, headers=headers)).json()[0]
    assert related["instance"] == {
        "id": first["id"],
        "name": "inst-0",
        "infrastructureProviderId": str(world.provider.id),
        "siteId": str(world.site.id),
        "instanceTypeId": str(world.instance_type.id),
        "controllerInstanceId": first["id"],
        "status": "Ready",
    }
    assert related["nvLinkLogicalPartition"] == {
        "id": str(partition.id),
        "name": "lp-1",
        "siteId": str(world.site.id),
        "status": "Ready",
    }
    site_only = (await client.get(PATH, params={"includeRelation": "Site"}, headers=headers)).json()[0]
    assert "site" not in site_only


@pytest.mark.parametrize(
    ("params", "status", "message"),
    [
        ({"siteId": "x"}, 400, "Invalid Site ID: x specified in query"),
        ({"instanceId": "x"}, 400, "Invalid Instance ID: x in query"),
        ({"nvLinkLogicalPartitionId": "x"}, 400, "Invalid NVLink Logical Partition ID: x in query"),
        ({"nvLinkDomainId": "x"}, 400, "Invalid NVLink Domain ID: x in query"),
        ({"status": "Bogus"}, 400, "Invalid Status value: Bogus in query"),
        ({"orderBy": "NAME_ASC"}, 400, "Failed to validate pagination request data"),
        ({"includeRelation": "Tenant"}, 400, "Invalid includeRelation value in query: Tenant"),
    ],
)
async def test_bad_query(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    params: dict,
    status: int,
    message: str,
) -> None:
    assert error(await client.get(PATH, params=params, headers=headers)) == (status, message)


async def test_lookups_and_scoping(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    other = await f.tenant(session, "other-org")
    await f.allocation(session, other, world.site, world.instance_type, 2)
    other_vpc = await f.vpc(session, other, world.site, name="their-vpc")
    other_net = await f.subnet(session, other_vpc, name="their-net")
    theirs_lp = await f.logical_partition(session, other, world.site, name="their-lp")
    foreign_site = await f.site(session, world.provider, name="foreign")
    await session.commit()
    (mine,) = await bound_instances(client, headers, world, partition.id, 1)
    their_world = f.NvlinkSite(
        world.provider, world.site, world.instance_type, other, world.allocation, other_vpc, other_net
    )
    theirs_headers = bearer(settings, "other-org")
    body = instance_body(their_world, name="theirs", nvLinkInterfaces=items(theirs_lp.id, 0, 1))
    theirs = (await client.post("/v2/org/other-org/nico/instance", json=body, headers=theirs_headers)).json()

    # No filter: only the caller's own interfaces, never the other tenant's.
    mine_listed = (await client.get(PATH, headers=headers)).json()
    assert {i["instanceId"] for i in mine_listed} == {mine["id"]}
    theirs_listed = (
        await client.get("/v2/org/other-org/nico/nvlink-interface", headers=theirs_headers)
    ).json()
    assert {i["instanceId"] for i in theirs_listed} == {theirs["id"]}

    unknown = uuid.uuid4()
    checks = [
        ({"instanceId": str(unknown)}, 404, f"Could not find Instance with ID: {unknown} specified in query"),
        ({"instanceId": theirs["id"]}, 403,
         f"Instance: {theirs['id']} specified in query doesn't belong to current Tenant"),
        ({"nvLinkLogicalPartitionId": str(unknown)}, 404,
         f"Could not find NVLink Logical Partition with ID: {unknown} specified in query"),
        ({"nvLinkLogicalPartitionId": str(theirs_lp.id)}, 403,
         f"NVLink Logical Partition: {theirs_lp.id} specified in query doesn't belong to current Tenant"),
        ({"siteId": str(foreign_site.id)}, 403,
         f"Site: {foreign_site.id} specified in query doesn't exist or Tenant doesn't have access to it"),
        ({"siteId": str(unknown)}, 403,
         f"Site: {unknown} specified in query doesn't exist or Tenant doesn't have access to it"),
    ]  # fmt: skip
    for params, status, message in checks:
        assert error(await client.get(PATH, params=params, headers=headers)) == (status, message), params
    scoped = f"{BASE}/instance"
    assert error(await client.get(f"{scoped}/nope/nvlink-interface", headers=headers)) == (
        400,
        "Invalid Instance ID: nope specified in request",
    )
    assert error(await client.get(f"{scoped}/{unknown}/nvlink-interface", headers=headers)) == (
        404,
        f"Could not find Instance with ID: {unknown} specified in request",
    )
    assert error(await client.get(f"{scoped}/{theirs['id']}/nvlink-interface", headers=headers)) == (
        403,
        f"Instance: {theirs['id']} specified in request doesn't belong to current Tenant",
    )
    nobody = bearer(settings, "nobody-org")
    assert error(await client.get("/v2/org/nobody-org/nico/nvlink-interface", headers=nobody)) == (
        403,
        "Org does not have a Tenant associated",
    )
