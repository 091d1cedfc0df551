"""fabric health and multicast budgets: what the fabric last said about each GPU's and physical
partition's health, each domain's multicast budget, and each logical partition's multicast limit

``gpu.health`` and ``physical_partition.health`` are the fabric manager's own words (HEALTHY,
DEGRADED, NO_NVLINK, DEGRADED_BW, ...; NULL until observed), written by the reconciler and shown to
tenants. ``nvlink_domain.max_multicast_groups`` is the domain's budget from NMX-C
GetDomainProperties (1024 on NVL72; NULL until read). ``logical_partition.multicast_groups_limit``
is what each of its physical partitions asks the fabric for (a multiple of 4; default 16).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "logical_partition",
        sa.Column("multicast_groups_limit", sa.Integer(), server_default="16", nullable=False),
    )
    op.create_check_constraint(
        op.f("ck_logical_partition_multicast_groups_limit"),
        "logical_partition",
        "multicast_groups_limit >= 0 AND multicast_groups_limit % 4 = 0",
    )
    op.add_column("nvlink_domain", sa.Column("max_multicast_groups", sa.Integer(), nullable=True))
    op.add_column("gpu", sa.Column("health", sa.String(length=32), nullable=True))
    op.add_column("physical_partition", sa.Column("health", sa.String(length=32), nullable=True))


def downgrade() -> None:
    op.drop_column("physical_partition", "health")
    op.drop_column("gpu", "health")
    op.drop_column("nvlink_domain", "max_multicast_groups")
    op.drop_constraint(
        op.f("ck_logical_partition_multicast_groups_limit"), "logical_partition", type_="check"
    )
    op.drop_column("logical_partition", "multicast_groups_limit")
