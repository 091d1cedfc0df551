"""Status history: entries of one transaction keep their order; reads return the newest first."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from nico.services import status
from tests.support import factories as f


async def test_history_is_newest_first_and_limited_per_owner(session: AsyncSession) -> None:
    s = await f.nvlink_site(session, racks=1, trays=1)
    other = await f.vpc(session, s.tenant, s.site, name="vpc-2")
    for n in range(25):
        await status.record(session, "vpc_id", s.vpc.id, "Ready", f"entry {n}")
    await status.record(session, "vpc_id", other.id, "Pending", "only one")
    await session.commit()

    found = await status.history(session, "vpc_id", [s.vpc.id, other.id])
    assert [d.message for d in found[s.vpc.id]] == [f"entry {n}" for n in range(24, 4, -1)]
    assert [d.message for d in found[other.id]] == ["only one"]
    assert (await status.history(session, "vpc_id", [s.vpc.id], limit=100))[s.vpc.id][-1].message == "entry 0"
    assert await status.history(session, "vpc_id", []) == {}
