"""A fingerprint of every table's content, to prove that a rejected request changed nothing."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from nico.db.base import Base


async def fingerprint(session: AsyncSession) -> dict[str, str]:
    """Table name -> digest of its committed rows, read on a connection of its own (the session and
    its objects are left alone). The rate buckets are left out: every fabric-changing request spends
    a token, refused or not (what a request changed is the rest)."""
    engine = session.bind
    assert isinstance(engine, AsyncEngine)
    out = {}
    async with engine.connect() as conn:
        for table in Base.metadata.sorted_tables:
            if table.name == "fabric_rate_bucket":
                continue
            digest = await conn.scalar(
                text(
                    f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {table.name} t"
                )
            )
            out[table.name] = str(digest)
    return out
