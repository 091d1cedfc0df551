"""Stored functions and triggers come from nico/db/sql: each rule's current text in one file

The database's rules (the machine pick, the quota check, the domain capacity triggers, the scheduler
feed's triggers) were PL/pgSQL strings inside migrations 0005-0014, some assembled from pieces of
earlier revisions; reading one as it runs meant finding its last redefinition. Each now lives in
``nico/db/sql/<rule>.sql``, and this revision re-creates every rule from those files: the same
definitions, laid out to be read (only whitespace inside the bodies differs). The triggers are
dropped and created again with the definitions they had.

Migrations pin the text they apply by digest (``nico.db.sql``'s docstring says how a later change of a
rule keeps this revision meaning what it meant). Downgrade restores the text the earlier revisions
wrote.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from nico.db import sql as rules
from nico.db.migrate import sibling_revision

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPLIED = {
    "capacity": "9e19029d425af52f",
    "feed_triggers": "46d9b80bbd2b10e9",
    "machine_pick": "7c81501b3dc9d49e",
    "quota": "89792ad570d94181",
}


def _replacing(statement: str) -> str:
    return statement.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)


def _previous() -> list[str]:
    """Every function as revision 0014 left it (the triggers are as they were)."""
    renamed = sibling_revision(__file__, "0008")
    capacity, statements = sibling_revision(__file__, "0009"), sibling_revision(__file__, "0010")
    audience = sibling_revision(__file__, "0011")
    creates, first = sibling_revision(__file__, "0013"), sibling_revision(__file__, "0014")
    return [
        _replacing(capacity.ADD),
        _replacing(statements.CAPACITY_COLLECT),
        _replacing(statements.CAPACITY_APPLY),
        audience._function(),
        renamed._functions(renamed=True)[1],  # 0005's partition function, 0008's column names
        _replacing(creates.FUNCTION),
        _replacing(creates.QUOTA),
        _replacing(first.FUNCTION),
    ]


def upgrade() -> None:
    for name, digest in APPLIED.items():
        rules.apply(op, name, digest)


def downgrade() -> None:
    for statement in _previous():
        op.execute(statement)
