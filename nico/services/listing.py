"""One page of a filtered select, with the total, in one round trip (``count(*) OVER ()``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncSession


class PageRequest(Protocol):
    """What a list endpoint asked for (``nico.api.pagination.Page`` satisfies it)."""

    @property
    def offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def order_field(self) -> str: ...

    @property
    def descending(self) -> bool: ...


async def fetch_page(
    session: AsyncSession,
    stmt: Select[Any],
    page: PageRequest,
    order: Mapping[str, Any],
    tiebreak: Any,
) -> tuple[Sequence[Any], int]:
    """The rows of ``stmt`` (one entity or column per row) on ``page``, and how many match in all.

    ``order`` maps each allowed ``orderBy`` field to its column; ``tiebreak`` keeps pages stable.
    """
    column = order[page.order_field]
    ordered = column.desc() if page.descending else column.asc()
    tie = tiebreak.desc() if page.descending else tiebreak.asc()
    rows = (
        await session.execute(
            stmt.add_columns(func.count().over().label("total"))
            .order_by(ordered, tie)
            .offset(page.offset)
            .limit(page.size)
        )
    ).all()
    if rows:
        return [row[0] for row in rows], int(rows[0].total)
    if page.offset == 0:
        return [], 0
    total = await session.scalar(select(func.count()).select_from(stmt.order_by(None).subquery()))
    return [], int(total or 0)
