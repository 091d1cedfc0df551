"""``/instance/type``: capability rules, visibility, PATCH/DELETE rules and the machine association."""

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
from nico.db.enums import MachineStatus
from nico.db.models import Instance as InstanceRow
from nico.db.models import InstanceType, Machine, MachineCapability, Site, Tenant, TenantSite
from nico.services.instance_type import association_id
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.snapshots import snapshot

PROVIDER, OTHER_PROVIDER, TENANT = "prov", "prov-b", "ten"
GB200 = {"type": "GPU", "name": "NVIDIA GB200", "count": 4, "deviceType": "NVLink"}


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
    foreign_type: InstanceType
    machines: list[Machine]
    tenant: Tenant
    headers: dict[str, dict[str, str]]


async def gpu_capability(session: AsyncSession, machine: Machine, count: int = 4) -> None:
    session.add(
        MachineCapability(
            machine_id=machine.id, type="GPU", name="NVIDIA GB200", count=count, device_type="NVLink"
        )
    )
    await session.flush()


@pytest_asyncio.fixture
async def world(session: AsyncSession, settings: Settings) -> World:
    owner = await f.provider(session, PROVIDER)
    other = await f.provider(session, OTHER_PROVIDER)
    site = await f.site(session, owner, name="alpha")
    other_site = await f.site(session, owner, name="beta")
    foreign_site = await f.site(session, other, name="alpha")
    itype = await f.instance_type(session, site)
    foreign_type = await f.instance_type(session, foreign_site)
    machines = await f.rack(session, site, None, index=0, trays=4)
    for machine in machines:
        await gpu_capability(session, machine)
    who = await f.tenant(session, TENANT)
    await session.commit()
    headers = {
        "provider": bearer(settings, PROVIDER, "PROVIDER_ADMIN"),
        "viewer": bearer(settings, PROVIDER, "PROVIDER_VIEWER"),
        "other": bearer(settings, OTHER_PROVIDER, "PROVIDER_ADMIN"),
        "tenant": bearer(settings, TENANT, "TENANT_ADMIN"),
    }
    return World(site, other_site, foreign_site, itype, foreign_type, machines, who, headers)


# --- create ----------------------------------------------------------------------------------------


async def test_create_renders_capabilities_in_request_order(client: httpx.AsyncClient, world: World) -> None:
    body = {
        "NAME": "gb200-x",
        "siteid": str(world.site.id),
        "labels": {"rack": "nvl72"},
        "controllerMachineType": "gb200",
        "machineCapabilities": [
            {"type": "CPU", "name": "Grace", "cores": 72, "threads": 72, "hardwareRevision": "A1"},
            GB200,
            {"type": "InfiniBand", "name": "CX7", "inactiveDevices": [1, 3], "count": 4},
            {"type": "Memory", "name": "LPDDR5X", "capacity": "480 GiB", "cores": 3},
        ],
    }
    response = await client.post(
        url(PROVIDER, "/instance/type"), headers=world.headers["provider"], json=body
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["status"] == "Ready" and created["labels"] == {"rack": "nvl72"}
    assert [(h["status"], h["message"]) for h in created["statusHistory"]] == [
        ("Ready", "Instance type is ready for use")
    ]
    assert created["machineCapabilities"] == [
        {"type": "CPU", "name": "Grace", "cores": 72, "threads": 72, "count": None},
        {"type": "GPU", "name": "NVIDIA GB200", "count": 4, "deviceType": "NVLink"},
        {"type": "InfiniBand", "name": "CX7", "inactiveDevices": [1, 3], "count": 4},
        {"type": "Memory", "name": "LPDDR5X", "capacity": "480 GiB", "count": None},
    ]
    assert (
        "machineInstanceTypes" not in created and "allocationStats" not in created and "site" not in created
    )


INVALID = "Error validating Instance Type creation request data"
LENGTH = "must be at least 2 characters and maximum 256 characters"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"siteId": "{site}"}, envelope(400, INVALID, {"name": LENGTH})),
        ({"name": "ok"}, envelope(400, INVALID, {"siteId": "a value is required"})),
        ({"name": "ok", "siteId": "nope"}, envelope(400, INVALID, {"siteId": "must be a valid UUID"})),
        (
            {"name": "ok", "siteId": "{site}", "labels": {str(n): "v" for n in range(11)}},
            envelope(400, INVALID, {"labels": "up to 10 key/value pairs can be specified in labels"}),
        ),
        (
            {"name": "ok", "siteId": "{site}", "controllerMachineType": "x"},
            envelope(400, INVALID, {"controllerMachineType": "not a valid value"}),
        ),
        (
            {"name": "ok", "siteId": "{site}", "machineCapabilities": [GB200, {"name": "x1"}]},
            envelope(400, INVALID, {"1": {"type": "type must be specified for each Machine Capability"}}),
        ),
        (
            {"name": "ok", "siteId": "{site}", "machineCapabilities": [{"type": "TPU", "name": "x1"}]},
            envelope(400, INVALID, {"0": {"type": "invalid value: TPU for Machine Capability type"}}),
        ),
        (
            {"name": "ok", "siteId": "{site}", "machineCapabilities": [{"type": "GPU"}]},
            envelope(400, INVALID, {"0": {"name": "name must be specified for each Machine Capability"}}),
        ),
        (
            {
                "name": "ok",
                "siteId": "{site}",
                "machineCapabilities": [{"type": "GPU", "name": "g", "count": -1}],
            },
            envelope(400, INVALID, {"0": {"name": LENGTH, "count": "must be between 0 and 2147483647"}}),
        ),
        (
            {
                "name": "ok",
                "siteId": "{site}",
                "machineCapabilities": [{"type": "GPU", "name": "gg", "vendor": "v" * 300}],
            },
            envelope(400, INVALID, {"0": {"vendor": "must be at most 256 characters"}}),
        ),
        (
            {"name": "ok", "siteId": "{site}", "machineCapabilities": [GB200, GB200]},
            envelope(
                400,
                INVALID,
                {
                    "machineCapabilities": (
                        "requested Capability type `GPU` cannot contain duplicate Capability name: "
                        "NVIDIA GB200"
                    )
                },
            ),
        ),
        (
            {
                "name": "ok",
                "siteId": "{site}",
                "machineCapabilities": [{"type": "Network", "name": "nic", "deviceType": "X"}],
            },
            envelope(
                400,
                INVALID,
                {
                    "machineCapabilities": (
                        "requested device type  `X`  for Capability type `Network` is not valid"
                    )
                },
            ),
        ),
        (
            {
                "name": "ok",
                "siteId": "{site}",
                "machineCapabilities": [{"type": "GPU", "name": "gg", "deviceType": "PCIe"}],
            },
            envelope(400, "Unsupported Device Type specified for GPU Capability PCIe"),
        ),
        (
            {
                "name": "ok",
                "siteId": "{site}",
                "machineCapabilities": [{"type": "Network", "name": "nn", "deviceType": "NVLink"}],
            },
            envelope(400, "Unsupported Device Type specified for Network Capability NVLink"),
        ),
        (
            {
                "name": "ok",
                "siteId": "{site}",
                "machineCapabilities": [{"type": "CPU", "name": "cc", "deviceType": "DPU"}],
            },
            envelope(400, "Unsupported Device Type: DPU specified for Capability type CPU"),
        ),
        (
            {
                "name": "ok",
                "siteId": "{site}",
                "machineCapabilities": [{"type": "GPU", "name": "gg", "inactiveDevices": [1]}],
            },
            envelope(400, "InactiveDevices specified for non-InfiniBand Capability Type"),
        ),
        (
            {
                "name": "ok",
                "siteId": "{site}",
                "machineCapabilities": [{"type": "GPU", "name": "gg", "count": "4"}],
            },
            envelope(
                400,
                "Failed to parse request data, potentially invalid structure",
                {"machineCapabilities.0.count": "Input should be a valid integer"},
            ),
        ),
        (
            {"name": "ok", "siteId": str(uuid.UUID(int=5))},
            envelope(400, "Could not find Site specified in request"),
        ),
        (
            {"name": "ok", "siteId": "{foreign}"},
            envelope(
                400,
                "Site specified in request is not associated with the Infrastructure Provider for the Org",
            ),
        ),
        ({"name": "gb200-4gpu", "siteId": "{site}"}, None),
    ],
)
async def test_create_refusals_change_nothing(
    client: httpx.AsyncClient,
    session: AsyncSession,
    world: World,
    body: dict[str, Any],
    expected: tuple[int, dict[str, Any]] | None,
) -> None:
    raw = (
        json.dumps(body)
        .replace("{site}", str(world.site.id))
        .replace("{foreign}", str(world.foreign_site.id))
    )
    if expected is None:  # the name clash carries the existing id
        expected = envelope(
            409,
            f"Instance Type with name: gb200-4gpu for Site: {world.site.id} already exists",
            {"id": str(world.itype.id)},
        )
    before = await snapshot(session)
    response = await client.post(
        url(PROVIDER, "/instance/type"),
        headers={**world.headers["provider"], "content-type": "application/json"},
        content=raw,
    )
    assert (response.status_code, response.json()) == expected
    assert await snapshot(session) == before


async def test_create_needs_a_provider_admin_with_a_provider(
    client: httpx.AsyncClient, settings: Settings, world: World
) -> None:
    body = {"name": "ok", "siteId": str(world.site.id)}
    viewer = await client.post(url(PROVIDER, "/instance/type"), headers=world.headers["viewer"], json=body)
    assert (viewer.status_code, viewer.json()) == envelope(
        403, "User does not have Provider Admin role with org"
    )
    none = await client.post(
        url("ghost", "/instance/type"), headers=bearer(settings, "ghost", "PROVIDER_ADMIN"), json=body
    )
    assert (none.status_code, none.json()) == envelope(403, "Org does not have an Infrastructure Provider")


# --- list and get ----------------------------------------------------------------------------------


async def test_the_route_is_not_taken_for_an_instance_id(client: httpx.AsyncClient, world: World) -> None:
    response = await client.get(url(PROVIDER, "/instance/type"), headers=world.headers["provider"])
    assert response.status_code == 200 and [t["id"] for t in response.json()] == [str(world.itype.id)]


async def test_list_views_pages_and_stats(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    for n in range(21):
        await f.instance_type(session, world.other_site, name=f"t{n:02d}", gpus=None)
    for machine in world.machines[:3]:
        machine.instance_type_id = world.itype.id
    await f.allocation(session, world.tenant, world.site, world.itype, 2)
    await session.commit()
    provider = world.headers["provider"]
    page = await client.get(url(PROVIDER, "/instance/type"), headers=provider, params={"orderBy": "NAME_ASC"})
    assert json.loads(page.headers["X-Pagination"])["total"] == 22 and len(page.json()) == 20
    assert page.json()[0]["name"] == "gb200-4gpu"
    scoped = await client.get(
        url(PROVIDER, "/instance/type"),
        headers=provider,
        params={
            "siteId": str(world.site.id),
            "includeMachineAssignment": "true",
            "includeAllocationStats": "true",
            "includeRelation": ["Site", "InfrastructureProvider"],
        },
    )
    [item] = scoped.json()
    assert item["allocationStats"] == {
        "assigned": 3,
        "total": 2,
        "used": 0,
        "unused": 2,
        "unusedUsable": 2,
        "maxAllocatable": 1,
    }
    assert [a["machineId"] for a in item["machineInstanceTypes"]] == sorted(m.id for m in world.machines[:3])
    assert item["machineInstanceTypes"][0]["id"] == str(association_id(world.machines[0].id, world.itype.id))
    assert item["site"]["id"] == str(world.site.id) and item["infrastructureProvider"]["org"] == PROVIDER
    tenant = world.headers["tenant"]
    seen = await client.get(
        url(TENANT, "/instance/type"), headers=tenant, params={"includeAllocationStats": "1"}
    )
    assert [t["id"] for t in seen.json()] == [str(world.itype.id)]
    assert seen.json()[0]["allocationStats"] == {
        "assigned": 3,
        "total": 2,
        "used": 0,
        "unused": 2,
        "unusedUsable": 2,
    }
    await f.instance_type(session, world.site, name="unallocated", gpus=None)
    await session.commit()
    everything = await client.get(url(TENANT, "/instance/type"), headers=tenant)
    assert len(everything.json()) == 2
    allocated = await client.get(
        url(TENANT, "/instance/type"), headers=tenant, params={"excludeUnallocated": "true"}
    )
    assert [t["id"] for t in allocated.json()] == [str(world.itype.id)]


@pytest.mark.parametrize(
    ("who", "params", "expected"),
    [
        ("provider", {"siteId": "x"}, envelope(400, "Invalid Site ID in query")),
        (
            "provider",
            {"siteId": str(uuid.UUID(int=9))},
            envelope(400, "Failed to retrieve Site specified in query"),
        ),
        ("provider", {"status": "Gone"}, envelope(400, "Invalid Status value in query")),
        (
            "provider",
            {"includeRelation": "Tenant"},
            envelope(400, "Invalid includeRelation value in query: Tenant"),
        ),
        (
            "provider",
            {"excludeUnallocated": "true"},
            envelope(403, "Only Tenant can specify query param `excludeUnallocated`"),
        ),
        (
            "tenant",
            {"includeMachineAssignment": "true"},
            envelope(403, "Only Provider can specify query param `includeMachineAssignment`"),
        ),
        (
            "tenant",
            {"includeAllocationStats": "y"},
            envelope(400, "Invalid value specified for `includeAllocationStats` query param"),
        ),
        (
            "provider",
            {"orderBy": "SITE_ASC"},
            envelope(400, "Failed to validate pagination request data", {}),
        ),
    ],
)
async def test_list_rejects_bad_queries(
    client: httpx.AsyncClient, world: World, who: str, params: dict[str, str], expected: tuple[int, Any]
) -> None:
    org = TENANT if who == "tenant" else PROVIDER
    response = await client.get(url(org, "/instance/type"), headers=world.headers[who], params=params)
    assert (response.status_code, response.json()) == expected


async def test_get_checks_id_existence_and_access(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    provider, tenant = world.headers["provider"], world.headers["tenant"]
    cases = [
        (PROVIDER, provider, "/instance/type/123", envelope(400, "Invalid Instance Type ID in URL")),
        (
            PROVIDER,
            provider,
            f"/instance/type/{uuid.UUID(int=4)}",
            envelope(404, "Could not find InstanceType with specified ID"),
        ),
        (
            PROVIDER,
            provider,
            f"/instance/type/{world.foreign_type.id}",
            envelope(403, "Instance Type is not associated with org"),
        ),
        (
            TENANT,
            tenant,
            f"/instance/type/{world.itype.id}",
            envelope(403, "Instance Type is not associated with org"),
        ),
    ]
    for org, headers, path, expected in cases:
        response = await client.get(url(org, path), headers=headers)
        assert (response.status_code, response.json()) == expected, path
    session.add(TenantSite(tenant_id=world.tenant.id, site_id=world.site.id))
    await session.commit()
    shown = await client.get(url(TENANT, f"/instance/type/{world.itype.id}"), headers=tenant)
    assert shown.status_code == 200 and shown.json()["machineCapabilities"] == [GB200]


# --- patch and delete ------------------------------------------------------------------------------


async def test_patch_replaces_capabilities_only_without_machines(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    path = url(PROVIDER, f"/instance/type/{world.itype.id}")
    headers = world.headers["provider"]
    changed = await client.patch(
        path,
        headers=headers,
        json={
            "name": "renamed",
            "description": "d",
            "machineCapabilities": [GB200, {"type": "CPU", "name": "Grace"}],
        },
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["name"] == "renamed" and len(changed.json()["machineCapabilities"]) == 2
    same = await client.patch(path, headers=headers, json={"name": "renamed"})
    assert same.json()["updated"] == changed.json()["updated"]
    world.machines[0].instance_type_id = world.itype.id
    await session.commit()
    before = await snapshot(session)
    locked = await client.patch(path, headers=headers, json={"machineCapabilities": []})
    assert (locked.status_code, locked.json()) == envelope(
        412, "MachineCapabilities cannot be updated when there are associated Machines"
    )
    assert await snapshot(session) == before


async def test_patch_and_delete_checks_in_order(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings, world: World
) -> None:
    await f.instance_type(session, world.site, name="taken", gpus=None)
    await session.commit()
    before = await snapshot(session)
    provider = world.headers["provider"]
    mine = f"/instance/type/{world.itype.id}"
    cases = [
        (
            "PATCH",
            PROVIDER,
            provider,
            "/instance/type/x",
            {},
            envelope(400, "Invalid Instance Type ID in URL"),
        ),
        (
            "PATCH",
            "ghost",
            bearer(settings, "ghost", "PROVIDER_ADMIN"),
            mine,
            {},
            envelope(403, "Org does not have an Infrastructure Provider"),
        ),
        (
            "PATCH",
            PROVIDER,
            provider,
            f"/instance/type/{uuid.UUID(int=2)}",
            {},
            envelope(404, "Could not find Instance Type with specified ID"),
        ),
        (
            "PATCH",
            PROVIDER,
            provider,
            f"/instance/type/{world.foreign_type.id}",
            {},
            envelope(403, "Instance Type is not associated with org's Infrastructure Provider"),
        ),
        (
            "PATCH",
            PROVIDER,
            provider,
            mine,
            {"name": "t"},
            envelope(400, "Error validating Instance Type update request data", {"name": LENGTH}),
        ),
        (
            "PATCH",
            PROVIDER,
            provider,
            mine,
            {"name": "taken"},
            envelope(
                409, "Another Instance Type with specified name already exists for Site and Provider", None
            ),
        ),
        (
            "DELETE",
            PROVIDER,
            provider,
            f"/instance/type/{world.foreign_type.id}",
            None,
            envelope(403, "Instance Type is not associated with org's Infrastructure Provider"),
        ),
        (
            "DELETE",
            TENANT,
            world.headers["tenant"],
            mine,
            None,
            envelope(403, "User does not have Provider Admin role with org"),
        ),
    ]
    for method, org, headers, path, body, expected in cases:
        response = await client.request(method, url(org, path), headers=headers, json=body)
        status, payload = response.status_code, response.json()
        if status == 409:
            payload = {**payload, "data": None}
        assert (status, payload) == expected, (method, path)
    assert await snapshot(session) == before


async def test_delete_is_refused_while_used_then_frees_machines(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    for machine in world.machines:
        machine.instance_type_id = world.itype.id
    alloc = await f.allocation(session, world.tenant, world.site, world.itype, 1)
    await session.commit()
    path = url(PROVIDER, f"/instance/type/{world.itype.id}")
    headers = world.headers["provider"]
    used = await client.delete(path, headers=headers)
    assert (used.status_code, used.json()) == envelope(
        400, "Instance Type is being used by one or more Allocations and cannot be deleted"
    )
    await session.delete(alloc)
    network = await f.vpc(session, world.tenant, world.site)
    session.add(
        InstanceRow(
            tenant_id=world.tenant.id,
            site_id=world.site.id,
            vpc_id=network.id,
            instance_type_id=world.itype.id,
            name="i-1",
        )
    )
    await session.commit()
    busy = await client.delete(path, headers=headers)
    assert (busy.status_code, busy.json()) == envelope(
        400, "Instance Type is being used by one or more Instances and cannot be deleted"
    )
    await session.execute(InstanceRow.__table__.delete())
    await session.commit()
    gone = await client.delete(path, headers=headers)
    assert (gone.status_code, gone.text) == (202, "Deletion request was accepted")
    session.expire_all()
    assert all(m.instance_type_id is None for m in (await session.scalars(select(Machine))).all())


# --- machine association ---------------------------------------------------------------------------


async def test_associate_list_and_dissociate(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    base = url(PROVIDER, f"/instance/type/{world.itype.id}/machine")
    headers = world.headers["provider"]
    ids = [m.id for m in world.machines]
    made = await client.post(base, headers=headers, json={"MachineIDs": ids[:3]})
    assert made.status_code == 201, made.text
    assert [a["machineId"] for a in made.json()] == ids[:3]
    first = made.json()[0]
    assert first["instanceTypeId"] == str(world.itype.id)
    assert first["deprecations"] == [
        {
            "attribute": "id",
            "replacedby": "machineId",
            "effective": "2026-07-09T00:00:00Z",
            "notice": "\"'id' has been deprecated in favor of 'machineId'. Please take action immediately\"",
        }
    ]
    listed = await client.get(base, headers=headers, params={"pageSize": 2, "orderBy": "CREATED_DESC"})
    assert json.loads(listed.headers["X-Pagination"])["total"] == 3 and len(listed.json()) == 2
    by_machine = await client.delete(f"{base}/{ids[0]}", headers=headers)
    assert (by_machine.status_code, by_machine.text) == (202, "Deletion request was accepted")
    by_association = await client.delete(f"{base}/{made.json()[1]['id']}", headers=headers)
    assert by_association.status_code == 202
    type_id = world.itype.id
    session.expire_all()
    rows = {m.id: m.instance_type_id for m in (await session.scalars(select(Machine))).all()}
    assert rows == {ids[0]: None, ids[1]: None, ids[2]: type_id, ids[3]: None}


async def test_association_refusals_change_nothing(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    other_provider_machine = (await f.rack(session, world.foreign_site, None, index=1, trays=1))[0]
    await gpu_capability(session, other_provider_machine)
    elsewhere = (await f.rack(session, world.other_site, None, index=2, trays=1))[0]
    await gpu_capability(session, elsewhere)
    bare = (await f.rack(session, world.site, None, index=3, trays=1))[0]
    wrong = (await f.rack(session, world.site, None, index=4, trays=1))[0]
    await gpu_capability(session, wrong, count=8)
    busy, typed = world.machines[0], world.machines[1]
    busy.status = MachineStatus.MAINTENANCE
    typed.instance_type_id = world.foreign_type.id
    await session.commit()
    base = url(PROVIDER, f"/instance/type/{world.itype.id}/machine")
    cases = [
        (
            url(PROVIDER, "/instance/type/nope/machine"),
            {"machineIds": ["a"]},
            envelope(400, "Invalid Instance Type ID in URL"),
        ),
        (
            url(PROVIDER, f"/instance/type/{uuid.UUID(int=8)}/machine"),
            {"machineIds": ["a"]},
            envelope(404, "Instance Type not found"),
        ),
        (
            url(PROVIDER, f"/instance/type/{world.foreign_type.id}/machine"),
            {"machineIds": ["a"]},
            envelope(403, "Instance Type is not associated with org's Infrastructure Provider"),
        ),
        (
            base,
            {"machineIds": []},
            envelope(
                400,
                "Error validating Machine/Instance Type Association creation request data",
                {"machineIds": "at least one machine ID is required"},
            ),
        ),
        (
            base,
            {"machineIds": "m"},
            envelope(
                400,
                "Failed to parse request data, potentially invalid structure",
                {"machineIds": "Input should be a valid list"},
            ),
        ),
        (
            base,
            {"machineIds": [bare.id]},
            envelope(
                409,
                "Machines specified in request currently do not have any Capabilities to match against "
                "Instance Type",
            ),
        ),
        (
            base,
            {"machineIds": [world.machines[2].id, wrong.id]},
            envelope(409, f"Capabilities for Machine: {wrong.id} do not match Instance Type's Capabilities"),
        ),
        (
            base,
            {"machineIds": [world.machines[2].id, "ghost"]},
            envelope(404, "Machine with ID: ghost does not exist"),
        ),
        (
            base,
            {"machineIds": [busy.id]},
            envelope(
                400,
                (
                    f"Machine: {busy.id} is in Maintenance state. Instance Type can only be assigned to a "
                    "Machine in `Ready` or `Reset` status"
                ),
            ),
        ),
        (
            base,
            {"machineIds": [other_provider_machine.id]},
            envelope(
                403,
                f"Machine: {other_provider_machine.id} is not associated with org's Infrastructure Provider",
            ),
        ),
        (
            base,
            {"machineIds": [typed.id]},
            envelope(
                409, f"Machine: {typed.id} is already associated with Instance Type {world.foreign_type.id}"
            ),
        ),
        (
            base,
            {"machineIds": [elsewhere.id]},
            envelope(400, f"Machine: {elsewhere.id} is not at the Site of the Instance Type"),
        ),
        (
            base,
            {"machineIds": ["x" * 300]},
            envelope(
                400,
                "Error validating Machine/Instance Type Association creation request data",
                {"machineIds": "each machine ID must be 1 to 256 characters"},
            ),
        ),
    ]
    before = await snapshot(session)
    for path, body, expected in cases:
        response = await client.post(path, headers=world.headers["provider"], json=body)
        assert (response.status_code, response.json()) == expected, body
    assert await snapshot(session) == before


async def test_dissociation_refusals(client: httpx.AsyncClient, session: AsyncSession, world: World) -> None:
    for machine in world.machines[:2]:
        machine.instance_type_id = world.itype.id
    world.machines[2].instance_type_id = world.foreign_type.id
    await f.allocation(session, world.tenant, world.site, world.itype, 2)
    network = await f.vpc(session, world.tenant, world.site)
    instance = InstanceRow(
        tenant_id=world.tenant.id,
        site_id=world.site.id,
        vpc_id=network.id,
        instance_type_id=world.itype.id,
        name="i-1",
    )
    session.add(instance)
    await session.flush()
    world.machines[0].instance_id = instance.id
    await session.commit()
    base = url(PROVIDER, f"/instance/type/{world.itype.id}/machine")
    cases = [
        (
            f"{base}/nobody",
            envelope(404, "Could not find Machine/Instance Type association with ID specified in URL"),
        ),
        (
            f"{base}/{uuid.UUID(int=3)}",
            envelope(404, "Could not find Machine/Instance Type association with ID specified in URL"),
        ),
        (
            f"{base}/{world.machines[2].id}",
            envelope(403, "Machine/Instance Type association does not belong to Instance Type"),
        ),
        (
            f"{base}/{world.machines[0].id}",
            envelope(
                400, "Machine is currently in use by an Instance and cannot be dissociated from Instance Type"
            ),
        ),
        (
            f"{base}/{world.machines[1].id}",
            envelope(
                400,
                "Deletion of Machine/Instance type association is not allowed because of existing Allocation "
                "Constraints",
            ),
        ),
    ]
    before = await snapshot(session)
    for path, expected in cases:
        response = await client.delete(path, headers=world.headers["provider"])
        assert (response.status_code, response.text) == (
            expected[0],
            json.dumps(expected[1], separators=(",", ":")),
        ), path
    assert await snapshot(session) == before
    other = await client.get(
        url(OTHER_PROVIDER, f"/instance/type/{world.itype.id}/machine"), headers=world.headers["other"]
    )
    assert (other.status_code, other.json()) == envelope(
        403, "Instance Type is not associated with org's Infrastructure Provider"
    )
