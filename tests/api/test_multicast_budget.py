"""Multicast budgets at the API (issue 13 part 2): a logical partition carries a multicast groups
limit (a multiple of 4, default 16); a domain's budget (``max_multicast_groups``, stored once the
reconciler has read it) bounds the limits of the partitions present there, and placement answers
409 naming the budget instead of leaving the create to fail on the fabric."""

from __future__ import annotations

import uuid

import httpx
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Instance, LogicalPartition, Machine, NvlinkDomain, PhysicalPartition
from nico.db.raw import driver_connection
from nico.instance.queries import placement_inputs
from tests.api.conftest import BASE, error, instance_body
from tests.support import factories as f

LP_PATH = f"{BASE}/nvlink-logical-partition"


async def create_lp(client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, **extra: object):
    body = {"name": extra.pop("name", "lp-1"), "siteId": str(world.site.id), **extra}
    return await client.post(LP_PATH, json=body, headers=headers)


async def set_budget(session: AsyncSession, world: f.NvlinkSite, budget: int) -> None:
    await session.execute(
        update(NvlinkDomain).where(NvlinkDomain.uuid.in_(world.domains)).values(max_multicast_groups=budget)
    )
    await session.commit()


async def a_and_b_present(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    limits: dict[str, int],
) -> dict[str, uuid.UUID]:
    """Logical partitions ``lp-<name>`` with these multicast groups limits; ``a`` present in the
    world's first domain and ``b`` in its second (a physical partition each)."""
    lps: dict[str, uuid.UUID] = {}
    for name, limit in limits.items():
        response = await create_lp(client, headers, world, name=f"lp-{name}", multicastGroupsLimit=limit)
        lps[name] = uuid.UUID(response.json()["id"])
    for n, (lp, domain) in enumerate(zip((lps["a"], lps["b"]), world.domains, strict=True)):
        session.add(
            PhysicalPartition(
                logical_partition_id=lp,
                domain_uuid=domain,
                nmx_partition_id=n + 1,
                fabric_ref=str(n + 1),
                name=f"pp-{n}",
            )
        )
    await session.commit()
    return lps


async def test_limit_is_a_multiple_of_4_with_a_default_of_16(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    default = await create_lp(client, headers, world)
    assert default.status_code == 201 and default.json()["multicastGroupsLimit"] == 16
    for bad in (6, -4, 2048, "16"):
        response = await create_lp(client, headers, world, name=f"bad-{bad}", multicastGroupsLimit=bad)
        assert response.status_code == 400, (bad, response.text)
        assert "multicastGroupsLimit" in response.json()["data"]
    chosen = await create_lp(client, headers, world, name="lp-32", multicastGroupsLimit=32)
    assert chosen.status_code == 201 and chosen.json()["multicastGroupsLimit"] == 32
    stored = await session.scalar(
        select(LogicalPartition.multicast_groups_limit).where(LogicalPartition.name == "lp-32")
    )
    assert stored == 32
    got = await client.get(f"{LP_PATH}/{chosen.json()['id']}", headers=headers)
    assert got.json()["multicastGroupsLimit"] == 32


async def test_a_limit_no_domain_can_hold_is_409_naming_the_budget(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    # Unknown budgets (the reconciler has not read them yet) constrain nothing.
    assert (
        await create_lp(client, headers, world, name="early", multicastGroupsLimit=1024)
    ).status_code == 201
    await set_budget(session, world, 64)
    status, message = error(await create_lp(client, headers, world, name="huge", multicastGroupsLimit=128))
    assert status == 409 and "max_multicast_groups: 64" in message and "128" in message
    assert (await create_lp(client, headers, world, name="fits", multicastGroupsLimit=64)).status_code == 201


async def test_placement_avoids_full_budgets_and_answers_409_when_none_has_room(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    await set_budget(session, world, 32)
    # a fills domain 0's budget; b takes half of domain 1's.
    lps = await a_and_b_present(client, headers, world, session, {"a": 32, "b": 16, "c": 32})
    d0, d1 = world.domains
    domain_of = {m.id: m.domain_uuid for m in world.machines}

    def nvlink(lp: uuid.UUID) -> list[dict[str, object]]:
        return [{"nvLinkLogicalPartitionId": str(lp), "deviceInstance": 0}]

    # c (32) fits neither domain: 409 naming the budget, nothing assigned.
    before = await session.scalar(select(func.count()).select_from(Instance))
    response = await client.post(
        f"{BASE}/instance",
        json=instance_body(world, name="c-1", nvLinkInterfaces=nvlink(lps["c"])),
        headers=headers,
    )
    status, message = error(response)
    assert status == 409, response.text
    assert "max_multicast_groups" in message and "multicastGroupsLimit" in message and "32" in message
    assert await session.scalar(select(func.count()).select_from(Instance)) == before
    # a is present in domain 0 already: no new groups needed, its instance goes there.
    placed = await client.post(
        f"{BASE}/instance",
        json=instance_body(world, name="a-1", nvLinkInterfaces=nvlink(lps["a"])),
        headers=headers,
    )
    assert placed.status_code == 201, placed.text
    assert domain_of[placed.json()["machineId"]] == d0
    # A new 16-group partition only fits domain 1 (16 of 32 left), even though domain 0 has free machines.
    d = await create_lp(client, headers, world, name="lp-d", multicastGroupsLimit=16)
    placed = await client.post(
        f"{BASE}/instance",
        json=instance_body(world, name="d-1", nvLinkInterfaces=nvlink(uuid.UUID(d.json()["id"]))),
        headers=headers,
    )
    assert placed.status_code == 201, placed.text
    assert domain_of[placed.json()["machineId"]] == d1
    free_in_d0 = await session.scalar(
        select(func.count())
        .select_from(Machine)
        .where(Machine.domain_uuid == d0, Machine.instance_id.is_(None))
    )
    assert free_in_d0 and free_in_d0 > 0


async def test_placement_reads_only_the_domains_over_budget_with_their_figures(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    """Placement's inputs name the domains a request's partitions do not fit (budget, groups in use,
    groups the partitions not yet there would add) and no other: a domain where a partition is
    present already needs nothing for it, and a domain with room is not sent at all (every domain's
    list of present partitions, read for every create, grew with the site)."""
    await set_budget(session, world, 40)
    # a (32) is present in domain 0; b (16) in domain 1.
    lps = await a_and_b_present(client, headers, world, session, {"a": 32, "b": 16, "c": 16})
    d0, d1 = world.domains
    site_id, type_id = world.site.id, world.instance_type.id

    async def over(*names: str) -> list[tuple[uuid.UUID, int, int, int]]:
        conn = await driver_connection(session)
        ids = [lps[n] for n in names]
        found = await placement_inputs(conn, site_id, type_id, ids, budgets=True, per_kind=8)
        await session.rollback()
        return sorted(found.budgets)

    # b is in domain 1 already (nothing needed there); domain 0 holds a's 32 of 40.
    assert await over("b") == [(d0, 40, 32, 16)]
    assert await over("a") == [(d1, 40, 16, 32)]  # a is in domain 0 already
    assert await over("c") == [(d0, 40, 32, 16)]  # domain 1 has room for c: not sent
    assert await over("a", "c") == sorted([(d0, 40, 32, 16), (d1, 40, 16, 48)])
