"""Shared fixtures: a real PostgreSQL database migrated by Alembic, the app, an HTTP client.

The tests run in parallel (pytest-xdist, ``-n auto`` in pyproject.toml; ``-n 0`` runs them in this
process). Each worker is a pytest session of its own, so the session fixtures below exist once per
worker: its own database, created and migrated by Alembic when a test first asks for it, its own app
and its own data directory. Each worker starts its own embedded PostgreSQL (a server's transaction
horizon spans its databases, and the event stream waits on it); on the one server that
``NICO_TEST_DATABASE_URL`` names, the workers' databases sit side by side. LISTEN/NOTIFY, advisory
locks and ``pg_stat_activity`` filtered by ``current_database()`` stay within a worker's database.

Each test that touches the database (the ``db`` fixture) gets it clean: after the test every table is
emptied and every sequence restarted (:class:`tests.support.db.Cleaner`). Not a rolled-back outer
transaction: the code under test commits through its own pools, several connections at once (races,
LISTEN, two reconcilers), which one wrapping transaction would serialize or hide.

The end-to-end tests (marker ``e2e``) start whole processes (demo, wheel install, Chromium,
Prometheus): they are one xdist group, run one after another on one worker (``--dist loadgroup``)
while the other workers take the rest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

import nico.db.models  # noqa: F401
from nico.api.app import build_context, create_app
from nico.api.context import AppContext
from nico.config import Settings, load_settings
from nico.db import migrate
from nico.db.base import Base
from tests.support import db as testdb

TEST_SECRET = "test-secret-0123456789abcdef-0123456789"
TABLES = [table.name for table in Base.metadata.sorted_tables]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("e2e"):
            item.add_marker(pytest.mark.xdist_group("e2e"))


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    url = testdb.create_database()
    migrate.upgrade(url)
    yield url
    testdb.drop_database(url)


@pytest.fixture(scope="session")
def cleaner(database_url: str) -> Iterator[testdb.Cleaner]:
    cleaner = testdb.Cleaner(database_url, TABLES)
    yield cleaner
    cleaner.close()


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("nico-data")


@pytest.fixture(scope="session")
def settings(database_url: str, data_dir: Path) -> Settings:
    return load_settings(
        database_url=database_url,
        data_dir=data_dir,
        auth={"hs256_secret": TEST_SECRET},
    )


@pytest_asyncio.fixture(scope="session")
async def app_context(settings: Settings, database_url: str) -> AsyncIterator[AppContext]:
    ctx = build_context(settings, database_url)
    yield ctx
    await ctx.close()


@pytest.fixture(scope="session")
def app(settings: Settings, app_context: AppContext) -> FastAPI:
    return create_app(settings, context=app_context)


@pytest.fixture
def db(database_url: str, cleaner: testdb.Cleaner) -> Iterator[str]:
    """The test database, emptied after the test."""
    yield database_url
    cleaner.empty()


@pytest_asyncio.fixture
async def session(app_context: AppContext, db: str) -> AsyncIterator[AsyncSession]:
    """A session for arranging and inspecting data; commit what the code under test must see."""
    async with app_context.sessions() as s:
        yield s


@pytest_asyncio.fixture
async def client(app: FastAPI, db: str) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://nico.test") as c:
        yield c
