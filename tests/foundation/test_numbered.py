"""Long statements sent with PostgreSQL's own placeholders (:class:`nico.db.raw.Numbered`): written with
psycopg's named ones, translated once, run with the same parameters by name."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.raw import Numbered, driver_connection, fetch_numbered


def test_each_name_is_numbered_once_in_order_of_first_use() -> None:
    numbered = Numbered.of("SELECT %(b)s, %(a)b::uuid[], %(b)s + 1, %(c)s")
    assert numbered.sql == "SELECT $1, $2::uuid[], $1 + 1, $3"
    assert numbered.names == ("b", "a", "c")
    assert numbered.values({"a": [1], "b": 2, "c": None, "unused": 4}) == [2, [1], None]


def test_a_percent_that_is_no_placeholder_is_refused() -> None:
    with pytest.raises(ValueError, match="no %"):
        Numbered.of("SELECT 'x' LIKE '%%' || %(a)s")


async def test_a_numbered_statement_runs_with_its_parameters_by_name(session: AsyncSession) -> None:
    ids = [uuid.uuid4(), uuid.uuid4()]
    statement = Numbered.of(
        "SELECT %(n)s::int * 2 AS twice, cardinality(%(ids)b::uuid[]) AS count,"
        " (%(ids)b::uuid[])[2] AS second, %(names)b::text[] AS names, %(n)s::int AS n"
    )
    (row,) = await fetch_numbered(
        await driver_connection(session), statement, {"n": 21, "ids": ids, "names": ["a", None]}
    )
    assert row == {"twice": 42, "count": 2, "second": ids[1], "names": ["a", None], "n": 21}
