"""``domain_capacity`` (migration 0009's triggers) equals a recount of the machines after every path
that assigns, frees or changes machines, and under many concurrent batches: placement reads these
counts instead of the machine table, so a count that drifts places on machines that are not there or
refuses free ones."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.models import Instance, Machine
from nico.reconciler.lifecycle import finish_instance_termination
from nico.services import status
from tests.api.conftest import batch_body, instance_body
from tests.api.test_races import assert_no_machine_shared, tenants_on
from tests.support import factories as f
from tests.support.auth import bearer

BASE = "/v2/org/tenant-org/nico"
PROVIDER_BASE = "/v2/org/provider-org/nico"

_RECOUNT = """
SELECT m.site_id, m.instance_type_id,
       coalesce(m.domain_uuid, '00000000-0000-0000-0000-000000000000'::uuid),
       count(*) FILTER (WHERE m.instance_id IS NULL AND m.status = 'Ready' AND NOT m.is_missing_on_site
                          AND m.reserved_lp_id IS NULL),
       count(*) FILTER (WHERE m.instance_id IS NOT NULL)
FROM machine m WHERE m.instance_type_id IS NOT NULL GROUP BY 1, 2, 3
"""


async def counts(session: AsyncSession) -> dict[tuple[Any, ...], tuple[int, int]]:
    """(site, type, domain) -> (free, used) from ``domain_capacity``, rows of zeros left out."""
    await session.commit()  # a fresh snapshot
    rows = await session.execute(
        text("SELECT site_id, instance_type_id, domain_uuid, free, used FROM domain_capacity")
    )
    return {(s, t, d): (free, used) for s, t, d, free, used in rows if free or used}


async def recount(session: AsyncSession) -> dict[tuple[Any, ...], tuple[int, int]]:
    await session.commit()
    rows = await session.execute(text(_RECOUNT))
    return {(s, t, d): (free, used) for s, t, d, free, used in rows if free or used}


async def assert_in_step(session: AsyncSession) -> dict[tuple[Any, ...], tuple[int, int]]:
    kept, real = await counts(session), await recount(session)
    assert kept == real
    return kept


def free_of(kept: dict[tuple[Any, ...], tuple[int, int]], domain: uuid.UUID) -> int:
    return sum(free for (_, _, d), (free, _) in kept.items() if d == domain)


async def test_counts_follow_creates_and_deletes(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=2, trays=4)
    partition = await f.logical_partition(session, world.tenant, world.site)
    loose = await f.rack(session, world.site, world.instance_type, index=9, trays=2, with_nvlink=False)
    await session.commit()
    kept = await assert_in_step(session)
    assert sum(free for free, _ in kept.values()) == 10

    single = await client.post(f"{BASE}/instance", json=instance_body(world, name="one"), headers=headers)
    assert single.status_code == 201, single.text
    kept = await assert_in_step(session)
    assert sum(used for _, used in kept.values()) == 1

    batch = await client.post(
        f"{BASE}/instance/batch", json=batch_body(world, count=3, topologyOptimized=True), headers=headers
    )
    assert batch.status_code == 201, batch.text
    kept = await assert_in_step(session)
    assert sum(used for _, used in kept.values()) == 4

    bound = await client.post(
        f"{BASE}/instance",
        json=instance_body(
            world, name="bound", nvLinkInterfaces=[{"nvLinkLogicalPartitionId": str(partition.id)}]
        ),
        headers=headers,
    )
    assert bound.status_code == 201, bound.text
    await assert_in_step(session)

    # Removed at once (no NVLink binding): its machine is free again in the same transaction.
    gone = await client.delete(f"{BASE}/instance/{single.json()['id']}", headers=headers)
    assert gone.status_code == 202, gone.text
    kept = await assert_in_step(session)
    assert sum(used for _, used in kept.values()) == 4

    # Terminating until the reconciler sees its GPUs leave: the machine stays used until then.
    terminating = await client.delete(f"{BASE}/instance/{bound.json()['id']}", headers=headers)
    assert terminating.status_code == 202, terminating.text
    kept = await assert_in_step(session)
    assert sum(used for _, used in kept.values()) == 4
    assert await finish_instance_termination(session, uuid.UUID(bound.json()["id"]))
    kept = await assert_in_step(session)
    assert sum(used for _, used in kept.values()) == 3

    # Machines without a domain count under the nil domain.
    targeted_free = free_of(kept, uuid.UUID(int=0))
    assert targeted_free == len(loose)


async def test_counts_follow_machine_changes(
    client: httpx.AsyncClient, settings: Settings, session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=2, trays=4)
    other_type = await f.instance_type(session, world.site, name="other-type")
    await session.commit()
    provider = bearer(settings, "provider-org", "PROVIDER_ADMIN")
    first, spare = world.machines[0].id, world.machines[7].id
    domain = world.domains[0]
    before = free_of(await assert_in_step(session), domain)

    maintenance = {"setMaintenanceMode": True, "maintenanceMessage": "reseat the tray"}
    response = await client.patch(f"{PROVIDER_BASE}/machine/{first}", json=maintenance, headers=provider)
    assert response.status_code == 200, response.text
    assert free_of(await assert_in_step(session), domain) == before - 1
    response = await client.patch(
        f"{PROVIDER_BASE}/machine/{first}", json={"setMaintenanceMode": False}, headers=provider
    )
    assert response.status_code == 200, response.text
    assert free_of(await assert_in_step(session), domain) == before

    # A machine leaves its instance type (the allocation no longer needs every machine), then gets
    # another one: its count moves with it.
    await session.execute(text("UPDATE allocation_constraint SET constraint_value = 1"))
    await session.commit()
    response = await client.patch(
        f"{PROVIDER_BASE}/machine/{spare}", json={"clearInstanceType": True}, headers=provider
    )
    assert response.status_code == 200, response.text
    kept = await assert_in_step(session)
    assert free_of(kept, world.domains[1]) == 3
    machine = await session.get(Machine, spare)
    assert machine is not None
    machine.instance_type_id = other_type.id
    await session.commit()
    kept = await assert_in_step(session)
    assert kept[(world.site.id, other_type.id, world.domains[1])] == (1, 0)

    # Missing on site (the inventory's report), then unregistered.
    machine = await session.get(Machine, first)
    assert machine is not None
    machine.is_missing_on_site = True
    await status.record(session, "machine_id", first, "Error", "Machine is missing on Site")
    await session.commit()
    assert free_of(await assert_in_step(session), domain) == before - 1
    response = await client.delete(f"{PROVIDER_BASE}/machine/{first}", headers=provider)
    assert response.status_code == 202, response.text
    assert free_of(await assert_in_step(session), domain) == before - 1

    # Registration: new machines in a new domain, then one moved there from another domain.
    new_domain = uuid.uuid4()

    def tray(index: int, machine_id: str) -> dict[str, Any]:
        return {
            "id": machine_id,
            "nvLinkInfo": {
                "domainUuid": str(new_domain),
                "chassisSerial": "CHS-NEW",
                "trayIndex": index,
                "gpus": [{"deviceId": d, "gpuUid": str(9_000_000 + index * 8 + d)} for d in range(1, 5)],
            },
        }

    body = {
        "siteId": str(world.site.id),
        "instanceTypeId": str(world.instance_type.id),
        "machines": [tray(0, "new-0"), tray(1, "new-1")],
    }
    response = await client.post(f"{PROVIDER_BASE}/machine/registration", json=body, headers=provider)
    assert response.status_code == 201, response.text
    assert free_of(await assert_in_step(session), new_domain) == 2


async def test_one_statement_over_many_machines_and_domains_keeps_counts(session: AsyncSession) -> None:
    """Migration 0010's statement trigger sums a statement's machine changes per domain: one UPDATE
    or DELETE over machines of several domains and kinds of change (assigned, freed, moved to another
    domain and type, a change that moves no count), a batch and its deletion, leaves the counts equal
    to a recount; the per-statement deltas are gone at the commit, and a rolled-back savepoint's too."""
    world = await f.nvlink_site(session, racks=3, trays=4)
    other_type = await f.instance_type(session, world.site, name="other-type")
    await session.commit()
    await assert_in_step(session)
    ids = [m.id for m in world.machines]

    # A batch's worth of instances over two domains, assigned in one statement, then freed in one.
    owners = [(machine_id, uuid.uuid4()) for machine_id in ids[:6]]
    for n, (_, instance_id) in enumerate(owners):
        session.add(
            Instance(
                id=instance_id,
                tenant_id=world.tenant.id,
                site_id=world.site.id,
                vpc_id=world.vpc.id,
                instance_type_id=world.instance_type.id,
                name=f"multi-{n}",
            )
        )
    await session.commit()
    await session.execute(
        text(
            "UPDATE machine SET instance_id = u.instance_id "
            "FROM unnest(CAST(:machines AS text[]), CAST(:owners AS uuid[])) AS u(machine_id, instance_id) "
            "WHERE machine.id = u.machine_id"
        ),
        {"machines": [m for m, _ in owners], "owners": [o for _, o in owners]},
    )
    await session.commit()
    kept = await assert_in_step(session)
    assert sum(used for _, used in kept.values()) == 6

    # One statement: machines of every domain change in different ways at once.
    await session.execute(
        text(
            "UPDATE machine SET "
            "status = CASE WHEN id = :down THEN 'Maintenance' ELSE status END, "
            "domain_uuid = CASE WHEN id = :moved THEN :there ELSE domain_uuid END, "
            "instance_type_id = CASE WHEN id = :moved THEN :other ELSE instance_type_id END, "
            "hostname = 'renamed' "  # moves no count
            "WHERE id = ANY(:all)"
        ),
        {"down": ids[8], "moved": ids[9], "there": world.domains[0], "other": other_type.id, "all": ids},
    )
    await session.commit()
    kept = await assert_in_step(session)
    assert kept[(world.site.id, other_type.id, world.domains[0])] == (1, 0)

    # Deleting the instances frees their machines (ON DELETE SET NULL: one statement of the cascade).
    await session.execute(text("DELETE FROM instance WHERE id = ANY(:ids)"), {"ids": [o for _, o in owners]})
    await session.commit()
    kept = await assert_in_step(session)
    assert sum(used for _, used in kept.values()) == 0

    # A change rolled back to a savepoint counts for nothing; deleting machines takes them off.
    savepoint = await session.begin_nested()
    await session.execute(
        text("UPDATE machine SET status = 'Maintenance' WHERE id = ANY(:ids)"), {"ids": ids}
    )
    assert (await session.execute(text("SELECT count(*) FROM domain_capacity_delta"))).scalar_one() > 0
    await savepoint.rollback()
    await session.execute(text("DELETE FROM machine WHERE id = ANY(:ids)"), {"ids": ids[:2]})
    await session.commit()
    kept = await assert_in_step(session)
    assert sum(free for free, _ in kept.values()) == len(ids) - 2 - 1  # the moved one: free, other type
    assert (await session.execute(text("SELECT count(*) FROM domain_capacity_delta"))).scalar_one() == 0


async def test_concurrent_batches_never_share_a_machine_and_keep_counts(
    client: httpx.AsyncClient, settings: Settings, session: AsyncSession
) -> None:
    """Forty batches of four at once on eight racks of eighteen, from four tenants: each rack takes
    four (topology-optimised), so exactly 32 succeed, whatever order they arrive in; a request that
    loses a race for a domain's machines takes the next domain instead of a 409 while one has room."""
    world = await f.nvlink_site(session, racks=8, trays=18)
    racers = await tenants_on(session, world, 4)

    async def batch(n: int) -> httpx.Response:
        who = racers[n % len(racers)]
        return await client.post(
            f"/v2/org/{who.tenant.org}/nico/instance/batch",
            json=batch_body(who, count=4, namePrefix=f"racer-{n}", topologyOptimized=True),
            headers=bearer(settings, who.tenant.org),
        )

    responses = await asyncio.gather(*(batch(n) for n in range(40)))
    codes = Counter(r.status_code for r in responses)
    assert codes == {201: 32, 409: 8}, [r.text for r in responses if r.status_code not in (201, 409)]
    created = [i for r in responses if r.status_code == 201 for i in r.json()]
    await assert_no_machine_shared(session, created)
    for response in (r for r in responses if r.status_code == 201):
        machines = {i["machineId"] for i in response.json()}
        assert len({m.rsplit("-t", 1)[0] for m in machines}) == 1  # one rack per batch
    kept = await assert_in_step(session)
    assert sorted(free for free, _ in kept.values()) == [2] * 8


async def test_a_big_site_still_places_best_fit(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    """Placement reads a sample of each kind of domain on a site with more domains than a sample
    holds: the one fragment is a kind of its own, so the next batches still go there first and whole
    racks stay free."""
    world = await f.nvlink_site(session, racks=20, trays=6)
    await session.commit()

    async def batch(count: int, prefix: str) -> set[str]:
        response = await client.post(
            f"{BASE}/instance/batch",
            json=batch_body(world, count=count, namePrefix=prefix, topologyOptimized=True),
            headers=headers,
        )
        assert response.status_code == 201, response.text
        return {i["machineId"].rsplit("-t", 1)[0] for i in response.json()}

    (fragment,) = await batch(2, "first")  # an untouched rack, any of the twenty
    assert await batch(2, "second") == {fragment}
    assert await batch(2, "third") == {fragment}
    kept = await assert_in_step(session)
    assert sorted(free for free, _ in kept.values()) == [0] + [6] * 19
