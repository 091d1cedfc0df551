"""The engines' pools hand out the connection returned last (the statements prepared on it are reused),
the API's as well as the reconciler's: on a queue, ``nico serve``'s passes went from connection to
connection and PostgreSQL parsed and planned their statements again on each."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from nico.api.app import build_context
from nico.config import Settings
from nico.db.engine import make_engine


async def _pid(conn: AsyncConnection) -> int:
    return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def _handed_out_after(engine: AsyncEngine) -> tuple[list[int], int]:
    """Three connections at once, given back first to last; then the session of the next handed out."""
    async with AsyncExitStack() as held:
        conns = [await held.enter_async_context(engine.connect()) for _ in range(3)]
        pids = [await _pid(conn) for conn in conns]
        for conn in conns:
            await conn.close()  # back to the pool, in this order
    async with engine.connect() as conn:
        return pids, await _pid(conn)


@pytest.mark.parametrize("built_by", ["make_engine", "the API"])
async def test_the_connection_returned_last_is_handed_out_next(database_url: str, built_by: str) -> None:
    if built_by == "the API":
        engine = build_context(Settings(database_url=database_url), database_url).engine
    else:
        engine = make_engine(database_url, pool_size=3)
    try:
        returned, handed = await _handed_out_after(engine)
        assert handed == returned[-1]  # a queue hands out returned[0], idle longest
    finally:
        await engine.dispose()
