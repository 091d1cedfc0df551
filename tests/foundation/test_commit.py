"""Services never commit; the request scope does, once, with :func:`nico.db.raw.commit`, which sends
the statements a service registered (:func:`nico.db.raw.send_at_commit`) in the COMMIT's round trip.
Any other commit of such a session is refused, so a registered check is never skipped."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.raw import (
    AtCommit,
    Numbered,
    NumberedStatement,
    Statement,
    commit,
    send_at_commit,
    together,
    write_at_commit,
)


async def test_a_commit_that_would_leave_a_registered_statement_behind_is_refused() -> None:
    async with AsyncSession() as session:
        await session.commit()  # nothing registered: an ordinary commit
        send_at_commit(session, AtCommit(Statement("SELECT 1"), lambda _: None))
        with pytest.raises(RuntimeError, match=r"nico\.db\.raw\.commit"):
            await session.commit()
        await session.rollback()  # the transaction is gone, and what it registered with it
        await session.commit()


class Refused(Exception):
    """What a check's refusal becomes (the check named by its SQLSTATE)."""


def check(sql: str, params: dict[str, object], sqlstate: str) -> AtCommit:
    return AtCommit(
        Statement(sql, params), lambda exc: Refused(sqlstate) if exc.sqlstate == sqlstate else None
    )


# 22012 and 22P02 when asked, raised when the statement runs (random(): nothing folded in planning), as
# a check function's are.
DIVIDES = "SELECT CASE WHEN %(divide)s THEN 1 / floor(random() * 0)::int END"
PARSES = "SELECT CASE WHEN %(parse)s THEN CAST(%(text)s || floor(random() * 0)::int::text AS integer) END"


async def test_checks_sent_together_run_in_their_order_and_refuse_the_commit(session: AsyncSession) -> None:
    """Several checks go out as one statement (``together``): the first registered that refuses is the
    refusal; checks that all pass let the commit through."""
    for first, second, expected in [
        (
            check(DIVIDES, {"divide": True}, "22012"),
            check(PARSES, {"parse": True, "text": "x"}, "22P02"),
            "22012",
        ),
        (
            check(PARSES, {"parse": True, "text": "x"}, "22P02"),
            check(DIVIDES, {"divide": True}, "22012"),
            "22P02",
        ),
        (
            check(DIVIDES, {"divide": False}, "22012"),
            check(PARSES, {"parse": True, "text": "x"}, "22P02"),
            "22P02",
        ),
    ]:
        assert len(together([first.statement, second.statement])) == 1
        await session.execute(text("SELECT 1"))
        send_at_commit(session, first)
        send_at_commit(session, second)
        with pytest.raises(Refused, match=expected):
            await commit(session)
        await session.rollback()
    for passing in [
        check(DIVIDES, {"divide": False}, "22012"),
        check(PARSES, {"parse": False, "text": "1"}, "22P02"),
    ]:
        send_at_commit(session, passing)
    await session.execute(text("SELECT 1"))
    await commit(session)  # nothing refused
    # One parameter name with two values: sent apart, in their order.
    clashing = [Statement("SELECT %(n)s::int", {"n": 1}), Statement("SELECT %(n)s::int", {"n": 2})]
    assert together(clashing) == clashing


# A write sent with the COMMIT (``write_at_commit``) and a check after it that counts what it wrote: the
# check raises 22012 when the table holds more than %(most)s rows.
NOTES = "CREATE TABLE IF NOT EXISTS commit_note (n int)"
WRITE = Numbered.of("INSERT INTO commit_note SELECT unnest(%(ns)b::int[]) RETURNING n")
AT_MOST = (
    "SELECT CASE WHEN (SELECT count(*) FROM commit_note) > %(most)s THEN 1 / floor(random() * 0)::int END"
)


async def notes(session: AsyncSession) -> list[int]:
    return sorted((await session.scalars(text("SELECT n FROM commit_note"))).all())


async def test_a_write_goes_out_with_the_commit_before_the_checks_that_see_it(session: AsyncSession) -> None:
    """The write registered with the COMMIT runs before the checks (which count its rows), in the
    commit's round trip; its rows are read after the commit, never before; a refusing check commits
    none of it; a rolled back transaction forgets it; any other commit is refused."""
    await session.execute(text(NOTES))
    await session.execute(text("DELETE FROM commit_note"))
    await session.commit()
    written = write_at_commit(session, NumberedStatement(WRITE, {"ns": [1, 2]}))
    send_at_commit(session, check(AT_MOST, {"most": 1}, "22012"))  # the write's 2 rows are too many
    with pytest.raises(RuntimeError, match="before the commit"):
        written.rows()
    with pytest.raises(Refused, match="22012"):
        await commit(session)
    await session.rollback()
    assert await notes(session) == []  # nothing of the refused transaction
    await session.rollback()

    written = write_at_commit(session, NumberedStatement(WRITE, {"ns": [3, 4]}))
    send_at_commit(session, check(AT_MOST, {"most": 2}, "22012"))
    await session.execute(text("SELECT 1"))
    await commit(session)
    assert sorted(r["n"] for r in written.rows()) == [3, 4]
    assert await notes(session) == [3, 4]
    await session.rollback()

    await session.execute(text("SELECT 1"))  # a transaction, as a create's context begins it
    forgotten = write_at_commit(session, NumberedStatement(WRITE, {"ns": [5]}))
    await session.rollback()  # the write goes with the transaction
    await commit(session)
    assert await notes(session) == [3, 4]
    with pytest.raises(RuntimeError, match="before the commit"):
        forgotten.rows()
    await session.rollback()

    write_at_commit(session, NumberedStatement(WRITE, {"ns": [6]}))
    with pytest.raises(RuntimeError, match=r"nico\.db\.raw\.commit"):
        await session.commit()  # a commit that would skip the write
    await session.rollback()
    await session.execute(text("DROP TABLE commit_note"))
    await session.commit()
