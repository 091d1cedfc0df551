"""Array parameters sent as one literal string (``nico.db.raw.array_literal``) read back in PostgreSQL
as the values they were made of: quotes, backslashes, commas, braces, spaces, the word NULL and the
empty string stay text; None is NULL; 64-bit GUIDs keep every digit."""

from __future__ import annotations

import uuid

import psycopg

from nico.db.engine import libpq_url
from nico.db.raw import array_literal

AWKWARD = ['say "hi"', "back\\slash", "a,b", "{x}", " padded ", "NULL", "", "tray_partition_SN-1_3"]


async def test_text_elements_read_back_as_sent(database_url: str) -> None:
    values: list[str | None] = [*AWKWARD, None]
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url), autocommit=True) as conn:
        row = await (await conn.execute("SELECT CAST(%s AS text[])", [array_literal(values)])).fetchone()
    assert row is not None and row[0] == values


async def test_numbers_and_uuids_read_back_as_sent(database_url: str) -> None:
    guids = [2**64 - 1, 2**63 + 12345, 0]
    ids = [str(uuid.uuid4()), None]
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url), autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT CAST(%s AS numeric[]), CAST(%s AS uuid[]), CAST(%s AS bigint[])",
            [array_literal(guids), array_literal(ids), array_literal([7, None])],
        )
        row = await cur.fetchone()
    assert row is not None
    assert [int(g) for g in row[0]] == guids
    assert [str(i) if i is not None else None for i in row[1]] == ids
    assert row[2] == [7, None]
