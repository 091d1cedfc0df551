"""The Alembic history builds exactly the schema the models describe, and runs both ways."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

import nico.db.models  # noqa: F401
from nico.db import migrate
from nico.db.base import Base
from tests.support import db as testdb


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return set(sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()


def _functions(url: str) -> set[str]:
    """The stored functions of the schema (a trigger goes with its table or its function)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            query = sa.text(
                "SELECT oid::regprocedure::text FROM pg_proc "
                "WHERE pronamespace = current_schema()::regnamespace"
            )
            return set(conn.execute(query).scalars())
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade_and_no_drift_from_models() -> None:
    url = testdb.create_database("nico_migrations")
    try:
        migrate.upgrade(url)
        assert set(Base.metadata.tables) <= _tables(url)

        migrate.downgrade(url, "base")
        assert _tables(url) <= {"alembic_version"}
        assert _functions(url) == set(), "a downgrade left its functions behind"

        migrate.upgrade(url)
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                context = MigrationContext.configure(conn, opts={"compare_type": True})
                diff = compare_metadata(context, Base.metadata)
        finally:
            engine.dispose()
        assert diff == [], f"models and migrations differ: {diff}"
    finally:
        testdb.drop_database(url)


def test_history_is_linear() -> None:
    script = ScriptDirectory(str(migrate.migrations_dir()))
    assert len(script.get_heads()) == 1
    assert len(script.get_bases()) == 1
