"""Test databases on real PostgreSQL: the embedded server unless ``NICO_TEST_DATABASE_URL`` is set.

``NICO_TEST_DATABASE_URL`` names any database on a server where the user may create databases; the
tests create (and drop) their own databases beside it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

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


def truncate_all(url: str, tables: list[str]) -> None:
    """Empty ``tables`` and restart every sequence. Only the tables that hold rows are truncated: a
    TRUNCATE costs a new file per table, and most tests touch a few of them."""
    probe = " UNION ALL ".join(f"SELECT '{t}' WHERE EXISTS (SELECT 1 FROM \"{t}\")" for t in tables)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("SET lock_timeout = '20s'")
        used = [row[0] for row in conn.execute(probe)]
        sequences = [
            row[0]
            for row in conn.execute(
                "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'S' AND n.nspname = current_schema()"
            )
        ]
        restarts = "".join(f"ALTER SEQUENCE {name} RESTART;" for name in sequences)
        quoted = ", ".join('"' + table + '"' for table in used)
        truncate = f"TRUNCATE {quoted} CASCADE;" if used else ""
        if truncate or restarts:
            conn.execute("BEGIN;" + truncate + restarts + "COMMIT;")
