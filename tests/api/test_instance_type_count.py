"""``instance_type_count`` (rule ``instance_count``, migration 0026) equals a recount of the instances
per (tenant, type) after every path that writes instances, and under concurrent creates and deletes:
the quota check reads this count instead of the instance table, so a count that drifts lets a tenant
over its quota or refuses a create within it."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.reconciler.lifecycle import finish_instance_termination
from tests.api.conftest import batch_body, instance_body
from tests.api.test_races import tenants_on
from tests.support import factories as f
from tests.support.auth import bearer

BASE = "/v2/org/tenant-org/nico"


async def assert_in_step(session: AsyncSession) -> dict[tuple[Any, ...], int]:
    """The kept counts (rows of zero left out), after checking them against a recount."""
    await session.commit()  # a fresh snapshot
    kept = {
        (t, i): n
        for t, i, n in await session.execute(
            text("SELECT tenant_id, instance_type_id, instances FROM instance_type_count")
        )
        if n
    }
    real = {
        (t, i): n
        for t, i, n in await session.execute(
            text(
                "SELECT tenant_id, instance_type_id, count(*) FROM instance "
                "WHERE instance_type_id IS NOT NULL GROUP BY 1, 2"
            )
        )
    }
    assert kept == real
    return kept


async def test_counts_follow_creates_batches_deletes_and_changes(
    client: httpx.AsyncClient, headers: dict[str, str], session: AsyncSession
) -> None:
    world = await f.nvlink_site(session, racks=2, trays=5)
    other_type = await f.instance_type(session, world.site, name="other-type")
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    key = (world.tenant.id, world.instance_type.id)

    single = await client.post(f"{BASE}/instance", json=instance_body(world, name="one"), headers=headers)
    assert single.status_code == 201, single.text
    assert (await assert_in_step(session))[key] == 1
    batch = await client.post(f"{BASE}/instance/batch", json=batch_body(world, count=4), headers=headers)
    assert batch.status_code == 201, batch.text
    assert (await assert_in_step(session))[key] == 5
    bound = await client.post(
        f"{BASE}/instance",
        json=instance_body(
            world, name="bound", nvLinkInterfaces=[{"nvLinkLogicalPartitionId": str(partition.id)}]
        ),
        headers=headers,
    )
    assert bound.status_code == 201, bound.text
    assert (await assert_in_step(session))[key] == 6

    # Removed at once (no NVLink binding), then one Terminating until the reconciler finishes it.
    gone = await client.delete(f"{BASE}/instance/{single.json()['id']}", headers=headers)
    assert gone.status_code == 202, gone.text
    assert (await assert_in_step(session))[key] == 5
    terminating = await client.delete(f"{BASE}/instance/{bound.json()['id']}", headers=headers)
    assert terminating.status_code == 202, terminating.text
    assert (await assert_in_step(session))[key] == 5
    assert await finish_instance_termination(session, uuid.UUID(bound.json()["id"]))
    assert (await assert_in_step(session))[key] == 4

    # An instance moved to another type (an operator's repair), one left without a type, a change that
    # moves no count: one statement.
    ids = [uuid.UUID(i["id"]) for i in batch.json()]
    await session.execute(
        text(
            "UPDATE instance SET instance_type_id = CASE WHEN id = :a THEN :other WHEN id = :b THEN NULL "
            "ELSE instance_type_id END, status = 'Ready' WHERE id = ANY(:ids)"
        ),
        {"a": ids[0], "b": ids[1], "other": other_type.id, "ids": ids},
    )
    kept = await assert_in_step(session)
    assert kept[key] == 2 and kept[(world.tenant.id, other_type.id)] == 1

    # A rolled-back savepoint leaves nothing behind; then one DELETE over both types.
    async with session.begin_nested() as nested:
        await session.execute(text("DELETE FROM instance WHERE id = :a"), {"a": ids[2]})
        await nested.rollback()
    assert (await assert_in_step(session))[key] == 2
    await session.execute(
        text("UPDATE machine SET instance_id = NULL WHERE instance_id = ANY(:ids)"), {"ids": ids}
    )
    await session.execute(text("DELETE FROM instance WHERE id = ANY(:ids)"), {"ids": ids})
    assert await assert_in_step(session) == {}


async def test_counts_hold_under_concurrent_creates_and_deletes(
    client: httpx.AsyncClient, settings: Settings, session: AsyncSession
) -> None:
    """Four tenants' creates, batches and deletes race each other (each tenant's own writes racing for
    its counter row): every row takes each statement's change exactly once."""
    world = await f.nvlink_site(session, racks=4, trays=9)
    everyone = [world, *await tenants_on(session, world, 3)]

    def path_of(who: f.NvlinkSite) -> str:
        return f"/v2/org/{who.tenant.org}/nico"

    doomed: list[tuple[f.NvlinkSite, str]] = []
    for who in everyone:
        made = await client.post(
            f"{path_of(who)}/instance/batch",
            json=batch_body(who, count=3, namePrefix="old"),
            headers=bearer(settings, who.tenant.org),
        )
        assert made.status_code == 201, made.text
        doomed.extend((who, i["id"]) for i in made.json())
    await assert_in_step(session)

    racing = []
    for who in everyone:
        auth = bearer(settings, who.tenant.org)
        racing.extend(
            client.post(f"{path_of(who)}/instance", json=instance_body(who, name=f"race-{n}"), headers=auth)
            for n in range(3)
        )
        racing.append(
            client.post(
                f"{path_of(who)}/instance/batch",
                json=batch_body(who, count=2, namePrefix="new"),
                headers=auth,
            )
        )
    racing.extend(
        client.delete(f"{path_of(who)}/instance/{i}", headers=bearer(settings, who.tenant.org))
        for who, i in doomed
    )
    responses = await asyncio.gather(*racing)
    assert Counter(r.status_code for r in responses) == {201: 16, 202: 12}, [
        r.text for r in responses if r.status_code not in (201, 202)
    ]
    kept = await assert_in_step(session)
    assert {kept[(who.tenant.id, world.instance_type.id)] for who in everyone} == {5}


_HOLD = """
WITH made AS (
    INSERT INTO instance (id, tenant_id, site_id, instance_type_id, vpc_id, name, status,
                          nvlink_config_version, nvlink_applied_version)
    SELECT gen_random_uuid(), :tenant, :site, :itype, :vpc, 'held-' || n, 'Ready', 1, 1
    FROM generate_series(1, :count) n
    RETURNING id, name
)
INSERT INTO machine (id, site_id, instance_type_id, status, instance_id,
                     domain_uuid, chassis_serial, tray_index)
SELECT m.name, :site, :itype, 'Ready', m.id, :domain, 'HELD', row_number() OVER ()
FROM made m
"""


async def test_a_create_reads_a_few_instances_however_many_the_tenant_holds(session: AsyncSession) -> None:
    """The creation context, the quota check and the in-flight limit check of a tenant that holds
    3,000 settled instances of the type, on machines in an NVLink domain: together they read a few
    instance rows (the counter row, the index of changes in flight), not the tenant's 3,000 (as
    counting them did, and as the in-flight check's plan does when the planner takes most instances
    for in flight)."""
    world = await f.nvlink_site(session, racks=1, trays=2)
    ids = {
        "tenant": world.tenant.id,
        "site": world.site.id,
        "itype": world.instance_type.id,
        "vpc": world.vpc.id,
        "domain": world.domains[0],
    }
    await session.execute(text(_HOLD), {**ids, "count": 3000})
    await session.execute(text("UPDATE allocation_constraint SET constraint_value = 100000"))
    await session.commit()
    for table in ("instance", "machine"):
        await session.execute(text(f"ANALYZE {table}"))
    await session.commit()

    # The backend's counts not yet reported: they may hold earlier transactions' too, and are reported
    # only between transactions, so the difference within this one is what the three statements read.
    read = text(
        "SELECT pg_stat_get_xact_tuples_returned('instance'::regclass) "
        "+ pg_stat_get_xact_tuples_fetched('instance'::regclass)"
    )
    before = await session.scalar(read)
    await session.execute(
        text(
            "SELECT * FROM nico_creation_context(:org, NULL, :vpc, :itype, '{}'::uuid[], '{new}'::text[], "
            "'{}'::uuid[])"
        ),
        {"org": world.tenant.org, **ids},
    )
    await session.execute(text("SELECT nico_check_quota(:tenant, :itype)"), ids)
    await session.execute(text("SELECT nico_check_nvlink_changes_quota(:tenant, :site, 100000)"), ids)
    after = await session.scalar(read)
    await session.rollback()
    assert before is not None and after is not None
    assert after - before < 50, f"{after - before} instance rows read"
