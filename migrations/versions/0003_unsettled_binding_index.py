"""nvlink_interface: partial index of the bindings the fabric does not hold yet, by partition

Placement asks where a logical partition is present: its physical partitions, plus the domains of
bindings not yet realised. Without this index the second half scanned every binding of the
partition, so creating an instance grew slower as its partition grew.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_nvlink_interface_unsettled",
        "nvlink_interface",
        ["logical_partition_id"],
        postgresql_where=sa.text("status IN ('Pending', 'Provisioning', 'Error')"),
    )


def downgrade() -> None:
    op.drop_index("ix_nvlink_interface_unsettled", table_name="nvlink_interface")
