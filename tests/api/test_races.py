"""Racing requests through the ASGI app (each on its own database connection) never share a machine,
and exactly as many succeed as there is capacity (or quota)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import httpx
import psycopg
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.models import Instance, LogicalPartition, Machine, Vpc
from nico.db.raw import driver_connection
from nico.instance import queries as instance_queries
from nico.instance.claim import claim
from nico.services.placement import Ask
from tests.api.conftest import batch_body, instance_body
from tests.support import factories as f
from tests.support.auth import bearer

TENANTS = 4


def another_session(session: AsyncSession) -> AsyncSession:
    """Another session on the same engine: its own connection, its own transaction."""
    return AsyncSession(bind=session.bind, expire_on_commit=False)


async def tenants_on(session: AsyncSession, world: f.NvlinkSite, count: int) -> list[f.NvlinkSite]:
    """``count`` more tenants at the site, each with its own allocation, VPC and subnet."""
    out = []
    for n in range(count):
        who = await f.tenant(session, f"racer-{n}")
        alloc = await f.allocation(session, who, world.site, world.instance_type, len(world.machines))
        network = await f.vpc(session, who, world.site, name=f"vpc-{n}")
        net = await f.subnet(session, network, name=f"subnet-{n}")
        out.append(
            f.NvlinkSite(
                world.provider, world.site, world.instance_type, who, alloc, network, net, world.machines
            )
        )
    await session.commit()
    return out


async def assert_no_machine_shared(session: AsyncSession, created: list[dict]) -> None:
    machines = Counter(i["machineId"] for i in created)
    assert all(n == 1 for n in machines.values())
    assigned = await session.scalar(select(func.count()).where(Machine.instance_id.is_not(None)))
    assert assigned == len(created) == await session.scalar(select(func.count()).select_from(Instance))


async def test_sixteen_batches_race_for_one_domain(
    client: httpx.AsyncClient, settings: Settings, session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=1, trays=18)
    racers = await tenants_on(session, world, TENANTS)

    async def batch(n: int) -> httpx.Response:
        who = racers[n % TENANTS]
        headers = bearer(settings, who.tenant.org)
        return await client.post(
            f"/v2/org/{who.tenant.org}/nico/instance/batch", json=batch_body(who), headers=headers
        )

    responses = await asyncio.gather(*(batch(n) for n in range(16)))
    codes = Counter(r.status_code for r in responses)
    assert codes == {201: 9, 409: 7}, [r.text for r in responses if r.status_code not in (201, 409)]
    for response in responses:
        if response.status_code == 409:
            assert response.json()["message"].startswith(
                "Topology optimization requires all 2 machines on same NVLink domain, "
                "but best domain only has"
            ) or response.json()["message"].startswith("Insufficient machines available: requested 2")
    created = [i for r in responses if r.status_code == 201 for i in r.json()]
    await assert_no_machine_shared(session, created)


async def test_single_creates_race_for_the_last_machines(
    client: httpx.AsyncClient, settings: Settings, session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=2, trays=3)
    racers = await tenants_on(session, world, TENANTS)

    async def create(n: int) -> httpx.Response:
        who = racers[n % TENANTS]
        body = instance_body(who, name=f"racer-{n}")
        return await client.post(
            f"/v2/org/{who.tenant.org}/nico/instance", json=body, headers=bearer(settings, who.tenant.org)
        )

    responses = await asyncio.gather(*(create(n) for n in range(10)))
    assert Counter(r.status_code for r in responses) == {201: 6, 409: 4}
    assert {r.json()["message"] for r in responses if r.status_code == 409} == {
        "No Machines are available for specified Instance Type"
    }
    await assert_no_machine_shared(session, [r.json() for r in responses if r.status_code == 201])


async def test_quota_holds_under_concurrent_creates(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=1, trays=10, quota=3)
    await session.commit()
    responses = await asyncio.gather(
        *(
            client.post(
                "/v2/org/tenant-org/nico/instance", json=instance_body(world, name=f"q-{n}"), headers=headers
            )
            for n in range(8)
        )
    )
    assert Counter(r.status_code for r in responses) == {201: 3, 403: 5}
    batches = await asyncio.gather(
        *(
            client.post(
                "/v2/org/tenant-org/nico/instance/batch", json=batch_body(world, count=2), headers=headers
            )
            for _ in range(4)
        )
    )
    assert {r.status_code for r in batches} == {403}  # quota 3 is used up
    await assert_no_machine_shared(session, [r.json() for r in responses if r.status_code == 201])


async def test_partition_delete_never_strands_a_binding(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    """Creates binding GPUs to a partition race its delete: either the delete is refused (bindings
    exist) or the creates are refused (the partition is gone); never a binding to a missing partition."""
    world = await f.nvlink_site(session, racks=1, trays=8)
    await session.commit()
    for round_ in range(3):
        partition = await f.logical_partition(session, world.tenant, world.site, name=f"lp-race-{round_}")
        await session.commit()
        body = {"nvLinkInterfaces": [{"nvLinkLogicalPartitionId": str(partition.id), "deviceInstance": 0}]}
        creates = [
            client.post(
                "/v2/org/tenant-org/nico/instance",
                json=instance_body(world, name=f"r{round_}-{n}", **body),
                headers=headers,
            )
            for n in range(2)
        ]
        delete = client.delete(
            f"/v2/org/tenant-org/nico/nvlink-logical-partition/{partition.id}", headers=headers
        )
        *created, deleted = await asyncio.gather(*creates, delete)
        made = [r for r in created if r.status_code == 201]
        if deleted.status_code == 202:
            assert made == []
            assert {r.json()["message"] for r in created} <= {
                f"Could not find NVLink Logical Partition with ID: {partition.id} specified in request data"
            }
        else:
            assert deleted.json()["message"].endswith(
                "active Instances are associated with this NVLink Logical Partition, unable to delete"
            )
        for response in made:  # clean up for the next round
            await client.delete(f"/v2/org/tenant-org/nico/instance/{response.json()['id']}", headers=headers)


async def test_a_short_pick_keeps_none_of_its_machines_locked(session: AsyncSession) -> None:
    """A pick is all or nothing (``nico_lock_free_machines``, migration 0013): when a domain gives fewer
    machines than asked (another transaction holds some), the function says how many it gave and
    keeps none of them locked, so other requests can take them at once; a pick that fits locks them
    all, to the end of its transaction."""
    world = await f.nvlink_site(session, racks=2, trays=4)
    await session.commit()
    d0, d1 = world.domains
    site, itype = world.site.id, world.instance_type.id
    async with another_session(session) as holder, another_session(session) as picker:
        held = await instance_queries.lock_free_machines(
            await driver_connection(holder), site, itype, [(d0, 3)]
        )  # 3 of d0's 4 machines held by another request
        assert len(held.locked) == 3 and not held.short
        short = await instance_queries.lock_free_machines(
            await driver_connection(picker), site, itype, [(d1, 4), (d0, 2)]
        )
        assert short == instance_queries.Pick([], {d0: 1})  # d1 gave 4, d0 only 1: nothing kept
        async with another_session(session) as third:
            rest = await instance_queries.lock_free_machines(
                await driver_connection(third), site, itype, [(d1, 4), (d0, 1)]
            )  # the short pick's machines are free to lock: all of d1, d0's last one
            assert len(rest.locked) == 5 and {d for _, d in rest.locked} == {d0, d1}
            await third.rollback()
        await picker.rollback()
        await holder.rollback()


async def test_a_pick_takes_the_first_domain_that_still_has_the_machines(session: AsyncSession) -> None:
    """``nico_lock_free_machines_first`` (migration 0014) tries the domains in the order given: one
    that comes up short (another transaction holds its machines) keeps none of them locked and the
    next is tried, in the same statement; when all come up short, nothing is locked and the pick says
    what each gave."""
    world = await f.nvlink_site(session, racks=3, trays=4)
    await session.commit()
    d0, d1, d2 = world.domains
    site, itype = world.site.id, world.instance_type.id
    async with another_session(session) as holder, another_session(session) as picker:
        held = await instance_queries.lock_free_machines(
            await driver_connection(holder), site, itype, [(d0, 3), (d1, 4)]
        )  # d0 keeps one free machine, d1 none
        assert len(held.locked) == 7
        conn = await driver_connection(picker)
        short = await instance_queries.lock_first_free(conn, site, itype, [d0, d1], 2)
        assert short == instance_queries.Pick([], {d0: 1, d1: 0})
        got = await instance_queries.lock_first_free(conn, site, itype, [d0, d1, d2], 2)
        assert not got.short and len(got.locked) == 2 and {d for _, d in got.locked} == {d2}
        async with another_session(session) as third:
            rest = await instance_queries.lock_free_machines(
                await driver_connection(third), site, itype, [(d0, 1), (d2, 2)]
            )  # d0's last machine was tried and let go; d2's other two were never locked
            assert len(rest.locked) == 3
            await third.rollback()
        async with another_session(session) as fourth:  # the picker holds d2's two to its end
            taken = await instance_queries.lock_free_machines(
                await driver_connection(fourth), site, itype, [(d2, 3)]
            )
            assert taken == instance_queries.Pick([], {d2: 2})
            await fourth.rollback()
        await picker.rollback()
        await holder.rollback()


async def test_a_create_that_loses_its_best_domain_takes_the_next_in_one_statement(
    session: AsyncSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Best fit sends requests that arrive together to the same domain. A request that finds it held
    goes on to the next domain that fits in the same pick, not back to the server to plan again: one
    locking statement."""
    world = await f.nvlink_site(session, racks=3, trays=4)
    d0, d1, d2 = world.domains
    site, itype = world.site.id, world.instance_type.id
    down = next(m for m in world.machines if m.domain_uuid == d0)
    await session.execute(update(Machine).where(Machine.id == down.id).values(status="Error"))
    await session.commit()  # d0 has 3 free machines, d1 and d2 4: d0 is the best fit for 2
    calls: list[str] = []
    for name in ("lock_free_machines", "lock_first_free"):
        real = getattr(instance_queries, name)

        def counted(*args: object, _real: object = real, _name: str = name, **kw: object) -> object:
            calls.append(_name)
            return _real(*args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(instance_queries, name, counted)
    async with another_session(session) as holder, another_session(session) as creating:
        await instance_queries.lock_first_free(await driver_connection(holder), site, itype, [d0], 2)
        calls.clear()
        ask = Ask(instance_type_id=itype, count=2, needs_nvlink=True, topology_optimized=True)
        claimed = await claim(await driver_connection(creating), site_id=site, ask=ask, seed=1)
        assert {c.domain_uuid for c in claimed} <= {d1, d2} and len(claimed) == 2
        assert calls == ["lock_first_free"]
        await creating.rollback()
        await holder.rollback()


async def held_creation_context(
    creating: AsyncSession, world: f.NvlinkSite, partition_ids: list[uuid.UUID]
) -> tuple[instance_queries.CreationContext | None, dict[uuid.UUID, LogicalPartition]]:
    """The creation context of an instance ``held`` in the world's VPC, naming ``partition_ids``, read
    (and its locks taken) in ``creating``'s transaction."""
    return await instance_queries.creation_context(
        await driver_connection(creating),
        org=world.tenant.org,
        requested_tenant=None,
        vpc_id=world.vpc.id,
        instance_type_id=world.instance_type.id,
        subnet_ids=[world.subnet.id],
        names=["held"],
        partition_ids=partition_ids,
    )


async def test_a_create_holds_its_vpc_and_its_default_partition_from_its_first_round_trip(
    session: AsyncSession,
) -> None:
    """The creation context also locks the VPC and the VPC's default logical partition FOR SHARE in its
    round trip, after reading the context: a change of the VPC's default partition, or of that
    partition (singleNvLinkDomain, its reservation), waits for the create. Another VPC stays free."""
    world = await f.nvlink_site(session, racks=1, trays=2)
    default = await f.logical_partition(session, world.tenant, world.site, name="default")
    await session.execute(
        update(Vpc).where(Vpc.id == world.vpc.id).values(nvlink_logical_partition_id=default.id)
    )
    other = await f.vpc(session, world.tenant, world.site, name="other")
    await session.commit()
    async with another_session(session) as creating, another_session(session) as changing:
        context, _ = await held_creation_context(creating, world, [])
        assert context is not None and context.vpc_default_partition_id == default.id
        changer = await driver_connection(changing)
        await (
            await changer.execute("SELECT 1 FROM vpc WHERE id = %s FOR UPDATE NOWAIT", [other.id])
        ).fetchall()
        for table, row in [("vpc", world.vpc.id), ("logical_partition", default.id)]:
            with pytest.raises(psycopg.errors.LockNotAvailable):
                await changer.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR UPDATE NOWAIT", [row])
            await changing.rollback()
            changer = await driver_connection(changing)
        await creating.rollback()


async def test_a_create_holds_its_partitions_from_its_first_round_trip(session: AsyncSession) -> None:
    """The creation context locks the logical partitions the request names FOR SHARE in the round
    trip that reads it, before any machine is claimed (the lock order of docs/architecture.md): a
    delete, which locks the partition for update, cannot take it until the create's transaction has
    ended, so it then sees the create's bindings. A partition the request does not name stays free."""
    world = await f.nvlink_site(session, racks=1, trays=2)
    named = await f.logical_partition(session, world.tenant, world.site, name="named")
    other = await f.logical_partition(session, world.tenant, world.site, name="other")
    await session.commit()
    lock = "SELECT 1 FROM logical_partition WHERE id = %s FOR UPDATE NOWAIT"
    async with another_session(session) as creating, another_session(session) as deleting:
        # The second partition exists nowhere: not found, no error.
        context, found = await held_creation_context(creating, world, [named.id, uuid.uuid4()])
        assert context is not None and set(found) == {named.id}
        assert found[named.id].status == "Ready" and found[named.id].tenant_id == world.tenant.id
        deleter = await driver_connection(deleting)
        await (await deleter.execute(lock, [other.id])).fetchall()
        with pytest.raises(psycopg.errors.LockNotAvailable):
            await deleter.execute(lock, [named.id])
        await deleting.rollback()
        await creating.rollback()
        deleter = await driver_connection(deleting)
        assert len(await (await deleter.execute(lock, [named.id])).fetchall()) == 1
        await deleting.rollback()
