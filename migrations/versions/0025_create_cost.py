"""create cost: the quota check counts reserved machines from the tenant's logical partitions (rule
``quota``)

The commit's quota check counted the machines the tenant's partitions hold in reserve with a join
that started from every free machine of the type at the site: a create's check read the whole site's
free machines (0.4 ms of PostgreSQL's CPU at 16 racks, growing with the site). It now probes each of
the tenant's partitions by the reservation's key; the count is the same.

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from nico.db import sql as rules

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPLIED = {"quota": "7c52edaaf1a2583b"}
PREVIOUS = {"quota": "1b0843c64aea1620"}


def upgrade() -> None:
    for name, digest in APPLIED.items():
        rules.apply(op, name, digest)


def downgrade() -> None:
    for name, digest in PREVIOUS.items():
        rules.apply(op, name, digest)
