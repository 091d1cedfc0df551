"""Status history (``statusHistory``) of every resource: append an entry, read the newest ones."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import StatusDetail
from nico.db.queries import status as queries
from nico.services.listing import PageRequest, fetch_page
from nico.services.records import copy_of

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
class StatusRecord:
    """One history entry as views show it."""

    status: str
    message: str | None
    created: datetime
    updated: datetime


async def record(
    session: AsyncSession, owner: Owner, owner_id: uuid.UUID | str, status: str, message: str | None
) -> StatusRecord:
    """Append one entry (timestamped with the database's clock, so entries of one transaction order)."""
    entry = StatusDetail(status=status, message=message, **{owner: owner_id})
    session.add(entry)
    await session.flush()
    return copy_of(StatusRecord, entry)


async def history(
    session: AsyncSession, owner: Owner, owner_ids: Sequence[uuid.UUID | str], limit: int = DEFAULT_LIMIT
) -> dict[uuid.UUID | str, list[StatusRecord]]:
    """The newest ``limit`` entries of each owner, newest first."""
    if not owner_ids:
        return {}
    out: dict[uuid.UUID | str, list[StatusRecord]] = defaultdict(list)
    for detail in await queries.newest_entries(session, owner, owner_ids, limit):
        out[getattr(detail, owner)].append(copy_of(StatusRecord, detail))
    return out


ORDER_FIELDS = frozenset({"status", "created", "updated"})


async def page(
    session: AsyncSession, owner: Owner, owner_id: uuid.UUID | str, wanted: PageRequest
) -> tuple[list[StatusRecord], int]:
    """One page of an owner's entries (the ``status-history`` endpoints)."""
    rows, total = await fetch_page(
        session, queries.entries_of(owner, owner_id), wanted, queries.ENTRY_ORDER, StatusDetail.id
    )
    return [copy_of(StatusRecord, row) for row in rows], total
