"""Status history (``statusHistory``) of every resource: append an entry, read the newest ones."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import StatusDetail
from nico.db.queries import status as queries
from nico.services.listing import PageRequest, fetch_page

Owner = Literal[
    "site_id",
    "instance_type_id",
    "allocation_id",
    "vpc_id",
    "subnet_id",
    "logical_partition_id",
    "instance_id",
    "machine_id",
]

DEFAULT_LIMIT = 20  # GET and list show the 20 most recent entries


@dataclass(frozen=True)
class Entry:
    """One history entry as a view holds it (no ORM row)."""

    status: str
    message: str | None
    created: datetime
    updated: datetime


def entries(rows: Iterable[StatusDetail]) -> tuple[Entry, ...]:
    return tuple(Entry(row.status, row.message, row.created, row.updated) for row in rows)


async def record(
    session: AsyncSession, owner: Owner, owner_id: uuid.UUID | str, status: str, message: str | None
) -> StatusDetail:
    """Append one entry (timestamped with the database's clock, so entries of one transaction order)."""
    entry = StatusDetail(status=status, message=message, **{owner: owner_id})
    session.add(entry)
    await session.flush()
    return entry


async def history(
    session: AsyncSession, owner: Owner, owner_ids: Sequence[uuid.UUID | str], limit: int = DEFAULT_LIMIT
) -> dict[uuid.UUID | str, list[StatusDetail]]:
    """The newest ``limit`` entries of each owner, newest first."""
    if not owner_ids:
        return {}
    out: dict[uuid.UUID | str, list[StatusDetail]] = defaultdict(list)
    for detail in await queries.newest_entries(session, owner, owner_ids, limit):
        out[getattr(detail, owner)].append(detail)
    return out


ORDER_FIELDS = frozenset({"status", "created", "updated"})


async def page(
    session: AsyncSession, owner: Owner, owner_id: uuid.UUID | str, wanted: PageRequest
) -> tuple[Sequence[StatusDetail], int]:
    """One page of an owner's entries (the ``status-history`` endpoints)."""
    return await fetch_page(
        session, queries.entries_of(owner, owner_id), wanted, queries.ENTRY_ORDER, StatusDetail.id
    )
