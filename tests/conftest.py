"""Shared fixtures: a real PostgreSQL database migrated by Alembic, the app, an HTTP client.

Each test that touches the database gets it clean: every table is truncated after the test.
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


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    url = testdb.create_database()
    migrate.upgrade(url)
    yield url
    testdb.drop_database(url)


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
def db(database_url: str) -> Iterator[str]:
    """The test database, emptied after the test."""
    yield database_url
    testdb.truncate_all(database_url, TABLES)


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
