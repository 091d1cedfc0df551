"""Services never commit; the request scope does, once, with :func:`nico.db.raw.commit`, which sends
the statements a service registered (:func:`nico.db.raw.send_at_commit`) in the COMMIT's round trip.
Any other commit of such a session is refused, so a registered check is never skipped."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.raw import AtCommit, Statement, send_at_commit


async def test_a_commit_that_would_leave_a_registered_statement_behind_is_refused() -> None:
    async with AsyncSession() as session:
        await session.commit()  # nothing registered: an ordinary commit
        send_at_commit(session, AtCommit(Statement("SELECT 1"), lambda _: None))
        with pytest.raises(RuntimeError, match=r"nico\.db\.raw\.commit"):
            await session.commit()
        await session.rollback()  # the transaction is gone, and what it registered with it
        await session.commit()
