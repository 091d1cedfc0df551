"""A command that needs the schema finds the database or says in one line what to do, and creates
nothing: no embedded server in a mistyped data directory, no table in a database without the schema.
Only ``migrate``, ``serve``, ``reconcile`` and ``demo`` make a database."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from alembic.script import ScriptDirectory
from typer.testing import CliRunner

from nico.cli import app
from nico.db.engine import libpq_url, name_connections
from nico.db.migrate import head_revision
from nico.db.revisions import migrations_dir, revisions
from tests.support import db as testdb

MACHINE = "SIM-0001-t00"
UUID = "6c0e6a4e-2d4e-4f7b-9a61-0f6d1f1d2c3b"
NEEDS_THE_SCHEMA = [
    ["admin", "nvlink-domains"],
    ["admin", "machine", "list"],
    ["admin", "machine", "nvlink-info", "show", MACHINE],
    ["admin", "machine", "nvlink-info", "populate", MACHINE],
    ["admin", "nvlink-nmxc-endpoints", "show"],
    ["admin", "nvlink-nmxc-endpoints", "create", "--chassis-serial", "S1", "--endpoint", "http://h:1"],
    ["admin", "credential", "delete-nmx-m"],
    ["admin", "logical-partition", "show"],
    ["admin", "lp", "create", "-n", "lp-a", "-t", "tenant-org"],
    ["admin", "lp", "delete", "-n", UUID],
    ["admin", "nvl-partition", "show"],
    ["admin", "nvp", "show", "-t", "tenant-org", "-n", "nico-1"],
    ["admin", "nmxc", "browse", "--chassis-serial", "S1"],
]


def invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output


@pytest.fixture
def missing_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A mistyped data directory, and no database URL: the embedded server is the only way left."""
    typo = tmp_path / "nico-dtaa"
    monkeypatch.delenv("NICO_DATABASE_URL", raising=False)
    monkeypatch.setenv("NICO_DATA_DIR", str(typo))
    return typo


@pytest.mark.parametrize("args", NEEDS_THE_SCHEMA, ids=" ".join)
def test_a_missing_data_dir_is_one_line_and_creates_nothing(args: list[str], missing_dir: Path) -> None:
    code, output = invoke(args)
    assert code == 1, output
    assert output == (
        f"database error: no nico database in {missing_dir} (NICO_DATA_DIR); `nico migrate` makes one "
        "there, or set NICO_DATABASE_URL\n"
    )
    assert not missing_dir.exists()


def test_the_installed_command_on_a_missing_data_dir(tmp_path: Path) -> None:
    """As a user types it: no traceback, one line on stderr, nothing on stdout, no directory."""
    typo = tmp_path / "typo"
    env = {k: v for k, v in os.environ.items() if k != "NICO_DATABASE_URL"} | {"NICO_DATA_DIR": str(typo)}
    done = subprocess.run(
        [sys.executable, "-m", "nico.cli", "admin", "nvlink-domains"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"database error: no nico database in {typo} (NICO_DATA_DIR); `nico migrate` makes one there, "
        "or set NICO_DATABASE_URL"
    ]
    assert not typo.exists()


@pytest.fixture
def unmigrated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """An empty database on the test server, named by NICO_DATABASE_URL."""
    url = testdb.create_database("nico_unmigrated")
    monkeypatch.setenv("NICO_DATABASE_URL", url)
    monkeypatch.setenv("NICO_DATA_DIR", str(tmp_path))
    yield url
    testdb.drop_database(url)


def tables(url: str) -> set[str]:
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {name for (name,) in rows}


def stamp(url: str, revision: str) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("DELETE FROM alembic_version")
        conn.execute("INSERT INTO alembic_version VALUES (%s)", (revision,))


@pytest.mark.parametrize(
    "args", [NEEDS_THE_SCHEMA[0], NEEDS_THE_SCHEMA[5], NEEDS_THE_SCHEMA[8]], ids=" ".join
)
def test_a_database_without_the_schema_says_run_migrate(args: list[str], unmigrated: str) -> None:
    head = head_revision()
    code, output = invoke(args)
    assert (code, output) == (1, "database error: database schema is not initialised; run `nico migrate`\n")
    assert tables(unmigrated) == set()

    stamp(unmigrated, "0003")
    code, output = invoke(args)
    assert (code, output) == (
        1,
        f"database error: database schema is at revision 0003, expected {head}; run `nico migrate`\n",
    )
    stamp(unmigrated, "ffff_from_a_later_nico")
    code, output = invoke(args)
    assert (code, output) == (
        1,
        "database error: database schema is at revision ffff_from_a_later_nico, newer than this nico's "
        f"{head}; upgrade nico\n",
    )
    assert tables(unmigrated) == {"alembic_version"}


def test_the_revisions_read_without_alembic_are_alembics() -> None:
    script = ScriptDirectory(str(migrations_dir()))
    found = revisions()
    assert found.heads == set(script.get_heads())
    assert found.known == {r.revision for r in script.walk_revisions()}


def test_checking_the_schema_does_not_load_alembic(cli_env: dict[str, str]) -> None:
    """The check costs two small reads, not Alembic's import (a few hundred milliseconds a command)."""
    code = (
        "import sys; from typer.testing import CliRunner; from nico.cli import app; "
        "r = CliRunner().invoke(app, ['admin', 'nvlink-domains']); "
        "print(r.exit_code, r.stdout.strip(), sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=os.environ | cli_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.split() == ["0", "[]", "[]"], done.stderr


def test_the_commands_name_their_connections_unless_the_operator_did(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nico serve`` and ``nico reconcile`` give their PostgreSQL connections their command as
    application_name (``pg_stat_activity`` and the server's log tell the API's work from the
    reconciler's); a name the operator set in ``PGAPPNAME`` is kept."""
    monkeypatch.delenv("PGAPPNAME", raising=False)
    name_connections("nico reconcile")
    with psycopg.connect(libpq_url(database_url)) as conn:
        row = conn.execute("SELECT current_setting('application_name')").fetchone()
    assert row is not None and row[0] == "nico reconcile"
    monkeypatch.setenv("PGAPPNAME", "site-api-7")
    name_connections("nico serve")
    assert os.environ["PGAPPNAME"] == "site-api-7"
