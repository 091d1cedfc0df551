"""The scheduler feed's live stream of NVLink placement changes (nico extension,
``GET /nvlink-topology/events``).

Events come from PostgreSQL, not from process memory: triggers append one ``placement_event`` row per
changed interface and ``NOTIFY nico_placement`` (migrations 0005, 0010), so every API replica streams
the same events whichever process (API or reconciler) made the change. Each process holds one ``LISTEN``
connection while it has open streams; a notification names the (tenant, site) pairs of its events
(migration 0011) and wakes only the streams of those tenants and sites (a provider's streams: of those
sites), which then read the rows after their cursors. A stream that misses a notification (the
listener reconnecting) still reads at its next heartbeat.

The cursor (the SSE ``id``, sent back as ``Last-Event-ID``) is ``<txid>-<id>``: events are delivered
in (writing transaction, row) order and only from transactions older than every running one (below
the horizon), so a slow transaction that commits late never lands behind a cursor that has moved on.
A stream that read events not final yet waits for the horizon to pass them. The listener watches the
horizon for all of its streams at once: one probe after each notification (any commit may be the
one that moves it) or, without any, after a delay that doubles; a stream is woken, and reads again,
only when the horizon has passed its first event not yet final. (Streams that re-read on every
notification while they waited read 6.4 times per instance under 16 tenants.)
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
from typing import Any, NamedTuple

import psycopg
from psycopg.rows import dict_row

from nico.db.engine import libpq_url
from nico.db.queries import feed as q
from nico.db.raw import Numbered, RawPool
from nico.services.errors import bad_request
from nico.services.feed_export import Scope

log = logging.getLogger(__name__)

BATCH = 500
RETRY_MS = 1000
PRUNE_EVERY_SECONDS = 60.0
# While a stream waits for the horizon, it is probed after every notification and, without any (the
# transaction holding it back announced nothing), after SETTLE_FIRST, then twice as long each time up
# to SETTLE_LAST. The writers that hold the horizon back are short (a create writes in the round trip
# of its commit; a pass's write-back is two round trips), so the first probe comes soon: 20 ms made
# the last Ready event of an instance wait for it more often than not under 16 tenants.
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
        # the value is not echoed: it is the client's, of any length, and a response is no place for it
        raise bad_request("Invalid Last-Event-ID (expected <txid>-<id> as sent by this stream)")
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
    """One stream's wake-up: bumped by the notifications that name its scope's tenant or site, and
    when the horizon passes ``pending``, the txid of its first event not final yet."""

    def __init__(self, scope: Scope) -> None:
        self.tenant = str(scope.tenant_id) if scope.tenant_id is not None else None
        self._site = str(scope.site_id) if scope.site_id is not None else None
        self.generation = 0
        self.pending: int | None = None
        self._wake = asyncio.Event()

    def concerned(self, audience: frozenset[tuple[str, str]] | None) -> bool:
        """Whether a notification for ``audience`` may hold events of this scope. A provider's
        scope has no tenant and is not told its sites: it wakes for every site, or its one site."""
        if audience is None:
            return True
        return any(
            (self.tenant is None or tenant == self.tenant) and (self._site is None or site == self._site)
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


class FeedListener:
    """One ``LISTEN nico_placement`` connection per process, shared by every open stream; a
    notification wakes only the streams whose scope it names. It also watches the horizon for the
    streams waiting for their events to become final (``raw`` runs its probes)."""

    def __init__(self, url: str, raw: RawPool) -> None:
        self._url = libpq_url(url)
        self._raw = raw
        self._waiters: set[Waiter] = set()
        # The same, by tenant (None: a provider's streams): a notification looks only at those of the
        # tenants it names, not at every stream of the process.
        self._by_tenant: dict[str | None, set[Waiter]] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._last_prune = 0.0
        self._committed = asyncio.Event()  # a notification since the last probe
        self._prober: asyncio.Task[None] | None = None
        self.probes = 0

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
            self._by_tenant.setdefault(waiter.tenant, set()).add(waiter)
            return waiter

    async def release(self, waiter: Waiter) -> None:
        async with self._lock:
            self._waiters.discard(waiter)
            same_tenant = self._by_tenant.get(waiter.tenant, set())
            same_tenant.discard(waiter)
            if not same_tenant:
                self._by_tenant.pop(waiter.tenant, None)
            if not self._waiters:
                for task in (self._task, self._prober):
                    if task is not None:
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await task
                self._task = self._prober = None

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
        """Wake the streams ``audience`` concerns (None: every stream), and the horizon's prober."""
        if audience is None:
            for waiter in self._waiters:
                waiter.bump()
        else:
            # a provider's streams (no tenant) hear of every tenant
            tenants: set[str | None] = {None, *(tenant for tenant, _ in audience)}
            for tenant in tenants:
                for waiter in self._by_tenant.get(tenant, ()):
                    if waiter.concerned(audience):
                        waiter.bump()
        self._committed.set()

    def wait_for_horizon(self, waiter: Waiter, txid: int | None) -> None:
        """Wake ``waiter`` once the horizon has passed ``txid`` (None: it waits for nothing)."""
        waiter.pending = txid
        if txid is not None and (self._prober is None or self._prober.done()):
            self._prober = asyncio.create_task(self._probe(), name="nico-placement-horizon")

    async def _probe(self) -> None:
        """Probe the horizon while streams wait for it: after each notification, else after a delay
        that doubles; one probe at a time, whatever the number of streams."""
        delay = SETTLE_FIRST
        while True:
            try:
                async with asyncio.timeout(delay):  # not wait_for: see Reconciler._loop
                    await self._committed.wait()
                delay = SETTLE_FIRST
            except TimeoutError:
                delay = min(delay * 2, SETTLE_LAST)
            self._committed.clear()  # a notification from here on brings the next probe at once
            if not any(w.pending is not None for w in self._waiters):
                return
            try:
                (row,) = await _rows(self._raw, q.HORIZON, {})
            except Exception:  # the database away: streams still read at every heartbeat
                log.warning("cannot read the placement events' horizon", exc_info=True)
                delay = SETTLE_LAST
                continue
            self.probes += 1
            for waiter in self._waiters:
                if waiter.pending is not None and waiter.pending < row["horizon"]:
                    waiter.pending = None
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


class Read(NamedTuple):
    """One read of a stream (:func:`nico.db.queries.feed.event_text_after`): the final events' SSE
    text, the cursor after them, the txid of the first event not final yet, how many were read."""

    text: str | None
    last: list[int] | None
    pending: int | None
    read: int


async def _read(raw: RawPool, statement: Numbered, params: dict[str, Any]) -> Read:
    """A stream's read, one row on a pooled autocommit connection, its parameters in order (no list
    among them: a plain raw cursor, without ``raw_cursor``'s binary list dumper to set up each time)."""
    async with raw.connection() as conn, psycopg.AsyncRawCursor(conn) as cursor:
        await cursor.execute(statement.sql, statement.values(params), prepare=True)
        row = await cursor.fetchone()
    assert row is not None  # an aggregate's one row
    return Read(*row)


def as_python_writes(text: str) -> str:
    """The events' SSE text as ``json.dumps`` writes each body: PostgreSQL writes every character but
    printable ASCII as is (``to_json``), Python escapes them (``\\u00e9``), so a body holding one is
    written again here; the text of printable ASCII bodies (nearly all) is left as it is."""
    if text.isascii() and "\x7f" not in text:
        return text
    lines = text.split("\n")  # PostgreSQL escapes line breaks inside the JSON: a line is a field
    for index, line in enumerate(lines):
        if line.startswith("data: "):
            lines[index] = "data: " + json.dumps(json.loads(line[6:]), separators=(",", ":"))
    return "\n".join(lines)


def sse(event: str, data: dict[str, Any], cursor: Cursor | None = None) -> str:
    head = f"id: {cursor}\n" if cursor is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def stream(
    raw: RawPool,
    listener: FeedListener,
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
        read_events = Numbered.of(
            q.event_text_after(
                tenant=scope.tenant_id is not None,
                provider=scope.provider_id is not None,
                site=scope.site_id is not None,
            )
        )
        while True:
            seen = waiter.generation
            read = await _read(raw, read_events, params | {"after_txid": cursor.txid, "after_id": cursor.id})
            if read.text is not None and read.last is not None:
                cursor = Cursor(*read.last)
                yield as_python_writes(read.text)  # one write for the read (each crosses the ASGI stack)
            if read.pending is None and read.read == BATCH:
                continue  # more may be waiting
            # Everything final when the read began is sent: what came after has notified (after
            # ``seen``), so the wait below returns at once for it; no read to find nothing.
            listener.wait_for_horizon(waiter, read.pending)
            if not await waiter.wait(seen, heartbeat_seconds):
                yield ": heartbeat\n\n"
    finally:
        await listener.release(waiter)
