"""Alembic wiring: upgrade and downgrade, the head as Alembic sees it. (Whether a database is at head is
:mod:`nico.db.revisions`' question, answered without importing Alembic.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from nico.db.engine import normalize_url
from nico.db.revisions import migrations_dir


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
