"""``/allocation``: capacity, the tenant-site link, the one constraint, views and isolation."""

from __future__ import annotations

import asyncio
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
from nico.db.models import Allocation, Instance, InstanceType, Site, Tenant, TenantSite, Vpc
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.snapshots import snapshot

PROVIDER, OTHER_PROVIDER, TENANT, OTHER_TENANT = "prov", "prov-b", "ten", "ten-b"
INVALID = "Error validating Allocation creation request data"
LENGTH = "must be at least 2 characters and maximum 256 characters"
ONE_CONSTRAINT = "at least one (and at most one) Allocation Constraint must be specified"


def url(org: str, path: str) -> str:
    return f"/v2/org/{org}/nico{path}"


def envelope(status: int, message: str, data: Any = None) -> tuple[int, dict[str, Any]]:
    return status, {"source": "nico", "message": message, "data": data}


@dataclass
class World:
    site: Site
    other_site: Site
    foreign_site: Site
    itype: InstanceType
    elsewhere_type: InstanceType
    foreign_type: InstanceType
    tenant: Tenant
    other_tenant: Tenant
    headers: dict[str, dict[str, str]]

    def body(self, **changes: Any) -> dict[str, Any]:
        constraint = {
            "resourceType": "InstanceType",
            "resourceTypeId": str(self.itype.id),
            "constraintType": "Reserved",
            "constraintValue": 2,
        }
        constraint.update(changes.pop("constraint", {}))
        body = {
            "name": "alloc-a",
            "tenantId": str(self.tenant.id),
            "siteId": str(self.site.id),
            "allocationConstraints": [constraint],
        }
        body.update(changes)
        return body


@pytest_asyncio.fixture
async def world(session: AsyncSession, settings: Settings) -> World:
    owner = await f.provider(session, PROVIDER)
    other = await f.provider(session, OTHER_PROVIDER)
    site = await f.site(session, owner, name="alpha")
    other_site = await f.site(session, owner, name="beta")
    foreign_site = await f.site(session, other, name="alpha")
    itype = await f.instance_type(session, site)
    elsewhere_type = await f.instance_type(session, other_site)
    foreign_type = await f.instance_type(session, foreign_site)
    await f.rack(session, site, itype, index=0, trays=3)
    await f.rack(session, foreign_site, foreign_type, index=1, trays=3)
    who = await f.tenant(session, TENANT)
    other_who = await f.tenant(session, OTHER_TENANT)
    await session.commit()
    headers = {
        "provider": bearer(settings, PROVIDER, "PROVIDER_ADMIN"),
        "viewer": bearer(settings, PROVIDER, "PROVIDER_VIEWER"),
        "other": bearer(settings, OTHER_PROVIDER, "PROVIDER_ADMIN"),
        "tenant": bearer(settings, TENANT, "TENANT_ADMIN"),
        "other_tenant": bearer(settings, OTHER_TENANT, "TENANT_ADMIN"),
    }
    return World(site, other_site, foreign_site, itype, elsewhere_type, foreign_type, who, other_who, headers)


async def instances(session: AsyncSession, world: World, count: int) -> None:
    network = await session.scalar(select(Vpc).where(Vpc.tenant_id == world.tenant.id))
    network = network or await f.vpc(session, world.tenant, world.site)
    for _ in range(count):
        session.add(
            Instance(
                tenant_id=world.tenant.id,
                site_id=world.site.id,
                vpc_id=network.id,
                instance_type_id=world.itype.id,
                name=f"i-{uuid.uuid4().hex[:6]}",
            )
        )
    await session.commit()


# --- create ----------------------------------------------------------------------------------------


async def test_create_links_the_tenant_to_the_site(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    body = world.body()
    body["allocationConstraints"][0] = {
        "RESOURCETYPE": "InstanceType",
        "ResourceTypeID": str(world.itype.id),
        "constrainttype": "Reserved",
        "constraintValue": 2,
    }
    response = await client.post(url(PROVIDER, "/allocation"), headers=world.headers["provider"], json=body)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["status"] == "Registered" and created["tenantId"] == str(world.tenant.id)
    assert [(h["status"], h["message"]) for h in created["statusHistory"]] == [
        ("Registered", "received allocation creation request, registered")
    ]
    [constraint] = created["allocationConstraints"]
    assert constraint["ResourceTypeID"] == str(world.itype.id) and "resourceTypeId" not in constraint
    assert constraint["constraintValue"] == 2 and constraint["derivedResourceId"] is None
    assert constraint["instanceType"] == {
        "id": str(world.itype.id),
        "name": "gb200-4gpu",
        "infrastructureProviderId": str(world.itype.infrastructure_provider_id),
        "siteId": str(world.site.id),
        "status": "Ready",
    }
    assert await session.get(TenantSite, (world.tenant.id, world.site.id)) is not None


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"name": None}, envelope(400, INVALID, {"name": LENGTH})),
        ({"tenantId": "t"}, envelope(400, INVALID, {"tenantId": "must be a valid UUID"})),
        ({"siteId": None}, envelope(400, INVALID, {"siteId": "a value is required"})),
        (
            {"allocationConstraints": []},
            envelope(
                400,
                INVALID,
                {"allocationConstraints": ONE_CONSTRAINT},
            ),
        ),
        (
            {"constraint": {"resourceType": "Disk"}},
            envelope(400, INVALID, {"resourceType": "Resource Type must be InstanceType or IPBlock"}),
        ),
        (
            {"constraint": {"resourceTypeId": None}},
            envelope(400, INVALID, {"resourceTypeId": "a value is required"}),
        ),
        (
            {"constraint": {"constraintType": "Spot"}},
            envelope(
                400,
                INVALID,
                {"constraintType": "Constraint Type should be Reserved, OnDemand or Preemptible"},
            ),
        ),
        (
            {"constraint": {"constraintValue": 0}},
            envelope(400, INVALID, {"constraintValue": "a value is required"}),
        ),
        (
            {"constraint": {"constraintValue": -3}},
            envelope(400, INVALID, {"constraintValue": "must be between 1 and 2147483647"}),
        ),
        (
            {"constraint": {"constraintValue": "2"}},
            envelope(
                400,
                "Failed to parse request data, potentially invalid structure",
                {"allocationConstraints.0.constraintValue": "Input should be a valid integer"},
            ),
        ),
        ({"tenantId": str(uuid.UUID(int=1))}, envelope(400, "Error retrieving Tenant in request")),
        ({"siteId": str(uuid.UUID(int=1))}, envelope(400, "Error retrieving Site in request")),
        (
            {"siteId": "{foreign_site}"},
            envelope(400, "Site specified in request doesn't belong to current org's Provider"),
        ),
        (
            {"constraint": {"resourceType": "IPBlock"}},
            envelope(
                400, "IPBlock Allocation Constraints are not supported: nico does no IP address management"
            ),
        ),
        (
            {"constraint": {"resourceTypeId": str(uuid.UUID(int=1))}},
            envelope(400, "Error retrieving Instance Type in Allocation Constraint in request"),
        ),
        (
            {"constraint": {"resourceTypeId": "{elsewhere_type}"}},
            envelope(
                400,
                "Instance Type: {elsewhere_type} in Allocation Constraint does not belong to Site specified "
                "in request",
            ),
        ),
        (
            {"constraint": {"constraintType": "OnDemand"}},
            envelope(400, "Only Constraint Type: Reserved is supported at this time"),
        ),
        (
            {"constraint": {"constraintValue": 4}},
            envelope(
                409,
                "Allocation Constraint with Instance Type: gb200-4gpu cannot be satisfied due to machine "
                "availability",
            ),
        ),
    ],
)
async def test_create_refusals_in_order_change_nothing(
    client: httpx.AsyncClient,
    session: AsyncSession,
    world: World,
    changes: dict[str, Any],
    expected: tuple[int, dict[str, Any]],
) -> None:
    ids = {"foreign_site": world.foreign_site.id, "elsewhere_type": world.elsewhere_type.id}
    raw = json.dumps(world.body(**changes))
    wanted = json.dumps(expected[1])
    for key, value in ids.items():
        marker = "{" + key + "}"
        raw, wanted = raw.replace(marker, str(value)), wanted.replace(marker, str(value))
    before = await snapshot(session)
    response = await client.post(
        url(PROVIDER, "/allocation"),
        headers={**world.headers["provider"], "content-type": "application/json"},
        content=raw,
    )
    assert (response.status_code, response.json()) == (expected[0], json.loads(wanted))
    assert await snapshot(session) == before


async def test_create_name_clash_and_provider_row(
    client: httpx.AsyncClient, settings: Settings, world: World
) -> None:
    first = await client.post(
        url(PROVIDER, "/allocation"),
        headers=world.headers["provider"],
        json=world.body(constraint={"constraintValue": 1}),
    )
    clash = await client.post(
        url(PROVIDER, "/allocation"),
        headers=world.headers["provider"],
        json=world.body(constraint={"constraintValue": 1}),
    )
    assert (clash.status_code, clash.json()) == envelope(
        409, "An Allocation with specified name already exists for Tenant", {"id": first.json()["id"]}
    )
    ghost = await client.post(
        url("ghost", "/allocation"), headers=bearer(settings, "ghost", "PROVIDER_ADMIN"), json=world.body()
    )
    assert (ghost.status_code, ghost.json()) == envelope(
        400, "Failed to retrieve Infrastructure Provider for org"
    )
    viewer = await client.post(
        url(PROVIDER, "/allocation"), headers=world.headers["viewer"], json=world.body()
    )
    assert (viewer.status_code, viewer.json()) == envelope(
        403, "User does not have Provider Admin role with org"
    )


async def test_racing_creates_never_overbook(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    async def create(name: str) -> int:
        response = await client.post(
            url(PROVIDER, "/allocation"), headers=world.headers["provider"], json=world.body(name=name)
        )
        return response.status_code

    codes = await asyncio.gather(*(create(f"race-{n}") for n in range(4)))
    assert sorted(codes) == [201, 409, 409, 409]
    total = sum(c.constraint_value for c in (await session.scalars(select(f.AllocationConstraint))).all())
    assert total == 2


# --- list, get -------------------------------------------------------------------------------------


async def test_list_views_filters_and_orders(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    await f.allocation(session, world.tenant, world.site, world.itype, 1, name="b-first")
    await f.allocation(session, world.other_tenant, world.site, world.itype, 2, name="a-second")
    await f.allocation(session, world.other_tenant, world.foreign_site, world.foreign_type, 1, name="foreign")
    await session.commit()
    provider = world.headers["provider"]
    mine = await client.get(url(PROVIDER, "/allocation"), headers=provider, params={"orderBy": "NAME_ASC"})
    assert [a["name"] for a in mine.json()] == ["a-second", "b-first"]
    by_value = await client.get(
        url(PROVIDER, "/allocation"), headers=provider, params={"orderBy": "CONSTRAINT_VALUE_DESC"}
    )
    assert [a["name"] for a in by_value.json()] == ["a-second", "b-first"]
    for order in (
        "SITE_NAME_ASC",
        "TENANT_ORG_DISPLAY_NAME_DESC",
        "INSTANCE_TYPE_NAME_ASC",
        "IP_BLOCK_NAME_ASC",
    ):
        ordered = await client.get(url(PROVIDER, "/allocation"), headers=provider, params={"orderBy": order})
        assert ordered.status_code == 200 and len(ordered.json()) == 2, order
    by_display = await client.get(
        url(PROVIDER, "/allocation"), headers=provider, params={"orderBy": "TENANT_ORG_DISPLAY_NAME_DESC"}
    )
    assert [a["name"] for a in by_display.json()] == ["a-second", "b-first"]
    filtered = await client.get(
        url(PROVIDER, "/allocation"),
        headers=provider,
        params={
            "tenantId": str(world.tenant.id),
            "constraintValue": "1",
            "resourceType": "InstanceType",
            "constraintType": "Reserved",
            "status": "Registered",
            "siteId": str(world.site.id),
            "includeRelation": ["Tenant", "Site", "InfrastructureProvider"],
        },
    )
    [item] = filtered.json()
    assert item["name"] == "b-first" and item["tenant"]["org"] == TENANT and item["site"]["name"] == "alpha"
    assert item["infrastructureProvider"]["org"] == PROVIDER
    searched = await client.get(url(PROVIDER, "/allocation"), headers=provider, params={"query": "SECOND"})
    assert [a["name"] for a in searched.json()] == ["a-second"]
    tenant = await client.get(url(TENANT, "/allocation"), headers=world.headers["tenant"])
    assert [a["name"] for a in tenant.json()] == ["b-first"]
    ignored = await client.get(
        url(TENANT, "/allocation"),
        headers=world.headers["tenant"],
        params={"tenantId": str(world.other_tenant.id)},
    )
    assert [a["name"] for a in ignored.json()] == ["b-first"]  # tenantId is a provider-view filter
    foreign = await client.get(url(OTHER_PROVIDER, "/allocation"), headers=world.headers["other"])
    assert [a["name"] for a in foreign.json()] == ["foreign"]
    other_tenant = await client.get(url(OTHER_TENANT, "/allocation"), headers=world.headers["other_tenant"])
    assert sorted(a["name"] for a in other_tenant.json()) == ["a-second", "foreign"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"siteId": "s"}, envelope(400, "Failed to retrieve site from request", {"siteId": "s"})),
        (
            {"siteId": str(uuid.UUID(int=6))},
            envelope(400, "Failed to retrieve site from request", {"siteId": str(uuid.UUID(int=6))}),
        ),
        ({"status": "Done"}, envelope(400, "Invalid Status value in query", {"status": "Done"})),
        ({"resourceType": "Disk"}, envelope(400, "Invalid resourceType value in query: Disk")),
        ({"resourceTypeId": "r"}, envelope(400, "Invalid ResourceType ID in query")),
        ({"constraintType": "Spot"}, envelope(400, "Invalid constraintType value in query: Spot")),
        ({"constraintValue": "x"}, envelope(400, "Invalid Constraint Value in query")),
        ({"id": "x"}, envelope(400, "Invalid Allocation ID in query")),
        ({"tenantId": "tt"}, envelope(400, "Invalid Tenant ID: tt in query")),
        ({"includeRelation": "Vpc"}, envelope(400, "Invalid includeRelation value in query: Vpc")),
        ({"orderBy": "PRICE_ASC"}, envelope(400, "Failed to validate pagination request data", {})),
    ],
)
async def test_list_rejects_bad_queries(
    client: httpx.AsyncClient, world: World, params: dict[str, str], expected: tuple[int, Any]
) -> None:
    response = await client.get(
        url(PROVIDER, "/allocation"), headers=world.headers["provider"], params=params
    )
    assert (response.status_code, response.json()) == expected


async def test_get_access(client: httpx.AsyncClient, session: AsyncSession, world: World) -> None:
    alloc = await f.allocation(session, world.tenant, world.site, world.itype, 1)
    await session.commit()
    path = f"/allocation/{alloc.id}"
    assert (await client.get(url(TENANT, path), headers=world.headers["tenant"])).status_code == 200
    assert (await client.get(url(PROVIDER, path), headers=world.headers["viewer"])).status_code == 200
    cases = [
        (OTHER_TENANT, "other_tenant", path, envelope(403, "Allocation is not associated with org")),
        (OTHER_PROVIDER, "other", path, envelope(403, "Allocation is not associated with org")),
        (PROVIDER, "provider", "/allocation/x", envelope(400, "Invalid Allocation ID in URL")),
        (
            PROVIDER,
            "provider",
            f"/allocation/{uuid.UUID(int=2)}",
            envelope(404, "Could not find Allocation with specified ID"),
        ),
    ]
    for org, who, target, expected in cases:
        response = await client.get(url(org, target), headers=world.headers[who])
        assert (response.status_code, response.json()) == expected, (org, target)


# --- patch, delete ---------------------------------------------------------------------------------


async def test_patch_rules(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings, world: World
) -> None:
    alloc = await f.allocation(session, world.tenant, world.site, world.itype, 1, name="one")
    await f.allocation(session, world.tenant, world.site, world.itype, 1, name="two")
    await session.commit()
    path = f"/allocation/{alloc.id}"
    renamed = await client.patch(
        url(PROVIDER, path), headers=world.headers["provider"], json={"Name": "uno", "description": "first"}
    )
    assert renamed.status_code == 200 and (renamed.json()["name"], renamed.json()["description"]) == (
        "uno",
        "first",
    )
    before = await snapshot(session)
    cases = [
        (
            PROVIDER,
            "provider",
            path,
            {"name": "two"},
            envelope(409, "Another Allocation with specified name already exists for Tenant", "id"),
        ),
        (
            PROVIDER,
            "provider",
            path,
            {"name": " x"},
            envelope(
                400,
                "Error validating Allocation update request data",
                {"name": "name field has leading whitespace"},
            ),
        ),
        (
            PROVIDER,
            "provider",
            f"/allocation/{uuid.UUID(int=1)}",
            {},
            envelope(404, "Could not retrieve Allocation to update"),
        ),
        ("ghost", "ghost", path, {}, envelope(404, "Error retrieving infrastructureProvider for org")),
        (
            OTHER_PROVIDER,
            "other",
            path,
            {"name": "mine"},
            envelope(
                400, "InfrastructureProvider in org does not match InfrastructureProvider in Allocation"
            ),
        ),
        (
            TENANT,
            "tenant",
            path,
            {"name": "mine"},
            envelope(403, "User does not have Provider Admin role with org"),
        ),
    ]
    headers = {**world.headers, "ghost": bearer(settings, "ghost", "PROVIDER_ADMIN")}
    for org, who, target, body, expected in cases:
        response = await client.patch(url(org, target), headers=headers[who], json=body)
        payload = response.json()
        if expected[1]["data"] == "id":
            payload["data"] = "id" if set(payload["data"]) == {"id"} else payload["data"]
        assert (response.status_code, payload) == expected, body
    assert await snapshot(session) == before


async def test_delete_keeps_instances_covered_and_unlinks_the_site_with_the_last(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    first = await f.allocation(session, world.tenant, world.site, world.itype, 2, name="first")
    second = await f.allocation(session, world.tenant, world.site, world.itype, 1, name="second")
    await session.commit()
    await instances(session, world, 2)
    headers = world.headers["provider"]
    before = await snapshot(session)
    refused = await client.delete(url(PROVIDER, f"/allocation/{first.id}"), headers=headers)
    assert (refused.status_code, refused.json()) == envelope(
        400,
        (
            f"Deleting this Allocation as specified would result in 1 total Machines for Instance Type ID: "
            f"{world.itype.id} allocated to Tenant, less than Tenant's active Instance count: 2 for the "
            f"Instance Type"
        ),
    )
    foreign = await client.delete(
        url(OTHER_PROVIDER, f"/allocation/{first.id}"), headers=world.headers["other"]
    )
    assert (foreign.status_code, foreign.json()) == envelope(
        400, "Allocation does not belong to current Infrastructure Provider"
    )
    assert await snapshot(session) == before
    ok = await client.delete(url(PROVIDER, f"/allocation/{second.id}"), headers=headers)
    assert (ok.status_code, ok.text, ok.headers["content-type"].split(";")[0]) == (
        202,
        "Deletion request was accepted",
        "text/plain",
    )
    assert await session.get(TenantSite, (world.tenant.id, world.site.id)) is not None
    await session.execute(Instance.__table__.delete())
    await session.commit()
    first_path = url(PROVIDER, f"/allocation/{first.id}")
    last = await client.delete(first_path, headers=headers)
    assert last.status_code == 202
    session.expire_all()
    assert (await session.scalars(select(TenantSite))).all() == []
    again = await client.delete(first_path, headers=headers)
    assert (again.status_code, again.json()) == envelope(
        404, "Allocation specified does not exist, or has been deleted"
    )


# --- constraint patch ------------------------------------------------------------------------------


async def test_constraint_patch(client: httpx.AsyncClient, session: AsyncSession, world: World) -> None:
    alloc = await f.allocation(session, world.tenant, world.site, world.itype, 2)
    other = await f.allocation(session, world.other_tenant, world.foreign_site, world.foreign_type, 1)
    await session.commit()
    constraint = await session.scalar(
        select(f.AllocationConstraint).where(f.AllocationConstraint.allocation_id == alloc.id)
    )
    other_constraint = await session.scalar(
        select(f.AllocationConstraint).where(f.AllocationConstraint.allocation_id == other.id)
    )
    assert constraint is not None and other_constraint is not None
    path = f"/allocation/{alloc.id}/constraint/{constraint.id}"
    await instances(session, world, 2)
    headers = world.headers["provider"]
    same = await client.patch(url(PROVIDER, path), headers=headers, json={"constraintValue": 2})
    assert same.status_code == 200 and "instanceType" not in same.json()
    assert same.json()["updated"] == constraint.updated.isoformat().replace("+00:00", "Z")
    grown = await client.patch(url(PROVIDER, path), headers=headers, json={"CONSTRAINTVALUE": 3})
    assert grown.status_code == 200 and grown.json()["constraintValue"] == 3
    assert grown.json()["instanceType"]["id"] == str(world.itype.id) and grown.json()[
        "ResourceTypeID"
    ] == str(world.itype.id)
    before = await snapshot(session)
    cases = [
        (
            PROVIDER,
            "provider",
            f"/allocation/x/constraint/{constraint.id}",
            {"constraintValue": 1},
            envelope(400, "Invalid Allocation ID in URL"),
        ),
        (
            PROVIDER,
            "provider",
            f"/allocation/{alloc.id}/constraint/y",
            {"constraintValue": 1},
            envelope(400, "Invalid Allocation Constraint ID in URL"),
        ),
        (
            PROVIDER,
            "provider",
            path,
            "not json",
            envelope(400, "Failed to parse request data, invalid JSON structure"),
        ),
        (
            PROVIDER,
            "provider",
            path,
            {"constraintValue": 0},
            envelope(
                400,
                "Error validating Allocation Constraint update request data",
                {"constraintValue": "a value is required"},
            ),
        ),
        (
            PROVIDER,
            "provider",
            f"/allocation/{alloc.id}/constraint/{uuid.UUID(int=1)}",
            {"constraintValue": 1},
            envelope(404, "Could not find Allocation Constraint with ID specified in request"),
        ),
        (
            PROVIDER,
            "provider",
            f"/allocation/{uuid.UUID(int=1)}/constraint/{constraint.id}",
            {"constraintValue": 1},
            envelope(400, "Allocation Constraint does not belong to Allocation specified in request"),
        ),
        (
            PROVIDER,
            "provider",
            f"/allocation/{other.id}/constraint/{other_constraint.id}",
            {"constraintValue": 1},
            envelope(
                400,
                "Allocation does not belong to org's Infrastructure Provider, unable to update Allocation "
                "Constraint",
            ),
        ),
        (
            PROVIDER,
            "provider",
            path,
            {"constraintValue": 1},
            envelope(
                400,
                (
                    "Updating this Allocation Constraint as specified would result in 1 total Machines for "
                    "Instance Type: "
                    "gb200-4gpu allocated to Tenant, less than Tenant's active Instance count: 2 for the "
                    "Instance Type"
                ),
            ),
        ),
        (
            PROVIDER,
            "provider",
            path,
            {"constraintValue": 4},
            envelope(400, "New constraint value cannot be satisfied due to Machine availability"),
        ),
    ]
    for org, who, target, body, expected in cases:
        kwargs: dict[str, Any] = (
            {"content": body, "headers": {**world.headers[who], "content-type": "application/json"}}
            if isinstance(body, str)
            else {"json": body, "headers": world.headers[who]}
        )
        response = await client.patch(url(org, target), **kwargs)
        assert (response.status_code, response.json()) == expected, target
    assert await snapshot(session) == before


async def test_allocations_are_removed_only_by_their_provider(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    alloc = await f.allocation(session, world.tenant, world.site, world.itype, 1)
    await session.commit()
    tenant = await client.delete(url(TENANT, f"/allocation/{alloc.id}"), headers=world.headers["tenant"])
    assert (tenant.status_code, tenant.json()) == envelope(
        403, "User does not have Provider Admin role with org"
    )
    assert (await session.scalars(select(Allocation))).all() != []
