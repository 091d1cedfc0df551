"""``GET /nvlink-topology/events`` through a real SSE client (httpx-sse) against two API replicas
served by uvicorn on loopback: a Ready interface reaches both streams within 1 s, a client that
reconnects to the other replica with ``Last-Event-ID`` misses nothing, and tenants see only their own
placement."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent, aconnect_sse
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.queries.feed import PRUNE as PRUNE_SQL
from tests.api.conftest import BASE, instance_body, make_instances
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.placement import realise
from tests.support.replica import replica

EVENTS = "/nvlink-topology/events"
READY_WITHIN = 1.0  # the bound from Ready to the event on the stream
DEADLINE = 20.0


class Consumer:
    """An SSE client reading one stream into a queue until stopped."""

    def __init__(self, url: str, headers: dict[str, str], last_event_id: str | None = None) -> None:
        self.queue: asyncio.Queue[ServerSentEvent] = asyncio.Queue()
        headers = dict(headers)
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        self._task = asyncio.create_task(self._run(url, headers))

    async def _run(self, url: str, headers: dict[str, str]) -> None:
        async with (
            httpx.AsyncClient(timeout=httpx.Timeout(DEADLINE, read=None)) as client,
            aconnect_sse(client, "GET", url, headers=headers) as source,
        ):
            assert source.response.status_code == 200, await source.response.aread()
            async for event in source.aiter_sse():
                await self.queue.put(event)

    async def next(self, event: str = "placement", within: float = DEADLINE) -> ServerSentEvent:
        async with asyncio.timeout(within):
            while True:
                got = await self.queue.get()
                if got.event == event:
                    return got

    async def take(self, count: int, within: float = DEADLINE) -> list[ServerSentEvent]:
        return [await self.next(within=within) for _ in range(count)]

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def body(event: ServerSentEvent) -> dict[str, Any]:
    data: dict[str, Any] = event.json()
    return data


@pytest.mark.e2e
async def test_stream_across_replicas_resumes_without_loss(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
    database_url: str,
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    instances = await make_instances(client, headers, world, partition.id, 2)
    async with replica(settings, database_url) as a, replica(settings, database_url) as b:
        on_a = Consumer(f"{a}{BASE}{EVENTS}", headers)
        on_b = Consumer(f"{b}{BASE}{EVENTS}", headers)
        await on_a.next("hello")
        await on_b.next("hello")

        clique = await realise(session, instances[0], partition.id, 9)
        await session.commit()
        first_a = await on_a.next(within=READY_WITHIN)
        first_b = await on_b.next(within=READY_WITHIN)
        assert first_a.id == first_b.id  # both replicas stream the database's events, in one order
        assert body(first_a)["kind"] == "Ready" and body(first_a)["nvLinkCliqueId"] == clique
        assert body(first_a)["instanceId"] == str(instances[0])
        assert body(first_a)["nvLinkDomainId"] == clique.split(".")[0]
        await on_a.stop()  # disconnects after the first of four events

        second = await realise(session, instances[1], partition.id, 9)
        await session.commit()
        live = [first_b, *await on_b.take(7)]
        assert [body(e)["kind"] for e in live] == ["Ready"] * 8
        assert {body(e)["nvLinkCliqueId"] for e in live} == {clique} == {second}
        assert len({body(e)["nvLinkInterfaceId"] for e in live}) == 8

        # Reconnect to the other replica with the last id seen: the seven missed events, in order.
        resumed = Consumer(f"{b}{BASE}{EVENTS}", headers, last_event_id=first_a.id)
        await resumed.next("hello")
        again = await resumed.take(7)
        assert [(e.id, e.data) for e in again] == [(e.id, e.data) for e in live[1:]]
        await resumed.stop()
        await on_b.stop()


@pytest.mark.e2e
async def test_stream_is_tenant_scoped(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
    database_url: str,
) -> None:
    mine = await f.logical_partition(session, world.tenant, world.site)
    other = await f.tenant(session, "other-org")
    await f.allocation(session, other, world.site, world.instance_type, 2)
    theirs_lp = await f.logical_partition(session, other, world.site, name="theirs")
    their_vpc = await f.vpc(session, other, world.site, name="vpc-theirs")
    their_subnet = await f.subnet(session, their_vpc, name="subnet-theirs")
    await session.commit()
    their_headers = bearer(settings, "other-org")
    (my_instance,) = await make_instances(client, headers, world, mine.id, 1)
    items = [{"nvLinkLogicalPartitionId": str(theirs_lp.id), "deviceInstance": i} for i in range(4)]
    their_body = instance_body(world, name="theirs-0", nvLinkInterfaces=items)
    their_body |= {"vpcId": str(their_vpc.id), "interfaces": [{"subnetId": str(their_subnet.id)}]}
    response = await client.post("/v2/org/other-org/nico/instance", json=their_body, headers=their_headers)
    assert response.status_code == 201, response.text
    their_instance = uuid.UUID(response.json()["id"])
    async with replica(settings, database_url) as a:
        watcher = Consumer(f"{a}/v2/org/other-org/nico{EVENTS}", their_headers)
        await watcher.next("hello")
        await realise(session, my_instance, mine.id, 4)  # the other tenant must not see this
        await session.commit()
        await realise(session, their_instance, theirs_lp.id, 5)
        await session.commit()
        seen = await watcher.take(4)
        assert {body(e)["instanceId"] for e in seen} == {str(their_instance)}
        assert {body(e)["nvLinkLogicalPartitionId"] for e in seen} == {str(theirs_lp.id)}
        await watcher.stop()


async def test_bad_last_event_id(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    response = await client.get(f"{BASE}{EVENTS}", headers=headers | {"Last-Event-ID": "yesterday"})
    assert response.status_code == 400
    assert "Last-Event-ID" in response.json()["message"]


@pytest.mark.e2e
async def test_resume_past_the_retention_window_says_reset(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    settings: Settings,
    database_url: str,
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    (instance,) = await make_instances(client, headers, world, partition.id, 1)
    async with replica(settings, database_url) as a:
        watcher = Consumer(f"{a}{BASE}{EVENTS}", headers)
        await watcher.next("hello")
        await realise(session, instance, partition.id, 3)
        await session.commit()
        seen = await watcher.take(4)
        await watcher.stop()
        # Retention pruning removes old events: an old cursor can no longer promise a complete replay.
        await session.execute(
            text("UPDATE placement_event SET created = now() - interval '2 days' WHERE id <= :id"),
            {"id": int(seen[1].id.split("-")[1])},
        )
        await session.execute(
            text(PRUNE_SQL.replace("%(seconds)s", ":seconds")),
            {"seconds": settings.api.placement_event_retention_seconds},
        )
        await session.commit()
        resumed = Consumer(f"{a}{BASE}{EVENTS}", headers, last_event_id=seen[0].id)
        reset = await resumed.next("reset")
        assert reset.id and reset.id != seen[0].id
        await resumed.stop()
        intact = Consumer(f"{a}{BASE}{EVENTS}", headers, last_event_id=seen[2].id)
        assert (await intact.next()).id == seen[3].id
        await intact.stop()
