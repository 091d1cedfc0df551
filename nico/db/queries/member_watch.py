"""The SQL by which a reconciler hears of the others coming and going without polling: a notice on the
members' channel when one takes or gives up its slot, and a wait for another's slot lock (granted the
moment that reconciler's session ends). Slots are the advisory locks of
:mod:`nico.db.queries.reconciler_members`."""

from __future__ import annotations

import psycopg
from psycopg import sql

CHANNEL = "nico_members"
LISTEN = sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL))
NOTIFY = sql.SQL("NOTIFY {}").format(sql.Identifier(CHANNEL))
# Sent with libpq's own calls (the caller waits on the socket): blocks until the slot is free.
WAIT_FOR_SLOT = b"SELECT pg_advisory_lock($1::int, $2::int)"
# The waiting session holds no other advisory lock: whatever it was granted goes.
LET_GO = "SELECT pg_advisory_unlock_all()"


async def listen(conn: psycopg.AsyncConnection[object]) -> None:
    await conn.execute(LISTEN)


async def announce(conn: psycopg.AsyncConnection[object]) -> None:
    """Tell the other reconcilers to look at the slots now."""
    await conn.execute(NOTIFY)


async def let_go(conn: psycopg.AsyncConnection[object]) -> None:
    await conn.execute(LET_GO)
