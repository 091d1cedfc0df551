"""Array parameters sent as one literal (:func:`nico.db.raw.array_literal`): PostgreSQL reads back
every value as it was, whatever it holds (quotes, backslashes, separators, braces, the word NULL,
spaces at either end, no character at all), and None as NULL."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.raw import array_literal, driver_connection

ODD = ['a "quoted" word', "back\\slash", "comma, and {brace}", "NULL", "null", "", "  spaced  ", "é ✓\n\t"]


async def test_every_value_reads_back_as_it_was(session: AsyncSession) -> None:
    ids = [uuid.uuid4(), uuid.uuid4()]
    driver = await driver_connection(session)
    row = await (
        await driver.execute(
            "SELECT %(texts)s::text[], %(ids)s::uuid[], %(flags)s::boolean[], %(ns)s::int[],"
            " %(none)s::text[]",
            {
                "texts": array_literal([*ODD, None]),
                "ids": array_literal(ids),
                "flags": array_literal([True, False, None]),
                "ns": array_literal([0, -3, 72]),
                "none": array_literal([]),
            },
        )
    ).fetchone()
    assert row == ([*ODD, None], ids, [True, False, None], [0, -3, 72], [])
    await session.rollback()
