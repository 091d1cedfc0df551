"""A tenant's limits at a site: logical partitions, NVLink changes in flight, fabric-changing requests

Adds the rule ``tenant_limits`` (nico/db/sql/tenant_limits.sql): the quota checks of logical
partitions and of instances whose NVLink change the fabric has not settled, each counted under the
lock of the tenant's ``tenant_site`` row, and the token bucket of fabric-changing requests, kept in
``fabric_rate_bucket`` (unlogged) so that every API replica draws from the same one.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from nico.db import sql as rules

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPLIED = "8cc178a208e0c3d5"
FUNCTIONS = (
    "nico_take_fabric_token(text, double precision, double precision)",
    "nico_check_nvlink_changes_quota(uuid, uuid, integer)",
    "nico_check_partition_quota(uuid, uuid, integer)",
    "nico_lock_tenant_site(uuid, uuid)",
)


def upgrade() -> None:
    op.create_table(
        "fabric_rate_bucket",
        sa.Column("org", sa.String(length=256), nullable=False),
        sa.Column("tokens", sa.Double(), nullable=False),
        sa.Column("refilled", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("org", name=op.f("pk_fabric_rate_bucket")),
        prefixes=["UNLOGGED"],
    )
    rules.apply(op, "tenant_limits", APPLIED)


def downgrade() -> None:
    for function in FUNCTIONS:
        op.execute(f"DROP FUNCTION {function}")
    op.drop_table("fabric_rate_bucket")
