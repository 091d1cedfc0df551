"""Whole-table snapshots, to assert that a rejected request changed nothing."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

INVENTORY_TABLES = (
    "infrastructure_provider",
    "tenant",
    "site",
    "tenant_site",
    "instance_type",
    "machine_capability",
    "machine",
    "gpu",
    "nvlink_domain",
    "allocation",
    "allocation_constraint",
    "subnet",
    "status_detail",
)


async def snapshot(session: AsyncSession, tables: tuple[str, ...] = INVENTORY_TABLES) -> dict[str, list[str]]:
    """Every row of ``tables`` as text, in a stable order (reads what is committed now)."""
    out: dict[str, list[str]] = {}
    for table in tables:
        rows = await session.execute(text(f"SELECT t::text FROM {table} AS t ORDER BY 1"))
        out[table] = [row[0] for row in rows]
    await session.commit()
    return out
