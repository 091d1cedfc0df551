"""``/site``: provider-or-tenant reads, creation Registered at once, PATCH rules, deletion, isolation."""

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
from nico.db.enums import NetworkVirtualizationType
from nico.db.models import (
    InfrastructureProvider,
    InstanceType,
    Machine,
    NvlinkDomain,
    Site,
    Tenant,
    TenantSite,
)
from nico.services import status
from nico.services.orgs import ROLE_WITHOUT_PROVIDER, ROLE_WITHOUT_TENANT
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.snapshots import snapshot

BASE = "/v2/org/{org}/nico"
PROVIDER, OTHER_PROVIDER, TENANT = "prov", "prov-b", "ten"


def url(org: str, path: str) -> str:
    return BASE.format(org=org) + path


@dataclass
class World:
    site: Site
    other_site: Site
    headers: dict[str, dict[str, str]]


@pytest_asyncio.fixture
async def world(session: AsyncSession, settings: Settings) -> World:
    owner = await f.provider(session, PROVIDER)
    other = await f.provider(session, OTHER_PROVIDER)
    site = await f.site(session, owner, name="alpha")
    other_site = await f.site(session, other, name="alpha")
    await f.tenant(session, TENANT)
    await session.commit()
    headers = {
        "provider": bearer(settings, PROVIDER, "PROVIDER_ADMIN"),
        "viewer": bearer(settings, PROVIDER, "PROVIDER_VIEWER"),
        "other": bearer(settings, OTHER_PROVIDER, "PROVIDER_ADMIN"),
        "tenant": bearer(settings, TENANT, "TENANT_ADMIN"),
    }
    return World(site, other_site, headers)


def envelope(status: int, message: str, data: Any = None) -> tuple[int, dict[str, Any]]:
    return status, {"source": "nico", "message": message, "data": data}


# --- auth: membership, then role, before the body is read --------------------------------------------


@pytest.mark.parametrize(
    ("method", "org", "roles", "expected"),
    [
        ("GET", "elsewhere", ("PROVIDER_ADMIN",), envelope(403, "Failed to validate membership for org")),
        (
            "GET",
            PROVIDER,
            ("SOMETHING_ELSE",),
            envelope(403, "User does not have Provider or Tenant role with org"),
        ),
        (
            "POST",
            "elsewhere",
            ("PROVIDER_ADMIN",),
            envelope(403, f"Failed to validate membership for org: {PROVIDER}"),
        ),
        (
            "POST",
            PROVIDER,
            ("TENANT_ADMIN",),
            envelope(403, "User does not have Provider Admin role with org"),
        ),
        (
            "POST",
            PROVIDER,
            ("PROVIDER_VIEWER",),
            envelope(403, "User does not have Provider Admin role with org"),
        ),
    ],
)
async def test_membership_then_role_even_with_a_malformed_body(
    client: httpx.AsyncClient,
    settings: Settings,
    world: World,
    method: str,
    org: str,
    roles: tuple[str, ...],
    expected: tuple[int, dict[str, Any]],
) -> None:
    response = await client.request(
        method,
        url(PROVIDER, "/site"),
        headers={**bearer(settings, org, *roles), "content-type": "application/json"},
        content=b"{not json",
    )
    assert (response.status_code, response.json()) == expected


async def test_missing_token_is_401(client: httpx.AsyncClient, world: World) -> None:
    response = await client.get(url(PROVIDER, "/site"))
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("roles", "message"),
    [
        (("PROVIDER_ADMIN",), ROLE_WITHOUT_PROVIDER),
        (("TENANT_ADMIN",), ROLE_WITHOUT_TENANT),
        (("PROVIDER_VIEWER", "TENANT_ADMIN"), f"{ROLE_WITHOUT_PROVIDER}. {ROLE_WITHOUT_TENANT}"),
    ],
)
async def test_reads_need_the_row_behind_a_role(
    client: httpx.AsyncClient, settings: Settings, world: World, roles: tuple[str, ...], message: str
) -> None:
    response = await client.get(url("nobody", "/site"), headers=bearer(settings, "nobody", *roles))
    assert (response.status_code, response.json()) == envelope(400, message)


# --- create ----------------------------------------------------------------------------------------


async def test_create_is_registered_at_once_with_both_history_entries(
    client: httpx.AsyncClient, world: World
) -> None:
    response = await client.post(
        url(PROVIDER, "/site"),
        headers=world.headers["provider"],
        json={
            "NAME": "beta",
            "Description": "second",
            "location": {"City": "Santa Clara"},
            "contact": {"email": "ops@example.com"},
            "serialConsoleHostname": "sc.example.com",
            "capabilities": {"NVLINKPARTITION": True},
        },
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["name"] == "beta" and body["description"] == "second" and body["org"] == PROVIDER
    assert body["status"] == "Registered" and body["isOnline"] is True
    assert [(h["status"], h["message"]) for h in body["statusHistory"]] == [
        ("Pending", "received site creation request, pending pairing"),
        ("Registered", "Site has been successfully paired"),
    ]
    assert body["capabilities"] == {
        "nativeNetworking": False,
        "networkSecurityGroup": True,
        "nvLinkPartition": True,
        "flow": False,
        "imageBasedOperatingSystem": False,
    }
    assert body["location"] == {"city": "Santa Clara", "state": None, "country": None}
    assert body["contact"] == {"email": "ops@example.com"}
    assert body["registrationToken"] is None and body["isSerialConsoleEnabled"] is False
    assert "isSerialConsoleSSHKeysEnabled" not in body and "infrastructureProvider" not in body
    fetched = await client.get(url(PROVIDER, f"/site/{body['id']}"), headers=world.headers["provider"])
    assert [h["status"] for h in fetched.json()["statusHistory"]] == ["Registered", "Pending"]


async def test_create_defaults_capabilities_like_the_reference(
    client: httpx.AsyncClient, world: World
) -> None:
    response = await client.post(
        url(PROVIDER, "/site"), headers=world.headers["provider"], json={"name": "gamma"}
    )
    assert response.json()["capabilities"] == {
        "nativeNetworking": False,
        "networkSecurityGroup": True,
        "nvLinkPartition": False,
        "flow": False,
        "imageBasedOperatingSystem": False,
    }


INVALID = "Error validating Site creation request data"
PARSE = "Failed to parse request data, potentially invalid structure"


@pytest.mark.parametrize(
    ("body", "status", "message", "data"),
    [
        ({}, 400, INVALID, {"name": "must be at least 2 characters and maximum 256 characters"}),
        ({"name": "x"}, 400, INVALID, {"name": "must be at least 2 characters and maximum 256 characters"}),
        (
            {"name": "x" * 257},
            400,
            INVALID,
            {"name": "must be at least 2 characters and maximum 256 characters"},
        ),
        ({"name": " lead"}, 400, INVALID, {"name": "name field has leading whitespace"}),
        ({"name": "trail "}, 400, INVALID, {"name": "name field has trailing whitespace"}),
        (
            {"name": "ok", "description": "d" * 1025},
            400,
            INVALID,
            {"description": "maximum 1024 characters are allowed in description"},
        ),
        (
            {"name": "ok", "serialConsoleHostname": "bad host!"},
            400,
            INVALID,
            {"serialConsoleHostname": "invalid hostname"},
        ),
        (
            {"name": "ok", "location": {"city": "c" * 10_000}},
            400,
            INVALID,
            {"location": "city, state and country must be at most 256 characters each"},
        ),
        (
            {"name": "ok", "contact": {"email": "not-an-email"}},
            400,
            INVALID,
            {"contact": "must be a valid email address"},
        ),
        ({"name": 5}, 400, PARSE, {"name": "Input should be a valid string"}),
        (
            {"name": "ok", "capabilities": {"nvLinkPartition": "yes"}},
            400,
            PARSE,
            {"capabilities.nvLinkPartition": "Input should be a valid boolean"},
        ),
        ({"name": "ok", "location": "Paris"}, 400, PARSE, None),
    ],
)
async def test_create_rejects_bad_bodies_and_changes_nothing(
    client: httpx.AsyncClient,
    session: AsyncSession,
    world: World,
    body: dict[str, Any],
    status: int,
    message: str,
    data: dict[str, str] | None,
) -> None:
    before = await snapshot(session)
    response = await client.post(url(PROVIDER, "/site"), headers=world.headers["provider"], json=body)
    assert response.status_code == status and response.json()["message"] == message
    if data is not None:
        assert response.json()["data"] == data
    assert await snapshot(session) == before


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"{", "application/json"),
        (b"[]", "application/json"),
        (b"name=x", "application/x-www-form-urlencoded"),
        (b"\xff\xfe", "application/json"),
    ],
)
async def test_create_rejects_unparsable_bodies(
    client: httpx.AsyncClient, session: AsyncSession, world: World, content: bytes, content_type: str
) -> None:
    before = await snapshot(session)
    response = await client.post(
        url(PROVIDER, "/site"),
        headers={**world.headers["provider"], "content-type": content_type},
        content=content,
    )
    assert (response.status_code, response.json()["message"]) == (400, PARSE)
    assert await snapshot(session) == before


async def test_create_needs_the_provider_row_and_a_free_name(
    client: httpx.AsyncClient, settings: Settings, world: World
) -> None:
    lonely = await client.post(
        url("lonely", "/site"), headers=bearer(settings, "lonely", "PROVIDER_ADMIN"), json={"name": "x1"}
    )
    assert (lonely.status_code, lonely.json()) == envelope(
        404, "Org 'lonely' does not have an Infrastructure Provider"
    )
    clash = await client.post(
        url(PROVIDER, "/site"), headers=world.headers["provider"], json={"name": "alpha"}
    )
    assert (clash.status_code, clash.json()) == envelope(
        409,
        "A Site with specified name already exists for Infrastructure Provider",
        {"id": str(world.site.id)},
    )


# --- list ------------------------------------------------------------------------------------------


async def test_list_pages_orders_and_filters(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    provider_id = world.site.infrastructure_provider_id
    for n in range(24):
        session.add(
            Site(
                infrastructure_provider_id=provider_id,
                name=f"s{n:02d}",
                description=f"rack row {n}",
                nvlink_partition=n % 2 == 0,
                status="Registered" if n % 3 else "Pending",
            )
        )
    await session.commit()
    headers = world.headers["provider"]
    first = await client.get(url(PROVIDER, "/site"), headers=headers)
    assert first.status_code == 200 and len(first.json()) == 20
    assert json.loads(first.headers["X-Pagination"]) == {
        "pageNumber": 1,
        "pageSize": 20,
        "total": 25,
        "orderBy": None,
    }
    second = await client.get(url(PROVIDER, "/site"), headers=headers, params={"pageNumber": 2})
    assert len(second.json()) == 5
    assert not {s["id"] for s in first.json()} & {s["id"] for s in second.json()}
    ordered = await client.get(
        url(PROVIDER, "/site"), headers=headers, params={"orderBy": "NAME_DESC", "pageSize": 3}
    )
    assert [s["name"] for s in ordered.json()] == ["s23", "s22", "s21"]
    pending = await client.get(
        url(PROVIDER, "/site"), headers=headers, params={"status": "Pending", "pageSize": 100}
    )
    assert {s["status"] for s in pending.json()} == {"Pending"} and len(pending.json()) == 8
    nvlink = await client.get(
        url(PROVIDER, "/site"), headers=headers, params={"isNVLinkPartitionEnabled": "F", "pageSize": 100}
    )
    assert len(nvlink.json()) == 12 and not any(s["capabilities"]["nvLinkPartition"] for s in nvlink.json())
    found = await client.get(url(PROVIDER, "/site"), headers=headers, params={"query": "ROW 1"})
    assert sorted(s["name"] for s in found.json()) == ["s01"] + [f"s{n}" for n in range(10, 20)]
    wildcard = await client.get(url(PROVIDER, "/site"), headers=headers, params={"query": "%"})
    assert wildcard.json() == []
    related = await client.get(
        url(PROVIDER, "/site"),
        headers=headers,
        params={"includeRelation": "InfrastructureProvider", "pageSize": 1},
    )
    assert related.json()[0]["infrastructureProvider"] == {
        "org": PROVIDER,
        "orgDisplayName": f"{PROVIDER} (display)",
    }


@pytest.mark.parametrize(
    ("params", "status", "message", "data"),
    [
        ({"status": "Bogus"}, 400, "Invalid Status value in query", {"status": "Bogus"}),
        ({"isFlowEnabled": "maybe"}, 400, "Invalid value specified for `isFlowEnabled` query param", None),
        ({"includeRelation": "Tenant"}, 400, "Invalid includeRelation value in query: Tenant", None),
        (
            {"orderBy": "name"},
            400,
            "Failed to validate pagination request data",
            {"orderBy": "must be in the format of field_ASC or field_DESC"},
        ),
        ({"orderBy": "REGION_ASC"}, 400, "Failed to validate pagination request data", {}),
        (
            {"pageSize": "101"},
            400,
            "Failed to validate pagination request data",
            {"pageSize": "must be less that or equal to: 100"},
        ),
        ({"pageNumber": "one"}, 400, "Failed to parse request pagination data", None),
        (
            {"includeMachineStats": "nah"},
            400,
            "Invalid value specified for `includeMachineStats` query param",
            None,
        ),
    ],
)
async def test_list_rejects_bad_queries(
    client: httpx.AsyncClient, world: World, params: dict[str, str], status: int, message: str, data: Any
) -> None:
    response = await client.get(url(PROVIDER, "/site"), headers=world.headers["provider"], params=params)
    assert (response.status_code, response.json()) == envelope(status, message, data)


async def test_machine_stats_are_for_providers(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    itype = await f.instance_type(session, world.site)
    await f.rack(session, world.site, itype, index=0, trays=3)
    who = await f.tenant(session, "ten-2")
    await f.allocation(session, who, world.site, itype, 2)
    await session.commit()
    response = await client.get(
        url(PROVIDER, "/site"), headers=world.headers["viewer"], params={"includeMachineStats": "true"}
    )
    assert response.json()[0]["machineStats"] == {
        "total": 3,
        "totalByStatus": {"Ready": 3},
        "totalByHealth": {},
        "totalByStatusAndHealth": {"Ready": {}},
        "totalByAllocation": {"allocatedInUse": 0, "allocatedNotInUse": 2, "unallocated": 1},
    }
    tenant = await client.get(
        url(TENANT, "/site"), headers=world.headers["tenant"], params={"includeMachineStats": "true"}
    )
    assert (tenant.status_code, tenant.json()) == envelope(
        403, "User must have Provider Admin role to request `includeMachineStats`"
    )


async def test_tenant_sees_the_sites_it_holds_allocations_at(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings, world: World
) -> None:
    empty = await client.get(url(TENANT, "/site"), headers=world.headers["tenant"])
    assert empty.json() == [] and json.loads(empty.headers["X-Pagination"])["total"] == 0
    tenant = await session.scalar(select(Tenant).where(Tenant.org == TENANT))
    assert tenant is not None
    session.add(TenantSite(tenant_id=tenant.id, site_id=world.other_site.id))
    await session.commit()
    listed = await client.get(url(TENANT, "/site"), headers=world.headers["tenant"])
    assert [s["id"] for s in listed.json()] == [str(world.other_site.id)]
    one = await client.get(url(TENANT, f"/site/{world.other_site.id}"), headers=world.headers["tenant"])
    assert one.status_code == 200 and one.json()["isSerialConsoleSSHKeysEnabled"] is False
    assert one.json()["org"] == OTHER_PROVIDER
    hidden = await client.get(url(TENANT, f"/site/{world.site.id}"), headers=world.headers["tenant"])
    assert (hidden.status_code, hidden.json()) == envelope(403, "Site is not associated with org")
    # A caller holding both roles sees the union of both views.
    await f.provider(session, TENANT)
    await session.commit()
    both = bearer(settings, TENANT, "PROVIDER_VIEWER", "TENANT_ADMIN")
    union = await client.get(url(TENANT, "/site"), headers=both)
    assert [s["id"] for s in union.json()] == [str(world.other_site.id)]


# --- get and status history ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "who", "expected"),
    [
        ("/site/not-a-uuid", "provider", envelope(400, "Invalid Site ID in URL")),
        (f"/site/{uuid.UUID(int=7)}", "provider", envelope(404, "Could not find Site with specified ID")),
        ("/site/{other}", "provider", envelope(403, "Site is not associated with org")),
        ("/site/{other}/status-history", "provider", envelope(403, "Site is not associated with org")),
        (
            "/site/{mine}?includeRelation=Site",
            "provider",
            envelope(400, "Invalid includeRelation value in query: Site"),
        ),
    ],
)
async def test_get_errors(
    client: httpx.AsyncClient, world: World, path: str, who: str, expected: tuple[int, dict[str, Any]]
) -> None:
    path = path.format(other=world.other_site.id, mine=world.site.id)
    response = await client.get(url(PROVIDER, path), headers=world.headers[who])
    assert (response.status_code, response.json()) == expected


async def test_status_history_is_paged_newest_first(client: httpx.AsyncClient, world: World) -> None:
    created = await client.post(
        url(PROVIDER, "/site"), headers=world.headers["provider"], json={"name": "hist"}
    )
    site_id = created.json()["id"]
    response = await client.get(
        url(PROVIDER, f"/site/{site_id}/status-history"), headers=world.headers["viewer"]
    )
    assert [h["status"] for h in response.json()] == ["Registered", "Pending"]
    assert json.loads(response.headers["X-Pagination"])["total"] == 2
    oldest = await client.get(
        url(PROVIDER, f"/site/{site_id}/status-history"),
        headers=world.headers["viewer"],
        params={"orderBy": "CREATED_ASC", "pageSize": 1},
    )
    assert [h["status"] for h in oldest.json()] == ["Pending"]


# --- patch -----------------------------------------------------------------------------------------


async def test_patch_turns_nvlink_on_and_renames(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    site = await f.site(
        session,
        await session.get(InfrastructureProvider, world.site.infrastructure_provider_id),
        name="plain",
        nvlink=False,
    )
    await session.commit()
    response = await client.patch(
        url(PROVIDER, f"/site/{site.id}"),
        headers=world.headers["provider"],
        json={
            "capabilities": {"nvlinkpartition": True},
            "name": "renamed",
            "isSerialConsoleEnabled": True,
            "serialConsoleIdleTimeout": 60,
            "location": {"country": "US"},
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["capabilities"]["nvLinkPartition"] is True and body["name"] == "renamed"
    assert body["isSerialConsoleEnabled"] is True and body["serialConsoleIdleTimeout"] == 60
    assert body["location"] == {"city": None, "state": None, "country": "US"}
    assert body["capabilities"]["networkSecurityGroup"] is True  # absent keys are unchanged


UPDATE_INVALID = "Error validating Site update request data"
SSH_KEYS_GONE = "configuring this value is no longer supported, update SSH Key Groups to remove Site instead"


@pytest.mark.parametrize(
    ("who", "body", "expected"),
    [
        (
            "provider",
            {"name": "x"},
            envelope(
                400, UPDATE_INVALID, {"name": "must be at least 2 characters and maximum 256 characters"}
            ),
        ),
        (
            "provider",
            {"serialConsoleIdleTimeout": 0},
            envelope(400, UPDATE_INVALID, {"serialConsoleIdleTimeout": "must be greater than 0"}),
        ),
        (
            "provider",
            {"isSerialConsoleSSHKeysEnabled": True},
            envelope(
                400,
                UPDATE_INVALID,
                {"isSerialConsoleSSHKeysEnabled": "value is not configurable by Provider"},
            ),
        ),
        (
            "tenant",
            {"name": "new-name"},
            envelope(400, UPDATE_INVALID, {"name": "value is not configurable by Tenant"}),
        ),
        (
            "tenant",
            {"isSerialConsoleSSHKeysEnabled": True},
            envelope(
                400,
                UPDATE_INVALID,
                {"isSerialConsoleSSHKeysEnabled": SSH_KEYS_GONE},
            ),
        ),
        ("tenant", {}, envelope(403, "Current org is not allowed to modify Site attributes")),
        (
            "other",
            {"name": "mine-now"},
            envelope(403, "Current org is not allowed to modify Site attributes"),
        ),
        (
            "provider",
            {"name": "alpha-2", "capabilities": {"flow": 1}},
            envelope(400, PARSE, {"capabilities.flow": "Input should be a valid boolean"}),
        ),
        ("viewer", {"name": "viewer-edit"}, envelope(403, "User does not have Provider Admin role with org")),
    ],
)
async def test_patch_errors_change_nothing(
    client: httpx.AsyncClient,
    session: AsyncSession,
    world: World,
    who: str,
    body: dict[str, Any],
    expected: tuple[int, dict[str, Any]],
) -> None:
    before = await snapshot(session)
    org = {"tenant": TENANT, "other": OTHER_PROVIDER}.get(who, PROVIDER)
    response = await client.patch(url(org, f"/site/{world.site.id}"), headers=world.headers[who], json=body)
    assert (response.status_code, response.json()) == expected
    assert await snapshot(session) == before


async def test_patch_refuses_clashes_and_preconditions(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    owner = await session.get(InfrastructureProvider, world.site.infrastructure_provider_id)
    assert owner is not None
    pending = await f.site(session, owner, name="pending", registered=False)
    fnn = await f.site(session, owner, name="fnn")
    fnn.native_networking = True
    who = await f.tenant(session, "ten-fnn")
    network = await f.vpc(session, who, fnn)
    network.network_virtualization_type = NetworkVirtualizationType.FNN
    await session.commit()
    headers = world.headers["provider"]
    clash = await client.patch(url(PROVIDER, f"/site/{pending.id}"), headers=headers, json={"name": "alpha"})
    assert (clash.status_code, clash.json()) == envelope(
        409, "Another Site with specified name already exists for Provider", {"id": str(world.site.id)}
    )
    console = await client.patch(
        url(PROVIDER, f"/site/{pending.id}"), headers=headers, json={"isSerialConsoleEnabled": True}
    )
    assert (console.status_code, console.json()) == envelope(
        400, "Serial Console attributes can only be updated when Site is in Registered state"
    )
    native = await client.patch(
        url(PROVIDER, f"/site/{fnn.id}"), headers=headers, json={"capabilities": {"nativeNetworking": False}}
    )
    assert (native.status_code, native.json()) == envelope(
        400,
        "Cannot disable Native Networking while Site has one or more VPCs with virtualization type set to "
        "FNN",
    )
    missing = await client.patch(url(PROVIDER, f"/site/{uuid.UUID(int=1)}"), headers=headers, json={})
    assert (missing.status_code, missing.json()) == envelope(404, "Could not retrieve Site to update")
    bad = await client.patch(url(PROVIDER, "/site/zzz"), headers=headers, json={})
    assert (bad.status_code, bad.json()) == envelope(400, "Invalid Site ID in URL")


# --- delete ----------------------------------------------------------------------------------------


async def test_delete_removes_the_site_with_its_inventory(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    itype = await f.instance_type(session, world.site)
    await f.rack(session, world.site, itype, index=0, trays=2)
    await session.commit()
    response = await client.delete(
        url(PROVIDER, f"/site/{world.site.id}"),
        headers=world.headers["provider"],
        params={"purgeMachines": "true"},
    )
    assert response.status_code == 202
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "Deletion request was accepted"
    for model in (Site, Machine, InstanceType, NvlinkDomain):
        rows = (await session.scalars(select(model))).all()
        assert all(getattr(r, "site_id", getattr(r, "id", None)) != world.site.id for r in rows), model
    assert await session.get(Site, world.other_site.id) is not None


async def test_delete_refusals_change_nothing(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings, world: World
) -> None:
    itype = await f.instance_type(session, world.other_site)
    await f.rack(session, world.other_site, itype, index=0, trays=1)
    owner = await session.get(InfrastructureProvider, world.site.infrastructure_provider_id)
    assert owner is not None
    with_vpc = await f.site(session, owner, name="with-vpc")
    await f.vpc(session, await f.tenant(session, "ten-v"), with_vpc)
    await f.allocation(session, await f.tenant(session, "ten-a"), world.other_site, itype, 1)
    await session.commit()
    before = await snapshot(session)
    cases = [
        (
            url(PROVIDER, f"/site/{world.site.id}?purgeMachines=perhaps"),
            "provider",
            envelope(400, "Invalid purgeMachines query param"),
        ),
        (
            url("ghost", f"/site/{world.site.id}"),
            "ghost",
            envelope(403, "No Infrastructure Provider found for this org"),
        ),
        (
            url(PROVIDER, f"/site/{uuid.UUID(int=3)}"),
            "provider",
            envelope(404, "Could not retrieve Site with ID in URL"),
        ),
        (
            url(PROVIDER, f"/site/{world.other_site.id}"),
            "provider",
            envelope(403, "Site does not belong to org's Infrastructure Provider"),
        ),
        (
            url(OTHER_PROVIDER, f"/site/{world.other_site.id}"),
            "other",
            envelope(403, "Site has Allocations which must be deleted first"),
        ),
        (
            url(PROVIDER, f"/site/{with_vpc.id}"),
            "provider",
            envelope(
                400,
                "Site has tenant resources (VPCs, Subnets, Instances or NVLink Logical Partitions) which "
                "must be deleted first",
            ),
        ),
        (
            url(TENANT, f"/site/{world.site.id}"),
            "tenant",
            envelope(403, "User does not have Provider Admin role with org"),
        ),
    ]
    headers = {**world.headers, "ghost": bearer(settings, "ghost", "PROVIDER_ADMIN")}
    for path, who, expected in cases:
        response = await client.delete(path, headers=headers[who])
        assert (response.status_code, response.json()) == expected, path
    assert await snapshot(session) == before


async def test_two_providers_never_touch_each_others_sites(client: httpx.AsyncClient, world: World) -> None:
    mine = await client.get(url(PROVIDER, "/site"), headers=world.headers["provider"])
    theirs = await client.get(url(OTHER_PROVIDER, "/site"), headers=world.headers["other"])
    assert [s["id"] for s in mine.json()] == [str(world.site.id)]
    assert [s["id"] for s in theirs.json()] == [str(world.other_site.id)]
    # A token for one org cannot be used on the other's path.
    crossed = await client.get(url(OTHER_PROVIDER, "/site"), headers=world.headers["provider"])
    assert crossed.status_code == 403


async def test_history_shows_20_on_reads_and_up_to_100_after_patch(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    for n in range(120):
        await status.record(session, "site_id", world.site.id, "Registered", f"entry {n}")
    await session.commit()
    headers = world.headers["provider"]
    got = await client.get(url(PROVIDER, f"/site/{world.site.id}"), headers=headers)
    assert [h["message"] for h in got.json()["statusHistory"]] == [f"entry {n}" for n in range(119, 99, -1)]
    listed = await client.get(url(PROVIDER, "/site"), headers=headers)
    assert len(listed.json()[0]["statusHistory"]) == 20
    patched = await client.patch(
        url(PROVIDER, f"/site/{world.site.id}"), headers=headers, json={"description": "x"}
    )
    assert [h["message"] for h in patched.json()["statusHistory"]] == [
        f"entry {n}" for n in range(119, 19, -1)
    ]
