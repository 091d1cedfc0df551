"""A pipeline that commits and then sends more (:func:`nico.db.raw.pipelined` with ``then``): the
COMMIT goes out as a statement with the rest, what follows it runs outside the transaction (nothing
begins one), and a failure before it commits nothing and runs nothing after it."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import text

from nico.api.context import AppContext
from nico.db.raw import Statement, driver_connection, pipelined

KEY = 727_272


async def test_statements_after_the_commit_run_outside_any_transaction(app_context: AppContext) -> None:
    async with app_context.engine.connect() as conn:
        driver = await driver_connection(conn)
        await pipelined(driver, [Statement("SELECT pg_advisory_lock(%(k)s)", {"k": KEY})])
        await conn.commit()
        await pipelined(
            driver,
            [Statement("CREATE TEMP TABLE IF NOT EXISTS note (n int)"), Statement("DELETE FROM note")],
            commit=True,
            then=[],
        )
        rows = await pipelined(
            driver,
            [Statement("INSERT INTO note VALUES (1)")],
            commit=True,
            then=[
                Statement("SELECT pg_advisory_unlock(%(k)s)", {"k": KEY}),
            ],
        )
        assert rows[-1] == [(True,)]  # the lock let go, with the COMMIT's round trip
        assert driver.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # nothing begun after it
        await conn.rollback()  # nothing left to roll back: the COMMIT went out
        assert await conn.scalar(text("SELECT count(*) FROM note")) == 1  # committed
        await conn.rollback()


async def test_a_failure_before_the_commit_commits_nothing_and_runs_nothing_after_it(
    app_context: AppContext,
) -> None:
    async with app_context.engine.connect() as conn:
        driver = await driver_connection(conn)
        await pipelined(
            driver,
            [Statement("CREATE TEMP TABLE IF NOT EXISTS note (n int)"), Statement("DELETE FROM note")],
            commit=True,
            then=[],
        )
        await pipelined(
            driver, [Statement("SELECT pg_advisory_lock(%(k)s)", {"k": KEY})], commit=True, then=[]
        )
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            await pipelined(
                await driver_connection(conn),
                [Statement("INSERT INTO note VALUES (1)"), Statement("INSERT INTO note VALUES ('x')")],
                commit=True,
                then=[Statement("SELECT pg_advisory_unlock(%(k)s)", {"k": KEY})],
            )
        await conn.rollback()
        assert await conn.scalar(text("SELECT count(*) FROM note")) == 0
        held = await conn.scalar(
            text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        )
        assert held == 1  # the unlock after the COMMIT never ran
        assert await conn.scalar(text("SELECT pg_advisory_unlock(:k)"), {"k": KEY})
        await conn.rollback()


async def test_statements_after_a_commit_need_the_commit(app_context: AppContext) -> None:
    async with app_context.engine.connect() as conn:
        with pytest.raises(ValueError, match="no COMMIT"):
            await pipelined(await driver_connection(conn), [], then=[])
        await conn.rollback()
