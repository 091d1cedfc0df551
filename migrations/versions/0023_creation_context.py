"""creation context: a create's first reads and locks in one statement (rule ``creation_context``)

A create sent seven statements in its first round trip: the plan mode, the context its checks read,
three locks (the VPC, its default logical partition, the named partitions) and placement's inputs.
``nico_creation_context`` does the first five, in the same order and each with its own snapshot, in
one statement: a create's PostgreSQL and client CPU follow its statements more than what they do.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from nico.db import sql as rules

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPLIED = {"creation_context": "00c6e656fde15494"}


def upgrade() -> None:
    for name, digest in APPLIED.items():
        rules.apply(op, name, digest)


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION IF EXISTS nico_creation_context(text, uuid, uuid, uuid, uuid[], text[], uuid[])"
    )
