"""The raw connection pool: bounded, reused last-in first-out, and healing when a connection breaks."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from nico.db.raw import RawPool


async def test_connections_are_reused_and_bounded(database_url: str) -> None:
    pool = RawPool(database_url, size=2)
    try:
        async with pool.connection() as first:
            pid = first.info.backend_pid
        async with pool.connection() as again:
            assert again.info.backend_pid == pid  # reused, not reopened

        inside = 0
        most = 0

        async def use() -> None:
            nonlocal inside, most
            async with pool.connection() as conn:
                inside += 1
                most = max(most, inside)
                await conn.execute("SELECT pg_sleep(0.01)")
                inside -= 1

        await asyncio.wait_for(asyncio.gather(*(use() for _ in range(10))), timeout=30)
        assert most == 2
        assert pool._opened == 2
    finally:
        await pool.close()


async def test_a_broken_connection_is_replaced_and_waiters_are_not_stranded(database_url: str) -> None:
    pool = RawPool(database_url, size=1)
    try:
        async with pool.connection() as conn:
            doomed = conn.info.backend_pid
        waiter_started = asyncio.Event()

        async def waiter() -> int:
            waiter_started.set()
            async with pool.connection() as conn:
                cur = await conn.execute("SELECT pg_backend_pid()")
                row = await cur.fetchone()
                assert row is not None
                return int(row[0])

        with pytest.raises(psycopg.Error):
            async with pool.connection() as conn:
                task = asyncio.create_task(waiter())
                await waiter_started.wait()
                await conn.execute("SELECT 1/0")  # fails mid-use: the connection is discarded
        replacement = await asyncio.wait_for(task, timeout=30)
        assert replacement != doomed
        async with pool.connection() as conn:
            await conn.execute("SELECT 1")  # and the pool keeps working
        assert pool._opened == 1
    finally:
        await pool.close()


async def test_the_callers_own_error_returns_the_connection(database_url: str) -> None:
    pool = RawPool(database_url, size=1)
    try:
        with pytest.raises(LookupError):
            async with pool.connection() as conn:
                pid = conn.info.backend_pid
                raise LookupError("a 404, say")
        async with pool.connection() as conn:
            assert conn.info.backend_pid == pid
    finally:
        await pool.close()
