"""The live stream of NVLink placement changes (nico extension, ``GET /nvlink-topology/events``).

Events come from PostgreSQL, not from process memory: triggers append one ``placement_event`` row per
changed interface and ``NOTIFY nico_placement`` (migrations 0005, 0010), so every API replica streams
the same events whichever process (API or reconciler) made the change. Each process holds one ``LISTEN``
connection while it has open streams; a notification names the (tenant, site) pairs of its events
(migration 0011) and wakes only the streams of those tenants and sites (a provider's streams: of those
sites), which then read the rows after their cursors. A stream that misses a notification (the
listener reconnecting) still reads at its next heartbeat.

The cursor (the SSE ``id``, sent back as ``Last-Event-ID``) is ``<txid>-<id>``: events are delivered
in (writing transaction, row) order and only from transactions older than every running one, so a
slow transaction that commits late never lands behind a cursor that has moved on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from nico.db.engine import libpq_url
from nico.db.queries import placement_events as q
from nico.db.raw import RawPool
from nico.services.errors import bad_request
from nico.services.placement_export import Scope

log = logging.getLogger(__name__)

BATCH = 500
RETRY_MS = 1000
PRUNE_EVERY_SECONDS = 60.0
# A notification whose events are not final yet (an older writing transaction still runs) is read
# again after SETTLE_FIRST, then twice as long each time up to SETTLE_LAST. The writers that hold the
# horizon back are short (a create writes in the round trip of its commit; a pass's write-back is two
# round trips), so the first retry comes soon: 20 ms made the last Ready event of an instance wait
# for it more often than not under 16 tenants.
SETTLE_FIRST, SETTLE_LAST = 0.005, 2.0
_CURSOR = re.compile(r"^(\d{1,19})-(\d{1,19})$")


@dataclass(frozen=True)
class Cursor:
    txid: int
    id: int

    def __str__(self) -> str:
        return f"{self.txid}-{self.id}"


def parse_cursor(value: str | None) -> Cursor | None:
    """A ``Last-Event-ID`` as the stream sent it; anything else is a 400."""
    if value is None or value == "":
        return None
    match = _CURSOR.match(value.strip())
    if match is None:
        raise bad_request(f"Invalid Last-Event-ID: {value} (expected <txid>-<id> as sent by this stream)")
    return Cursor(int(match[1]), int(match[2]))


def parse_audience(payload: str) -> frozenset[tuple[str, str]] | None:
    """The ``<tenant>:<site>`` pairs a notification names (migration 0011); None: everyone (an
    empty payload: too many pairs to name, or a writer that names none)."""
    pairs = set()
    for item in payload.split(","):
        tenant, sep, site = item.strip().partition(":")
        if not sep or not site:
            return None
        pairs.add((tenant, site))
    return frozenset(pairs) or None


class Waiter:
    """One stream's wake-up: bumped by the notifications that name its scope's tenant or site."""

    def __init__(self, scope: Scope) -> None:
        self._tenant = str(scope.tenant_id) if scope.tenant_id is not None else None
        self._site = str(scope.site_id) if scope.site_id is not None else None
        self.generation = 0
        self.settling = False
        self._wake = asyncio.Event()

    def concerned(self, audience: frozenset[tuple[str, str]] | None) -> bool:
        """Whether a notification for ``audience`` may hold events of this scope. A provider's
        scope has no tenant and is not told its sites: it wakes for every site, or its one site. A
        stream waiting for its events to become final wakes for every commit that might free them."""
        if audience is None or self.settling:
            return True
        return any(
            (self._tenant is None or tenant == self._tenant) and (self._site is None or site == self._site)
            for tenant, site in audience
        )

    def bump(self) -> None:
        self.generation += 1
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    async def wait(self, seen: int, seconds: float) -> bool:
        """Wait until a notification newer than generation ``seen``; False on timeout."""
        if self.generation != seen:
            return True
        wake = self._wake
        try:
            async with asyncio.timeout(seconds):  # not wait_for: see Reconciler._loop
                await wake.wait()
        except TimeoutError:
            return False
        return True


class PlacementListener:
    """One ``LISTEN nico_placement`` connection per process, shared by every open stream; a
    notification wakes only the streams whose scope it names."""

    def __init__(self, url: str) -> None:
        self._url = libpq_url(url)
        self._waiters: set[Waiter] = set()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._last_prune = 0.0

    async def acquire(self, scope: Scope) -> Waiter:
        async with self._lock:
            if self._task is None or self._task.done():
                conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
                try:
                    await conn.execute(f"LISTEN {q.CHANNEL}")
                except BaseException:
                    await conn.close()
                    raise
                self._task = asyncio.create_task(self._run(conn), name="nico-placement-listener")
            waiter = Waiter(scope)
            self._waiters.add(waiter)
            return waiter

    async def release(self, waiter: Waiter) -> None:
        async with self._lock:
            self._waiters.discard(waiter)
            if not self._waiters and self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._task
                self._task = None

    async def _run(self, conn: psycopg.AsyncConnection[Any]) -> None:
        try:
            async for note in conn.notifies():
                self.notify(parse_audience(note.payload))
        except asyncio.CancelledError:
            raise
        except Exception:  # connection lost: streams fall back to reading at each heartbeat
            log.warning("placement listener lost its connection", exc_info=True)
        finally:
            self.notify(None)
            with contextlib.suppress(Exception):
                await conn.close()

    def notify(self, audience: frozenset[tuple[str, str]] | None) -> None:
        """Wake the streams ``audience`` concerns (None: every stream)."""
        for waiter in self._waiters:
            if waiter.concerned(audience):
                waiter.bump()

    def prune_due(self) -> bool:
        now = time.monotonic()
        if now - self._last_prune < PRUNE_EVERY_SECONDS:
            return False
        self._last_prune = now
        return True


async def _rows(raw: RawPool, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """One statement on a pooled autocommit connection (held only for the statement, never for the
    life of a stream)."""
    async with raw.connection() as conn, conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql, params)
        return await cursor.fetchall()


def event_body(row: dict[str, Any]) -> dict[str, Any]:
    return {
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


def sse(event: str, data: dict[str, Any], cursor: Cursor | None = None) -> str:
    head = f"id: {cursor}\n" if cursor is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def stream(
    raw: RawPool,
    listener: PlacementListener,
    scope: Scope,
    last_event_id: Cursor | None,
    *,
    heartbeat_seconds: float,
    retention_seconds: int,
) -> AsyncIterator[str]:
    """SSE text: ``hello`` (the start cursor), then ``placement`` events, heartbeats when idle, and
    ``reset`` if the resumed cursor is older than the retention window (the client re-reads the export).
    """
    waiter = await listener.acquire(scope)
    try:
        if listener.prune_due():
            await _rows(raw, q.PRUNE, {"seconds": retention_seconds})
        cursor = last_event_id
        yield f"retry: {RETRY_MS}\n\n"
        if cursor is not None and cursor.id != 0:
            (kept,) = await _rows(raw, q.CURSOR_KEPT, {"txid": cursor.txid, "id": cursor.id})
            if not kept["kept"]:
                cursor = None
                reset = True
            else:
                reset = False
        else:
            reset = False
        if cursor is None:
            (start,) = await _rows(raw, q.START, {})
            cursor = Cursor(*start["cursor"])
            if reset:
                yield sse("reset", {"reason": "Last-Event-ID is older than the retention window"}, cursor)
            elif last_event_id is None:
                yield sse("hello", {"retentionSeconds": retention_seconds}, cursor)
        else:
            yield sse("hello", {"retentionSeconds": retention_seconds}, cursor)
        params = scope.params() | {"limit": BATCH}
        # After a notification that brought nothing final (an older transaction still runs and holds
        # the horizon back), read again soon rather than at the next heartbeat.
        backoff: float | None = None
        while True:
            seen = waiter.generation
            after = {"after_txid": cursor.txid, "after_id": cursor.id}
            rows = await _rows(raw, q.EVENTS_AFTER, params | after)
            for row in rows:
                cursor = Cursor(row["txid"], row["id"])
                yield sse("placement", event_body(row), cursor)
            if rows:
                backoff = None
                if len(rows) == BATCH:
                    continue  # more may be waiting
                # Everything final when the read began is sent: what came after has notified (after
                # ``seen``), so the wait below returns at once for it; no read to find nothing.
            timeout = heartbeat_seconds if backoff is None else backoff
            # Told of events that are not final yet: any commit may be the one holding them back.
            waiter.settling = backoff is not None
            if await waiter.wait(seen, timeout):
                backoff = SETTLE_FIRST
            elif backoff is not None and backoff < heartbeat_seconds:
                backoff = min(backoff * 2, heartbeat_seconds)
                if backoff >= SETTLE_LAST:
                    backoff = None
            else:
                backoff = None
                yield ": heartbeat\n\n"
    finally:
        await listener.release(waiter)
