"""``POST /instance/batch``: validation, the ordered checks of spec §6, topology-optimised placement
on one NVLink domain, names, quota, NVLink rules, all-or-nothing."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.engine import libpq_url
from nico.db.enums import LogicalPartitionStatus
from nico.db.models import Instance, Machine
from nico.instance import creation
from tests.api.conftest import BASE, batch_body, error, instance_body
from tests.support import factories as f
from tests.support.state import fingerprint

PATH = f"{BASE}/instance/batch"
INVALID = "Error validating batch instance creation request data"
MISMATCH = (
    "NVLink Logical Partition specified for NVLink Interface does not match NVLink Logical Partition of VPC"
)


def items(partition: uuid.UUID, *indexes: int) -> list[dict[str, Any]]:
    return [{"nvlinklogicalpartitionid": str(partition), "deviceInstance": i} for i in indexes]


async def domains_of(session: AsyncSession, machine_ids: list[str]) -> set[uuid.UUID | None]:
    rows = await session.scalars(select(Machine.domain_uuid).where(Machine.id.in_(machine_ids)))
    return set(rows)


async def test_batch_lands_on_one_domain_with_names_and_history(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    response = await client.post(PATH, json=batch_body(world, count=3), headers=headers)
    assert response.status_code == 201, response.text
    created = response.json()
    assert isinstance(created, list) and len(created) == 3
    suffixes = set()
    for n, inst in enumerate(created, start=1):
        match = re.fullmatch(r"worker-([0-9a-f]{6})-(\d+)", inst["name"])
        assert match and int(match.group(2)) == n
        suffixes.add(match.group(1))
        assert inst["status"] == "Pending"
        assert [h["status"] for h in inst["statusHistory"]] == ["Pending"]
        assert inst["deprecations"][0]["attribute"] == "sshkeygroups"
    assert len(suffixes) == 1
    assert len(await domains_of(session, [i["machineId"] for i in created])) == 1
    again = await client.post(PATH, json=batch_body(world, count=2), headers=headers)
    assert again.status_code == 201  # same prefix, new random suffix


@pytest.mark.parametrize(
    ("change", "data"),
    [
        ({"count": 0}, {"count": "a value is required"}),
        ({"count": None}, {"count": "a value is required"}),
        ({"count": 1}, {"count": "Count must be at least 2"}),
        ({"count": 19}, {"count": "Count cannot exceed 18"}),
        ({"count": 73}, {"count": "Count cannot exceed 18"}),
        ({"namePrefix": None}, {"namePrefix": "must be at least 2 characters and maximum 256 characters"}),
        ({"namePrefix": "w" * 241},
         {"namePrefix": "Name prefix must contain at least 2 characters and a maximum of 240 characters"}),
        ({"namePrefix": " w1"}, {"namePrefix": "name field has leading whitespace"}),
        ({"instanceTypeId": None}, {"instanceTypeId": "a value is required"}),
        ({"vpcId": "x"}, {"vpcId": "must be a valid UUID"}),
        ({"interfaces": [{"subnetId": str(uuid.UUID(int=3)), "ipAddress": "10.0.0.5"}]},
         {"interfaces": "batch instance create does not support `ipAddress` on interfaces"}),
        ({"nvLinkInterfaces": [{"nvLinkLogicalPartitionId": str(uuid.UUID(int=3)), "deviceInstance": -1}]},
         {"deviceInstance": "deviceInstance must be between 0 and 3"}),
    ],
)  # fmt: skip
async def test_batch_validation(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    change: dict[str, Any],
    data: dict[str, str],
) -> None:
    before = await fingerprint(session)
    response = await client.post(PATH, json=batch_body(world, **change), headers=headers)
    assert response.status_code == 400
    assert response.json() == {"source": "nico", "message": INVALID, "data": data}
    assert await fingerprint(session) == before


async def test_batch_checks_in_order(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    async def check(body: dict[str, Any], status: int, message: str) -> None:
        before = await fingerprint(session)
        assert error(await client.post(PATH, json=body, headers=headers)) == (status, message)
        assert await fingerprint(session) == before

    await check(
        batch_body(world, instanceTypeId=str(uuid.uuid4())),
        400,
        "Could not find Instance Type with ID specified in request data",
    )
    await check(
        batch_body(world, vpcId=str(uuid.uuid4())),
        400,
        "Could not find VPC with ID specified in request data",
    )
    far = await f.site(session, world.provider, name="far")
    far_type = await f.instance_type(session, far, name="far-type")
    await session.commit()
    await check(
        batch_body(world, instanceTypeId=str(far_type.id)),
        400,
        "VPC and Instance Type specified in request data do not belong to the same Site",
    )
    world.site.status = "Pending"
    await session.commit()
    await check(
        batch_body(world), 400, "The Site where Instances are being created is not in Registered state"
    )
    world.site.status = "Registered"
    await session.commit()
    missing = uuid.uuid4()
    await check(
        batch_body(world, interfaces=[{"subnetId": str(missing)}]),
        400,
        "Could not find Subnet with ID specified in request data",
    )
    unallocated = await f.instance_type(session, world.site, name="unallocated")
    await session.commit()
    await check(
        batch_body(world, instanceTypeId=str(unallocated.id)),
        403,
        "Tenant does not have any Allocations for Site and Instance Type specified in request data",
    )


@pytest.mark.parametrize("stale", [False, True], ids=["first check", "check with the commit"])
async def test_quota_is_403_with_the_numbers(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    session: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
    stale: bool,
) -> None:
    """Over the quota: 403 with the numbers, nothing of the batch committed. Refused by the first
    check, or (``stale``: the first check made to read the quota before a concurrent create committed)
    by the check made with the commit, under the reservations' lock, which counts what it used up."""
    world = await f.nvlink_site(session, racks=1, trays=8, quota=5)
    await session.commit()
    assert (await client.post(PATH, json=batch_body(world, count=3), headers=headers)).status_code == 201
    before = await fingerprint(session)
    if stale:
        first_check = creation.creation_context

        async def reads_too_early(*args: Any, **kwargs: Any) -> Any:
            return replace(await first_check(*args, **kwargs), instances_of_type=0)

        monkeypatch.setattr(creation, "creation_context", reads_too_early)
    response = await client.post(PATH, json=batch_body(world, count=3), headers=headers)
    assert error(response) == (
        403,
        "Tenant has reached the maximum number of Instances for Instance Type. "
        "Current: 3, Requested: 3, Max: 5",
    )
    assert await fingerprint(session) == before
    body = instance_body(world, name="one-more")
    single = await client.post(f"{BASE}/instance", json=body, headers=headers)
    assert single.status_code == 201  # 4 of 5: the refused batch left nothing behind, nor any lock


async def test_capacity_409s(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    # Two racks of two trays: 4 free machines, at most 2 in one domain.
    world = await f.nvlink_site(session, racks=2, trays=2, quota=10)
    await session.commit()
    before = await fingerprint(session)
    response = await client.post(PATH, json=batch_body(world, count=5), headers=headers)
    assert error(response) == (409, "Insufficient machines available: requested 5, available 4")
    response = await client.post(PATH, json=batch_body(world, count=3), headers=headers)
    assert error(response) == (
        409,
        "Topology optimization requires all 3 machines on same NVLink domain, "
        "but best domain only has 2 available",
    )
    assert await fingerprint(session) == before
    spread = await client.post(
        PATH, json=batch_body(world, count=3, topologyOptimized=False), headers=headers
    )
    assert spread.status_code == 201
    assert len(await domains_of(session, [i["machineId"] for i in spread.json()])) == 2


async def test_machines_without_a_domain_are_not_candidates_for_topology(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=1, trays=1)
    await f.rack(session, world.site, world.instance_type, index=5, trays=3, with_nvlink=False)
    await f.allocation(session, world.tenant, world.site, world.instance_type, 3)
    await session.commit()
    response = await client.post(PATH, json=batch_body(world, count=2), headers=headers)
    assert error(response) == (
        409,
        "Topology optimization requires all 2 machines on same NVLink domain, "
        "but best domain only has 1 available",
    )
    loose = await client.post(PATH, json=batch_body(world, count=3, topologyOptimized=False), headers=headers)
    assert loose.status_code == 201
    assert await domains_of(session, [i["machineId"] for i in loose.json()]) == {None}
    assert {i["status"] for i in loose.json()} == {"Ready"}  # nothing to wait for without a domain


async def test_best_fit_takes_the_fullest_domain_that_fits(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=3, trays=6)
    await session.commit()
    first = (await client.post(PATH, json=batch_body(world, count=4), headers=headers)).json()
    (home,) = await domains_of(session, [i["machineId"] for i in first])
    second = (await client.post(PATH, json=batch_body(world, count=2), headers=headers)).json()
    assert await domains_of(session, [i["machineId"] for i in second]) == {home}  # the 2 left there
    third = (await client.post(PATH, json=batch_body(world, count=6), headers=headers)).json()
    assert home not in await domains_of(session, [i["machineId"] for i in third])


async def test_nvlink_rules_in_batch(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site, name="lp")
    pending = await f.logical_partition(
        session, world.tenant, world.site, name="pending", status=LogicalPartitionStatus.PENDING
    )
    other = await f.tenant(session, "other-org")
    theirs = await f.logical_partition(session, other, world.site, name="theirs")
    cpu = await f.instance_type(session, world.site, name="cpu", gpus=None)
    await f.rack(session, world.site, cpu, index=7, trays=2)
    await f.allocation(session, world.tenant, world.site, cpu, 2)
    await session.commit()
    unknown = uuid.uuid4()
    cases: list[tuple[dict[str, Any], str, Any]] = [
        (
            {"instanceTypeId": str(cpu.id), "nvLinkInterfaces": items(partition.id, 0)},
            "NVLink Interfaces cannot be specified if Instance Type doesn't have GPU Capabilities",
            None,
        ),
        (
            {"nvLinkInterfaces": items(partition.id, 0, 0)},
            "NVLink interfaces validation failed: nvLinkInterfaces: duplicate deviceInstance: 0 specified in "
            "NVLink Interfaces.",
            {"nvLinkInterfaces": "duplicate deviceInstance: 0 specified in NVLink Interfaces"},
        ),
        (
            {"nvLinkInterfaces": items(unknown, 0)},
            f"Could not find NVLink Logical Partition with ID {unknown}",
            None,
        ),
        (
            {"nvLinkInterfaces": items(theirs.id, 0)},
            f"NVLink Logical Partition {theirs.id} is not owned by Tenant",
            None,
        ),
        (
            {"nvLinkInterfaces": items(pending.id, 0)},
            f"NVLink Logical Partition {pending.id} is not in Ready state",
            None,
        ),
    ]
    for change, message, data in cases:
        before = await fingerprint(session)
        response = await client.post(PATH, json=batch_body(world, **change), headers=headers)
        assert response.status_code == 400, response.text
        assert response.json() == {"source": "nico", "message": message, "data": data}
        assert await fingerprint(session) == before
    ok = await client.post(
        PATH, json=batch_body(world, nvLinkInterfaces=items(partition.id, 0, 1, 2, 3)), headers=headers
    )
    assert ok.status_code == 201
    assert [len(i["nvLinkInterfaces"]) for i in ok.json()] == [4, 4]
    ids = {b["id"] for i in ok.json() for b in i["nvLinkInterfaces"]}
    assert len(ids) == 8  # each instance its own rows


async def test_vpc_default_in_batch_is_compared_before_lookup(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    default = await f.logical_partition(session, world.tenant, world.site, name="default")
    world.vpc.nvlink_logical_partition_id = default.id
    await session.commit()
    response = await client.post(
        PATH, json=batch_body(world, nvLinkInterfaces=items(uuid.uuid4(), 0)), headers=headers
    )
    assert error(response) == (400, MISMATCH)
    auto = await client.post(PATH, json=batch_body(world, count=2), headers=headers)
    assert [[b["deviceInstance"] for b in i["nvLinkInterfaces"]] for i in auto.json()] == [[0, 1, 2, 3]] * 2


async def test_a_failed_batch_assigns_nothing(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await f.logical_partition(
        session, world.tenant, world.site, name="late", status=LogicalPartitionStatus.PENDING
    )
    await session.commit()
    before = await fingerprint(session)
    # Fails after machines were locked (NVLink validation runs after allocation): all rolled back.
    response = await client.post(
        PATH, json=batch_body(world, nvLinkInterfaces=items(partition.id, 0)), headers=headers
    )
    assert response.status_code == 400
    assert await fingerprint(session) == before
    assert await session.scalar(select(func.count()).select_from(Instance)) == 0
    assert await session.scalar(select(func.count()).where(Machine.instance_id.is_not(None))) == 0


@pytest.mark.parametrize("path", ["single", "batch"])
async def test_the_response_is_built_after_the_commit_with_no_lock_held(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    """A create's response is built when it is sent, after its transaction committed: the tenant's
    quota lock (taken last, held to the commit) is not held while the instances are rendered, so
    concurrent creates of the tenant wait only for the commit."""
    from nico.instance import router

    seen: list[tuple[bool, int]] = []
    render = router.Instance.of

    def observed(view: Any) -> Any:
        with psycopg.connect(libpq_url(database_url), autocommit=True) as other:
            with other.transaction():  # NOWAIT: an error while another transaction holds the lock
                other.execute("SELECT 1 FROM allocation_constraint FOR UPDATE NOWAIT")
            visible = other.execute("SELECT count(*) FROM instance WHERE id = %s", (view.id,)).fetchone()
        assert visible is not None
        seen.append((True, int(visible[0])))
        return render(view)

    monkeypatch.setattr(router.Instance, "of", observed)
    if path == "single":
        response = await client.post(f"{BASE}/instance", json=instance_body(world), headers=headers)
    else:
        response = await client.post(PATH, json=batch_body(world, count=2), headers=headers)
    assert response.status_code == 201, response.text
    assert seen and all(visible == 1 for _, visible in seen)  # committed before it was rendered
