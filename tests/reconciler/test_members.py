"""Reconcilers hear of each other without polling (``members.Members.watch``), on real PostgreSQL:
with the looks on a timer pushed out of reach, one that joins, one that stops and one whose session
is killed are each seen within a second or two, and a watch whose wait for another's slot was cut
short by news holds no slot but its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from sqlalchemy import text

from nico.api.context import AppContext
from nico.reconciler import members
from nico.reconciler.members import SLOT_CLASS, Members
from tests.support.waiting import stop_within, wait_for


@pytest.fixture(autouse=True)
def no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only news can make a watch look again within a test's deadlines."""
    monkeypatch.setattr(members, "POLL", 1000.0)
    monkeypatch.setattr(members, "RECHECK", 1000.0)


@pytest_asyncio.fixture
async def watched(app_context: AppContext, db: str) -> AsyncIterator[tuple[Members, list[int]]]:
    """A member watching (its slot taken and looked at), and the changes it reported."""
    first = Members(app_context.engine)
    changes: list[int] = []
    task = asyncio.create_task(first.watch(lambda: changes.append(len(first.held))))
    await wait_for(lambda: first.held == (first.slot,), what="the first member's own slot seen")
    yield first, changes
    task.cancel()
    await stop_within("the watch", asyncio.gather(task, return_exceptions=True))


# This database's only: on a shared server (CI's), other test workers' databases hold slots too.
_GRANTED = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted"
    " AND classid = CAST(:c AS oid)"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


async def granted_slots(app_context: AppContext) -> int:
    """Member slot locks granted now, counting a slot held twice twice."""
    async with app_context.engine.connect() as conn:
        found = await conn.scalar(text(_GRANTED), {"c": SLOT_CLASS})
    return int(found or 0)


async def test_a_reconciler_that_joins_is_seen_at_once(
    app_context: AppContext, watched: tuple[Members, list[int]]
) -> None:
    first, changes = watched
    second = Members(app_context.engine)
    await second.join()
    try:
        await wait_for(lambda: len(first.held) == 2, what="the second member seen")
        assert changes[-1] == 2
        third = Members(app_context.engine)
        await third.join()  # news while the first waits for the second's slot: that wait is cut short
        await wait_for(lambda: len(first.held) == 3, what="the third member seen")
        await wait_for(lambda: first._next_slot() == second.slot, what="the first waiting again")
        assert await granted_slots(app_context) == 3, "a watch holds a slot not its own"
        await third.leave()
    finally:
        await second.leave()


async def test_a_reconciler_that_stops_is_seen_gone_at_once(
    app_context: AppContext, watched: tuple[Members, list[int]]
) -> None:
    first, _ = watched
    second = Members(app_context.engine)
    task = asyncio.create_task(second.watch(lambda: None))
    await wait_for(lambda: len(first.held) == 2 and len(second.held) == 2, what="both members seen")
    task.cancel()  # a stop gives the slot up, and says so
    await stop_within("the second watch", asyncio.gather(task, return_exceptions=True))
    await wait_for(lambda: first.held == (first.slot,), what="the stopped member seen gone")


async def test_a_reconciler_whose_session_is_killed_is_seen_gone_at_once(
    app_context: AppContext, watched: tuple[Members, list[int]]
) -> None:
    first, _ = watched
    second = Members(app_context.engine)
    await second.join()  # joined, never to say it leaves
    await wait_for(lambda: len(first.held) == 2, what="the second member seen")
    await wait_for(lambda: first._next_slot() == second.slot, what="the first waiting for its slot")
    pid = (await second._driver()).info.backend_pid
    async with app_context.engine.connect() as conn:
        await conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
    await wait_for(lambda: first.held == (first.slot,), what="the killed member seen gone")
    assert await granted_slots(app_context) == 1, "the wait kept the dead member's slot"
    await second._drop()
