"""Test databases on real PostgreSQL: the embedded server unless ``NICO_TEST_DATABASE_URL`` is set.

``NICO_TEST_DATABASE_URL`` names any database on a server where the user may create databases; the
tests create (and drop) their own databases beside it. Each pytest-xdist worker starts an embedded
server of its own: the horizon of finished transactions (``pg_current_snapshot``) spans a server's
databases, so another worker's transactions would hold back the placement event stream's.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import TupleRow
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from nico.db.engine import libpq_url, normalize_url

_EMBEDDED_DIR: Path | None = None


def server_url() -> str:
    """A SQLAlchemy URL of some database on the test server (used to create others)."""
    global _EMBEDDED_DIR
    env = os.environ.get("NICO_TEST_DATABASE_URL")
    if env:
        return normalize_url(env)
    if _EMBEDDED_DIR is None:
        _EMBEDDED_DIR = Path(tempfile.mkdtemp(prefix="nico-test-pg-"))
        # Registered before the server's own clean-up, so it runs after it (atexit is LIFO).
        atexit.register(shutil.rmtree, _EMBEDDED_DIR, ignore_errors=True)
    from nico.db.embedded import start_embedded_postgres

    url = start_embedded_postgres(_EMBEDDED_DIR, "postgres", delete_on_exit=True)
    # A throwaway server: nothing in it has to survive a crash, so commits need not wait for the disk.
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
    return url


def create_database(prefix: str = "nico_test") -> str:
    """Create an empty database and return its SQLAlchemy URL."""
    base = server_url()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(libpq_url(base), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_url(base).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    name = make_url(url).database
    base = server_url()
    with psycopg.connect(libpq_url(base), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Cleaner:
    """Empties one test database after each test, over a connection it keeps open: a new backend
    first loads the catalog entries of every table it probes, which costs ten times the probe."""

    def __init__(self, url: str, tables: list[str]) -> None:
        self._url = libpq_url(url)
        self._tables = tables  # parents before children
        self._probe = " UNION ALL ".join(f"SELECT '{t}' WHERE EXISTS (SELECT 1 FROM \"{t}\")" for t in tables)
        self._conn: psycopg.Connection[TupleRow] | None = None

    def _connection(self) -> psycopg.Connection[TupleRow]:
        """The kept connection, or a new one when a test ended it (terminating every backend of the
        database, as a restart does)."""
        if self._conn is not None:
            try:
                self._conn.execute("SELECT 1")
                return self._conn
            except psycopg.OperationalError:
                self._conn.close()
        self._conn = psycopg.connect(self._url, autocommit=True)
        self._conn.execute("SET lock_timeout = '20s'")
        return self._conn

    def empty(self) -> None:
        """Leave every table empty and every sequence unused, as a fresh migrated database has them.

        DELETE, not TRUNCATE: a TRUNCATE writes new files for the table and each of its indexes,
        which costs far more than deleting the handful of rows a test leaves. Only tables that hold
        rows are touched, children first. A DELETE fires the tables' triggers, which may write rows
        elsewhere (an event, a capacity delta): the pass repeats until every table is empty. Then the
        sequences that were used restart.
        """
        conn = self._connection()
        for _ in range(len(self._tables) + 1):
            used = {row[0] for row in conn.execute(self._probe)}
            if not used:
                break
            with conn.transaction():
                conn.execute("".join(f'DELETE FROM "{t}";' for t in reversed(self._tables) if t in used))
        else:
            raise RuntimeError(f"tables still hold rows after emptying them: {sorted(used)}")
        sequences = conn.execute(
            "SELECT format('%I.%I', schemaname, sequencename) FROM pg_sequences "
            "WHERE schemaname = current_schema() AND last_value IS NOT NULL"
        ).fetchall()
        if sequences:
            with conn.transaction():
                conn.execute("".join(f"ALTER SEQUENCE {row[0]} RESTART;" for row in sequences))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


@contextmanager
def statements_run(engine: AsyncEngine) -> Iterator[list[str]]:
    """The SQL statements ``engine`` runs while the block runs, in order (a fixed number of queries,
    not one per row, is what a test of a read asserts with it)."""
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count)
