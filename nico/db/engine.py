"""Engines and sessions. The API and the reconciler use async sessions; Alembic uses a sync engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from nico.config import Settings
from nico.db.embedded import start_embedded_postgres


def normalize_url(url: str) -> str:
    """Accept ``postgres://`` and ``postgresql://`` URLs and select the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def libpq_url(url: str) -> str:
    """The same URL without the SQLAlchemy driver suffix, for raw psycopg connections."""
    return normalize_url(url).replace("postgresql+psycopg://", "postgresql://", 1)


def resolve_database_url(settings: Settings) -> str:
    """``NICO_DATABASE_URL`` if set, else the embedded server in the data directory."""
    if settings.database_url:
        return normalize_url(settings.database_url)
    return start_embedded_postgres(settings.data_dir)


def make_engine(url: str, *, pool_size: int = 10) -> AsyncEngine:
    return create_async_engine(
        normalize_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        pool_recycle=1800,
    )


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
