"""a create's cost whatever the tenant's size: instances counted per (tenant, type) by triggers, and
the changes in flight found on a partial index (rules ``instance_count``, ``quota``,
``creation_context``, ``tenant_limits``)

A create counted the tenant's instances of the type twice (its creation context, its quota check
under the allocation lock) and its instances whose NVLink change is in flight once, each reading
every instance of the tenant: at 20,000 instances a create cost several times what it costs a small
tenant. ``instance_type_count`` holds the count per (tenant, type), kept by statement triggers on
``instance`` (exact in the transaction that writes, so the quota check sees its own instances), and
``ix_instance_in_flight`` holds only the instances whose change is in flight (statistics
``st_instance_in_flight`` tell the planner how few they are).

The backfill counts the instance table once under the triggers' lock (writers of instances wait for
the migration's commit); the partial index and the statistics are built in the same transaction.
Each reads the instance table once: a second or two at 100,000 instances.

Revision ID: 0026
Revises: 0025
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from nico.db import sql as rules

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

IN_FLIGHT = "(status = 'Terminating' OR nvlink_applied_version IS DISTINCT FROM nvlink_config_version)"
APPLIED = {
    "instance_count": "febde6ae50e7d2cf",
    "quota": "6cda0e6d74006148",
    "creation_context": "dbda3d1ce6fecad8",
    "tenant_limits": "49881fd25c565ca9",
}
PREVIOUS = {
    "quota": "7c52edaaf1a2583b",
    "creation_context": "00c6e656fde15494",
    "tenant_limits": "8cc178a208e0c3d5",
}


def upgrade() -> None:
    op.create_table(
        "instance_type_count",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("instance_type_id", sa.Uuid(), nullable=False),
        sa.Column("instances", sa.BigInteger(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "instance_type_id", name=op.f("pk_instance_type_count")),
    )
    # The triggers first: creating them locks the instance table against writes until the commit, so
    # the backfill's count and the triggers' changes never overlap nor miss a row.
    for name, digest in APPLIED.items():
        rules.apply(op, name, digest)
    op.execute(
        "INSERT INTO instance_type_count (tenant_id, instance_type_id, instances) "
        "SELECT tenant_id, instance_type_id, count(*) FROM instance WHERE instance_type_id IS NOT NULL "
        "GROUP BY tenant_id, instance_type_id"
    )
    # The changes in flight on a partial index, and statistics on its predicate so that the planner
    # knows how few rows it holds (an OR is estimated arm by arm, as if most instances matched).
    op.execute(
        f"CREATE INDEX ix_instance_in_flight ON instance (tenant_id, site_id) WHERE {IN_FLIGHT} IS TRUE"
    )
    op.execute(f"CREATE STATISTICS st_instance_in_flight ON ({IN_FLIGHT}) FROM instance")
    op.execute("ANALYZE instance")


def downgrade() -> None:
    op.execute("DROP STATISTICS st_instance_in_flight")
    op.execute("DROP INDEX ix_instance_in_flight")
    for name, digest in PREVIOUS.items():
        rules.apply(op, name, digest)
    for trigger in ("insert", "update", "delete"):
        op.execute(f"DROP TRIGGER instance_type_count_{trigger} ON instance")
    op.execute("DROP FUNCTION instance_type_count_collect()")
    op.execute("DROP FUNCTION instance_type_count_move()")
    op.drop_table("instance_type_count")
