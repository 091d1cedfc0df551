"""The source of every stored function and trigger (the database's rules), and how migrations apply it.

Each ``<rule>.sql`` file beside this module holds the current definition of one rule or of a closely
related group (its functions and the triggers that run them), as it runs at the head revision. A
file opens with a comment block (what the rule is, who calls it, the migration that last changed
it); the rest, its *body*, is the SQL that runs: ``CREATE OR REPLACE FUNCTION`` and, for triggers,
``DROP TRIGGER IF EXISTS`` then ``CREATE TRIGGER``, so applying a file twice is harmless.

Migrations pin what they apply by digest. A migration never applies "whatever the file says today",
or an old revision would silently change meaning the day a rule changes: it names each rule with the
digest of the body it applied (``apply(op, "capacity", "3f2a...")``). :func:`pinned` finds that text:
the live file when its body still has that digest, else ``superseded/<rule>-<digest>.sql``, the copy
kept when the rule moved on, else it raises. To change a rule:

1. copy the live file to ``superseded/<rule>-<its digest>.sql``: the migrations that name that digest
   still apply it (``python -m nico.db.sql`` prints every rule's digest);
2. edit the live file (and its header: the migration that last changed it);
3. add a migration whose ``upgrade`` applies the new digest and whose ``downgrade`` applies the old.

``tests/foundation/test_sql_rules.py`` holds this: the database that ``nico migrate`` builds from an
empty one has exactly the functions and triggers of the live files, and each file's digest is named
by the migration its header says last changed it. An edit to a file without a migration fails it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

HERE = Path(__file__).resolve().parent
SUPERSEDED = HERE / "superseded"


class Executes(Protocol):
    """What applying needs of Alembic's ``op`` (or a connection): run one SQL string."""

    def execute(self, sqltext: str, /) -> object: ...


def names() -> list[str]:
    """The rules, by file name without ``.sql``."""
    return sorted(path.stem for path in HERE.glob("*.sql"))


def load(name: str) -> str:
    """The live file of rule ``name``, header and all."""
    return (HERE / f"{name}.sql").read_text()


def body(text: str) -> str:
    """``text`` without its opening comment block: the SQL that runs."""
    lines = text.splitlines(keepends=True)
    start = 0
    while start < len(lines) and (lines[start].startswith("--") or not lines[start].strip()):
        start += 1
    return "".join(lines[start:])


def digest(text: str) -> str:
    """The digest migrations pin a rule's text by: of its body, so the header can be reworded freely."""
    return hashlib.sha256(body(text).encode()).hexdigest()[:16]


def pinned(name: str, wanted: str) -> str:
    """The body of rule ``name`` whose digest is ``wanted``: the live file's, or a superseded copy's."""
    live = load(name)
    if digest(live) == wanted:
        return body(live)
    kept = SUPERSEDED / f"{name}-{wanted}.sql"
    if kept.is_file():
        text = kept.read_text()
        if digest(text) != wanted:
            raise LookupError(f"{kept} was edited: its digest is {digest(text)}, its name says {wanted}")
        return body(text)
    raise LookupError(
        f"a migration applies rule {name!r} at digest {wanted}, but {HERE / name}.sql is at {digest(live)} "
        f"and {kept.name} does not exist: a rule was changed without keeping the text a migration names "
        "(see nico/db/sql/__init__.py)"
    )


def apply(op: Executes, name: str, wanted: str) -> None:
    """Create (or replace) the functions and triggers of rule ``name`` as pinned by ``wanted``."""
    op.execute(pinned(name, wanted))
