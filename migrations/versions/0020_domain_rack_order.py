"""domain rack order: ``nvlink_domain.rack_serial``, the least chassis serial of a domain's machines

The topology pages order a site's domains in rack order. They aggregated every machine of the site on
each page to find it (the cost of a page grew with the site: 0.1-0.5 s of PostgreSQL at 10,000 racks);
the column is kept by rule domain_rack_order (new) on every insert, delete and move of a machine, and
filled here from the machines there are.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from nico.db import sql as rules

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPLIED = {"domain_rack_order": "e7bcc847adb8207a"}


def upgrade() -> None:
    op.add_column("nvlink_domain", sa.Column("rack_serial", sa.String(length=256), nullable=True))
    op.execute(
        "UPDATE nvlink_domain d SET rack_serial = f.serial "
        "FROM (SELECT domain_uuid, min(chassis_serial) AS serial FROM machine "
        "      WHERE domain_uuid IS NOT NULL GROUP BY domain_uuid) f "
        "WHERE d.uuid = f.domain_uuid"
    )
    for name, digest in APPLIED.items():
        rules.apply(op, name, digest)


def downgrade() -> None:
    for trigger in ("added", "moved", "removed"):
        op.execute(f"DROP TRIGGER IF EXISTS trg_machine_rack_serial_{trigger} ON machine")
    op.execute("DROP FUNCTION IF EXISTS nico_domain_rack_serial_added()")
    op.execute("DROP FUNCTION IF EXISTS nico_domain_rack_serial_left()")
    op.drop_column("nvlink_domain", "rack_serial")
