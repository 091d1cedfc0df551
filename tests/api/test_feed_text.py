"""The scheduler feed's events as PostgreSQL writes them (``feed.event_text_after``): byte for byte the
text the stream wrote when it built each body in Python (``json.dumps`` of a dict, the time by
``isoformat``), in every session time zone, for names no JSON writer leaves alone; and a stream whose
read fills a batch reads on at once, every event once, in order."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.engine import libpq_url
from nico.db.queries import feed
from nico.db.raw import Numbered, raw_cursor
from nico.services import feed_stream
from nico.services.feed_export import Scope
from nico.services.feed_stream import Read, as_python_writes
from tests.api.test_feed_event_log import Streamed, _all_final
from tests.support import factories as f
from tests.support.waiting import wait_for

TENANT_SCOPE = {"tenant": True, "provider": False, "site": False}
# Names a JSON writer may escape: quotes and backslashes, a tab, DEL, accents, CJK, an emoji
# (astral: a surrogate pair in Python's \\u escapes), and none at all.
NAMES = ["plain-1", 'a "quoted" \\ name', "tab\there", "del\x7fete", "Zoë", "名前", "rocket 🚀", None]


def python_text(row: dict[str, Any]) -> str:
    """An event as the stream wrote it before PostgreSQL did: the reference this test holds the
    statement to."""
    body = {
        "kind": row["kind"],
        "time": row["created"].isoformat(),
        "instanceId": str(row["instance_id"]),
        "instanceName": row["instance_name"],
        "nvLinkInterfaceId": str(row["interface_id"]),
        "deviceInstance": row["device_instance"],
        "siteId": str(row["site_id"]),
        "nvLinkDomainId": str(row["domain_uuid"]) if row["domain_uuid"] is not None else None,
        "nvLinkLogicalPartitionId": str(row["logical_partition_id"]),
        "nvLinkCliqueId": row["clique_id"],
    }
    if row.get("health") is not None:
        body["nvLinkHealth"] = row["health"]
    data = json.dumps(body, separators=(",", ":"))
    return f"id: {row['txid']}-{row['id']}\nevent: placement\ndata: {data}\n\n"


async def _insert_events(session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID) -> None:
    """One event per name, in one transaction that announces them, with every optional column both
    null and set and a time with and without a fraction of a second."""
    for index, name in enumerate(NAMES):
        await session.execute(
            text(
                "INSERT INTO placement_event (txid, created, tenant_id, site_id, instance_id, instance_name,"
                " interface_id, device_instance, kind, domain_uuid, logical_partition_id, clique_id, health)"
                " VALUES (pg_current_xact_id()::text::bigint, CAST(:created AS timestamptz), :tenant, :site,"
                " gen_random_uuid(), :name, gen_random_uuid(), :device, :kind, :domain, gen_random_uuid(),"
                " :clique, :health)"
            ),
            {
                "created": f"2026-07-0{1 + index % 3} 23:59:5{index}.{index * 111111 % 1000000:06d}+00"
                if index % 2
                else "2026-01-15 06:30:00+00",
                "tenant": tenant_id,
                "site": site_id,
                "name": name,
                "device": index % 4,
                "kind": ["Pending", "Ready", "Removed", "Error"][index % 4],
                "domain": uuid.uuid4() if index % 3 else None,
                "clique": f"{uuid.uuid4()}.{index}" if index % 2 else None,
                "health": "DEGRADED" if index % 3 == 1 else None,
            },
        )
    # What the triggers of nvlink_interface send with their events: the stream's wake-up.
    await session.execute(text(f"NOTIFY {feed.CHANNEL}, '{tenant_id}:{site_id}'"))
    await session.commit()


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/St_Johns"])
async def test_postgresql_writes_each_event_as_the_stream_wrote_it_in_python(
    session: AsyncSession, database_url: str, zone: str
) -> None:
    world = await f.nvlink_site(session, racks=1, trays=1)
    await _insert_events(session, world.tenant.id, world.site.id)
    url = libpq_url(database_url)
    await wait_for(lambda: _all_final(url), within=30, what="the events final")
    params = {"tenant": world.tenant.id, "after_txid": 0, "after_id": 0, "limit": 100}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f"SET TimeZone = '{zone}'")
        rows = await (
            await conn.cursor(row_factory=dict_row).execute(feed.events_after(**TENANT_SCOPE), params)
        ).fetchall()
        statement = Numbered.of(feed.event_text_after(**TENANT_SCOPE))
        async with raw_cursor(conn) as cursor:
            await cursor.execute(statement.sql, statement.values(params))
            read = Read(*(await cursor.fetchone() or ()))
    assert len(rows) == len(NAMES)
    assert read.text is not None and not read.text.isascii()  # the names make Python write it again
    assert as_python_writes(read.text) == "".join(python_text(row) for row in rows)
    assert read.last == [rows[-1]["txid"], rows[-1]["id"]]
    assert read.pending is None and read.read == len(NAMES)


def test_text_of_printable_ascii_is_sent_as_postgresql_wrote_it() -> None:
    written = 'id: 1-2\nevent: placement\ndata: {"instanceName":"a \\"b\\" \\\\ c\\u0001"}\n\n'
    assert as_python_writes(written) is written
    deleted = 'id: 1-3\nevent: placement\ndata: {"instanceName":"del\x7fete"}\n\n'  # ASCII, not printable
    assert (
        as_python_writes(deleted) == 'id: 1-3\nevent: placement\ndata: {"instanceName":"del\\u007fete"}\n\n'
    )
    accented = 'id: 1-4\nevent: placement\ndata: {"instanceName":"Zoë"}\n\n'
    assert as_python_writes(accented) == 'id: 1-4\nevent: placement\ndata: {"instanceName":"Zo\\u00eb"}\n\n'


async def test_a_read_that_fills_a_batch_reads_on_at_once(
    session: AsyncSession, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight events, read three at a time: the stream sends all eight, each once and in order, without
    waiting for another notification (none comes) or a heartbeat."""
    monkeypatch.setattr(feed_stream, "BATCH", 3)
    world = await f.nvlink_site(session, racks=1, trays=1)
    await wait_for(lambda: _all_final(libpq_url(database_url)), within=30, what="the events so far final")
    streamed = Streamed(database_url, world.tenant.id)
    try:
        async with asyncio.timeout(30):
            await streamed.started.wait()
        await _insert_events(session, world.tenant.id, world.site.id)  # one commit, one notification
        await wait_for(lambda: len(streamed.events) >= len(NAMES), within=10, what="every event streamed")
    finally:
        await streamed.stop()
    assert [e["instanceName"] for e in streamed.events] == NAMES
    cursors = [tuple(int(part) for part in e["id"].split("-")) for e in streamed.events]
    assert cursors == sorted(set(cursors))


async def test_every_scope_s_read_runs_and_keeps_to_its_scope(
    session: AsyncSession, database_url: str
) -> None:
    """A tenant's, a tenant's at one site, a provider's at one site, and a provider's everywhere: each
    read (its statement numbered as the stream numbers it) finds the events of its scope only."""
    world = await f.nvlink_site(session, racks=1, trays=1)
    await _insert_events(session, world.tenant.id, world.site.id)
    await _insert_events(session, uuid.uuid4(), uuid.uuid4())  # another tenant, at no site of the provider
    url = libpq_url(database_url)
    await wait_for(lambda: _all_final(url), within=30, what="the events final")
    provider = world.site.infrastructure_provider_id
    scopes = [
        Scope(tenant_id=world.tenant.id),
        Scope(tenant_id=world.tenant.id, site_id=world.site.id),
        Scope(provider_id=provider, site_id=world.site.id),
        Scope(provider_id=provider),
    ]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for scope in scopes:
            kind = {"tenant": scope.tenant_id is not None, "provider": scope.provider_id is not None}
            statement = Numbered.of(feed.event_text_after(**kind, site=scope.site_id is not None))
            params = scope.params() | {"after_txid": 0, "after_id": 0, "limit": 100}
            async with psycopg.AsyncRawCursor(conn) as cursor:
                await cursor.execute(statement.sql, statement.values(params))
                read = Read(*(await cursor.fetchone() or ()))
            assert read.read == len(NAMES), scope
            assert read.text is not None and read.text.count(f'"siteId":"{world.site.id}"') == len(NAMES)
