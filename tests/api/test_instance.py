"""``POST/GET /instance``: the checks of spec §5.2-§5.5 in order, NVLink rules, placement, the
Instance wire format, list filters and pagination, isolation, bad input that changes nothing."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.enums import LogicalPartitionStatus, MachineStatus, SubnetStatus, VpcStatus
from nico.db.models import (
    AllocationConstraint,
    Instance,
    Machine,
    MachineCapability,
    NvlinkInterface,
    PhysicalPartition,
)
from nico.db.raw import driver_connection
from nico.instance.queries import placement_inputs
from tests.api.conftest import BASE, error, instance_body
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.state import fingerprint

PATH = f"{BASE}/instance"
INVALID = "Error validating Instance creation request data"
INSTANCE_KEYS = {
    "id",
    "name",
    "description",
    "controllerInstanceId",
    "tenantId",
    "infrastructureProviderId",
    "siteId",
    "instanceTypeId",
    "vpcId",
    "secondaryVpcIds",
    "machineId",
    "operatingSystemId",
    "ipxeScript",
    "alwaysBootWithCustomIpxe",
    "phoneHomeEnabled",
    "userData",
    "labels",
    "isUpdatePending",
    "serialConsoleUrl",
    "networkSecurityGroupId",
    "networkSecurityGroupPropagationDetails",
    "networkSecurityGroupInherited",
    "tpmEkCertificate",
    "status",
    "interfaces",
    "infinibandInterfaces",
    "dpuExtensionServiceDeployments",
    "nvLinkInterfaces",
    "nvLinkCliqueId",
    "sshKeyGroupIds",
    "sshKeyGroups",
    "statusHistory",
    "created",
    "updated",
    "deprecations",
}
MISMATCH = (
    "NVLink Logical Partition specified for NVLink Interface does not match NVLink Logical Partition of VPC"
)


async def lp(session: AsyncSession, world: f.NvlinkSite, name: str = "lp-1", **kw: Any) -> uuid.UUID:
    row = await f.logical_partition(session, world.tenant, world.site, name=name, **kw)
    await session.commit()
    return row.id


def items(partition: uuid.UUID, *indexes: int) -> list[dict[str, Any]]:
    return [{"nvLinkLogicalPartitionId": str(partition), "deviceInstance": i} for i in indexes]


async def test_create_wire_format(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await lp(session, world)
    body = instance_body(
        world, nvLinkInterfaces=items(partition, 2, 0), labels={"team": "ml"}, description="d"
    )
    response = await client.post(PATH, json=body, headers=headers)
    assert response.status_code == 201, response.text
    inst = response.json()
    assert set(inst) == INSTANCE_KEYS
    assert inst["status"] == "Pending"
    assert [(h["status"], h["message"]) for h in inst["statusHistory"]] == [
        ("Pending", "received instance creation request, pending")
    ]
    assert inst["controllerInstanceId"] == inst["id"]
    assert inst["infrastructureProviderId"] == str(world.provider.id)
    assert inst["machineId"] in {m.id for m in world.machines}
    assert (
        inst["labels"] == {"team": "ml"} and inst["secondaryVpcIds"] == [] and inst["sshKeyGroupIds"] is None
    )
    assert inst["deprecations"] == [
        {
            "attribute": "sshkeygroups",
            "replacedby": "sshKeyGroups",
            "effective": "2025-09-04T00:00:00Z",
            "notice": "\"'sshkeygroups' has been deprecated in favor of 'sshKeyGroups'. "
            'Please take action immediately"',
        }
    ]
    assert [i["isPhysical"] for i in inst["interfaces"]] == [True]  # the first is forced physical
    bindings = inst["nvLinkInterfaces"]
    assert [b["deviceInstance"] for b in bindings] == [2, 0]  # request order
    assert set(bindings[0]) == {
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
    assert all(
        b["status"] == "Pending" and b["nvLinkDomainId"] is None and b["gpuGuid"] is None for b in bindings
    )
    assert bindings[0]["nvLinklogicalPartitionId"] == str(partition)
    got = (await client.get(f"{PATH}/{inst['id']}", headers=headers)).json()
    assert got == inst


async def test_instance_on_a_machine_without_a_domain_is_ready_at_once(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    owner = await f.provider(session)
    site = await f.site(session, owner)
    itype = await f.instance_type(session, site, gpus=None)
    await f.rack(session, site, itype, index=0, trays=1, with_nvlink=False)
    who = await f.tenant(session, "tenant-org")
    await f.allocation(session, who, site, itype, 1)
    network = await f.vpc(session, who, site)
    net = await f.subnet(session, network)
    await session.commit()
    body = {
        "name": "plain",
        "instanceTypeId": str(itype.id),
        "vpcId": str(network.id),
        "ipxeScript": "x",
        "interfaces": [{"subnetId": str(net.id)}],
    }
    inst = (await client.post(PATH, json=body, headers=headers)).json()
    assert inst["status"] == "Ready" and inst["nvLinkInterfaces"] == []
    assert [h["status"] for h in inst["statusHistory"]] == ["Pending", "Ready"]


@pytest.mark.parametrize(
    ("change", "data"),
    [
        ({"name": None}, {"name": "must be at least 2 characters and maximum 256 characters"}),
        ({"description": "d" * 1025}, {"description": "maximum 1024 characters are allowed in description"}),
        (
            {"instanceTypeId": None},
            {"instanceTypeId": "either `instanceTypeId` or `machineId` must be specified"},
        ),
        (
            {"machineId": "m-1"},
            {
                "machineId": "only one of `instanceTypeId` or `machineId` can be specified in request, "
                + "not both"
            },
        ),
        ({"instanceTypeId": "zzz"}, {"instanceTypeId": "must be a valid UUID"}),
        ({"vpcId": "1234"}, {"vpcId": "must be a valid UUID"}),
        ({"interfaces": []}, {"interfaces": "at least one Interface must be specified"}),
        (
            {"ipxeScript": None},
            {"operatingSystemId": "either `operatingSystemId` or `ipxeScript` must be specified"},
        ),
        ({"ipxeScript": " "}, {"ipxeScript": "cannot be empty when `operatingSystemId` is not specified"}),
        ({"nvLinkInterfaces": [{"deviceInstance": 1}]}, {"nvLinkLogicalPartitionId": "a value is required"}),
        (
            {"nvLinkInterfaces": [{"nvLinkLogicalPartitionId": "x", "deviceInstance": 4}]},
            {
                "nvLinkLogicalPartitionId": "must be a valid UUID",
                "deviceInstance": "deviceInstance must be between 0 and 3",
            },
        ),
        (
            {"labels": {str(n): "v" for n in range(11)}},
            {"labels": "up to 10 key/value pairs can be specified in labels"},
        ),
        ({"sshKeyGroupIds": [str(uuid.uuid4())]}, {"sshKeyGroupIds": "is not supported by nico"}),
    ],
)
async def test_create_validation(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    change: dict[str, Any],
    data: dict[str, str],
) -> None:
    before = await fingerprint(session)
    response = await client.post(PATH, json=instance_body(world, **change), headers=headers)
    assert response.status_code == 400
    assert response.json() == {"source": "nico", "message": INVALID, "data": data}
    assert await fingerprint(session) == before


@pytest.mark.parametrize(
    "change",
    [
        {"name": 12},
        {"interfaces": "x"},
        {"labels": {"a": 1}},
        {"nvLinkInterfaces": [{"deviceInstance": "1"}]},
        {"phoneHomeEnabled": "true"},
    ],
)
async def test_wrong_json_types_are_400(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, change: dict[str, Any]
) -> None:
    response = await client.post(PATH, json=instance_body(world, **change), headers=headers)
    assert error(response) == (400, "Failed to parse request data, potentially invalid structure")


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
        assert error(response) == (status, message)
        assert await fingerprint(session) == before

    await check(
        instance_body(world),
        400,
        "Org does not have a Tenant associated",
        bearer(settings, "nobody-org"),
        "/v2/org/nobody-org/nico/instance",
    )
    await check(instance_body(world, tenantId=str(uuid.uuid4())), 400, "TenantID in request is not valid")
    other = await f.tenant(session, "other-org")
    other_vpc = await f.vpc(session, other, world.site, name="their-vpc")
    other_subnet = await f.subnet(session, other_vpc, name="their-subnet")
    await session.commit()
    await check(
        instance_body(world, tenantId=str(other.id)), 400, "TenantID in request does not match tenant in org"
    )
    await check(
        instance_body(world, vpcId=str(uuid.uuid4())),
        400,
        "Could not find VPC with ID specified in request data",
    )
    await check(
        instance_body(world, vpcId=str(other_vpc.id)), 400, "VPC specified in request is not owned by Tenant"
    )
    world.vpc.status = VpcStatus.PROVISIONING
    await session.commit()
    await check(instance_body(world), 400, "VPC specified in request data is not ready")
    world.vpc.status = VpcStatus.READY
    world.site.status = "Pending"
    await session.commit()
    await check(
        instance_body(world), 400, "The Site where this Instance is being created is not in Registered state"
    )
    world.site.status = "Registered"
    second_vpc = await f.vpc(session, world.tenant, world.site, name="vpc-2")
    elsewhere = await f.subnet(session, second_vpc, name="subnet-2")
    await session.commit()
    missing = uuid.uuid4()
    await check(
        instance_body(world, interfaces=[{"subnetId": str(missing)}]),
        400,
        f"Subnet: {missing} specified in request data is not found in DB",
    )
    await check(
        instance_body(world, interfaces=[{"subnetId": str(other_subnet.id)}]),
        400,
        f"Subnet: {other_subnet.id} specified in request is not owned by Tenant",
    )
    world.subnet.status = SubnetStatus.PENDING
    await session.commit()
    await check(
        instance_body(world),
        400,
        f"Subnet: {world.subnet.id} specified in request data is not in Ready state",
    )
    world.subnet.status = SubnetStatus.READY
    await session.commit()
    await check(
        instance_body(world, interfaces=[{"subnetId": str(elsewhere.id)}]),
        400,
        f"Subnet: {elsewhere.id} specified in request does not match with VPC",
    )
    first = (await client.post(PATH, json=instance_body(world, name="dup"), headers=headers)).json()
    before = await fingerprint(session)
    response = await client.post(PATH, json=instance_body(world, name="dup"), headers=headers)
    assert response.status_code == 409
    assert response.json()["message"] == "An Instance with specified name already exists for Tenant"
    assert response.json()["data"] == {"id": first["id"]}
    assert await fingerprint(session) == before
    await check(
        instance_body(world, instanceTypeId=str(uuid.uuid4())),
        400,
        "Could not find Instance Type with ID specified in request data",
    )
    unallocated = await f.instance_type(session, world.site, name="unallocated")
    await session.commit()
    await check(
        instance_body(world, instanceTypeId=str(unallocated.id)),
        403,
        "Tenant does not have any Allocations for Site and Instance Type specified in request data",
    )


async def test_quota_and_capacity(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=1, trays=3, quota=2)
    await session.commit()
    for n in range(2):
        assert (
            await client.post(PATH, json=instance_body(world, name=f"q-{n}"), headers=headers)
        ).status_code == 201
    before = await fingerprint(session)
    response = await client.post(PATH, json=instance_body(world, name="q-2"), headers=headers)
    assert error(response) == (
        403,
        "Tenant has reached the maximum number of Instances for Instance Type specified in request data",
    )
    assert await fingerprint(session) == before
    await session.execute(update(AllocationConstraint).values(constraint_value=5))
    await session.execute(
        update(Machine).where(Machine.instance_id.is_(None)).values(status=MachineStatus.MAINTENANCE)
    )
    await session.commit()
    before = await fingerprint(session)
    response = await client.post(PATH, json=instance_body(world, name="q-2"), headers=headers)
    assert error(response) == (409, "No Machines are available for specified Instance Type")
    assert await fingerprint(session) == before


async def test_nvlink_rules_on_create(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await lp(session, world)
    other = await f.tenant(session, "other-org")
    theirs = await f.logical_partition(session, other, world.site, name="theirs")
    far_site = await f.site(session, world.provider, name="far")
    far = await f.logical_partition(session, world.tenant, far_site, name="far")
    pending = await lp(session, world, name="pending", status=LogicalPartitionStatus.PENDING)
    cpu_type = await f.instance_type(session, world.site, name="cpu", gpus=None)
    await f.rack(session, world.site, cpu_type, index=9, trays=1)
    await f.allocation(session, world.tenant, world.site, cpu_type, 1)
    await session.commit()
    unknown = uuid.uuid4()
    cases = [
        (
            {"instanceTypeId": str(cpu_type.id), "nvLinkInterfaces": items(partition, 0)},
            None,
            "NVLink Interfaces cannot be specified if Instance Type doesn't have NVLink GPU Capability",
        ),
        (
            {"nvLinkInterfaces": items(partition, 1, 1)},
            "duplicate deviceInstance: 1 specified in NVLink Interfaces",
            None,
        ),
        (
            {"nvLinkInterfaces": items(unknown, 0)},
            None,
            f"Could not find NVLink Logical Partition with ID: {unknown} specified in request data",
        ),
        (
            {"nvLinkInterfaces": items(far.id, 0)},
            None,
            f"NVLink Logical Partition: {far.id} specified in request does not match with Instance Site",
        ),
        (
            {"nvLinkInterfaces": items(theirs.id, 0)},
            None,
            f"NVLink Logical Partition: {theirs.id} specified in request data is not owned by Tenant",
        ),
        (
            {"nvLinkInterfaces": items(pending, 0)},
            None,
            f"NVLink Logical Partition: {pending} specified in request data is not in Ready state",
        ),
    ]
    for change, data, message in cases:
        before = await fingerprint(session)
        response = await client.post(PATH, json=instance_body(world, **change), headers=headers)
        if data is not None:
            assert response.status_code == 400
            assert response.json() == {
                "source": "nico",
                "message": "Failed to validate NVLink interfaces specified in request data",
                "data": {"nvLinkInterfaces": data},
            }
        else:
            assert error(response) == (400, message), change
        assert await fingerprint(session) == before


async def test_vpc_default_partition_rules(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    default = await lp(session, world, name="default")
    other = await lp(session, world, name="other")
    world.vpc.nvlink_logical_partition_id = default
    await session.commit()
    unknown = uuid.uuid4()
    response = await client.post(
        PATH, json=instance_body(world, nvLinkInterfaces=items(unknown, 0)), headers=headers
    )
    assert error(response) == (
        400,
        f"Could not find NVLink Logical Partition with ID: {unknown} specified in request data",
    )
    response = await client.post(
        PATH, json=instance_body(world, nvLinkInterfaces=items(other, 0)), headers=headers
    )
    assert error(response) == (400, MISMATCH)
    explicit = await client.post(
        PATH,
        json=instance_body(world, name="explicit", nvLinkInterfaces=items(default, 0, 1, 2)),
        headers=headers,
    )
    assert explicit.status_code == 201 and len(explicit.json()["nvLinkInterfaces"]) == 3
    auto = (await client.post(PATH, json=instance_body(world, name="auto"), headers=headers)).json()
    assert [(b["deviceInstance"], b["nvLinklogicalPartitionId"]) for b in auto["nvLinkInterfaces"]] == [
        (i, str(default)) for i in range(4)
    ]
    device = await session.scalar(
        select(NvlinkInterface.device).where(NvlinkInterface.instance_id == uuid.UUID(auto["id"])).limit(1)
    )
    assert device == "NVIDIA GB200"


async def test_placement_prefers_the_partitions_domain_then_best_fit(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    domain_of = {m.id: m.domain_uuid for m in world.machines}
    partition = await lp(session, world)
    first = (
        await client.post(
            PATH,
            json=instance_body(world, name="inst-a", nvLinkInterfaces=items(partition, 0)),
            headers=headers,
        )
    ).json()
    assert "machineId" in first, first
    home = domain_of[first["machineId"]]
    # The partition's domain is preferred even before the reconciler built its physical partition.
    for n in range(3):
        inst = (
            await client.post(
                PATH,
                json=instance_body(world, name=f"inst-b{n}", nvLinkInterfaces=items(partition, 0)),
                headers=headers,
            )
        ).json()
        assert domain_of[inst["machineId"]] == home
    # The home domain is now full; a physical partition elsewhere pulls the next one there.
    away = next(d for d in world.domains if d != home)
    session.add(
        PhysicalPartition(
            logical_partition_id=partition, domain_uuid=away, nmx_partition_id=1, fabric_ref="1", name="pp"
        )
    )
    await session.commit()
    inst = (
        await client.post(
            PATH,
            json=instance_body(world, name="inst-c", nvLinkInterfaces=items(partition, 0)),
            headers=headers,
        )
    ).json()
    assert domain_of[inst["machineId"]] == away


async def partition_facts(
    session: AsyncSession, world: f.NvlinkSite, ids: set[uuid.UUID]
) -> tuple[frozenset[uuid.UUID], dict[uuid.UUID, int]]:
    """Where placement finds the logical partitions, and their multicast groups limits."""
    conn = await driver_connection(session)
    found = await placement_inputs(
        conn, world.site.id, world.instance_type.id, ids, budgets=False, per_kind=None
    )
    return found.lp_domains, found.limits


async def test_bindings_record_their_machine_s_domain_where_placement_finds_their_partition(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    """A binding made by a create or by a PATCH carries its machine's domain (migration 0012); the
    API's ``nvLinkDomainId`` stays null until the fabric holds it. Placement finds where a partition
    is about to be from those domains: a partition a PATCH moved onto an instance is present in that
    instance's domain, and only there."""
    domain_of = {m.id: m.domain_uuid for m in world.machines}
    first, second = await lp(session, world, "first"), await lp(session, world, "second")
    made = (
        await client.post(
            PATH, json=instance_body(world, name="made", nvLinkInterfaces=items(first, 0, 1)), headers=headers
        )
    ).json()
    home = domain_of[made["machineId"]]
    assert [b["nvLinkDomainId"] for b in made["nvLinkInterfaces"]] == [None, None]
    assert await partition_facts(session, world, {first}) == (frozenset({home}), {first: 16})
    assert (await partition_facts(session, world, {second}))[0] == frozenset()

    patched = await client.patch(
        f"{PATH}/{made['id']}", json={"nvLinkInterfaces": items(second, 0)}, headers=headers
    )

    assert patched.status_code == 200, patched.text
    placed = await session.scalars(
        select(NvlinkInterface.placed_domain_uuid).where(
            NvlinkInterface.instance_id == uuid.UUID(made["id"]),
            NvlinkInterface.logical_partition_id == second,
        )
    )
    assert list(placed) == [home]
    assert (await partition_facts(session, world, {second}))[0] == frozenset({home})
    assert (await partition_facts(session, world, {first}))[0] == frozenset()  # Deleting now


async def test_best_fit_keeps_whole_domains_free(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=3, trays=4)
    await session.commit()
    domain_of = {m.id: m.domain_uuid for m in world.machines}
    used = set()
    for n in range(4):
        inst = (await client.post(PATH, json=instance_body(world, name=f"i{n}"), headers=headers)).json()
        used.add(domain_of[inst["machineId"]])
    assert len(used) == 1  # four singles fill one rack instead of touching three


async def test_get_checks(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    assert error(await client.get(f"{PATH}/nope", headers=headers)) == (400, "Invalid Instance ID in URL")
    assert error(await client.get(f"{PATH}/{uuid.uuid4()}", headers=headers)) == (
        404,
        "Could not find Instance with specified ID",
    )
    inst = (await client.post(PATH, json=instance_body(world), headers=headers)).json()
    nobody = bearer(settings, "nobody-org")
    assert error(await client.get(f"/v2/org/nobody-org/nico/instance/{inst['id']}", headers=nobody)) == (
        403,
        "Org does not have a Tenant associated",
    )
    await f.tenant(session, "other-org")
    await session.commit()
    other = bearer(settings, "other-org")
    assert error(await client.get(f"/v2/org/other-org/nico/instance/{inst['id']}", headers=other)) == (
        403,
        "Instance does not belong to current Tenant",
    )
    with_machine = await client.get(
        f"{PATH}/{inst['id']}", params={"includeRelation": "Machine"}, headers=headers
    )
    machine = with_machine.json()["machine"]
    assert machine["id"] == inst["machineId"] and machine["instanceId"] == inst["id"]
    assert machine["serialNumber"] is None and "nvLinkInfo" not in machine  # tenant view
    assert "machine" not in (await client.get(f"{PATH}/{inst['id']}", headers=headers)).json()
    assert error(
        await client.get(f"{PATH}/{inst['id']}", params={"includeRelation": "VPC"}, headers=headers)
    ) == (
        400,
        "Invalid includeRelation value in query: VPC",
    )
    params = [
        ("includeRelation", r) for r in ("Site", "Tenant", "InfrastructureProvider", "InstanceType", "Vpc")
    ]
    full = (await client.get(f"{PATH}/{inst['id']}", params=params, headers=headers)).json()
    assert full["site"]["id"] == str(world.site.id)
    assert full["tenant"]["org"] == "tenant-org"
    assert full["infrastructureProvider"]["org"] == "provider-org"
    assert full["instanceType"]["id"] == str(world.instance_type.id)
    assert full["vpc"] == {
        "id": str(world.vpc.id),
        "name": "vpc-1",
        "controllerVpcId": str(world.vpc.id),
        "networkVirtualizationType": "ETHERNET_VIRTUALIZER",
        "status": "Ready",
    }


async def test_list_filters_order_and_pagination(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    ids = []
    for n in range(8):
        inst = (await client.post(PATH, json=instance_body(world, name=f"inst-{n}"), headers=headers)).json()
        ids.append(inst["id"])
    response = await client.get(PATH, params={"pageSize": 3, "pageNumber": 2}, headers=headers)
    assert [i["id"] for i in response.json()] == ids[3:6]
    assert json.loads(response.headers["X-Pagination"]) == {
        "pageNumber": 2,
        "pageSize": 3,
        "total": 8,
        "orderBy": None,
    }
    desc = await client.get(PATH, params={"orderBy": "NAME_DESC"}, headers=headers)
    assert [i["name"] for i in desc.json()] == [f"inst-{n}" for n in range(7, -1, -1)]
    by_machine = (await client.get(PATH, params={"orderBy": "MACHINE_ID_ASC"}, headers=headers)).json()
    assert [i["machineId"] for i in by_machine] == sorted(i["machineId"] for i in by_machine)
    one = (await client.get(f"{PATH}/{ids[0]}", headers=headers)).json()
    assert [
        i["id"]
        for i in (await client.get(PATH, params={"machineId": one["machineId"]}, headers=headers)).json()
    ] == [ids[0]]
    assert len((await client.get(PATH, params={"vpcId": str(world.vpc.id)}, headers=headers)).json()) == 8
    assert (
        len(
            (
                await client.get(PATH, params=[("status", "Pending"), ("status", "Ready")], headers=headers)
            ).json()
        )
        == 8
    )
    assert (await client.get(PATH, params={"name": "inst-3"}, headers=headers)).json()[0]["id"] == ids[3]
    assert len((await client.get(PATH, params={"query": "INST-"}, headers=headers)).json()) == 8
    assert (await client.get(PATH, params={"ipAddress": "10.0.0.1"}, headers=headers)).json() == []
    unknown = uuid.uuid4()
    assert error(await client.get(PATH, params={"vpcId": str(unknown)}, headers=headers)) == (
        404,
        f"Could not find VPC with ID {unknown} specified in query",
    )
    assert error(await client.get(PATH, params={"status": "Nope"}, headers=headers)) == (
        400,
        "Invalid Status value in query",
    )
    foreign = await f.site(session, world.provider, name="foreign")
    await session.commit()
    assert error(await client.get(PATH, params={"siteId": str(foreign.id)}, headers=headers)) == (
        403,
        "Tenant is not associated with one or more of the Sites specified in query",
    )
    assert error(await client.get(PATH, params={"orderBy": "BOGUS_ASC"}, headers=headers))[0] == 400


async def test_list_shows_every_nvlink_row(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await lp(session, world)
    for n in range(7):
        body = instance_body(world, name=f"i{n}", nvLinkInterfaces=items(partition, 0, 1, 2, 3))
        assert (await client.post(PATH, json=body, headers=headers)).status_code == 201
    listed = (await client.get(PATH, headers=headers)).json()
    assert sum(len(i["nvLinkInterfaces"]) for i in listed) == 28  # the reference truncates at 20


async def test_other_orgs_instances_are_invisible(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    mine = (await client.post(PATH, json=instance_body(world), headers=headers)).json()
    other = await f.tenant(session, "other-org")
    await f.allocation(session, other, world.site, world.instance_type, 2)
    await session.commit()
    theirs = bearer(settings, "other-org")
    base = "/v2/org/other-org/nico/instance"
    assert (await client.get(base, headers=theirs)).json() == []
    before = await fingerprint(session)
    assert (
        await client.patch(f"{base}/{mine['id']}", json={"name": "stolen"}, headers=theirs)
    ).status_code == 403
    assert (await client.delete(f"{base}/{mine['id']}", headers=theirs)).status_code == 403
    # Their instance may not use our VPC.
    response = await client.post(base, json=instance_body(world, name="theirs"), headers=theirs)
    assert error(response) == (400, "VPC specified in request is not owned by Tenant")
    assert await fingerprint(session) == before
    assert await session.scalar(select(func.count()).select_from(Instance)) == 1


async def test_targeted_creation(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    body = instance_body(world, instanceTypeId=None, machineId=world.machines[0].id)
    assert error(await client.post(PATH, json=body, headers=headers))[0] == 403
    world.tenant.targeted_instance_creation = True
    await session.commit()
    inst = await client.post(PATH, json=body, headers=headers)
    assert inst.status_code == 201 and inst.json()["machineId"] == world.machines[0].id
    assert inst.json()["instanceTypeId"] is None
    again = await client.post(
        PATH,
        json=instance_body(world, name="again", instanceTypeId=None, machineId=world.machines[0].id),
        headers=headers,
    )
    assert error(again) == (400, "Machine specified in request data is not available for Instance creation")
    # Machine capabilities are the fallback when there is no instance type.
    session.add(
        MachineCapability(
            machine_id=world.machines[1].id, type="GPU", name="NVIDIA GB200", count=4, device_type="NVLink"
        )
    )
    partition = await lp(session, world)
    body = instance_body(
        world,
        name="t2",
        instanceTypeId=None,
        machineId=world.machines[1].id,
        nvLinkInterfaces=items(partition, 3),
    )
    assert (await client.post(PATH, json=body, headers=headers)).status_code == 201
    assert (
        await session.scalar(select(Machine.instance_id).where(Machine.id == world.machines[1].id))
        is not None
    )


async def test_a_create_takes_the_session_s_driver_connection_once(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The create's service sends its statements (context, claim, insert) on the driver connection
    it took from the session once: each time from the session costs more CPU than a statement's
    sending (every module of the instance package that takes one is counted)."""
    taken: list[str] = []
    for name, module in list(sys.modules.items()):
        real = getattr(module, "driver_connection", None)
        if name.startswith("nico.instance.") and real is not None:

            async def counted(holder: object, _real: Any = real, _name: str = name) -> Any:
                taken.append(_name)
                return await _real(holder)

            monkeypatch.setattr(module, "driver_connection", counted)
    lp = await f.logical_partition(session, world.tenant, world.site, name="lp-once")
    await session.commit()
    body = instance_body(world, name="once", nvLinkInterfaces=[{"nvLinkLogicalPartitionId": str(lp.id)}])
    created = await client.post(PATH, json=body, headers=headers)
    assert created.status_code == 201, created.text
    assert taken == ["nico.instance.creation"]
