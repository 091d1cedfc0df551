"""The SQL of status history (table ``status_detail``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import StatusDetail


async def newest_entries(
    session: AsyncSession, owner: str, owner_ids: Sequence[uuid.UUID | str], limit: int
) -> list[StatusDetail]:
    """The newest ``limit`` entries of each owner (``owner`` names the owner's column), grouped by
    owner, newest first."""
    column = getattr(StatusDetail, owner)
    rank = (
        func.row_number()
        .over(partition_by=column, order_by=(StatusDetail.created.desc(), StatusDetail.id.desc()))
        .label("rank")
    )
    ranked = select(StatusDetail, rank).where(column.in_(list(owner_ids))).subquery()
    entry = ranked.c
    rows = await session.execute(
        select(StatusDetail).from_statement(
            select(ranked)
            .where(entry.rank <= limit)
            .order_by(getattr(entry, owner), entry.created.desc(), entry.id.desc())
        )
    )
    return list(rows.scalars())


def entries_of(owner: str, owner_id: uuid.UUID | str) -> Select[Any]:
    """Every entry of one owner (for paging)."""
    return select(StatusDetail).where(getattr(StatusDetail, owner) == owner_id)


ENTRY_ORDER: dict[str, Any] = {name: getattr(StatusDetail, name) for name in ("status", "created", "updated")}
