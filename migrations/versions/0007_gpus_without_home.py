"""nvlink_domain.gpus_without_home: GPUs in neither a tenant partition nor their home partition after
the reconciler's last pass over the domain (the invariant of the 2026 partition model, #6644), for the
topology page and the admin CLI. Additive with a default: an upgraded site keeps every row and
partition as it is.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "nvlink_domain",
        sa.Column("gpus_without_home", sa.Integer(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("nvlink_domain", "gpus_without_home")
