"""``/vpc``: the checks of spec §7 with codes and texts, the default NVLink partition (set, clear,
in use, no crash without one, 404 for an unknown id), list filters, isolation, no-change on errors."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.enums import LogicalPartitionStatus
from nico.db.models import Instance, InstanceInterface
from tests.api.conftest import BASE, error, instance_body
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.state import fingerprint

PATH = f"{BASE}/vpc"
PARTITION_ERRORS = "NVLink Logical Partition with ID specified in request data"


def vpc_body(world: f.NvlinkSite, name: str = "vpc-new", **extra: Any) -> dict[str, Any]:
    return {"name": name, "siteId": str(world.site.id), **extra}


async def test_create_is_ready_with_two_history_entries(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    chosen = str(uuid.uuid4())
    body = vpc_body(world, id=chosen, labels={"a": "b"}, nvLinkLogicalPartitionId=str(partition.id), vni=77)
    response = await client.post(PATH, json=body, headers=headers)
    assert response.status_code == 201, response.text
    vpc = response.json()
    assert vpc["id"] == chosen == vpc["controllerVpcId"]
    assert vpc["status"] == "Ready"
    assert [(h["status"], h["message"]) for h in vpc["statusHistory"]] == [
        ("Provisioning", "VPC provisioning has been initiated on Site"),
        ("Ready", "VPC is ready for use"),
    ]
    assert vpc["org"] == "tenant-org" and vpc["infrastructureProviderId"] == str(world.provider.id)
    assert vpc["networkVirtualizationType"] == "ETHERNET_VIRTUALIZER"
    assert vpc["nvLinkLogicalPartitionId"] == str(partition.id)
    assert vpc["requestedVni"] == 77 and vpc["vni"] == 77
    assert "nvLinkLogicalPartitionSummary" not in vpc and "site" not in vpc
    plain = (await client.post(PATH, json=vpc_body(world, name="vpc-plain"), headers=headers)).json()
    assert (
        plain["vni"] is not None
        and plain["requestedVni"] is None
        and plain["nvLinkLogicalPartitionId"] is None
    )
    got = (await client.get(f"{PATH}/{chosen}", headers=headers)).json()
    assert [h["status"] for h in got["statusHistory"]] == ["Ready", "Provisioning"]


@pytest.mark.parametrize(
    ("change", "data"),
    [
        ({"name": None}, {"name": "must be at least 2 characters and maximum 256 characters"}),
        ({"siteId": None}, {"siteId": "a value is required"}),
        ({"description": "d" * 1025}, {"description": "maximum 1024 characters are allowed in description"}),
        ({"id": "bad"}, {"id": "must be a valid UUID"}),
        ({"networkVirtualizationType": "VXLAN"}, {"networkVirtualizationType": "must be a valid value"}),
        ({"vni": 70000}, {"vni": "must be no greater than 65535"}),
        ({"networkSecurityGroupId": str(uuid.UUID(int=5))},
         {"networkSecurityGroupId": "Network Security Groups is not supported by nico"}),
    ],
)  # fmt: skip
async def test_create_validation(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    change: dict[str, Any],
    data: dict[str, str],
) -> None:
    before = await fingerprint(session)
    response = await client.post(PATH, json=vpc_body(world, **change), headers=headers)
    assert response.json() == {
        "source": "nico",
        "message": "Error validating VPC creation request data",
        "data": data,
    }
    assert await fingerprint(session) == before


async def test_create_checks_in_order(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    async def check(
        body: dict[str, Any], status: int, message: str, h: dict[str, str] = headers, path: str = PATH
    ) -> None:
        before = await fingerprint(session)
        response = await client.post(path, json=body, headers=h)
        assert error(response) == (status, message), body
        assert await fingerprint(session) == before

    await check(
        vpc_body(world, siteId=str(uuid.uuid4())),
        400,
        "Could not find Site with ID specified in request data",
    )
    pending = await f.site(session, world.provider, name="pending", registered=False)
    foreign = await f.site(session, world.provider, name="foreign")
    plain = await f.site(session, world.provider, name="plain", nvlink=False)
    plain_type = await f.instance_type(session, plain, name="t")
    await f.allocation(session, world.tenant, plain, plain_type, 1)
    other = await f.tenant(session, "other-org")
    theirs = await f.logical_partition(session, other, world.site, name="theirs")
    far = await f.logical_partition(session, world.tenant, foreign, name="far")
    not_ready = await f.logical_partition(
        session, world.tenant, world.site, name="nr", status=LogicalPartitionStatus.PENDING
    )
    await session.commit()
    await check(
        vpc_body(world, siteId=str(pending.id)),
        400,
        "Site specified in request data must be in Registered state in order to proceed",
    )
    await check(
        vpc_body(world),
        403,
        "Org does not have a Tenant associated",
        bearer(settings, "nobody-org"),
        "/v2/org/nobody-org/nico/vpc",
    )
    await check(
        vpc_body(world, siteId=str(foreign.id)),
        403,
        "Tenant does not have any Allocations with Site specified in request data",
    )
    await check(vpc_body(world, id=str(world.vpc.id)), 409, "A Vpc with specified ID already exists")
    before = await fingerprint(session)
    clash = await client.post(PATH, json=vpc_body(world, name="vpc-1"), headers=headers)
    assert clash.status_code == 409
    assert clash.json() == {
        "source": "nico",
        "message": "A Vpc with specified name already exists for Tenant",
        "data": {"id": str(world.vpc.id)},
    }
    assert await fingerprint(session) == before
    await check(
        vpc_body(world, siteId=str(plain.id), nvLinkLogicalPartitionId=str(uuid.uuid4())),
        400,
        "Site specified in request data must have NVLink Partition enabled in order to create VPC "
        "with default NVLink Partition",
    )
    await check(
        vpc_body(world, nvLinkLogicalPartitionId=""),
        400,
        "Invalid NVLink Logical Partition ID specified in request data",
    )
    await check(
        vpc_body(world, nvLinkLogicalPartitionId="nope"),
        400,
        "Invalid NVLink Logical Partition ID specified in request data",
    )
    await check(
        vpc_body(world, nvLinkLogicalPartitionId=str(uuid.uuid4())),
        404,
        "Could not find NVLink Logical Partition with ID specified in request data",
    )
    await check(
        vpc_body(world, nvLinkLogicalPartitionId=str(far.id)),
        403,
        f"{PARTITION_ERRORS} does not belong to Site",
    )
    await check(
        vpc_body(world, nvLinkLogicalPartitionId=str(not_ready.id)),
        403,
        f"{PARTITION_ERRORS} is not in Ready state",
    )
    await check(
        vpc_body(world, nvLinkLogicalPartitionId=str(theirs.id)),
        403,
        f"{PARTITION_ERRORS} does not belong to Tenant",
    )


async def test_update_default_partition(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    first = await f.logical_partition(session, world.tenant, world.site, name="first")
    second = await f.logical_partition(session, world.tenant, world.site, name="second")
    await session.commit()
    url = f"{PATH}/{world.vpc.id}"
    # No current default and an instance with bindings: not "in use" (the reference crashes here).
    inst = (
        await client.post(
            f"{BASE}/instance",
            json=instance_body(world, nvLinkInterfaces=[{"nvLinkLogicalPartitionId": str(second.id)}]),
            headers=headers,
        )
    ).json()
    set_first = await client.patch(url, json={"nvLinkLogicalPartitionId": str(first.id)}, headers=headers)
    assert set_first.status_code == 200 and set_first.json()["nvLinkLogicalPartitionId"] == str(first.id)
    # Bindings on another partition do not block a change either.
    cleared = await client.patch(url, json={"nvLinkLogicalPartitionId": ""}, headers=headers)
    assert cleared.status_code == 200 and cleared.json()["nvLinkLogicalPartitionId"] is None
    back = await client.patch(url, json={"nvLinkLogicalPartitionId": str(second.id)}, headers=headers)
    assert back.status_code == 200
    shown = await client.get(url, params={"includeRelation": "NVLinkLogicalPartition"}, headers=headers)
    assert shown.json()["nvLinkLogicalPartitionSummary"] == {
        "id": str(second.id),
        "name": "second",
        "siteId": str(world.site.id),
        "status": "Ready",
    }
    before = await fingerprint(session)
    for value in ["", str(first.id), str(second.id)]:
        response = await client.patch(url, json={"nvLinkLogicalPartitionId": value}, headers=headers)
        assert error(response) == (
            403,
            "Existing default NVLink Logical Partition is already being used by an Instance from the VPC",
        )
    assert await fingerprint(session) == before
    unchanged = await client.patch(
        url, json={"nvLinkLogicalPartitionId": None, "description": "x"}, headers=headers
    )
    assert unchanged.status_code == 200 and unchanged.json()["nvLinkLogicalPartitionId"] == str(second.id)
    unknown = await client.patch(
        f"{PATH}/{uuid.uuid4()}", json={"nvLinkLogicalPartitionId": str(first.id)}, headers=headers
    )
    assert error(unknown) == (404, "Could not retrieve VPC to update")
    assert inst["vpcId"] == str(world.vpc.id)


async def test_update_checks(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    other_vpc = await f.vpc(session, world.tenant, world.site, name="vpc-2")
    other = await f.tenant(session, "other-org")
    theirs = await f.vpc(session, other, world.site, name="theirs")
    plain = await f.site(session, world.provider, name="plain", nvlink=False)
    plain_type = await f.instance_type(session, plain, name="t")
    await f.allocation(session, world.tenant, plain, plain_type, 1)
    plain_vpc = await f.vpc(session, world.tenant, plain, name="plain-vpc")
    await session.commit()
    before = await fingerprint(session)
    response = await client.patch(f"{PATH}/{world.vpc.id}", json={"name": " x"}, headers=headers)
    assert response.json() == {
        "source": "nico",
        "message": "Error validating VPC update request data",
        "data": {"name": "name field has leading whitespace"},
    }
    assert error(await client.patch(f"{PATH}/bad", json={}, headers=headers)) == (
        400,
        "Invalid VPC ID in request",
    )
    assert error(await client.patch(f"{PATH}/{theirs.id}", json={"name": "mine"}, headers=headers)) == (
        403,
        "VPC does not belong to current Tenant",
    )
    clash = await client.patch(f"{PATH}/{world.vpc.id}", json={"name": "vpc-2"}, headers=headers)
    assert clash.status_code == 409 and clash.json()["data"] == {"id": str(other_vpc.id)}
    assert clash.json()["message"] == "Another VPC with specified name already exists for Tenant"
    response = await client.patch(
        f"{PATH}/{plain_vpc.id}", json={"nvLinkLogicalPartitionId": ""}, headers=headers
    )
    assert error(response) == (
        400,
        f"Site: {plain.id} specified in request data must have NVLink Partition enabled in order to "
        "update VPC with default NVLink Partition",
    )
    assert await fingerprint(session) == before
    renamed = await client.patch(f"{PATH}/{world.vpc.id}", json={"name": "vpc-renamed"}, headers=headers)
    assert renamed.status_code == 200 and renamed.json()["name"] == "vpc-renamed"


async def test_list_get_and_delete(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    second = await f.logical_partition(session, world.tenant, world.site, name="lp-2")
    other = await f.tenant(session, "other-org")
    theirs_lp = await f.logical_partition(session, other, world.site, name="theirs")
    theirs = await f.vpc(session, other, world.site, name="theirs")
    await session.commit()
    for n in range(3):
        body = vpc_body(world, name=f"vpc-{n + 10}", nvLinkLogicalPartitionId=str(partition.id))
        assert (await client.post(PATH, json=body, headers=headers)).status_code == 201
    listed = await client.get(PATH, params={"orderBy": "NAME_DESC", "pageSize": 2}, headers=headers)
    assert [v["name"] for v in listed.json()] == ["vpc-12", "vpc-11"]
    assert json.loads(listed.headers["X-Pagination"])["total"] == 4
    by_lp = await client.get(PATH, params={"nvLinkLogicalPartitionId": str(partition.id)}, headers=headers)
    assert len(by_lp.json()) == 3
    both = [("nvLinkLogicalPartitionId", str(partition.id)), ("nvLinkLogicalPartitionId", str(second.id))]
    assert len((await client.get(PATH, params=both, headers=headers)).json()) == 3
    unknown = uuid.uuid4()
    for value in [str(unknown), str(theirs_lp.id)]:
        response = await client.get(PATH, params={"nvLinkLogicalPartitionId": value}, headers=headers)
        assert error(response) == (
            400,
            f"NVLink Logical Partition ID: {value} specified in query does not exist for current Tenant",
        )
    assert error(await client.get(PATH, params={"nvLinkLogicalPartitionId": "x"}, headers=headers)) == (
        400,
        "Invalid NVLink Logical Partition ID: x in query",
    )
    assert error(await client.get(PATH, params={"status": "Gone"}, headers=headers)) == (
        400,
        "Invalid Status value in query",
    )
    assert error(await client.get(PATH, params={"includeRelation": "VPC"}, headers=headers))[0] == 400
    relations = [
        ("includeRelation", r) for r in ("Site", "Tenant", "InfrastructureProvider", "NetworkSecurityGroup")
    ]
    related = (await client.get(f"{PATH}/{world.vpc.id}", params=relations, headers=headers)).json()
    assert related["site"]["id"] == str(world.site.id) and related["tenant"]["org"] == "tenant-org"
    assert related["infrastructureProvider"]["org"] == "provider-org"
    assert (
        (await client.get(PATH, params={"query": "VPC-1"}, headers=headers))
        .json()[0]["name"]
        .startswith("vpc-1")
    )
    assert error(await client.get(f"{PATH}/bad", headers=headers)) == (400, "Invalid VPC ID in URL")
    assert error(await client.get(f"{PATH}/{unknown}", headers=headers)) == (
        404,
        "Could not find VPC with specified ID",
    )
    assert error(await client.get(f"{PATH}/{theirs.id}", headers=headers)) == (
        403,
        "VPC does not belong to current Tenant",
    )
    nobody = bearer(settings, "nobody-org")
    assert error(await client.get("/v2/org/nobody-org/nico/vpc", headers=nobody)) == (
        403,
        "Org does not have a Tenant associated",
    )

    before = await fingerprint(session)
    assert error(await client.delete(f"{PATH}/{world.vpc.id}", headers=headers)) == (
        400,
        "Cannot delete VPC, one or more Subnets exist for this VPC",
    )
    assert error(await client.delete(f"{PATH}/{theirs.id}", headers=headers)) == (
        400,
        "VPC does not belong to current Tenant",
    )
    assert error(await client.delete(f"{PATH}/bad", headers=headers)) == (400, "Invalid VPC ID in URL")
    assert await fingerprint(session) == before
    # An instance in a VPC without subnets of its own (its interface is on another VPC's subnet).
    lonely = await f.vpc(session, world.tenant, world.site, name="lonely")
    inst = Instance(tenant_id=world.tenant.id, site_id=world.site.id, vpc_id=lonely.id, name="odd")
    session.add(inst)
    await session.flush()
    session.add(InstanceInterface(instance_id=inst.id, subnet_id=world.subnet.id))
    await session.commit()
    assert error(await client.delete(f"{PATH}/{lonely.id}", headers=headers)) == (
        400,
        "Cannot delete VPC, one or more instances for this VPC",
    )
    empty = (await client.post(PATH, json=vpc_body(world, name="empty"), headers=headers)).json()
    response = await client.delete(f"{PATH}/{empty['id']}", headers=headers)
    assert response.status_code == 202 and response.text == "Deletion request was accepted"
    assert (await client.get(f"{PATH}/{empty['id']}", headers=headers)).status_code == 404
