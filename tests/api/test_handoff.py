"""Every request that changes desired NVLink state NOTIFYs the reconciler with the right domains
(heard on a separate LISTEN connection); requests that change none, or are rejected, send nothing."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest_asyncio
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.engine import libpq_url
from nico.db.models import Instance, Machine, PhysicalPartition
from nico.reconciler.lifecycle import apply_nvlink_observation
from nico.services.nvlink_events import CHANNEL, parse_payload, payload
from tests.api.conftest import BASE, batch_body, instance_body
from tests.support import factories as f


class Listener:
    """Notifications on ``nico_nvlink``, read in order with a deadline."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], url: str) -> None:
        self.conn, self.url = conn, url
        self.stream = conn.notifies(timeout=10)

    async def next(self) -> set[uuid.UUID]:
        note = await anext(self.stream)
        return parse_payload(note.payload)

    async def assert_silent(self) -> None:
        """Nothing was sent before a marker sent now (notifications arrive in commit order)."""
        marker = uuid.uuid4()
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as other:
            await other.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload([marker])))
        assert await self.next() == {marker}


@pytest_asyncio.fixture
async def listener(database_url: str, db: str) -> AsyncIterator[Listener]:
    url = libpq_url(database_url)
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute(f"LISTEN {CHANNEL}")
    try:
        yield Listener(conn, url)
    finally:
        await conn.close()


async def domain_of(session: AsyncSession, machine_id: str) -> uuid.UUID:
    domain = await session.scalar(select(Machine.domain_uuid).where(Machine.id == machine_id))
    assert domain is not None
    return domain


async def test_each_change_notifies_its_domains(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    listener: Listener,
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    binding = [{"nvLinkLogicalPartitionId": str(partition.id), "deviceInstance": 0}]

    created = (
        await client.post(
            f"{BASE}/instance", json=instance_body(world, nvLinkInterfaces=binding), headers=headers
        )
    ).json()
    home = await domain_of(session, created["machineId"])
    assert await listener.next() == {home}

    batch = (
        await client.post(f"{BASE}/instance/batch", json=batch_body(world, count=2), headers=headers)
    ).json()
    assert await listener.next() == {await domain_of(session, batch[0]["machineId"])}

    url = f"{BASE}/instance/{created['id']}"
    assert (
        await client.patch(
            url, json={"nvLinkInterfaces": [*binding, {**binding[0], "deviceInstance": 1}]}, headers=headers
        )
    ).status_code == 200
    assert await listener.next() == {home}

    assert (await client.patch(url, json={"name": "renamed"}, headers=headers)).status_code == 200
    # Realised (the Deleting row is gone); the same bindings again are the intended no-op.
    iid = uuid.UUID(created["id"])
    version = await session.scalar(select(Instance.nvlink_config_version).where(Instance.id == iid))
    assert version is not None
    assert await apply_nvlink_observation(session, iid, version, {0: (home, 10), 1: (home, 11)})
    await session.commit()
    assert (
        await client.patch(
            url, json={"nvLinkInterfaces": [*binding, {**binding[0], "deviceInstance": 1}]}, headers=headers
        )
    ).status_code == 200  # no-op
    await listener.assert_silent()

    rejected = instance_body(
        world, name="rejected", nvLinkInterfaces=[{"nvLinkLogicalPartitionId": str(uuid.uuid4())}]
    )
    assert (await client.post(f"{BASE}/instance", json=rejected, headers=headers)).status_code == 400
    bad_batch = batch_body(world, count=18)  # more than the free machines: rejected after nothing
    assert (await client.post(f"{BASE}/instance/batch", json=bad_batch, headers=headers)).status_code in (
        403,
        409,
    )
    assert (
        await client.post(
            f"{BASE}/nvlink-logical-partition",
            json={"name": "lp-new", "siteId": str(world.site.id)},
            headers=headers,
        )
    ).status_code == 201
    await listener.assert_silent()

    assert (await client.delete(url, headers=headers)).status_code == 202
    assert await listener.next() == {home}

    spare = await f.logical_partition(session, world.tenant, world.site, name="spare")
    far = next(d for d in world.domains if d != home)
    session.add(
        PhysicalPartition(
            logical_partition_id=spare.id, domain_uuid=far, nmx_partition_id=3, fabric_ref="3", name="pp"
        )
    )
    await session.commit()
    assert (
        await client.delete(f"{BASE}/nvlink-logical-partition/{spare.id}", headers=headers)
    ).status_code == 202
    assert await listener.next() == {far}
    assert (
        await client.delete(f"{BASE}/nvlink-logical-partition/{partition.id}", headers=headers)
    ).status_code == 400
    await listener.assert_silent()
