"""Single-domain logical partitions and reservations through the API: the 409s and their words, the
PATCH rules, reserved machines taken first by their partition and by nobody else, and freed when the
reservation shrinks, is cleared or its partition is deleted."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from prometheus_client import CollectorRegistry
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.models import Instance, Machine, MachineCapability
from nico.reconciler.figures import Figures
from nico.reconciler.metrics import ReconcilerMetrics
from tests.api.conftest import BASE, batch_body, error, instance_body
from tests.support import factories as f
from tests.support.auth import bearer

PATH = f"{BASE}/nvlink-logical-partition"


async def new_partition(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, name: str, **extra: Any
) -> dict[str, Any]:
    response = await client.post(
        PATH, json={"name": name, "siteId": str(world.site.id), **extra}, headers=headers
    )
    assert response.status_code == 201, response.text
    return response.json()


def gpus_in(lp: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"nvLinkLogicalPartitionId": lp["id"], "deviceInstance": d} for d in range(4)]


async def instance_in(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, lp: dict[str, Any], name: str
) -> httpx.Response:
    body = instance_body(world, name=name, nvLinkInterfaces=gpus_in(lp))
    return await client.post(f"{BASE}/instance", json=body, headers=headers)


async def machine_of(session: AsyncSession, instance_id: str) -> Machine:
    machine = await session.scalar(
        select(Machine)
        .where(Machine.instance_id == uuid.UUID(instance_id))
        .execution_options(populate_existing=True)
    )
    assert machine is not None
    return machine


async def reserved_to(session: AsyncSession, lp_id: str) -> list[Machine]:
    rows = await session.scalars(
        select(Machine)
        .where(Machine.reserved_lp_id == uuid.UUID(lp_id))
        .order_by(Machine.id)
        .execution_options(populate_existing=True)
    )
    return list(rows)


async def other_tenant(session: AsyncSession, world: f.NvlinkSite, org: str = "other-org") -> f.NvlinkSite:
    who = await f.tenant(session, org)
    alloc = await f.allocation(session, who, world.site, world.instance_type, len(world.machines))
    network = await f.vpc(session, who, world.site, name=f"vpc-{org}")
    net = await f.subnet(session, network, name=f"subnet-{org}")
    await session.commit()
    return f.NvlinkSite(
        world.provider,
        world.site,
        world.instance_type,
        who,
        alloc,
        network,
        net,
        world.machines,
        world.domains,
    )


async def fill(client: httpx.AsyncClient, settings: Settings, who: f.NvlinkSite, count: int) -> list[str]:
    """``count`` plain instances of another tenant, one by one; the machine ids they got."""
    headers = bearer(settings, who.tenant.org)
    got = []
    for n in range(count):
        response = await client.post(
            f"/v2/org/{who.tenant.org}/nico/instance",
            json=instance_body(who, name=f"fill-{n}"),
            headers=headers,
        )
        assert response.status_code == 201, response.text
        got.append(response.json()["machineId"])
    return got


# ---- singleNvLinkDomain ---------------------------------------------------------------------------


async def test_the_fields_default_to_the_references_behaviour(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    lp = await new_partition(client, headers, world, "plain")
    assert lp["singleNvLinkDomain"] is False
    assert lp["nvLinkDomainIds"] == []
    assert "reservation" not in lp
    response = await instance_in(client, headers, world, lp, "first")
    assert response.status_code == 201
    home = (await machine_of(session, response.json()["id"])).domain_uuid
    shown = (await client.get(f"{PATH}/{lp['id']}", headers=headers)).json()
    assert shown["nvLinkDomainIds"] == [str(home)]


async def test_a_single_domain_partition_refuses_a_second_domain_and_changes_nothing(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
) -> None:
    lp = await new_partition(client, headers, world, "one-rack", singleNvLinkDomain=True)
    assert lp["singleNvLinkDomain"] is True
    first = await instance_in(client, headers, world, lp, "first")
    assert first.status_code == 201, first.text
    home = (await machine_of(session, first.json()["id"])).domain_uuid
    # Another tenant takes all but one tray of the partition's rack (and none elsewhere: best fit).
    other = await other_tenant(session, world)
    await fill(client, settings, other, 2)
    second = await instance_in(client, headers, world, lp, "second")
    assert second.status_code == 201, second.text
    assert (await machine_of(session, second.json()["id"])).domain_uuid == home
    instances = await session.scalar(select(func.count()).select_from(Instance))
    third = await instance_in(client, headers, world, lp, "third")
    assert error(third) == (
        409,
        f"NVLink Logical Partition 'one-rack' ({lp['id']}) is limited to one NVLink domain "
        f"(singleNvLinkDomain) and is in NVLink domain {home}, which has 0 free Machines of the Instance "
        "Type left; 1 requested",
    )
    assert await session.scalar(select(func.count()).select_from(Instance)) == instances
    shown = (await client.get(f"{PATH}/{lp['id']}", headers=headers)).json()
    assert shown["nvLinkDomainIds"] == [str(home)]
    # A partition without the flag spills over, as the reference does.
    plain = await new_partition(client, headers, world, "spills")
    for n in range(2):
        assert (await instance_in(client, headers, world, plain, f"spill-{n}")).status_code == 201


async def test_a_batch_for_an_empty_single_domain_partition_needs_one_domain(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    lp = await new_partition(client, headers, world, "one-rack", singleNvLinkDomain=True)
    body = batch_body(world, count=5, topologyOptimized=False, nvLinkInterfaces=gpus_in(lp))
    response = await client.post(f"{BASE}/instance/batch", json=body, headers=headers)
    assert error(response) == (
        409,
        f"NVLink Logical Partition 'one-rack' ({lp['id']}) is limited to one NVLink domain "
        "(singleNvLinkDomain), and no NVLink domain has the 5 free Machines of the Instance Type "
        "requested: the best has 4",
    )
    response = await client.post(f"{BASE}/instance/batch", json={**body, "count": 4}, headers=headers)
    assert response.status_code == 201, response.text
    assert len({i["machineId"].split("-t")[0] for i in response.json()}) == 1


async def test_patch_sets_the_flag_only_on_a_partition_in_at_most_one_domain(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    lp = await new_partition(client, headers, world, "grows")
    for n in range(5):  # four trays per rack: the fifth spills into the second rack
        assert (await instance_in(client, headers, world, lp, f"n-{n}")).status_code == 201
    response = await client.patch(f"{PATH}/{lp['id']}", json={"singleNvLinkDomain": True}, headers=headers)
    status, message = error(response)
    assert status == 409
    assert message.startswith(f"NVLink Logical Partition 'grows' ({lp['id']}) is in 2 NVLink domains (")
    assert message.endswith("): singleNvLinkDomain can only be set on a partition in at most one")
    shown = (await client.get(f"{PATH}/{lp['id']}", headers=headers)).json()
    assert shown["singleNvLinkDomain"] is False
    assert sorted(shown["nvLinkDomainIds"]) == sorted(str(d) for d in world.domains)
    one = await new_partition(client, headers, world, "stays")
    assert (await instance_in(client, headers, world, one, "s-0")).status_code == 201
    response = await client.patch(f"{PATH}/{one['id']}", json={"singleNvLinkDomain": True}, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["singleNvLinkDomain"] is True
    response = await client.patch(f"{PATH}/{one['id']}", json={"singleNvLinkDomain": False}, headers=headers)
    assert response.json()["singleNvLinkDomain"] is False


async def test_an_instance_update_cannot_bring_gpus_of_another_domain(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    lp = await new_partition(client, headers, world, "one-rack", singleNvLinkDomain=True)
    assert (await instance_in(client, headers, world, lp, "member")).status_code == 201
    home = (await domains_of(client, headers, lp))[0]
    outsiders = []
    for n in range(4):  # plain instances fill the first rack, then go to the second
        response = await client.post(
            f"{BASE}/instance", json=instance_body(world, name=f"x-{n}"), headers=headers
        )
        assert response.status_code == 201
        outsiders.append(response.json()["id"])
    elsewhere = [i for i in outsiders if (await machine_of(session, i)).domain_uuid != uuid.UUID(home)]
    assert elsewhere
    response = await client.patch(
        f"{BASE}/instance/{elsewhere[0]}", json={"nvLinkInterfaces": gpus_in(lp)}, headers=headers
    )
    status, message = error(response)
    assert status == 409
    assert message.startswith(
        f"NVLink Logical Partition 'one-rack' ({lp['id']}) is limited to one NVLink domain "
        f"(singleNvLinkDomain) and is in NVLink domain {home}, which has "
    )
    assert message.endswith(
        f"the Instance's Machine is in NVLink domain {(await machine_of(session, elsewhere[0])).domain_uuid}"
    )
    same = [i for i in outsiders if i not in elsewhere]
    response = await client.patch(
        f"{BASE}/instance/{same[0]}", json={"nvLinkInterfaces": gpus_in(lp)}, headers=headers
    )
    assert response.status_code == 200, response.text


async def domains_of(client: httpx.AsyncClient, headers: dict[str, str], lp: dict[str, Any]) -> list[str]:
    return list((await client.get(f"{PATH}/{lp['id']}", headers=headers)).json()["nvLinkDomainIds"])


# ---- reservations -----------------------------------------------------------------------------------


async def test_a_reservation_holds_machines_nobody_else_takes(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
) -> None:
    reservation = {"instanceTypeId": str(world.instance_type.id), "count": 3}
    lp = await new_partition(client, headers, world, "room", reservation=reservation)
    held = await reserved_to(session, lp["id"])
    assert len(held) == 3 and len({m.domain_uuid for m in held}) == 1
    assert lp["reservation"] == {
        "instanceTypeId": str(world.instance_type.id),
        "count": 3,
        "nvLinkDomainId": str(held[0].domain_uuid),
        "available": 3,
    }
    other = await other_tenant(session, world)
    taken = await fill(client, settings, other, len(world.machines) - 3)
    assert not set(taken) & {m.id for m in held}
    response = await client.post(
        f"/v2/org/{other.tenant.org}/nico/instance",
        json=instance_body(other, name="one-too-many"),
        headers=bearer(settings, other.tenant.org),
    )
    assert response.status_code == 409
    # The tenant's own instances outside the partition do not take them either.
    response = await client.post(f"{BASE}/instance", json=instance_body(world, name="mine"), headers=headers)
    assert response.status_code == 409
    # The partition's instances take them, and what is left shows.
    for n in range(3):
        response = await instance_in(client, headers, world, lp, f"joins-{n}")
        assert response.status_code == 201, response.text
        assert response.json()["machineId"] in {m.id for m in held}
    shown = (await client.get(f"{PATH}/{lp['id']}", params={"includeStats": "true"}, headers=headers)).json()
    assert shown["reservation"]["available"] == 0 and shown["reservation"]["count"] == 3
    assert "totalReservedMachines" not in shown["nvLinkLogicalPartitionStats"]


async def test_the_partitions_new_instances_use_the_reservation_first(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    plain = await new_partition(client, headers, world, "elsewhere")
    assert (await instance_in(client, headers, world, plain, "fragment")).status_code == 201
    # Best fit would put a new partition's first instance beside the fragment; the reservation is
    # in the untouched rack (best fit for 4 machines), and the instance goes there.
    reservation = {"instanceTypeId": str(world.instance_type.id), "count": 4}
    lp = await new_partition(client, headers, world, "room", reservation=reservation)
    held = {m.id for m in await reserved_to(session, lp["id"])}
    response = await instance_in(client, headers, world, lp, "joins")
    assert response.json()["machineId"] in held
    shown = (await client.get(f"{PATH}/{lp['id']}", params={"includeStats": "true"}, headers=headers)).json()
    assert shown["reservation"]["available"] == 3
    assert shown["nvLinkLogicalPartitionStats"]["totalReservedMachines"] == 3


async def test_a_reservation_that_cannot_be_met_is_a_409_naming_the_best_domain(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    assert (
        await client.post(f"{BASE}/instance", json=instance_body(world, name="xx"), headers=headers)
    ).status_code == 201
    reservation = {"instanceTypeId": str(world.instance_type.id), "count": 5}
    response = await client.post(
        PATH,
        json={"name": "too-big", "siteId": str(world.site.id), "reservation": reservation},
        headers=headers,
    )
    assert error(response) == (
        409,
        f"Failed to reserve 5 Machines of Instance Type {world.instance_type.id} for NVLink Logical "
        "Partition 'too-big': the best NVLink domain has 4 free",
    )
    listed = (await client.get(PATH, headers=headers)).json()
    assert listed == []  # nothing was created
    assert await session.scalar(select(func.count()).where(Machine.reserved_lp_id.is_not(None))) == 0
    # A partition in a domain reserves there only.
    lp = await new_partition(client, headers, world, "placed")
    member = await instance_in(client, headers, world, lp, "member")
    home = (await machine_of(session, member.json()["id"])).domain_uuid
    response = await client.patch(
        f"{PATH}/{lp['id']}", json={"reservation": {**reservation, "count": 4}}, headers=headers
    )
    assert error(response) == (
        409,
        f"Failed to reserve 4 Machines of Instance Type {world.instance_type.id} for NVLink Logical "
        "Partition 'placed': the best NVLink domain of the partition has 2 free",
    )
    response = await client.patch(
        f"{PATH}/{lp['id']}", json={"reservation": {**reservation, "count": 2}}, headers=headers
    )
    assert response.status_code == 200, response.text
    assert response.json()["reservation"]["nvLinkDomainId"] == str(home)


async def test_reserved_machines_count_against_the_allocation(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=2, trays=4, quota=3)
    await session.commit()
    reservation = {"instanceTypeId": str(world.instance_type.id), "count": 2}
    lp = await new_partition(client, headers, world, "room", reservation=reservation)
    assert (
        await client.post(f"{BASE}/instance", json=instance_body(world, name="aa"), headers=headers)
    ).status_code == 201
    response = await client.post(f"{BASE}/instance", json=instance_body(world, name="bb"), headers=headers)
    assert error(response) == (
        403,
        "Tenant has reached the maximum number of Instances for Instance Type specified in request data",
    )
    # The partition's own instances fit: they take what is reserved.
    assert (await instance_in(client, headers, world, lp, "joins")).status_code == 201
    response = await client.patch(
        f"{PATH}/{lp['id']}", json={"reservation": {**reservation, "count": 3}}, headers=headers
    )
    assert error(response) == (
        403,
        "Tenant has reached the maximum number of Instances for Instance Type. "
        "Current: 3, Requested: 1, Max: 3",
    )
    assert len(await reserved_to(session, lp["id"])) == 2


async def test_shrinking_clearing_and_deleting_free_the_machines(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    reservation = {"instanceTypeId": str(world.instance_type.id), "count": 3}
    lp = await new_partition(client, headers, world, "room", reservation=reservation)
    response = await client.patch(
        f"{PATH}/{lp['id']}", json={"reservation": {**reservation, "count": 1}}, headers=headers
    )
    assert response.status_code == 200 and response.json()["reservation"]["count"] == 1
    assert len(await reserved_to(session, lp["id"])) == 1
    response = await client.patch(f"{PATH}/{lp['id']}", json={"name": "renamed"}, headers=headers)
    assert response.json()["reservation"]["count"] == 1  # absent: left as it is
    response = await client.patch(f"{PATH}/{lp['id']}", json={"reservation": None}, headers=headers)
    assert response.status_code == 200 and "reservation" not in response.json()
    assert await reserved_to(session, lp["id"]) == []
    response = await client.patch(f"{PATH}/{lp['id']}", json={"reservation": reservation}, headers=headers)
    assert len(await reserved_to(session, lp["id"])) == 3
    assert (await client.delete(f"{PATH}/{lp['id']}", headers=headers)).status_code == 202
    assert await session.scalar(select(func.count()).where(Machine.reserved_lp_id.is_not(None))) == 0
    # Every machine is free for anyone again.
    for n in range(len(world.machines)):
        response = await client.post(
            f"{BASE}/instance", json=instance_body(world, name=f"n-{n}"), headers=headers
        )
        assert response.status_code == 201, response.text


async def test_a_bad_reservation_is_a_400(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    response = await client.post(
        PATH,
        json={
            "name": "bad",
            "siteId": str(world.site.id),
            "reservation": {"instanceTypeId": "x", "count": 1},
        },
        headers=headers,
    )
    assert response.status_code == 400
    assert response.json()["data"] == {"reservation": "instanceTypeId must be a valid UUID"}
    response = await client.post(
        PATH,
        json={
            "name": "bad",
            "siteId": str(world.site.id),
            "reservation": {"instanceTypeId": str(uuid.uuid4()), "count": 1},
        },
        headers=headers,
    )
    assert response.status_code == 400
    assert "was not found at the NVLink Logical Partition's Site" in response.json()["message"]


async def test_the_gauges_count_reserved_machines_as_their_own_class(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    registry = CollectorRegistry()
    metrics = ReconcilerMetrics(registry, "nmxc", hold_seconds=3600)
    figures = Figures(session.bind, metrics)  # type: ignore[arg-type]
    reservation = {"instanceTypeId": str(world.instance_type.id), "count": 2}
    await new_partition(client, headers, world, "room", reservation=reservation)
    await figures.everything()

    def gauge(name: str) -> float | None:
        return registry.get_sample_value(name)

    # 8 machines: 2 held in one rack, whose other 2 are stranded beside them; the other rack whole.
    assert gauge("nico_nvlink_reserved_machines") == 2
    assert gauge("nico_nvlink_free_machines") == 6
    assert gauge("nico_nvlink_stranded_free_machines") == 2
    assert gauge("nico_nvlink_fragmentation_ratio") == 2 / 6


async def test_the_providers_stats_count_reserved_machines_as_their_own_class(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, settings: Settings
) -> None:
    provider = bearer(settings, "provider-org", "PROVIDER_ADMIN")
    params = {"siteId": str(world.site.id)}
    stats_path = "/v2/org/provider-org/nico/machine/instance-type/stats"
    before = (await client.get(stats_path, params=params, headers=provider)).json()[0]
    assert "reserved" not in before["assignedMachineStats"]  # the reference's shape without reservations
    reservation = {"instanceTypeId": str(world.instance_type.id), "count": 3}
    lp = await new_partition(client, headers, world, "room", reservation=reservation)
    assert (await instance_in(client, headers, world, lp, "joins")).status_code == 201
    item = (await client.get(stats_path, params=params, headers=provider)).json()[0]
    assigned = item["assignedMachineStats"]
    assert (assigned["total"], assigned["ready"], assigned["inUse"], assigned["reserved"]) == (8, 5, 1, 2)
    [share] = item["tenants"]
    assert (share["usedMachineStats"]["inUse"], share["usedMachineStats"]["reserved"]) == (1, 2)
    assert share["usedMachineStats"]["total"] == 3


async def test_the_topology_marks_a_split_partition(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    split = await new_partition(client, headers, world, "grows")
    for n in range(5):  # four trays per rack: the fifth spills into the second rack
        assert (await instance_in(client, headers, world, split, f"n-{n}")).status_code == 201
    body = (await client.get(f"{BASE}/nvlink-topology", headers=headers)).json()
    [shown] = body["nvLinkLogicalPartitions"]
    assert shown["split"] is True
    assert sorted(shown["nvLinkDomainIds"]) == sorted(str(d) for d in world.domains)


async def test_a_targeted_create_honours_reservations_and_single_domain_partitions(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    world.tenant.targeted_instance_creation = True
    for machine in world.machines:
        session.add(
            MachineCapability(
                machine_id=machine.id, type="GPU", name="NVIDIA GB200", count=4, device_type="NVLink"
            )
        )
    await session.commit()
    reservation = {"instanceTypeId": str(world.instance_type.id), "count": 1}
    room = await new_partition(client, headers, world, "room", reservation=reservation)
    [held] = await reserved_to(session, room["id"])
    body = instance_body(world, name="aimed", instanceTypeId=None, machineId=held.id)
    assert error(await client.post(f"{BASE}/instance", json=body, headers=headers)) == (
        400,
        "Machine specified in request data is not available for Instance creation",
    )
    body["nvLinkInterfaces"] = gpus_in(room)
    response = await client.post(f"{BASE}/instance", json=body, headers=headers)
    assert response.status_code == 201, response.text
    single = await new_partition(client, headers, world, "one-rack", singleNvLinkDomain=True)
    assert (await instance_in(client, headers, world, single, "member")).status_code == 201
    [home] = await domains_of(client, headers, single)
    elsewhere = next(m for m in world.machines if str(m.domain_uuid) != home and m.id != held.id)
    body = instance_body(
        world, name="aimed-2", instanceTypeId=None, machineId=elsewhere.id, nvLinkInterfaces=gpus_in(single)
    )
    status, message = error(await client.post(f"{BASE}/instance", json=body, headers=headers))
    assert status == 409 and f"is in NVLink domain {home}" in message


async def test_a_partition_being_deleted_takes_no_reservation(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    going = await f.logical_partition(session, world.tenant, world.site, name="going", status="Deleting")
    await session.commit()
    reservation = {"instanceTypeId": str(world.instance_type.id), "count": 1}
    response = await client.patch(f"{PATH}/{going.id}", json={"reservation": reservation}, headers=headers)
    assert error(response) == (400, "NVLink Logical Partition must be in Ready state to hold a reservation")
    assert await session.scalar(select(func.count()).where(Machine.reserved_lp_id.is_not(None))) == 0


async def test_a_reservation_never_holds_a_machine_held_by_health_or_by_another_manager(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    """Machines a foreign partition or an unhealthy GPU holds are not free: a reservation takes the
    others, and asking for more than those is the 409 naming what is free."""
    domains: dict[Any, list[Machine]] = {}
    for machine in world.machines:
        domains.setdefault(machine.domain_uuid, []).append(machine)
    for there in domains.values():  # one of each kind in every domain
        await session.execute(update(Machine).where(Machine.id == there[0].id).values(held_unhealthy=True))
        await session.execute(update(Machine).where(Machine.id == there[1].id).values(foreign_gpus=2))
    await session.commit()
    held_back = {m.id for there in domains.values() for m in there[:2]}
    free = max(len(there) for there in domains.values()) - 2  # the best single domain's
    too_many = {"instanceTypeId": str(world.instance_type.id), "count": free + 1}
    refused = await client.post(
        PATH, json={"name": "greedy", "siteId": str(world.site.id), "reservation": too_many}, headers=headers
    )
    assert refused.status_code == 409 and f"has {free} free" in refused.json()["message"]
    lp = await new_partition(client, headers, world, "room", reservation={**too_many, "count": free})
    held = {m.id for m in await reserved_to(session, lp["id"])}
    assert len(held) == free and not held & held_back
