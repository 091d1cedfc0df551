"""Engines and sessions. The API and the reconciler use async sessions; Alembic uses a sync engine."""

from __future__ import annotations

import os
import select
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from nico.config import Settings
from nico.db.embedded import has_embedded_postgres, start_embedded_postgres


def normalize_url(url: str) -> str:
    """Accept ``postgres://`` and ``postgresql://`` URLs and select the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def libpq_url(url: str) -> str:
    """The same URL without the SQLAlchemy driver suffix, for raw psycopg connections."""
    return normalize_url(url).replace("postgresql+psycopg://", "postgresql://", 1)


def name_connections(command: str) -> None:
    """Have every PostgreSQL connection this process opens carry ``command`` as its application_name
    (libpq's ``PGAPPNAME``, which every connection here honours: pools, listeners, migrations), so
    ``pg_stat_activity`` and the server's logs tell the API's work from the reconciler's; a name the
    operator set is kept."""
    os.environ.setdefault("PGAPPNAME", command)


class NoDatabase(LookupError):
    """No database is configured and the data directory holds no embedded server."""


def resolve_database_url(settings: Settings, *, create: bool = True) -> str:
    """``NICO_DATABASE_URL`` if set, else the embedded server in the data directory; made there first
    only with ``create`` (else :class:`NoDatabase` when there is none)."""
    if settings.database_url:
        return normalize_url(settings.database_url)
    if not create and not has_embedded_postgres(settings.data_dir):
        raise NoDatabase(f"no nico database in {settings.data_dir}")
    return start_embedded_postgres(settings.data_dir, supervise=True)


def is_stale(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether an idle pooled connection is known to be dead, without a round trip: the server never
    writes to an idle connection unprompted except to say goodbye, so a readable socket (the server
    closed it, restarted, or terminated the backend) means it must not be handed out again."""
    if conn.closed or conn.broken:
        return True
    try:
        poller = select.poll()
        poller.register(conn.pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    except (OSError, ValueError, psycopg.Error):
        return True


def _check_out(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    if is_stale(dbapi_connection.driver_connection):
        raise DisconnectionError("pooled connection closed by the server")  # the pool opens a new one


# Statements are prepared on a connection the first time they run there (psycopg's default waits for
# the fifth): the engine's pool holds up to twice db_pool_size connections, and under load the
# reconciler's and the requests' statements spread over all of them, so with the default most ran
# parsed and planned anew for as long as a burst lasted (half of the statements of a 16-tenant
# benchmark phase went unprepared). nico's SQL is a fixed set of texts, well under psycopg's cache of
# 100 per connection.
PREPARE_THRESHOLD = 0


def make_engine(url: str, *, pool_size: int = 10, lifo: bool = True) -> AsyncEngine:
    """An engine whose pool holds up to ``pool_size`` connections (and as many more at a peak). With
    ``lifo`` (the default) the connection returned last is handed out first, so a process whose work
    is mostly one thing at a time keeps reusing the same few connections and the statements prepared
    on them; a queue hands out the one idle longest: each of the pool's connections in turn, every
    statement parsed and planned again on each (``nico serve`` with its reconciler on a FIFO pool:
    twice PostgreSQL's CPU per converged instance). The connections a LIFO pool leaves idle are the
    ones a server's idle timeout may close: ``is_stale`` finds them on check-out."""
    engine = create_async_engine(
        normalize_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_use_lifo=lifo,
        pool_pre_ping=False,  # is_stale on check-out finds dead connections without a round trip
        pool_recycle=1800,
        connect_args={"prepare_threshold": PREPARE_THRESHOLD},
    )
    event.listen(engine.sync_engine, "checkout", _check_out)
    return engine


@asynccontextmanager
async def reading(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection for reads outside any transaction (autocommit: each statement its own), for
    readers that write nothing. No BEGIN and no ROLLBACK go out: a ROLLBACK would also cost the pooled
    connection every statement psycopg had prepared on it (psycopg forgets them all on a ROLLBACK),
    and the passes and requests that use the connection next would have them parsed and planned
    again."""
    async with engine.connect() as conn:
        yield await conn.execution_options(isolation_level="AUTOCOMMIT")


def make_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)


@asynccontextmanager
async def transaction(factory: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session that commits once when the block succeeds and rolls back when it raises."""
    async with factory() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise
