"""What a running API needs, built once per process and shared by every request."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property

from prometheus_client import CollectorRegistry
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from nico.api.auth import TokenVerifier
from nico.config import Settings
from nico.db.engine import reading
from nico.db.raw import RawPool
from nico.db.revisions import schema_problem
from nico.services.feed_stream import FeedListener

log = logging.getLogger(__name__)


@dataclass
class AppContext:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    verifier: TokenVerifier
    registry: CollectorRegistry

    @cached_property
    def raw(self) -> RawPool:
        """Raw autocommit connections for the hottest requests (see :mod:`nico.db.raw`)."""
        return RawPool(self.engine.url.render_as_string(hide_password=False), self.settings.db_pool_size)

    async def readiness_problem(self) -> str | None:
        """None when the database is reachable and its schema at head, else what is wrong."""
        try:
            async with reading(self.engine) as conn:
                await conn.execute(text("SELECT 1"))
                return await schema_problem(conn)
        except Exception as exc:
            # The exception text names sockets, hosts and users: it goes to the log, not to the caller.
            log.warning("not ready, database unreachable: %s: %s", type(exc).__name__, str(exc).strip())
            return "database unreachable"

    @cached_property
    def feed_listener(self) -> FeedListener:
        """The process's one LISTEN connection for placement events, shared by every open stream."""
        return FeedListener(self.engine.url.render_as_string(hide_password=False), self.raw)

    async def close(self) -> None:
        if "raw" in self.__dict__:
            await self.raw.close()
        await self.engine.dispose()

    @cached_property
    def read_sessions(self) -> async_sessionmaker[AsyncSession]:
        """Sessions for requests that only read: autocommit, so no BEGIN/COMMIT round trips (each
        statement sees committed data, as every statement does at READ COMMITTED anyway)."""
        return async_sessionmaker(
            self.engine.execution_options(isolation_level="AUTOCOMMIT"),
            expire_on_commit=False,
            autoflush=False,
        )
