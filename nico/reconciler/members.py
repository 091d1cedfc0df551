"""Which domains this reconciler's full passes cover when several reconcilers run against one
database: each holds a member slot (a PostgreSQL advisory lock on a connection of its own), and the
full passes split the domains by the slots held now.

A reconciler hears of the others without polling: one that takes or gives up its slot says so on the
members' channel (NOTIFY), and each waits for the lock of the next slot held (in slot order, the last
waiting for the first), granted the moment that reconciler's session ends: one that dies is seen gone
at once, and the one that saw it tells the others. It looks at the slots again on such news, every
:data:`RECHECK` seconds besides, and every :data:`POLL` seconds while its connections fail.

Only the full passes are split. A change's pass is made by whichever reconciler takes the domain's
lock first (:mod:`nico.reconciler.domain_pass`), so no domain waits for its "owner".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import pq
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from nico.db.engine import libpq_url
from nico.db.queries import member_watch
from nico.db.queries import reconciler_members as queries
from nico.reconciler.listening import notifications

log = logging.getLogger(__name__)

SLOT_CLASS = 0x6E69636F  # the first advisory-lock key of member slots ("nico")
SLOTS = 64  # at most this many reconcilers share the full passes; more cover every domain
POLL = 0.5  # seconds between looks at who is running while the watch's connections fail
RECHECK = 30.0  # seconds between looks when nothing is heard (a safety net)


class Members:
    """This reconciler's slot and the slots held now (none taken: it covers every domain)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.slot: int | None = None
        self.held: tuple[int, ...] = ()
        self._conn: AsyncConnection | None = None
        self._waiter: psycopg.AsyncConnection[Any] | None = None  # waits for the next slot's lock

    def covers(self, domain: uuid.UUID) -> bool:
        """Whether this reconciler's full passes cover ``domain``. Without a slot among those held
        (not joined, or its connection lost) it covers every domain: twice is better than never."""
        if self.slot is None or self.slot not in self.held or len(self.held) < 2:
            return True
        # The domain's last 64 bits: the domain locks use its first 64, spread alike.
        return int.from_bytes(domain.bytes[8:], "big") % len(self.held) == self.held.index(self.slot)

    async def join(self) -> None:
        """Take the lowest free slot (if this reconciler holds none) and read who else is running."""
        if self._conn is None:
            conn = await self.engine.connect()
            try:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                self.slot = await self._free_slot(conn)
            except BaseException:
                await conn.invalidate()
                await conn.close()
                raise
            if self.slot is None:
                await conn.close()
                log.warning("all %d reconciler slots held: this one's full passes cover every domain", SLOTS)
                return
            self._conn = conn
            driver = await self._driver()
            await member_watch.listen(driver)
            await member_watch.announce(driver)  # the others look now
        await self.look()

    @staticmethod
    async def _free_slot(conn: AsyncConnection) -> int | None:
        for slot in range(SLOTS):
            if await queries.take_slot(conn, SLOT_CLASS, slot):
                return slot
        return None

    async def look(self) -> None:
        """Read the slots held now."""
        if self._conn is not None:
            self.held = tuple(await queries.held_slots(self._conn, SLOT_CLASS))

    async def watch(self, changed: Callable[[], None]) -> None:
        """Keep the slot and follow who is running until cancelled; call ``changed`` when that changes
        (a reconciler started or died). A lost connection is left and the slot taken again; cancelled,
        it gives the slot up."""
        try:
            while True:
                try:
                    before = self.held
                    await self.join()  # (again, if the connection was lost) and look
                    if self.held != before:
                        log.info("reconcilers running: %d (this one in slot %s)", len(self.held), self.slot)
                        changed()
                    if self._conn is not None:
                        await self._news()
                        continue
                except Exception as exc:
                    log.warning("reconciler membership unknown (%s): covering every domain", exc)
                    await self._drop()
                    self.held = ()
                await asyncio.sleep(POLL)  # no slot to listen on, or its connections failed
        finally:
            await self.leave()

    async def _news(self) -> None:
        """Until a reconciler may have come or gone: a notice on the members' channel, or the next
        slot's lock granted (that reconciler's session ended); :data:`RECHECK` seconds at most."""
        waits = [asyncio.ensure_future(self._heard())]
        watched = self._next_slot()
        if watched is not None:
            waits.append(asyncio.ensure_future(self._freed(watched)))
        try:
            await asyncio.wait(waits, timeout=RECHECK, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
            ended = await asyncio.gather(*waits, return_exceptions=True)
        for result in ended:  # a connection that failed: the watch starts over
            if isinstance(result, Exception):
                raise result

    def _next_slot(self) -> int | None:
        """The slot after this one's among those held (the first after the last), if another is held."""
        if self.slot is None or self.slot not in self.held or len(self.held) < 2:
            return None
        return self.held[(self.held.index(self.slot) + 1) % len(self.held)]

    async def _heard(self) -> None:
        """Until a notice on the members' channel (one heard during a look counts)."""
        async with contextlib.aclosing(notifications(await self._driver())) as notes:
            async for _ in notes:
                return

    async def _freed(self, slot: int) -> None:
        """Until ``slot`` is given up or its session ends (its lock granted, and let go at once); then
        the others are told. Cancelled, the wait is cancelled in the database too."""
        waiter = self._waiter
        if waiter is None or waiter.closed:
            url = libpq_url(self.engine.url.render_as_string(hide_password=False))
            waiter = self._waiter = await psycopg.AsyncConnection.connect(url, autocommit=True)
        waiter.pgconn.send_query_params(member_watch.WAIT_FOR_SLOT, [b"%d" % SLOT_CLASS, b"%d" % slot])
        try:
            await _statement_end(waiter)
        except asyncio.CancelledError:
            await waiter.cancel_safe()
            granted = False
            with contextlib.suppress(psycopg.Error):
                await _statement_end(waiter)  # ended by the cancel, or granted just before it
                granted = True
            await member_watch.let_go(waiter)
            if granted:  # that reconciler is gone: the others are told all the same
                await member_watch.announce(waiter)
            raise
        await member_watch.let_go(waiter)
        await member_watch.announce(waiter)

    async def _driver(self) -> psycopg.AsyncConnection[Any]:
        assert self._conn is not None
        driver = (await self._conn.get_raw_connection()).driver_connection
        assert isinstance(driver, psycopg.AsyncConnection)
        return driver

    async def leave(self) -> None:
        """Give the slot up and say so (the others take this reconciler's domains at once)."""
        await self._close_waiter()
        conn, slot = self._conn, self.slot
        if conn is None or slot is None:
            return
        with contextlib.suppress(Exception):  # a lost session has let its slot go already
            await queries.release_slot(conn, SLOT_CLASS, slot)
            await member_watch.announce(await self._driver())
        # Not back to the pool: the session listens on the members' channel.
        await conn.invalidate()
        await conn.close()
        self._conn, self.slot, self.held = None, None, ()

    async def _drop(self) -> None:
        await self._close_waiter()
        conn, self._conn, self.slot = self._conn, None, None
        if conn is not None:
            await conn.invalidate()
            await conn.close()

    async def _close_waiter(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            with contextlib.suppress(psycopg.Error):
                await waiter.close()


async def _statement_end(conn: psycopg.AsyncConnection[Any]) -> None:
    """Wait on the socket (only) for the statement sent on ``conn`` with libpq's calls to end, and
    take its results; raises a :class:`psycopg.OperationalError` for an error (psycopg's own waits
    also wake every 0.1 s, for as long as the statement runs)."""
    pgconn, loop = conn.pgconn, asyncio.get_running_loop()
    if pgconn.flush():  # what did not fit in the socket at once (the statement is small: rarely)
        writable = asyncio.Event()
        loop.add_writer(pgconn.socket, writable.set)
        try:
            while pgconn.flush():
                await writable.wait()
                writable.clear()
        finally:
            loop.remove_writer(pgconn.socket)
    readable = asyncio.Event()
    loop.add_reader(pgconn.socket, readable.set)
    try:
        pgconn.consume_input()
        while pgconn.is_busy():
            await readable.wait()
            readable.clear()
            pgconn.consume_input()
    finally:
        loop.remove_reader(pgconn.socket)
    failed = None
    while (result := pgconn.get_result()) is not None:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            failed = result.error_message.decode(errors="replace")
    if failed is not None:
        raise psycopg.OperationalError(failed)
