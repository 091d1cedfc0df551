"""The placement event log written by the triggers of migration 0005: one row per interface change,
with the tenant, the domain and the clique id; a repartition under Ready interfaces and a removal are
events too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import delete, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.engine import libpq_url
from nico.db.models import FeedEvent, Instance, Machine, NvlinkInterface, PhysicalPartition
from nico.db.queries import feed
from nico.db.raw import Numbered, RawPool, driver_connection
from nico.services.feed_export import Scope
from nico.services.feed_stream import FeedListener, Waiter, parse_audience, stream
from tests.api.conftest import BASE, batch_body, instance_body
from tests.support import factories as f
from tests.support.placement import realise
from tests.support.waiting import wait_for


async def events(session: AsyncSession, after: int = 0) -> list[FeedEvent]:
    rows = await session.scalars(select(FeedEvent).where(FeedEvent.id > after).order_by(FeedEvent.id))
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


async def test_one_statement_over_many_rows_logs_each_row_once_in_row_order(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    """Migration 0010's statement triggers: a statement that inserts, updates or deletes many bindings
    logs one event per changed row (in the statement's row order, each with its own instance, tenant,
    domain and clique), none for rows it left as they were, and NOTIFYs once."""
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    items = [{"nvLinkLogicalPartitionId": str(partition.id), "deviceInstance": i} for i in (3, 1, 0, 2)]
    batch = await client.post(
        f"{BASE}/instance/batch", json=batch_body(world, count=3, nvLinkInterfaces=items), headers=headers
    )
    assert batch.status_code == 201, batch.text
    created = await events(session)
    instances = [i["id"] for i in batch.json()]
    bindings = [(i["id"], n["id"]) for i in batch.json() for n in i["nvLinkInterfaces"]]
    assert [(str(e.instance_id), str(e.interface_id)) for e in created] == bindings  # the insert's order
    assert [e.kind for e in created] == ["Pending"] * 12
    assert [e.instance_name for e in created] == [i["name"] for i in batch.json() for _ in range(4)]
    assert {e.tenant_id for e in created} == {world.tenant.id}
    machines = await session.execute(
        select(Machine.instance_id, Machine.domain_uuid).where(Machine.instance_id.in_(instances))
    )
    domain_of = {str(i): d for i, d in machines}
    assert [e.domain_uuid for e in created] == [domain_of[i] for i, _ in bindings]

    # One UPDATE: two instances' bindings become Ready (a clique each), the third's only change a
    # column no event shows.
    first, second, third = (uuid.UUID(i) for i in instances)
    await session.execute(
        text(
            "INSERT INTO physical_partition (id, logical_partition_id, domain_uuid, nmx_partition_id, "
            "fabric_ref, name) VALUES (:id, :lp, :domain, 77, '77', 'pp')"
        ),
        {"id": uuid.uuid4(), "lp": partition.id, "domain": domain_of[str(first)]},
    )
    await session.commit()
    seen = await events(session, created[-1].id)
    await session.execute(
        text(
            "UPDATE nvlink_interface n SET "
            "status = CASE WHEN n.instance_id = :third THEN n.status ELSE 'Ready' END, "
            "domain_uuid = CASE WHEN n.instance_id = :third THEN NULL ELSE m.domain_uuid END, device = 'x' "
            "FROM machine m WHERE m.instance_id = n.instance_id AND n.instance_id = ANY(:ids)"
        ),
        {"third": third, "ids": [first, second, third]},
    )
    await session.commit()
    updated = await events(session, (seen or created)[-1].id)
    assert sorted(str(e.interface_id) for e in updated) == sorted(b for i, b in bindings if i != str(third))
    assert [e.kind for e in updated] == ["Ready"] * 8
    clique = {e.instance_id: e.clique_id for e in updated}
    assert clique[first] == f"{domain_of[str(first)]}.77"
    # The second instance's domain has no physical partition of the LP (unless both share one).
    assert clique[second] == (clique[first] if domain_of[str(second)] == domain_of[str(first)] else None)

    # One DELETE of every binding (the instances' cascade): one Removed each, no name once the
    # instance is gone.
    await session.execute(delete(NvlinkInterface).where(NvlinkInterface.instance_id.in_([first, second])))
    await session.commit()
    removed = await events(session, updated[-1].id)
    assert sorted(str(e.interface_id) for e in removed) == sorted(b for i, b in bindings if i != str(third))
    assert [e.kind for e in removed] == ["Removed"] * 8
    # The cascade meets the rows in its scan's order: by their versions' places in a sequential scan,
    # by the places they were first written in an index scan (a HOT update keeps the index pointing
    # there), and which one it takes follows the tables' statistics; each row once either way (the
    # statement's row order is held by the insert above, whose order is the statement's own).
    third_bindings = sorted(b for i, b in bindings if i == str(third))
    await session.execute(text("DELETE FROM instance WHERE id = :id"), {"id": third})
    await session.commit()
    cascaded = await events(session, removed[-1].id)
    assert sorted(str(e.interface_id) for e in cascaded) == third_bindings
    assert [(e.kind, e.instance_name) for e in cascaded] == [("Removed", None)] * 4


async def two_instances_in_a_partition(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    """A batch of two instances, every GPU bound to a new logical partition of the tenant: 8 events."""
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    items = [{"nvLinkLogicalPartitionId": str(partition.id), "deviceInstance": i} for i in range(4)]
    batch = await client.post(
        f"{BASE}/instance/batch", json=batch_body(world, count=2, nvLinkInterfaces=items), headers=headers
    )
    assert batch.status_code == 201, batch.text


async def test_a_statement_notifies_only_when_it_logged_events(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    database_url: str,
) -> None:
    await two_instances_in_a_partition(client, headers, world, session)
    url = libpq_url(database_url)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as listener:
        await listener.execute("LISTEN nico_placement")
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as writer:
            await writer.execute("UPDATE nvlink_interface SET device = 'unrelated'")  # no event
            await writer.execute("NOTIFY nico_placement, 'first done'")
            await writer.execute("UPDATE nvlink_interface SET status = 'Error'")  # 8 events
            await writer.execute("NOTIFY nico_placement, 'second done'")
        got = []
        async for note in listener.notifies(timeout=30):  # a deadline; the sentinel ends it
            got.append(note.payload)
            if note.payload == "second done":
                break
    # The events' audience (migration 0011): the one (tenant, site) pair of the 8 events.
    assert got == ["first done", f"{world.tenant.id}:{world.site.id}", "second done"]


async def test_a_notification_wakes_only_the_streams_it_names(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    database_url: str,
) -> None:
    """One tenant's change wakes that tenant's streams and the site's provider streams, not another
    tenant's (which used to read, find nothing and retry on every change of the site), even one that
    waits for events of its own to become final: the horizon's prober wakes that one, when the
    horizon has passed them (used to be: on every commit)."""
    other, bystander = uuid.uuid4(), uuid.uuid4()
    raw = RawPool(database_url, 2)
    listener = FeedListener(database_url, raw)
    mine = await listener.acquire(Scope(tenant_id=world.tenant.id))
    theirs = await listener.acquire(Scope(tenant_id=other))
    waiting = await listener.acquire(Scope(tenant_id=other, site_id=world.site.id))
    listener.wait_for_horizon(waiting, 2**62)  # its own events, not final for as long as this test runs
    provider_site = await listener.acquire(Scope(provider_id=uuid.uuid4(), site_id=world.site.id))
    provider_elsewhere = await listener.acquire(Scope(provider_id=uuid.uuid4(), site_id=uuid.uuid4()))
    sentinel = await listener.acquire(Scope(tenant_id=bystander))
    try:
        await two_instances_in_a_partition(client, headers, world, session)
        async with await psycopg.AsyncConnection.connect(libpq_url(database_url), autocommit=True) as c:
            await c.execute(f"NOTIFY nico_placement, '{bystander}:{uuid.uuid4()}'")
        # Notifications arrive in commit order: once the sentinel's is in, the batch's was handled.
        assert await sentinel.wait(0, 30.0)
        assert mine.generation == 1
        assert provider_site.generation == 1
        await wait_for(lambda: listener.probes >= 1, within=30, what="the horizon probed")
        assert theirs.generation == 0 and provider_elsewhere.generation == 0 and waiting.generation == 0
    finally:
        for waiter in (mine, theirs, waiting, provider_site, provider_elsewhere, sentinel):
            await listener.release(waiter)
        await raw.close()


class Streamed:
    """One tenant's placement event stream (the service's generator, on a real database), read into
    a list by a task."""

    def __init__(self, database_url: str, tenant_id: uuid.UUID) -> None:
        self.raw = RawPool(database_url, 4)
        self.listener = FeedListener(database_url, self.raw)
        self.events: list[dict[str, Any]] = []
        self.started = asyncio.Event()
        body = stream(
            self.raw,
            self.listener,
            Scope(tenant_id=tenant_id),
            None,
            heartbeat_seconds=30,
            retention_seconds=3600,
        )
        self._task = asyncio.create_task(self._read(body))

    async def _read(self, body: AsyncIterator[str]) -> None:
        async for text_ in body:  # a write may hold several events, each ended by a blank line
            for block in text_.split("\n\n"):
                event = dict(line.split(": ", 1) for line in block.strip().splitlines() if ": " in line)
                if event.get("event") == "hello":
                    self.started.set()
                elif event.get("event") == "placement":
                    self.events.append({"id": event["id"], **json.loads(event["data"])})

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self.raw.close()


async def _all_final(url: str) -> bool:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT coalesce(max(txid), 0) < pg_snapshot_xmin(pg_current_snapshot())::text::bigint "
            "FROM placement_event"
        )
        row = await cur.fetchone()
        return row is not None and bool(row[0])


async def _bindings_of(session: AsyncSession, tenant_id: uuid.UUID) -> list[uuid.UUID]:
    rows = await session.scalars(
        select(NvlinkInterface.instance_id)
        .join(Instance, Instance.id == NvlinkInterface.instance_id)
        .where(Instance.tenant_id == tenant_id)
        .group_by(NvlinkInterface.instance_id)
        .order_by(NvlinkInterface.instance_id)
    )
    return list(rows)


@pytest.mark.parametrize("older_writes_events", [True, False], ids=["older-announces", "older-silent"])
async def test_a_stream_holds_events_until_every_older_transaction_ended(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    database_url: str,
    older_writes_events: bool,
) -> None:
    """A transaction that began before another and commits after it: the newer one's events wait on
    the stream until the older one has ended, then come after the older one's, none lost. With
    ``older-silent`` the older transaction writes no event, so its commit announces nothing and only
    the horizon's prober, probing on its own, can release the newer events."""
    fail = "UPDATE nvlink_interface SET status = 'Error' WHERE instance_id = %s"  # 4 events
    await two_instances_in_a_partition(client, headers, world, session)
    first, second = await _bindings_of(session, world.tenant.id)
    url = libpq_url(database_url)
    # On a server shared with other sessions (parallel test workers) their transactions hold the
    # horizon back: wait until the events so far are final, so the stream starts after them.
    await wait_for(lambda: _all_final(url), within=30, what="the events so far final")
    streamed = Streamed(database_url, world.tenant.id)
    try:
        async with asyncio.timeout(30):
            await streamed.started.wait()
        async with (
            await psycopg.AsyncConnection.connect(url) as older,
            await psycopg.AsyncConnection.connect(url, autocommit=True) as newer,
        ):
            if older_writes_events:
                await older.execute(fail, [first])
            else:
                await older.execute("SELECT pg_current_xact_id()")  # a txid, and no event
            await newer.execute(fail, [second])
            # The stream has read the newer events and found them not final (or, wrongly, sent
            # them), and the horizon has been probed twice since (after the newer commit's
            # notification, then on its own).
            await wait_for(
                lambda: streamed.listener.probes >= 2 or streamed.events, within=30, what="two probes"
            )
            assert streamed.events == []
            await older.commit()
        expected = 8 if older_writes_events else 4
        await wait_for(lambda: len(streamed.events) >= expected, within=30, what="the events streamed")
    finally:
        await streamed.stop()
    got = [(uuid.UUID(e["instanceId"]), e["kind"]) for e in streamed.events]
    assert got == ([(first, "Error")] * 4 if older_writes_events else []) + [(second, "Error")] * 4
    cursors = [tuple(int(part) for part in e["id"].split("-")) for e in streamed.events]
    assert cursors == sorted(cursors)


def test_a_notification_names_its_audience_or_everyone() -> None:
    tenant, site = uuid.uuid4(), uuid.uuid4()
    assert parse_audience(f"{tenant}:{site},:{site}") == {(str(tenant), str(site)), ("", str(site))}
    assert parse_audience("") is None  # too many pairs to name: every stream reads
    assert parse_audience("not a pair") is None  # a writer that names no audience
    assert Waiter(Scope(tenant_id=tenant)).concerned(None)


async def test_a_tenant_or_site_stream_reads_a_range_of_its_scope_s_index_for_any_values(
    session: AsyncSession,
) -> None:
    """A stream's read is planned once per connection: its generic plan (the one PostgreSQL settles on
    for any values) is a range of the scope's index, not a walk of every event after the cursor
    filtered by tenant (what a read with optional filters gets), nor a plan for each read."""
    world = await f.nvlink_site(session, racks=1, trays=1)
    others = [uuid.uuid4() for _ in range(16)]
    await session.execute(
        text(
            "INSERT INTO placement_event (id, txid, created, tenant_id, site_id, instance_id, instance_name,"
            " interface_id, device_instance, kind, logical_partition_id)"
            " SELECT g, 1000 + g / 4, now(), (CAST(:tenants AS uuid[]))[1 + (g / 8) % 17], :site,"
            " gen_random_uuid(), 'x', gen_random_uuid(), g % 4, 'Ready', gen_random_uuid()"
            " FROM generate_series(1, 4000) g"
        ),
        {"tenants": [world.tenant.id, *others], "site": world.site.id},
    )
    await session.execute(text("ANALYZE placement_event"))
    driver = await driver_connection(session)
    # The generic plan, as PostgreSQL 15 shows it too (EXPLAIN (GENERIC_PLAN) is 16's): the statement
    # prepared under force_generic_plan, explained for any values (nulls).
    await driver.execute("SET LOCAL plan_cache_mode = force_generic_plan", prepare=False)
    for number, (scope, index) in enumerate(
        [
            ({"tenant": True, "provider": False, "site": False}, "ix_placement_event_tenant"),
            ({"tenant": True, "provider": False, "site": True}, "ix_placement_event_tenant"),
            ({"tenant": False, "provider": True, "site": True}, "ix_placement_event_site"),
        ]
    ):
        numbered = Numbered.of(feed.event_text_after(**scope))
        await driver.execute(f"PREPARE stream_read_{number} AS {numbered.sql}", prepare=False)
        nulls = ", ".join("NULL" for _ in numbered.names)
        explained = await driver.execute(f"EXPLAIN EXECUTE stream_read_{number}({nulls})", prepare=False)
        plan = "\n".join(row[0] for row in await explained.fetchall())
        assert f"Index Scan using {index}" in plan, plan
        assert "ROW(txid, id)" not in plan, plan  # the range starts at the scope's key
