"""Where the migrations are, which revisions they hold and whether a database's schema is at their
head: read from the revision files' text, without importing Alembic (a few hundred milliseconds that
every command needing the schema, and every ``/readyz``, would pay for one comparison)."""

from __future__ import annotations

import ast
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

PACKAGED = Path(__file__).resolve().parents[1] / "_migrations"  # in a wheel: see setup.py
CHECKOUT = Path(__file__).resolve().parents[2] / "migrations"  # a source checkout (editable install)
# A revision file's own two assignments, as Alembic's template writes them (annotated or not).
ASSIGNMENT = re.compile(r"^(revision|down_revision)\s*(?::[^=]+)?=\s*(.+?)\s*$", re.MULTILINE)


def migrations_dir() -> Path:
    """``NICO_MIGRATIONS_DIR`` if set, else the migrations shipped in the package (an installed wheel),
    else ``migrations/`` at the top of the source checkout."""
    env = os.environ.get("NICO_MIGRATIONS_DIR")
    if env:
        return Path(env)
    return PACKAGED if (PACKAGED / "env.py").is_file() else CHECKOUT


@dataclass(frozen=True)
class Revisions:
    known: frozenset[str]
    heads: frozenset[str]


@functools.cache
def _read(versions: Path) -> Revisions:
    known: set[str] = set()
    below: set[str] = set()
    for path in versions.glob("*.py"):
        found = dict(ASSIGNMENT.findall(path.read_text(encoding="utf-8")))
        if "revision" not in found:
            continue
        known.add(ast.literal_eval(found["revision"]))
        down = ast.literal_eval(found.get("down_revision", "None"))
        below.update([down] if isinstance(down, str) else down or ())
    return Revisions(frozenset(known), frozenset(known - below))


def revisions() -> Revisions:
    """Every revision of the migrations and the heads (none of the others' ``down_revision``)."""
    return _read(migrations_dir() / "versions")


async def schema_problem(conn: AsyncConnection) -> str | None:
    """None when the schema is at head, else a one-line reason saying what to do."""
    exists = (await conn.execute(text("SELECT to_regclass('alembic_version')"))).scalar()
    if exists is None:
        return "database schema is not initialised; run `nico migrate`"
    current = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    graph = revisions()
    if current in graph.heads:
        return None
    head = ", ".join(sorted(graph.heads))
    if current is not None and current not in graph.known:
        return f"database schema is at revision {current}, newer than this nico's {head}; upgrade nico"
    return f"database schema is at revision {current}, expected {head}; run `nico migrate`"
