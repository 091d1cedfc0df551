"""The placement event log written by the triggers of migration 0005: one row per interface change,
with the tenant, the domain and the clique id; a repartition under Ready interfaces and a removal are
events too."""

from __future__ import annotations

import uuid

import httpx
from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import NvlinkInterface, PhysicalPartition, PlacementEvent
from tests.api.conftest import BASE, instance_body
from tests.support import factories as f
from tests.support.placement import realise


async def events(session: AsyncSession, after: int = 0) -> list[PlacementEvent]:
    rows = await session.scalars(
        select(PlacementEvent).where(PlacementEvent.id > after).order_by(PlacementEvent.id)
    )
    return list(rows)


async def test_interface_lifecycle_is_logged(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    items = [{"nvLinkLogicalPartitionId": str(partition.id), "deviceInstance": i} for i in range(4)]
    response = await client.post(
        f"{BASE}/instance", json=instance_body(world, name="node-0", nvLinkInterfaces=items), headers=headers
    )
    assert response.status_code == 201, response.text
    instance = uuid.UUID(response.json()["id"])

    created = await events(session)
    assert [e.kind for e in created] == ["Pending"] * 4
    assert {e.tenant_id for e in created} == {world.tenant.id}
    assert {e.instance_name for e in created} == {"node-0"}
    assert {e.clique_id for e in created} == {None}
    domain = created[0].domain_uuid
    assert domain in world.domains  # the machine's domain, known before the fabric holds the GPU

    clique = await realise(session, instance, partition.id, 11)
    await session.commit()
    ready = await events(session, created[-1].id)
    assert [e.kind for e in ready] == ["Ready"] * 4
    assert {e.clique_id for e in ready} == {clique} == {f"{domain}.11"}

    # A repartition: the same interfaces, a new NMX partition id -> a new clique, announced.
    await session.execute(
        update(PhysicalPartition)
        .where(PhysicalPartition.logical_partition_id == partition.id)
        .values(nmx_partition_id=12, fabric_ref="12")
    )
    await session.commit()
    moved = await events(session, ready[-1].id)
    assert [e.kind for e in moved] == ["Ready"] * 4
    assert {e.clique_id for e in moved} == {f"{domain}.12"}

    # An unrelated column change is no event.
    await session.execute(update(NvlinkInterface).values(device="gpu"))
    await session.commit()
    assert await events(session, moved[-1].id) == []

    await session.execute(delete(NvlinkInterface).where(NvlinkInterface.instance_id == instance))
    await session.commit()
    removed = await events(session, moved[-1].id)
    assert [e.kind for e in removed] == ["Removed"] * 4
    assert {e.interface_id for e in removed} == {e.interface_id for e in created}
