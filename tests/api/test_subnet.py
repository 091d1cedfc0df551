"""``/subnet``: thin tenant subnets, Ready at creation; VPC rules, views, deletion and isolation."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.enums import NetworkVirtualizationType, SiteStatus, VpcStatus
from nico.db.models import Instance, InstanceInterface, Site, Subnet, Tenant, Vpc
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.snapshots import snapshot

TENANT, OTHER_TENANT = "ten", "ten-b"
INVALID = "Error validating Subnet creation request data"
LENGTH = "must be at least 2 characters and maximum 256 characters"


def url(org: str, path: str) -> str:
    return f"/v2/org/{org}/nico{path}"


def envelope(status: int, message: str, data: Any = None) -> tuple[int, dict[str, Any]]:
    return status, {"source": "nico", "message": message, "data": data}


@dataclass
class World:
    site: Site
    tenant: Tenant
    vpc: Vpc
    other_vpc: Vpc
    headers: dict[str, dict[str, str]]


@pytest_asyncio.fixture
async def world(session: AsyncSession, settings: Settings) -> World:
    owner = await f.provider(session, "prov")
    site = await f.site(session, owner, name="alpha")
    itype = await f.instance_type(session, site)
    who = await f.tenant(session, TENANT)
    other = await f.tenant(session, OTHER_TENANT)
    await f.allocation(session, who, site, itype, 1)
    network = await f.vpc(session, who, site, name="vpc-a")
    other_network = await f.vpc(session, other, site, name="vpc-b")
    await session.commit()
    headers = {
        "tenant": bearer(settings, TENANT, "TENANT_ADMIN"),
        "other": bearer(settings, OTHER_TENANT, "TENANT_ADMIN"),
        "provider": bearer(settings, "prov", "PROVIDER_ADMIN"),
    }
    return World(site, who, network, other_network, headers)


async def test_create_is_ready_at_once(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    response = await client.post(
        url(TENANT, "/subnet"),
        headers=world.headers["tenant"],
        json={
            "NAME": "spaced name",
            "vpcid": str(world.vpc.id),
            "prefixLength": 24,
            "ipv4BlockId": str(uuid.UUID(int=77)),
            "ipBlockSize": 256,
        },
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["name"] == "spaced name"  # edge whitespace is refused like every resource's (hostile input)
    assert body["status"] == "Ready" and body["controllerNetworkSegmentId"] == body["id"]
    assert body["vpcId"] == str(world.vpc.id) and body["siteId"] == str(world.site.id)
    assert (body["prefixLength"], body["ipv4BlockId"]) == (24, str(uuid.UUID(int=77)))
    assert body["ipv4Prefix"] is None and body["ipv4Gateway"] is None and body["ipv6BlockId"] is None
    assert body["mtu"] is None and body["routingType"] is None
    assert "tenantId" not in body and "deprecations" not in body
    assert [(h["status"], h["message"]) for h in body["statusHistory"]] == [
        ("Pending", "received subnet creation request, pending"),
        ("Ready", "Subnet is ready for use"),
    ]
    minimal = await client.post(
        url(TENANT, "/subnet"),
        headers=world.headers["tenant"],
        json={"name": "bare", "vpcId": str(world.vpc.id)},
    )
    assert minimal.status_code == 201 and minimal.json()["prefixLength"] is None


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"vpcId": "{vpc}"}, envelope(400, INVALID, {"name": LENGTH})),
        ({"name": "n" * 257, "vpcId": "{vpc}"}, envelope(400, INVALID, {"name": LENGTH})),
        (
            {"name": "ok", "vpcId": "{vpc}", "description": "d" * 1025},
            envelope(400, INVALID, {"description": "maximum 1024 characters are allowed in description"}),
        ),
        ({"name": "ok"}, envelope(400, INVALID, {"vpcId": "a value is required"})),
        ({"name": "ok", "vpcId": "v"}, envelope(400, INVALID, {"vpcId": "must be a valid UUID"})),
        (
            {"name": "ok", "vpcId": "{vpc}", "ipv4BlockId": "b"},
            envelope(400, INVALID, {"ipv4BlockId": "must be a valid UUID"}),
        ),
        (
            {"name": "ok", "vpcId": "{vpc}", "ipv6BlockId": "{vpc}"},
            envelope(400, INVALID, {"ipv6BlockId": "IPv6 Subnet creation is not supported at this time"}),
        ),
        (
            {"name": "ok", "vpcId": "{vpc}", "prefixLength": 7},
            envelope(400, INVALID, {"prefixLength": "prefixLength must be at least 8"}),
        ),
        (
            {"name": "ok", "vpcId": "{vpc}", "prefixLength": 31},
            envelope(400, INVALID, {"prefixLength": "prefixLength must be at most 30"}),
        ),
        (
            {"name": "ok", "vpcId": "{vpc}", "prefixLength": 24.0},
            envelope(
                400,
                "Failed to parse request data, potentially invalid structure",
                {"prefixLength": "Input should be a valid integer"},
            ),
        ),
        (
            {"name": "ok", "vpcId": str(uuid.UUID(int=3))},
            envelope(400, "Could not find VPC specified in request"),
        ),
        (
            {"name": "ok", "vpcId": "{other_vpc}"},
            envelope(400, "Tenant for VPC in request does not match tenant in org"),
        ),
    ],
)
async def test_create_refusals_change_nothing(
    client: httpx.AsyncClient, session: AsyncSession, world: World, body: dict[str, Any], expected: Any
) -> None:
    raw = json.dumps(body).replace("{vpc}", str(world.vpc.id)).replace("{other_vpc}", str(world.other_vpc.id))
    before = await snapshot(session)
    response = await client.post(
        url(TENANT, "/subnet"),
        headers={**world.headers["tenant"], "content-type": "application/json"},
        content=raw,
    )
    assert (response.status_code, response.json()) == expected
    assert await snapshot(session) == before


async def test_create_needs_an_ethernet_ready_vpc_on_a_registered_site(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings, world: World
) -> None:
    await f.subnet(session, world.vpc, name="taken")
    fnn = await f.vpc(session, world.tenant, world.site, name="fnn")
    fnn.network_virtualization_type = NetworkVirtualizationType.FNN
    pending = await f.vpc(session, world.tenant, world.site, name="pending")
    pending.status = VpcStatus.PROVISIONING
    owner = await session.get(f.InfrastructureProvider, world.site.infrastructure_provider_id)
    assert owner is not None
    unpaired = await f.site(session, owner, name="unpaired", registered=False)
    lonely = await f.vpc(session, world.tenant, unpaired, name="lonely")
    await session.commit()
    before = await snapshot(session)
    taken = await session.scalar(select(Subnet.id).where(Subnet.name == "taken"))
    cases = [
        (
            {"name": "ok", "vpcId": str(fnn.id)},
            envelope(
                400,
                (
                    f"VPC: {fnn.id} specified in request must have Ethernet network virtualization type in "
                    "order to create Subnets"
                ),
            ),
        ),
        (
            {"name": "ok", "vpcId": str(pending.id)},
            envelope(400, "VPC specified in request data must be in Ready state in order to create Subnet"),
        ),
        (
            {"name": "ok", "vpcId": str(lonely.id)},
            envelope(
                400,
                "The Site where the Subnet is being created must be in Registered state in order to proceed",
            ),
        ),
        (
            {"name": "taken", "vpcId": str(world.vpc.id)},
            envelope(
                409, "A Subnet with specified name already exists for Tenant at this Site", {"id": str(taken)}
            ),
        ),
    ]
    for body, expected in cases:
        response = await client.post(url(TENANT, "/subnet"), headers=world.headers["tenant"], json=body)
        assert (response.status_code, response.json()) == expected, body
    no_tenant = await client.post(
        url("fresh", "/subnet"),
        headers=bearer(settings, "fresh", "TENANT_ADMIN"),
        json={"name": "ok", "vpcId": str(world.vpc.id)},
    )
    assert (no_tenant.status_code, no_tenant.json()) == envelope(400, "Error retrieving Tenant from org")
    provider = await client.post(
        url("prov", "/subnet"),
        headers=world.headers["provider"],
        json={"name": "ok", "vpcId": str(world.vpc.id)},
    )
    assert (provider.status_code, provider.json()) == envelope(
        403, "User does not have Tenant Admin role with org"
    )
    assert await snapshot(session) == before


async def test_list_is_scoped_to_the_tenant(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    for n in range(22):
        await f.subnet(session, world.vpc, name=f"net-{n:02d}")
    second = await f.vpc(session, world.tenant, world.site, name="vpc-c")
    await f.subnet(session, second, name="other-vpc-net")
    await f.subnet(session, world.other_vpc, name="not-mine")
    await session.commit()
    headers = world.headers["tenant"]
    page = await client.get(url(TENANT, "/subnet"), headers=headers, params={"orderBy": "NAME_DESC"})
    assert json.loads(page.headers["X-Pagination"]) == {
        "pageNumber": 1,
        "pageSize": 20,
        "total": 23,
        "orderBy": "NAME_DESC",
    }
    assert page.json()[0]["name"] == "other-vpc-net"
    by_vpc = await client.get(
        url(TENANT, "/subnet"),
        headers=headers,
        params={"vpcId": str(second.id), "includeRelation": ["Site", "Vpc", "Tenant"]},
    )
    [item] = by_vpc.json()
    assert item["name"] == "other-vpc-net" and item["site"]["id"] == str(world.site.id)
    assert item["vpc"]["id"] == str(second.id) and item["vpc"]["controllerVpcId"] == str(second.id)
    by_site = await client.get(
        url(TENANT, "/subnet"),
        headers=headers,
        params={"siteId": str(world.site.id), "query": "NET-0", "status": "Ready"},
    )
    assert len(by_site.json()) == 10
    theirs = await client.get(url(OTHER_TENANT, "/subnet"), headers=world.headers["other"])
    assert [s["name"] for s in theirs.json()] == ["not-mine"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"siteId": "s"},
            envelope(400, "Failed to retrieve Site specified in query param, invalid ID or DB error"),
        ),
        (
            {"siteId": str(uuid.UUID(int=1))},
            envelope(400, "Failed to retrieve Site specified in query param, invalid ID or DB error"),
        ),
        ({"vpcId": str(uuid.UUID(int=1))}, envelope(404, "Could not find VPC specified in request")),
        ({"vpcId": "{other_vpc}"}, envelope(400, "Tenant for VPC in request does not match tenant in org")),
        ({"status": "Gone"}, envelope(400, "Invalid Status value in query")),
        ({"includeRelation": "VPC"}, envelope(400, "Invalid includeRelation value in query: VPC")),
        ({"orderBy": "VPC_ASC"}, envelope(400, "Failed to validate pagination request data", {})),
    ],
)
async def test_list_rejects_bad_queries(
    client: httpx.AsyncClient, world: World, params: dict[str, str], expected: Any
) -> None:
    params = {k: v.replace("{other_vpc}", str(world.other_vpc.id)) for k, v in params.items()}
    response = await client.get(url(TENANT, "/subnet"), headers=world.headers["tenant"], params=params)
    assert (response.status_code, response.json()) == expected


async def test_list_by_a_site_without_allocation_is_forbidden(
    client: httpx.AsyncClient, world: World
) -> None:
    response = await client.get(
        url(OTHER_TENANT, "/subnet"), headers=world.headers["other"], params={"siteId": str(world.site.id)}
    )
    assert (response.status_code, response.json()) == envelope(
        403, "Tenant does not have access to this Site"
    )


async def test_get_patch_delete(client: httpx.AsyncClient, session: AsyncSession, world: World) -> None:
    mine = await f.subnet(session, world.vpc, name="mine")
    await f.subnet(session, world.vpc, name="sibling")
    theirs = await f.subnet(session, world.other_vpc, name="theirs")
    await session.commit()
    headers = world.headers["tenant"]
    got = await client.get(url(TENANT, f"/subnet/{mine.id}"), headers=headers)
    assert got.status_code == 200 and got.json()["name"] == "mine"
    patched = await client.patch(
        url(TENANT, f"/subnet/{mine.id}"), headers=headers, json={"name": "renamed", "Description": "d"}
    )
    assert (patched.json()["name"], patched.json()["description"]) == ("renamed", "d")
    before = await snapshot(session)
    cases = [
        ("GET", f"/subnet/{uuid.UUID(int=1)}", None, envelope(404, "Could not retrieve Subnet to update")),
        ("GET", "/subnet/abc", None, envelope(400, "Invalid Subnet ID in URL")),
        (
            "GET",
            f"/subnet/{theirs.id}",
            None,
            envelope(400, "Tenant for subnet in request does not match tenant in org"),
        ),
        (
            "PATCH",
            f"/subnet/{mine.id}",
            {"name": "sibling"},
            envelope(409, "Another Subnet with specified name already exists for Tenant", "id"),
        ),
        (
            "PATCH",
            f"/subnet/{mine.id}",
            {"name": "x"},
            envelope(400, "Error validating Subnet update request data", {"name": LENGTH}),
        ),
        (
            "PATCH",
            f"/subnet/{theirs.id}",
            {"name": "stolen"},
            envelope(400, "Tenant for subnet in request does not match tenant in org"),
        ),
        ("DELETE", f"/subnet/{uuid.UUID(int=1)}", None, envelope(404, "Could not find Subnet to delete")),
        (
            "DELETE",
            f"/subnet/{theirs.id}",
            None,
            envelope(400, "Org specified in request does not match org of Tenant associated with Subnet"),
        ),
    ]
    for method, path, body, expected in cases:
        response = await client.request(method, url(TENANT, path), headers=headers, json=body)
        payload = response.json()
        if expected[1]["data"] == "id":
            payload["data"] = "id" if set(payload["data"]) == {"id"} else payload["data"]
        assert (response.status_code, payload) == expected, (method, path)
    assert await snapshot(session) == before
    deleted = await client.delete(url(TENANT, f"/subnet/{mine.id}"), headers=headers)
    assert (deleted.status_code, deleted.text) == (202, "Deletion request was accepted")
    assert deleted.headers["content-type"].startswith("text/plain")
    assert await session.get(Subnet, mine.id, populate_existing=True) is None


async def test_delete_is_refused_while_an_instance_uses_the_subnet_or_the_site_is_unpaired(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    used = await f.subnet(session, world.vpc, name="used")
    instance = Instance(tenant_id=world.tenant.id, site_id=world.site.id, vpc_id=world.vpc.id, name="i-1")
    session.add(instance)
    await session.flush()
    session.add(InstanceInterface(instance_id=instance.id, subnet_id=used.id))
    free = await f.subnet(session, world.vpc, name="free")
    await session.commit()
    before = await snapshot(session)
    busy = await client.delete(url(TENANT, f"/subnet/{used.id}"), headers=world.headers["tenant"])
    assert (busy.status_code, busy.json()) == envelope(
        400, "Subnet is being used by one or more Instances and cannot be deleted"
    )
    site = await session.get(Site, world.site.id)
    assert site is not None
    site.status = SiteStatus.PENDING
    await session.commit()
    before = await snapshot(session)
    unpaired = await client.delete(url(TENANT, f"/subnet/{free.id}"), headers=world.headers["tenant"])
    assert (unpaired.status_code, unpaired.json()) == envelope(
        400, "Site associated with Subnet must be in Registered state in order to proceed"
    )
    assert await snapshot(session) == before
