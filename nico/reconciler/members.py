"""Which domains this reconciler's full passes cover when several reconcilers run against one
database: each holds a member slot (a PostgreSQL advisory lock on a connection of its own), and the
full passes split the domains by the slots held now. One that dies loses its session and its slot
with it; the others see that within :data:`POLL` seconds and cover its domains from then on.

Only the full passes are split. A change's pass is made by whichever reconciler takes the domain's
lock first (:mod:`nico.reconciler.domain_pass`), so no domain waits for its "owner".
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from nico.db.queries import reconciler_members as queries

log = logging.getLogger(__name__)

SLOT_CLASS = 0x6E69636F  # the first advisory-lock key of member slots ("nico")
SLOTS = 64  # at most this many reconcilers share the full passes; more cover every domain
POLL = 0.5  # seconds between looks at who is running


class Members:
    """This reconciler's slot and the slots held now (none taken: it covers every domain)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.slot: int | None = None
        self.held: tuple[int, ...] = ()
        self._conn: AsyncConnection | None = None

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
                except Exception as exc:
                    log.warning("reconciler membership unknown (%s): covering every domain", exc)
                    await self._drop()
                    self.held = ()
                await asyncio.sleep(POLL)
        finally:
            await self.leave()

    async def leave(self) -> None:
        """Give the slot up (the others take this reconciler's domains at their next look)."""
        conn, slot = self._conn, self.slot
        if conn is None or slot is None:
            return
        try:
            await queries.release_slot(conn, SLOT_CLASS, slot)
            await conn.close()
        except Exception:  # the session ends with the connection, and the slot with it
            await conn.invalidate()
        self._conn, self.slot, self.held = None, None, ()

    async def _drop(self) -> None:
        conn, self._conn, self.slot = self._conn, None, None
        if conn is not None:
            await conn.invalidate()
            await conn.close()
