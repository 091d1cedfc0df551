"""Query pieces every aggregate's module uses: the ``query`` text search of lists, rows by id."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession


def text_search(model: Any, query: str) -> ColumnElement[bool]:
    """Case-insensitive substring of the model's name, description or status."""
    needle = query.lower()
    return or_(
        func.strpos(func.lower(model.name), needle) > 0,
        func.strpos(func.lower(func.coalesce(model.description, "")), needle) > 0,
        func.strpos(func.lower(model.status), needle) > 0,
    )


async def rows_by_id(session: AsyncSession, model: Any, ids: set[Any]) -> dict[Any, Any]:
    """Rows of ``model`` by id (None ids ignored)."""
    ids.discard(None)
    if not ids:
        return {}
    return {row.id: row for row in await session.scalars(select(model).where(model.id.in_(ids)))}
