"""``/machine``: provider and privileged-tenant views, InUse rendering, filters, PATCH and DELETE rules."""

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
from nico.db.models import Instance, InstanceType, Machine, MachineCapability, Site, Tenant, TenantSite
from nico.services import status
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.snapshots import snapshot

PROVIDER, OTHER_PROVIDER, TENANT, OTHER_TENANT = "prov", "prov-b", "ten", "ten-b"
INVALID = "Error validating Machine update request data"
ONE_OF = "setMaintenanceMode, instanceTypeId, clearInstanceType or labels"
NOT_VISIBLE = (
    "Machine details can only be retrieved by it's Provider, privileged Tenants or Tenants who have an "
    "associated Instance"
)


def url(org: str, path: str) -> str:
    return f"/v2/org/{org}/nico{path}"


def envelope(status: int, message: str, data: Any = None) -> tuple[int, dict[str, Any]]:
    return status, {"source": "nico", "message": message, "data": data}


@dataclass
class World:
    site: Site
    other_site: Site
    itype: InstanceType
    machines: list[Machine]
    foreign: list[Machine]
    tenant: Tenant
    instance: Instance
    headers: dict[str, dict[str, str]]


@pytest_asyncio.fixture
async def world(session: AsyncSession, settings: Settings) -> World:
    owner = await f.provider(session, PROVIDER)
    other = await f.provider(session, OTHER_PROVIDER)
    site = await f.site(session, owner, name="alpha")
    other_site = await f.site(session, owner, name="beta")
    foreign_site = await f.site(session, other, name="alpha")
    itype = await f.instance_type(session, site)
    machines = await f.rack(session, site, itype, index=0, trays=4)
    for machine in machines:
        session.add(
            MachineCapability(
                machine_id=machine.id, type="GPU", name="NVIDIA GB200", count=4, device_type="NVLink"
            )
        )
        machine.serial_number = f"SN-{machine.id}"
    foreign = await f.rack(session, foreign_site, None, index=1, trays=1)
    who = await f.tenant(session, TENANT)
    await f.tenant(session, OTHER_TENANT)
    await f.allocation(session, who, site, itype, 2)
    network = await f.vpc(session, who, site)
    instance = Instance(
        tenant_id=who.id, site_id=site.id, vpc_id=network.id, instance_type_id=itype.id, name="i-1"
    )
    session.add(instance)
    await session.flush()
    machines[0].instance_id = instance.id
    await session.commit()
    session.expunge_all()
    headers = {
        "provider": bearer(settings, PROVIDER, "PROVIDER_ADMIN"),
        "viewer": bearer(settings, PROVIDER, "PROVIDER_VIEWER"),
        "other": bearer(settings, OTHER_PROVIDER, "PROVIDER_ADMIN"),
        "tenant": bearer(settings, TENANT, "TENANT_ADMIN"),
        "other_tenant": bearer(settings, OTHER_TENANT, "TENANT_ADMIN"),
    }
    return World(site, other_site, itype, machines, foreign, who, instance, headers)


async def privileged(session: AsyncSession, world: World) -> None:
    tenant = await session.get(Tenant, world.tenant.id)
    assert tenant is not None
    tenant.targeted_instance_creation = True
    await session.commit()


# --- list ------------------------------------------------------------------------------------------


async def test_provider_list_renders_in_use_and_nvlink_info(client: httpx.AsyncClient, world: World) -> None:
    response = await client.get(
        url(PROVIDER, "/machine"),
        headers=world.headers["viewer"],
        params={"orderBy": "ID_ASC", "includeRelation": ["Site", "InstanceType", "InfrastructureProvider"]},
    )
    assert response.status_code == 200, response.text
    assert json.loads(response.headers["X-Pagination"])["total"] == 4
    first = response.json()[0]
    assert first["id"] == first["controllerMachineId"] == world.machines[0].id
    assert first["status"] == "InUse" and first["instanceId"] == str(world.instance.id)
    assert first["tenantId"] == str(world.tenant.id) and first["isUsableByTenant"] is False
    assert first["serialNumber"] == f"SN-{world.machines[0].id}" and first["health"] is None
    assert first["machineInterfaces"] == [] and len(first["deprecations"]) == 3
    assert first["deprecations"][0]["attribute"] == "health.observed_at"
    assert first["nvLinkInfo"]["chassisSerial"] == "alpha-CHS0000" and first["nvLinkInfo"]["trayIndex"] == 0
    assert first["nvLinkInfo"]["gpus"][0] == {"deviceId": 1, "gpuUid": str(f.gpu_uid(0, 0, 1)), "slotId": 0}
    assert first["site"]["name"] == "alpha" and first["instanceType"]["name"] == "gb200-4gpu"
    assert first["infrastructureProvider"]["org"] == PROVIDER
    assert [m["status"] for m in response.json()[1:]] == ["Ready"] * 3


@pytest.mark.parametrize(
    ("params", "expected_ids"),
    [
        ({"status": "InUse"}, [0]),
        ({"status": "Ready"}, [1, 2, 3]),
        ({"hasInstance": "true", "siteId": "{site}"}, [0]),
        ({"hasInstance": "false", "siteId": "{site}"}, [1, 2, 3]),
        ({"instanceTypeId": "{itype}", "id": ["{m1}", "{m2}"]}, [1, 2]),
        ({"hasInstanceType": "false"}, []),
        ({"query": "T03"}, [3]),
        (
            {"capabilityType": "GPU", "capabilityName": "NVIDIA GB200", "isMissingOnSite": "false"},
            [0, 1, 2, 3],
        ),
        ({"capabilityType": "CPU"}, []),
        ({"hwSkuDeviceType": "gpu"}, []),
        ({"tenantId": "{tenant}"}, [0]),
        ({"orderBy": "STATUS_ASC", "pageSize": "1"}, [0]),
        ({"orderBy": "ID_DESC", "pageSize": "2", "pageNumber": "2"}, [1, 0]),
    ],
)
async def test_list_filters(
    client: httpx.AsyncClient, world: World, params: dict[str, Any], expected_ids: list[int]
) -> None:
    names = {
        "{site}": str(world.site.id),
        "{itype}": str(world.itype.id),
        "{tenant}": str(world.tenant.id),
        **{f"{{m{i}}}": m.id for i, m in enumerate(world.machines)},
    }

    def fill(value: str) -> str:
        return names.get(value, value)

    query = {
        k: [fill(v) for v in value] if isinstance(value, list) else fill(value) for k, value in params.items()
    }
    response = await client.get(url(PROVIDER, "/machine"), headers=world.headers["provider"], params=query)
    assert response.status_code == 200, response.text
    assert [m["id"] for m in response.json()] == [world.machines[i].id for i in expected_ids]


async def test_list_refusals(client: httpx.AsyncClient, settings: Settings, world: World) -> None:
    cases = [
        (PROVIDER, "provider", {"siteId": "x"}, envelope(404, "Could not find Site specified in query")),
        (
            PROVIDER,
            "provider",
            {"siteId": str(uuid.UUID(int=3))},
            envelope(404, "Could not find Site specified in query"),
        ),
        (
            OTHER_PROVIDER,
            "other",
            {"siteId": str(world.site.id)},
            envelope(403, "Site specified in query doesn't belong to org's Infrastructure provider"),
        ),
        (
            PROVIDER,
            "provider",
            {"instanceTypeId": str(uuid.UUID(int=3))},
            envelope(404, "Could not find Instance Type specified in query"),
        ),
        (
            PROVIDER,
            "provider",
            {"instanceTypeId": str(world.itype.id), "hasInstanceType": "false"},
            envelope(400, "`hasInstanceType` cannot be false when `instanceTypeId` is specified"),
        ),
        (
            PROVIDER,
            "provider",
            {"hasInstance": "true"},
            envelope(400, "Site ID must be specified in query when filtering by `hasInstance`"),
        ),
        (
            PROVIDER,
            "provider",
            {"status": "Busy"},
            envelope(400, "Invalid Status value in query", {"status": "Busy"}),
        ),
        (
            PROVIDER,
            "provider",
            {"hasInstanceType": "nah"},
            envelope(400, "Invalid value specified for `hasInstanceType` query param"),
        ),
        (
            PROVIDER,
            "provider",
            {"includeRelation": "Tenant"},
            envelope(400, "Invalid includeRelation value in query: Tenant"),
        ),
        (
            PROVIDER,
            "provider",
            {"orderBy": "NAME_ASC"},
            envelope(400, "Failed to validate pagination request data", {}),
        ),
        (
            TENANT,
            "tenant",
            {},
            envelope(
                400, "Site ID must be specified in query when retrieving Machines as a privileged Tenant"
            ),
        ),
        (
            TENANT,
            "tenant",
            {"siteId": str(world.site.id)},
            envelope(
                403, "Tenant must have targeted Instance creation capability in order to retrieve Machines"
            ),
        ),
        ("ghost", "ghost_provider", {}, envelope(404, "Infrastructure Provider not found in org")),
        (
            "ghost",
            "ghost_tenant",
            {},
            envelope(403, "Organization doesn't have a Provider or Tenant associated"),
        ),
        (PROVIDER, "nobody", {}, envelope(403, "User doesn't have Provider Admin or Tenant Admin role")),
        (PROVIDER, "outsider", {}, envelope(403, f"Failed to validate membership for org: {PROVIDER}")),
    ]
    headers = {
        **world.headers,
        "ghost_provider": bearer(settings, "ghost", "PROVIDER_VIEWER"),
        "ghost_tenant": bearer(settings, "ghost", "TENANT_ADMIN"),
        "nobody": bearer(settings, PROVIDER, "SOMETHING_ELSE"),
        "outsider": bearer(settings, "elsewhere", "PROVIDER_ADMIN"),
    }
    for org, who, params, expected in cases:
        response = await client.get(url(org, "/machine"), headers=headers[who], params=params)
        assert (response.status_code, response.json()) == expected, (who, params)


async def test_privileged_tenant_lists_machines_at_its_sites(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    await privileged(session, world)
    headers = world.headers["tenant"]
    response = await client.get(
        url(TENANT, "/machine"), headers=headers, params={"siteId": str(world.site.id)}
    )
    assert response.status_code == 200 and len(response.json()) == 4
    assert all("nvLinkInfo" not in m for m in response.json())
    assert response.json()[0]["serialNumber"] is not None
    elsewhere = await client.get(
        url(TENANT, "/machine"), headers=headers, params={"siteId": str(world.other_site.id)}
    )
    assert (elsewhere.status_code, elsewhere.json()) == envelope(
        403, "Tenant does not have access to this Site"
    )


# --- get and history -------------------------------------------------------------------------------


async def test_get_views(client: httpx.AsyncClient, session: AsyncSession, world: World) -> None:
    busy, idle = world.machines[0].id, world.machines[1].id
    own = await client.get(url(TENANT, f"/machine/{busy}"), headers=world.headers["tenant"])
    assert own.status_code == 200
    body = own.json()
    assert body["status"] == "InUse" and body["serialNumber"] is None and "nvLinkInfo" not in body
    assert body["tenantId"] == str(world.tenant.id)
    cases = [
        (
            TENANT,
            "tenant",
            idle,
            envelope(
                403,
                NOT_VISIBLE,
            ),
        ),
        (
            OTHER_TENANT,
            "other_tenant",
            busy,
            envelope(
                403,
                NOT_VISIBLE,
            ),
        ),
        (
            OTHER_PROVIDER,
            "other",
            idle,
            envelope(403, "Machine doesn't belong to org's Infrastructure provider"),
        ),
        (PROVIDER, "provider", "no-such-machine", envelope(404, "Could not find Machine with specified ID")),
    ]
    for org, who, machine_id, expected in cases:
        response = await client.get(url(org, f"/machine/{machine_id}"), headers=world.headers[who])
        assert (response.status_code, response.json()) == expected, (who, machine_id)
    await privileged(session, world)
    now_visible = await client.get(url(TENANT, f"/machine/{idle}"), headers=world.headers["tenant"])
    assert now_visible.status_code == 200 and now_visible.json()["serialNumber"] == f"SN-{idle}"


async def test_status_history(client: httpx.AsyncClient, session: AsyncSession, world: World) -> None:
    machine_id = world.machines[1].id
    for n in range(3):
        await status.record(session, "machine_id", machine_id, "Ready", f"entry {n}")
    await session.commit()
    response = await client.get(
        url(PROVIDER, f"/machine/{machine_id}/status-history"),
        headers=world.headers["viewer"],
        params={"pageSize": 2},
    )
    assert [h["message"] for h in response.json()] == ["entry 2", "entry 1"]
    assert json.loads(response.headers["X-Pagination"])["total"] == 3
    foreign = await client.get(
        url(PROVIDER, f"/machine/{world.foreign[0].id}/status-history"), headers=world.headers["provider"]
    )
    assert (foreign.status_code, foreign.json()) == envelope(
        403, "Machine doesn't belong to org's Infrastructure provider"
    )


# --- patch -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, envelope(400, INVALID, {"__all__": f"no updates specified. One of {ONE_OF} must be set"})),
        (
            {"labels": {"a": "b"}, "clearInstanceType": True},
            envelope(400, INVALID, {"__all__": f"only one of {ONE_OF} can be set at a time"}),
        ),
        (
            {"clearInstanceType": False},
            envelope(400, INVALID, {"clearInstanceType": "must be true when specified"}),
        ),
        ({"instanceTypeId": "t"}, envelope(400, INVALID, {"instanceTypeId": "must be a valid UUID"})),
        (
            {"setMaintenanceMode": True, "maintenanceMessage": "abc"},
            envelope(400, INVALID, {"maintenanceMessage": "the length must be between 5 and 256"}),
        ),
        (
            {"labels": {str(n): "v" for n in range(11)}},
            envelope(400, INVALID, {"labels": "up to 10 key/value pairs can be specified in labels"}),
        ),
        (
            {"labels": ["a"]},
            envelope(
                400,
                "Failed to parse request data, potentially invalid structure",
                {"labels": "Input should be a valid dictionary"},
            ),
        ),
        (
            {"instanceTypeId": str(uuid.UUID(int=5))},
            envelope(404, "Could not find Instance Type with specified ID"),
        ),
    ],
)
async def test_patch_validation_changes_nothing(
    client: httpx.AsyncClient, session: AsyncSession, world: World, body: dict[str, Any], expected: Any
) -> None:
    before = await snapshot(session)
    response = await client.patch(
        url(PROVIDER, f"/machine/{world.machines[1].id}"), headers=world.headers["provider"], json=body
    )
    assert (response.status_code, response.json()) == expected
    assert await snapshot(session) == before


async def test_maintenance_mode_and_labels(client: httpx.AsyncClient, world: World) -> None:
    path = url(PROVIDER, f"/machine/{world.machines[2].id}")
    headers = world.headers["provider"]
    on = await client.patch(
        path, headers=headers, json={"SETMAINTENANCEMODE": True, "maintenanceMessage": "reseat"}
    )
    assert (on.json()["status"], on.json()["maintenanceMessage"]) == ("Maintenance", "reseat")
    assert on.json()["isUsableByTenant"] is False
    assert (on.json()["statusHistory"][0]["status"], on.json()["statusHistory"][0]["message"]) == (
        "Maintenance",
        "reseat",
    )
    off = await client.patch(path, headers=headers, json={"setMaintenanceMode": False})
    assert (off.json()["status"], off.json()["maintenanceMessage"]) == ("Ready", None)
    labelled = await client.patch(path, headers=headers, json={"labels": {"row": "7"}})
    assert labelled.json()["labels"] == {"row": "7"} and labelled.json()["nvLinkInfo"] is not None


async def test_instance_type_changes(client: httpx.AsyncClient, session: AsyncSession, world: World) -> None:
    headers = world.headers["provider"]
    other_type = await f.instance_type(session, world.site, name="big", gpus=8)
    elsewhere_type = await f.instance_type(session, world.other_site, name="elsewhere", gpus=None)
    await session.commit()
    free = world.machines[3].id
    for machine_id in (world.machines[2].id, free):
        cleared = await client.patch(
            url(PROVIDER, f"/machine/{machine_id}"), headers=headers, json={"clearInstanceType": True}
        )
        assert cleared.status_code == 200 and cleared.json()["instanceTypeId"] is None
    before = await snapshot(session)
    cases = [
        (
            world.machines[0].id,
            {"clearInstanceType": True},
            envelope(
                400, "Machine is currently in use by an Instance, so its Instance Type cannot be modified"
            ),
        ),
        (
            free,
            {"instanceTypeId": str(other_type.id)},
            envelope(400, f"Capabilities for Machine: {free} do not match Instance Type's Capabilities"),
        ),
        (
            free,
            {"instanceTypeId": str(elsewhere_type.id)},
            envelope(400, "Instance Type does not belong to the Site of the Machine"),
        ),
        # Two machines of the type remain and the tenant holds 2 of them: none may leave.
        (
            world.machines[1].id,
            {"clearInstanceType": True},
            envelope(
                400,
                (
                    "Machine cannot be dissociated from existing Instance Type as it will violate Allocation "
                    "Constraints"
                ),
            ),
        ),
    ]
    for machine_id, body, expected in cases:
        response = await client.patch(url(PROVIDER, f"/machine/{machine_id}"), headers=headers, json=body)
        assert (response.status_code, response.json()) == expected, (machine_id, body)
    assert await snapshot(session) == before
    machine = await session.get(Machine, free)
    assert machine is not None
    machine.status = "Maintenance"
    await session.commit()
    refused = await client.patch(
        url(PROVIDER, f"/machine/{free}"), headers=headers, json={"instanceTypeId": str(world.itype.id)}
    )
    assert (refused.status_code, refused.json()) == envelope(
        400,
        (
            f"Machine: {free} is in Maintenance state. Instance Type can only be assigned to a Machine in "
            f"`Ready` or "
            "`Reset` status"
        ),
    )
    machine.status = "Ready"
    await session.commit()
    back = await client.patch(
        url(PROVIDER, f"/machine/{free}"), headers=headers, json={"instanceTypeId": str(world.itype.id)}
    )
    assert back.status_code == 200 and back.json()["instanceTypeId"] == str(world.itype.id)


async def test_who_may_patch(client: httpx.AsyncClient, session: AsyncSession, world: World) -> None:
    idle = world.machines[1].id
    before = await snapshot(session)
    cases = [
        (
            PROVIDER,
            "viewer",
            {"labels": {"a": "b"}},
            envelope(403, "User doesn't have Provider Admin or Tenant Admin role"),
        ),
        (
            OTHER_PROVIDER,
            "other",
            {"labels": {"a": "b"}},
            envelope(403, "Machine doesn't belong to org's Infrastructure provider"),
        ),
        (
            TENANT,
            "tenant",
            {"clearInstanceType": True},
            envelope(403, "Only Provider Admins can update or clear Machine's Instance Type"),
        ),
        (
            TENANT,
            "tenant",
            {"labels": {"a": "b"}},
            envelope(403, "Machine can only be updated by its Provider or privileged Tenants"),
        ),
    ]
    for org, who, body, expected in cases:
        response = await client.patch(url(org, f"/machine/{idle}"), headers=world.headers[who], json=body)
        assert (response.status_code, response.json()) == expected, (who, body)
    assert await snapshot(session) == before
    await privileged(session, world)
    allowed = await client.patch(
        url(TENANT, f"/machine/{idle}"), headers=world.headers["tenant"], json={"labels": {"team": "ml"}}
    )
    assert allowed.status_code == 200 and allowed.json()["labels"] == {"team": "ml"}
    assert "nvLinkInfo" not in allowed.json()


# --- delete ----------------------------------------------------------------------------------------


async def test_delete_only_machines_missing_on_site(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    headers = world.headers["provider"]
    machine_ids = [m.id for m in world.machines]
    before = await snapshot(session)
    present = await client.delete(url(PROVIDER, f"/machine/{machine_ids[3]}"), headers=headers)
    assert (present.status_code, present.json()) == envelope(
        400, "Machine exists on Site and cannot be deleted"
    )
    assert await snapshot(session) == before
    for machine_id in (machine_ids[0], machine_ids[2], machine_ids[3]):
        machine = await session.get(Machine, machine_id)
        assert machine is not None
        machine.is_missing_on_site = True
        await status.record(session, "machine_id", machine_id, "Error", "Machine is missing on Site")
    await session.commit()
    cases = [
        (
            PROVIDER,
            "provider",
            machine_ids[0],
            envelope(400, "Machine is in use by an Instance and cannot be deleted"),
        ),
        (
            PROVIDER,
            "provider",
            machine_ids[2],
            envelope(
                400,
                "Machine cannot be deleted as its Instance Type would no longer satisfy Allocation "
                "Constraints",
            ),
        ),
        (
            OTHER_PROVIDER,
            "other",
            machine_ids[3],
            envelope(403, "Machine doesn't belong to org's Infrastructure provider"),
        ),
        (
            PROVIDER,
            "viewer",
            machine_ids[3],
            envelope(403, "User does not have Provider Admin role with org"),
        ),
        (PROVIDER, "provider", "ghost", envelope(404, "Could not find Machine with specified ID")),
    ]
    # Only trays 0 and 2 keep the instance type, and the tenant reserves 2: neither may go.
    for machine_id in (machine_ids[1], machine_ids[3]):
        untyped = await session.get(Machine, machine_id)
        assert untyped is not None
        untyped.instance_type_id = None
    await session.commit()
    before = await snapshot(session)
    for org, who, machine_id, expected in cases:
        response = await client.delete(url(org, f"/machine/{machine_id}"), headers=world.headers[who])
        assert (response.status_code, response.json()) == expected, (who, machine_id)
    assert await snapshot(session) == before
    gone = await client.delete(url(PROVIDER, f"/machine/{machine_ids[3]}"), headers=headers)
    assert (gone.status_code, gone.headers["content-type"], gone.text) == (202, "application/json", "null")
    assert (await session.scalars(select(Machine.id).where(Machine.id == machine_ids[3]))).first() is None


async def test_privileged_tenants_need_an_allocation_at_the_site(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    await privileged(session, world)
    await session.execute(TenantSite.__table__.delete())
    await session.commit()
    response = await client.get(
        url(TENANT, f"/machine/{world.machines[1].id}"), headers=world.headers["tenant"]
    )
    assert response.status_code == 403
