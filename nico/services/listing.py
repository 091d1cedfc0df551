"""One page of a filtered select: the total count, then the rows in the requested order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import QueryableAttribute

Orderable = ColumnElement[Any] | QueryableAttribute[Any]


@dataclass(frozen=True)
class Window:
    """Which rows to return: ``order_field`` is a key of the resource's orderable columns."""

    offset: int = 0
    limit: int = 20
    order_field: str = "created"
    descending: bool = False


async def fetch_page(
    session: AsyncSession,
    stmt: Select[Any],
    window: Window,
    columns: Mapping[str, Orderable],
    tiebreak: Sequence[Orderable],
) -> tuple[list[Any], int]:
    """Rows of ``stmt`` (a select of one entity) in ``window`` and the total before paging. Ties are
    broken by ``tiebreak`` so that pages never overlap."""
    total = await session.scalar(select(func.count()).select_from(stmt.order_by(None).subquery()))
    column = columns[window.order_field]
    ordered = column.desc().nulls_last() if window.descending else column.asc().nulls_first()
    rows = await session.scalars(stmt.order_by(ordered, *tiebreak).offset(window.offset).limit(window.limit))
    return list(rows.unique()), int(total or 0)


def search_pattern(query: str | None) -> str | None:
    """An ILIKE pattern matching ``query`` anywhere (wildcards in it are literal), or None if blank."""
    text = (query or "").strip()
    if not text:
        return None
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
