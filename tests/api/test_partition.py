"""``/nvlink-logical-partition``: every check of spec §3 with its code and text, the wire format,
pagination, includes, isolation between orgs, and bad input that changes nothing."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.models import LogicalPartition, NvlinkInterface, PhysicalPartition
from tests.api.conftest import BASE, ORG, error, instance_body
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.state import fingerprint

PATH = f"{BASE}/nvlink-logical-partition"
CREATE_INVALID = "Error validating NVLink Logical Partition request creation data"


async def create(
    client: httpx.AsyncClient, headers: dict[str, str], site_id: uuid.UUID, name: str, org: str = ORG
) -> dict:
    path = f"/v2/org/{org}/nico/nvlink-logical-partition"
    response = await client.post(path, json={"name": name, "siteId": str(site_id)}, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()


async def test_create_is_ready_with_pending_then_ready_history(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    response = await client.post(
        PATH, json={"name": "lp-a", "description": "first", "siteId": str(world.site.id)}, headers=headers
    )
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "Ready"
    assert [(h["status"], h["message"]) for h in body["statusHistory"]] == [
        ("Pending", "received NVLink Logical Partition creation request, pending"),
        ("Ready", "NVLink Logical Partition is ready for use"),
    ]
    assert body["nvLinkLogicalPartitionStats"] is None
    assert set(body) == {
        "id",
        "name",
        "description",
        "siteId",
        "tenantId",
        "nvLinkLogicalPartitionStats",
        "multicastGroupsLimit",  # nico extension (compatibility row 76)
        "singleNvLinkDomain",  # nico extensions (compatibility row 91)
        "nvLinkDomainIds",
        "status",
        "statusHistory",
        "created",
        "updated",
    }
    assert body["multicastGroupsLimit"] == 16 and "nvLinkHealth" not in body  # not observed yet
    assert body["tenantId"] == str(world.tenant.id) and body["siteId"] == str(world.site.id)
    assert body["created"].endswith("Z") or body["created"].endswith("+00:00")
    got = await client.get(f"{PATH}/{body['id']}", headers=headers)
    assert [h["status"] for h in got.json()["statusHistory"]] == ["Ready", "Pending"]  # newest first


async def test_any_key_casing_binds(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    response = await client.post(
        PATH, json={"NAME": "lp-case", "siteid": str(world.site.id)}, headers=headers
    )
    assert response.status_code == 201
    assert response.json()["name"] == "lp-case"


@pytest.mark.parametrize(
    ("body", "data"),
    [
        (
            {},
            {
                "name": "must be at least 2 characters and maximum 256 characters",
                "siteId": "a value is required",
            },
        ),
        (
            {"name": "x", "siteId": "nope"},
            {
                "name": "must be at least 2 characters and maximum 256 characters",
                "siteId": "must be a valid UUID",
            },
        ),
        (
            {"name": " lp", "siteId": None},
            {"name": "name field has leading whitespace", "siteId": "a value is required"},
        ),
        (
            {"name": "lp ", "siteId": ""},
            {"name": "name field has trailing whitespace", "siteId": "a value is required"},
        ),
        (
            {"name": "x" * 257, "siteId": str(uuid.UUID(int=1))},
            {"name": "must be at least 2 characters and maximum 256 characters"},
        ),
    ],
)
async def test_create_validation(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    body: dict,
    data: dict,
) -> None:
    before = await fingerprint(session)
    response = await client.post(PATH, json=body, headers=headers)
    assert response.status_code == 400
    assert response.json() == {"source": "nico", "message": CREATE_INVALID, "data": data}
    assert await fingerprint(session) == before


@pytest.mark.parametrize(
    "raw",
    [b"{", b"[]", b'{"name": 5, "siteId": "x"}', b'{"name": "ok", "siteId": ["a"]}', b"null", b'"text"'],
)
async def test_unparsable_bodies_are_400(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession, raw: bytes
) -> None:
    before = await fingerprint(session)
    response = await client.post(PATH, content=raw, headers=headers | {"content-type": "application/json"})
    assert error(response) == (400, "Failed to parse request data, potentially invalid structure")
    assert await fingerprint(session) == before


async def test_non_json_content_type_is_400(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    body = json.dumps({"name": "lp", "siteId": str(world.site.id)})
    response = await client.post(PATH, content=body, headers=headers | {"content-type": "text/plain"})
    assert error(response) == (400, "Failed to parse request data, potentially invalid structure")


async def test_auth_is_checked_before_the_body(
    client: httpx.AsyncClient, settings: Settings, world: f.NvlinkSite
) -> None:
    assert error(await client.post(PATH, content=b"{")) == (401, "Request is missing authorization header")
    other = bearer(settings, "other-org")
    assert error(await client.post(PATH, content=b"{", headers=other)) == (
        403,
        f"Failed to validate membership for org: {ORG}",
    )
    provider = bearer(settings, ORG, "PROVIDER_ADMIN")
    for method, url in [
        ("POST", PATH),
        ("GET", PATH),
        ("GET", f"{PATH}/x"),
        ("PATCH", f"{PATH}/x"),
        ("DELETE", f"{PATH}/x"),
    ]:
        response = await client.request(method, url, content=b"{", headers=provider)
        assert error(response) == (403, "User does not have Tenant Admin role with org"), (method, url)


async def test_create_checks_in_order(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    prefix = "Failed to create NVLink Logical Partition"
    nobody = bearer(settings, "no-tenant-org")
    missing = uuid.uuid4()
    response = await client.post(
        "/v2/org/no-tenant-org/nico/nvlink-logical-partition",
        json={"name": "lp", "siteId": str(missing)},
        headers=nobody,
    )
    assert error(response) == (400, "Org does not have a Tenant associated")
    response = await client.post(PATH, json={"name": "lp", "siteId": str(missing)}, headers=headers)
    assert error(response) == (404, f"{prefix}, Could not find Site with ID: {missing} ")

    pending = await f.site(session, world.provider, name="pending-site", registered=False)
    foreign = await f.site(session, world.provider, name="foreign-site")
    no_nvlink = await f.site(session, world.provider, name="plain-site", nvlink=False)
    plain_type = await f.instance_type(session, no_nvlink, name="cpu")
    await f.allocation(session, world.tenant, no_nvlink, plain_type, 1)
    await session.commit()
    response = await client.post(PATH, json={"name": "lp", "siteId": str(pending.id)}, headers=headers)
    assert error(response) == (
        400,
        f"{prefix}, Site: {pending.id} specified in request is not in Registered state",
    )
    response = await client.post(PATH, json={"name": "lp", "siteId": str(foreign.id)}, headers=headers)
    assert error(response) == (403, "Tenant is not associated with Site specified in query")
    response = await client.post(PATH, json={"name": "lp", "siteId": str(no_nvlink.id)}, headers=headers)
    assert error(response) == (
        400,
        f"Site: {no_nvlink.id} specified in request data must have NVLink Logical Partition enabled in order "
        "to create NVLink Logical Partition",
    )
    first = await create(client, headers, world.site.id, "lp")
    before = await fingerprint(session)
    response = await client.post(PATH, json={"name": "lp", "siteId": str(world.site.id)}, headers=headers)
    assert response.status_code == 409
    assert response.json() == {
        "source": "nico",
        "message": "Another NVLink Logical Partition with specified name already exists for Tenant",
        "data": {"id": first["id"]},
    }
    assert await fingerprint(session) == before


async def test_names_are_unique_per_tenant_not_across_tenants(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    other = await f.tenant(session, "other-org")
    await f.allocation(session, other, world.site, world.instance_type, 1)
    await session.commit()
    await create(client, headers, world.site.id, "shared")
    response = await client.post(
        "/v2/org/other-org/nico/nvlink-logical-partition",
        json={"name": "shared", "siteId": str(world.site.id)},
        headers=bearer(settings, "other-org"),
    )
    assert response.status_code == 201


async def test_list_pagination_order_and_filters(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    for n in range(25):
        await create(client, headers, world.site.id, f"lp-{n:02d}")
    response = await client.get(PATH, headers=headers)
    assert response.status_code == 200
    assert len(response.json()) == 20
    assert json.loads(response.headers["X-Pagination"]) == {
        "pageNumber": 1,
        "pageSize": 20,
        "total": 25,
        "orderBy": None,
    }
    assert [p["name"] for p in response.json()] == [f"lp-{n:02d}" for n in range(20)]  # created ASC
    page2 = await client.get(PATH, params={"pageNumber": 2}, headers=headers)
    assert [p["name"] for p in page2.json()] == [f"lp-{n:02d}" for n in range(20, 25)]
    desc = await client.get(PATH, params={"pageSize": 10, "orderBy": "NAME_DESC"}, headers=headers)
    assert [p["name"] for p in desc.json()] == [f"lp-{n:02d}" for n in range(24, 14, -1)]
    assert json.loads(desc.headers["X-Pagination"])["orderBy"] == "NAME_DESC"
    assert (await client.get(PATH, params={"pageSize": 100}, headers=headers)).status_code == 200
    beyond = await client.get(PATH, params={"pageNumber": 5}, headers=headers)
    assert beyond.json() == [] and json.loads(beyond.headers["X-Pagination"])["total"] == 25
    found = await client.get(PATH, params={"query": "LP-07"}, headers=headers)
    assert [p["name"] for p in found.json()] == ["lp-07"]
    none = await client.get(PATH, params={"status": "Error"}, headers=headers)
    assert none.json() == [] and json.loads(none.headers["X-Pagination"])["total"] == 0
    by_site = await client.get(PATH, params={"siteId": str(world.site.id), "pageSize": 1}, headers=headers)
    assert json.loads(by_site.headers["X-Pagination"])["total"] == 25


@pytest.mark.parametrize(
    ("params", "status", "message", "data"),
    [
        (
            {"pageSize": "101"},
            400,
            "Failed to validate pagination request data",
            {"pageSize": "must be less that or equal to: 100"},
        ),
        (
            {"pageNumber": "-1"},
            400,
            "Failed to validate pagination request data",
            {"pageNumber": "must be greater than 0"},
        ),
        ({"pageNumber": "one"}, 400, "Failed to parse request pagination data", None),
        (
            {"orderBy": "name_asc"},
            400,
            "Failed to validate pagination request data",
            {"orderBy": "must be in the format of field_ASC or field_DESC"},
        ),
        ({"orderBy": "TEST_ASC"}, 400, "Failed to validate pagination request data", {}),
        ({"status": "BadRequest"}, 400, "Invalid Status value in query", None),
        (
            {"siteId": "nope"},
            400,
            "Failed to retrieve Site specified in query param, invalid ID or DB error",
            None,
        ),
        (
            {"siteId": str(uuid.UUID(int=7))},
            400,
            "Failed to retrieve Site specified in query param, invalid ID or DB error",
            None,
        ),
        ({"includeRelation": "VPC"}, 400, "Invalid includeRelation value in query: VPC", None),
        (
            {"includeInterfaces": "yes"},
            400,
            "Invalid value specified for `includeInterfaces` query param",
            None,
        ),
        ({"includeVpcs": "2"}, 400, "Invalid value specified for `includeVpcs` query param", None),
        ({"includeStats": "on"}, 400, "Invalid value specified for `includeStats` query param", None),
    ],
)
async def test_list_rejects_bad_query(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    params: dict,
    status: int,
    message: str,
    data: object,
) -> None:
    response = await client.get(PATH, params=params, headers=headers)
    assert response.status_code == status
    assert response.json() == {"source": "nico", "message": message, "data": data}


async def test_list_site_without_access_is_403(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    foreign = await f.site(session, world.provider, name="foreign")
    await session.commit()
    response = await client.get(PATH, params={"siteId": str(foreign.id)}, headers=headers)
    assert error(response) == (403, "Tenant does not have access to this Site")


async def test_includes_interfaces_vpcs_stats_site_tenant(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    lp = await create(client, headers, world.site.id, "lp-inc")
    vpc = await f.vpc(session, world.tenant, world.site, name="vpc-default")
    vpc.nvlink_logical_partition_id = uuid.UUID(lp["id"])
    await session.commit()
    body = instance_body(
        world,
        nvLinkInterfaces=[{"nvLinkLogicalPartitionId": lp["id"], "deviceInstance": i} for i in range(3)],
    )
    created = await client.post(f"{BASE}/instance", json=body, headers=headers)
    assert created.status_code == 201, created.text
    params = [
        ("includeInterfaces", "true"),
        ("includeVpcs", "1"),
        ("includeStats", "T"),
        ("includeRelation", "Site"),
        ("includeRelation", "Tenant"),
    ]
    for response in [
        await client.get(f"{PATH}/{lp['id']}", params=params, headers=headers),
        await client.get(PATH, params=params, headers=headers),
    ]:
        item = response.json() if isinstance(response.json(), dict) else response.json()[0]
        assert item["nvLinkLogicalPartitionStats"] == {"totalGpus": 3, "totalDistinctInstances": 1}
        assert [i["deviceInstance"] for i in item["nvLinkInterfaces"]] == [0, 1, 2]
        assert set(item["nvLinkInterfaces"][0]) == {
            "id",
            "instanceId",
            "nvLinkLogicalPartitionId",
            "deviceInstance",
            "status",
        }
        assert [v["id"] for v in item["vpcs"]] == [str(vpc.id)]
        assert set(item["vpcs"][0]) == {
            "id",
            "name",
            "controllerVpcId",
            "networkVirtualizationType",
            "status",
        }
        assert item["site"]["id"] == str(world.site.id) and item["site"]["isOnline"] is True
        assert item["tenant"]["org"] == ORG
    plain = (
        await client.get(f"{PATH}/{lp['id']}", params={"includeInterfaces": "false"}, headers=headers)
    ).json()
    assert "nvLinkInterfaces" not in plain and "vpcs" not in plain and "site" not in plain


async def test_list_is_not_truncated_at_20_interfaces(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    lp = await create(client, headers, world.site.id, "lp-many")
    for n in range(6):
        body = instance_body(
            world,
            name=f"i-{n}",
            nvLinkInterfaces=[{"nvLinkLogicalPartitionId": lp["id"], "deviceInstance": d} for d in range(4)],
        )
        assert (await client.post(f"{BASE}/instance", json=body, headers=headers)).status_code == 201
    for url in [f"{PATH}/{lp['id']}", PATH]:
        response = await client.get(
            url, params={"includeInterfaces": "true", "includeStats": "true"}, headers=headers
        )
        item = response.json() if isinstance(response.json(), dict) else response.json()[0]
        assert len(item["nvLinkInterfaces"]) == 24
        assert item["nvLinkLogicalPartitionStats"] == {"totalGpus": 24, "totalDistinctInstances": 6}


async def test_get_checks(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    assert error(await client.get(f"{PATH}/not-a-uuid", headers=headers)) == (
        400,
        "NVLink Logical Partition ID specified in URL is not valid",
    )
    assert error(await client.get(f"{PATH}/{uuid.uuid4()}", headers=headers)) == (
        404,
        "Could not find NVLink Logical Partition with specified ID",
    )
    other = await f.tenant(session, "other-org")
    theirs = await f.logical_partition(session, other, world.site, name="theirs")
    await session.commit()
    assert error(await client.get(f"{PATH}/{theirs.id}", headers=headers)) == (
        403,
        "NVLink Logical Partition is not owned by current org's Tenant",
    )
    nobody = bearer(settings, "no-tenant-org")
    response = await client.get(
        f"/v2/org/no-tenant-org/nico/nvlink-logical-partition/{theirs.id}", headers=nobody
    )
    assert error(response) == (400, "Org does not have a Tenant associated")


async def test_update(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    lp = await create(client, headers, world.site.id, "lp-u")
    taken = await create(client, headers, world.site.id, "lp-taken")
    unchanged = await client.patch(f"{PATH}/{lp['id']}", json={"name": "lp-u"}, headers=headers)
    assert unchanged.status_code == 200 and unchanged.json()["updated"] == lp["updated"]
    clash = await client.patch(f"{PATH}/{lp['id']}", json={"name": "lp-taken"}, headers=headers)
    assert clash.status_code == 409 and clash.json()["data"] == {"id": taken["id"]}
    renamed = await client.patch(
        f"{PATH}/{lp['id']}", json={"name": "lp-new", "description": ""}, headers=headers
    )
    assert renamed.status_code == 200
    assert renamed.json()["name"] == "lp-new" and renamed.json()["description"] == ""
    assert renamed.json()["status"] == "Ready"
    assert [h["status"] for h in renamed.json()["statusHistory"]] == ["Ready", "Pending"]
    kept = await client.patch(f"{PATH}/{lp['id']}", json={"description": None}, headers=headers)
    assert kept.json()["description"] == ""
    before = await fingerprint(session)
    for body, data in [
        ({"name": ""}, {"name": "must be at least 2 characters and maximum 256 characters"}),
        ({"name": "a "}, {"name": "name field has trailing whitespace"}),
    ]:
        response = await client.patch(f"{PATH}/{lp['id']}", json=body, headers=headers)
        assert response.status_code == 400
        assert response.json()["message"] == "Error validating NVLink Logical Partition update request data"
        assert response.json()["data"] == data
    assert error(await client.patch(f"{PATH}/bad", json={}, headers=headers)) == (
        400,
        "Invalid NVLink Logical Partition ID in URL",
    )
    assert error(await client.patch(f"{PATH}/{uuid.uuid4()}", json={}, headers=headers)) == (
        404,
        "Could not find NVLink Logical Partition with ID specified in URL",
    )
    other = await f.tenant(session, "other-org")
    theirs = await f.logical_partition(session, other, world.site, name="theirs")
    await session.commit()
    before = await fingerprint(session)
    response = await client.patch(f"{PATH}/{theirs.id}", json={"name": "mine"}, headers=headers)
    assert error(response) == (403, "NVLink Logical Partition is not owned by current org's Tenant")
    assert await fingerprint(session) == before


async def test_delete_checks_and_lifecycle(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    assert error(await client.delete(f"{PATH}/bad", headers=headers)) == (
        400,
        "Invalid NVLink Logical Partition ID in URL",
    )
    assert error(await client.delete(f"{PATH}/{uuid.uuid4()}", headers=headers)) == (
        404,
        "Could not retrieve NVLink Logical Partition to delete",
    )
    lp = await create(client, headers, world.site.id, "lp-d")
    lp_id = uuid.UUID(lp["id"])
    first = await f.vpc(session, world.tenant, world.site, name="vpc-a")
    second = await f.vpc(session, world.tenant, world.site, name="vpc-b")
    first.nvlink_logical_partition_id = second.nvlink_logical_partition_id = lp_id
    await session.commit()
    before = await fingerprint(session)
    response = await client.delete(f"{PATH}/{lp_id}", headers=headers)
    assert response.status_code == 400
    assert response.json() == {
        "source": "nico",
        "message": "NVLink Logical Partition is being used by one or more VPCs",
        "data": {"vpcIds": f"{first.id}, {second.id}"},
    }
    assert await fingerprint(session) == before
    first.nvlink_logical_partition_id = second.nvlink_logical_partition_id = None
    await session.commit()
    body = instance_body(
        world, nvLinkInterfaces=[{"nvLinkLogicalPartitionId": lp["id"], "deviceInstance": 0}]
    )
    inst = (await client.post(f"{BASE}/instance", json=body, headers=headers)).json()
    assert error(await client.delete(f"{PATH}/{lp_id}", headers=headers)) == (
        400,
        "1 active Instances are associated with this NVLink Logical Partition, unable to delete",
    )
    assert (await client.delete(f"{BASE}/instance/{inst['id']}", headers=headers)).status_code == 202
    # Terminating instances still count until the reconciler has taken their GPUs out.
    assert error(await client.delete(f"{PATH}/{lp_id}", headers=headers))[0] == 400

    # A partition with a physical partition waits in Deleting; one without goes at once.
    lonely = await create(client, headers, world.site.id, "lp-lonely")
    response = await client.delete(f"{PATH}/{lonely['id']}", headers=headers)
    assert response.status_code == 202
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "Deletion request was accepted"
    assert (await client.get(f"{PATH}/{lonely['id']}", headers=headers)).status_code == 404

    built = await create(client, headers, world.site.id, "lp-built")
    session.add(
        PhysicalPartition(
            logical_partition_id=uuid.UUID(built["id"]),
            domain_uuid=world.domains[1],
            nmx_partition_id=5,
            fabric_ref="5",
            name="nico-lp-built",
        )
    )
    await session.commit()
    for _ in range(2):  # a repeated delete is accepted again
        assert (await client.delete(f"{PATH}/{built['id']}", headers=headers)).status_code == 202
    shown = (await client.get(f"{PATH}/{built['id']}", headers=headers)).json()
    assert shown["status"] == "Deleting"
    assert shown["statusHistory"][0]["message"] == "Received request for deletion, pending processing"
    renamed = await client.patch(f"{PATH}/{built['id']}", json={"name": "still-renamable"}, headers=headers)
    assert renamed.status_code == 200 and renamed.json()["status"] == "Deleting"


async def test_other_orgs_partitions_are_invisible(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    other = await f.tenant(session, "other-org")
    await f.allocation(session, other, world.site, world.instance_type, 1)
    await session.commit()
    theirs = await create(client, bearer(settings, "other-org"), world.site.id, "theirs", "other-org")
    mine = await create(client, headers, world.site.id, "mine")
    listed = (await client.get(PATH, headers=headers)).json()
    assert [p["id"] for p in listed] == [mine["id"]]
    before = await fingerprint(session)
    assert (await client.delete(f"{PATH}/{theirs['id']}", headers=headers)).status_code == 403
    assert (
        await client.patch(f"{PATH}/{theirs['id']}", json={"name": "x1"}, headers=headers)
    ).status_code == 403
    assert await fingerprint(session) == before
    count = await session.scalar(select(func.count()).select_from(LogicalPartition))
    assert count == 2
    assert await session.scalar(select(func.count()).select_from(NvlinkInterface)) == 0
