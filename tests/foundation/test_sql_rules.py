"""The database's rules are the files in ``nico/db/sql``: a database migrated from empty to head has
exactly the stored functions and triggers those files define (whitespace aside), no more and no less;
each file's header names the migration that applies its current text; and every revision from the
first that applies the files downgrades to exactly the rules of the revision before it.

An edit to a file without a migration fails here (the migration that pins the old text finds neither
it nor a superseded copy, or, with a copy kept, the database keeps the old text); so does a function or
trigger a migration creates with no file."""

from __future__ import annotations

import re
from collections.abc import Iterator

import psycopg
import pytest
from alembic.script import ScriptDirectory

from nico.db import migrate, sql
from nico.db.engine import libpq_url
from tests.support import db as testdb

FIRST_FROM_FILES = "0015"  # the first revision that applies nico/db/sql
_FUNCTIONS = """
SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid) FROM pg_proc p
WHERE p.pronamespace = current_schema()::regnamespace AND p.prokind IN ('f', 'p')
"""
_TRIGGERS = """
SELECT t.tgname || ' ON ' || t.tgrelid::regclass::text, pg_get_triggerdef(t.oid) FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
"""


def _rules(conn: psycopg.Connection) -> dict[str, str]:
    """Every function and trigger of the schema: name -> definition."""
    return dict([*conn.execute(_FUNCTIONS), *conn.execute(_TRIGGERS)])


def _spaced(rules: dict[str, str]) -> dict[str, str]:
    """``rules`` with each run of whitespace made one space."""
    return {name: " ".join(definition.split()) for name, definition in rules.items()}


def _drop_every_rule(conn: psycopg.Connection) -> None:
    for function in list(_rules(conn)):
        if " ON " not in function:
            conn.execute(f"DROP FUNCTION IF EXISTS {function} CASCADE")  # with the triggers that run it
    for trigger in list(_rules(conn)):  # those that run a function of another schema
        name, table = trigger.split(" ON ")
        conn.execute(f'DROP TRIGGER "{name}" ON {table}')


@pytest.fixture(scope="module")
def at_head() -> Iterator[str]:
    url = testdb.create_database("nico_sql_rules")
    try:
        migrate.upgrade(url)
        yield url
    finally:
        testdb.drop_database(url)


def test_a_database_at_head_has_exactly_the_rules_of_the_files(at_head: str) -> None:
    with psycopg.connect(libpq_url(at_head)) as conn:
        migrated = _spaced(_rules(conn))
        # The same database with its rules replaced by the files' (rolled back at the end).
        _drop_every_rule(conn)
        assert _rules(conn) == {}
        for name in sql.names():
            conn.execute(sql.body(sql.load(name)))
        from_files = _spaced(_rules(conn))
        conn.rollback()
    assert migrated, "the migrated database has no functions or triggers: is this the right schema?"
    without_file = sorted(migrated.keys() - from_files.keys())
    assert not without_file, f"made by migrations but defined in no nico/db/sql file: {without_file}"
    not_migrated = sorted(from_files.keys() - migrated.keys())
    assert not not_migrated, f"defined in nico/db/sql but absent after `nico migrate`: {not_migrated}"
    differ = sorted(name for name in migrated if migrated[name] != from_files[name])
    assert not differ, (
        f"the database's definition differs from the file's: {differ}; a file changed without a "
        "migration that applies it (see nico/db/sql/__init__.py)"
    )


@pytest.mark.parametrize("name", sql.names())
def test_each_file_names_the_migration_that_applies_its_text(name: str) -> None:
    text = sql.load(name)
    said = re.search(r"^--.*last changed by migration (\d{4})", text, re.MULTILINE | re.IGNORECASE)
    assert said, f"{name}.sql: its header must say 'last changed by migration NNNN'"
    (revision,) = (migrate.migrations_dir() / "versions").glob(f"{said[1]}_*.py")
    assert sql.digest(text) in revision.read_text(), (
        f"{name}.sql is at digest {sql.digest(text)}, which migration {said[1]} does not apply"
    )


def _revisions_from(first: str) -> list[tuple[str, str]]:
    """(revision, the one before it) for ``first`` and every later revision, oldest first."""
    script = ScriptDirectory(str(migrate.migrations_dir()))
    walk = [(r.revision, str(r.down_revision)) for r in script.walk_revisions(first, "head")]
    return walk[::-1]


def test_each_revision_from_the_files_on_downgrades_to_the_rules_before_it() -> None:
    url = testdb.create_database("nico_sql_rules_down")
    try:
        walk = _revisions_from(FIRST_FROM_FILES)
        assert walk[0] == (FIRST_FROM_FILES, "0014")
        for revision, before in walk:
            migrate.upgrade(url, before)
            with psycopg.connect(libpq_url(url)) as conn:
                expected = _rules(conn)
            migrate.upgrade(url, revision)
            migrate.downgrade(url, before)
            with psycopg.connect(libpq_url(url)) as conn:
                assert _rules(conn) == expected, f"downgrade of {revision} did not restore {before}'s rules"
    finally:
        testdb.drop_database(url)
