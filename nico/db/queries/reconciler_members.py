"""The SQL of reconciler membership: member slots as PostgreSQL advisory locks (two-key form, a class
of their own apart from the domains' one-key locks), and which slots are held now."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

# Held advisory locks of the two-key form show in pg_locks with objsubid 2, key one as classid and
# key two as objid; locks are per database, so only this database's count.
_HELD = text(
    "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted"
    " AND classid = CAST(:c AS oid)"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


async def take_slot(conn: AsyncConnection, slot_class: int, slot: int) -> bool:
    """Take member slot ``slot`` for this session if no other session holds it."""
    taken = await conn.scalar(text("SELECT pg_try_advisory_lock(:c, :s)"), {"c": slot_class, "s": slot})
    return bool(taken)


async def release_slot(conn: AsyncConnection, slot_class: int, slot: int) -> None:
    await conn.execute(text("SELECT pg_advisory_unlock(:c, :s)"), {"c": slot_class, "s": slot})


async def held_slots(conn: AsyncConnection, slot_class: int) -> list[int]:
    """The member slots some session holds now, ascending."""
    return sorted(int(s) for s in (await conn.execute(_HELD, {"c": slot_class})).scalars())
