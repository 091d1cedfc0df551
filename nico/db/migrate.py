"""Alembic wiring: upgrade to head, and the revision check behind ``/readyz``."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from nico.db.engine import normalize_url

PACKAGED = Path(__file__).resolve().parents[1] / "_migrations"  # in a wheel: see setup.py
CHECKOUT = Path(__file__).resolve().parents[2] / "migrations"  # a source checkout (editable install)


def migrations_dir() -> Path:
    """``NICO_MIGRATIONS_DIR`` if set, else the migrations shipped in the package (an installed wheel),
    else ``migrations/`` at the top of the source checkout."""
    env = os.environ.get("NICO_MIGRATIONS_DIR")
    if env:
        return Path(env)
    return PACKAGED if (PACKAGED / "env.py").is_file() else CHECKOUT


def sibling_revision(beside: str, prefix: str) -> ModuleType:
    """The revision file ``<prefix>_*.py`` in the folder of ``beside`` (a revision's ``__file__``),
    loaded as a module: for a revision that re-creates or restores SQL an earlier one wrote."""
    path = next(Path(beside).parent.glob(f"{prefix}_*.py"))
    spec = importlib.util.spec_from_file_location(f"nico_migration_{prefix}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


def head_revision() -> str | None:
    script = ScriptDirectory(str(migrations_dir()))
    return script.get_current_head()


async def schema_problem(conn: AsyncConnection) -> str | None:
    """None when the schema is at head, else a one-line reason."""
    exists = (await conn.execute(text("SELECT to_regclass('alembic_version')"))).scalar()
    if exists is None:
        return "database schema is not initialised; run `nico migrate`"
    current = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    script = ScriptDirectory(str(migrations_dir()))
    head = script.get_current_head()
    if current == head:
        return None
    if current is not None and not _known(script, current):
        return f"database schema is at revision {current}, newer than this nico's {head}; upgrade nico"
    return f"database schema is at revision {current}, expected {head}; run `nico migrate`"


def _known(script: ScriptDirectory, revision: str) -> bool:
    try:
        return script.get_revision(revision) is not None
    except CommandError:  # alembic's "Can't locate revision": a later nico wrote it
        return False
