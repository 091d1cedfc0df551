"""domain_capacity: free and used machines per (site, instance type, NVLink domain), kept by triggers

Placement counted every machine of a site per request (a grouped scan of the machine table: 26 ms at
2,000 racks). It now reads one row per domain from ``domain_capacity``. Statement triggers on
``machine`` (AFTER INSERT / UPDATE / DELETE, with transition tables) add each statement's net change
per key in the same transaction, so every path that assigns, frees, registers, removes or changes a
machine keeps the counts equal to a recount. Each statement's rows are upserted in key order (one
lock order for the counter rows), and a statement that changes no count writes nothing.

The existing machines are counted into the table (backfill).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NO_DOMAIN = "'00000000-0000-0000-0000-000000000000'::uuid"
FREE = "(m.instance_id IS NULL AND m.status = 'Ready' AND NOT m.is_missing_on_site)::int"
USED = "(m.instance_id IS NOT NULL)::int"


def _deltas(source: str, sign: str) -> str:
    return (
        f"SELECT m.site_id, m.instance_type_id, coalesce(m.domain_uuid, {NO_DOMAIN}) AS domain_uuid, "
        f"{sign}{FREE} AS free, {sign}{USED} AS used FROM {source} m WHERE m.instance_type_id IS NOT NULL"
    )


def _upsert(deltas: str) -> str:
    # Key order: two statements touching the same counter rows lock them in the same order.
    return f"""
    INSERT INTO domain_capacity AS c (site_id, instance_type_id, domain_uuid, free, used)
    SELECT d.site_id, d.instance_type_id, d.domain_uuid, sum(d.free), sum(d.used)
    FROM ({deltas}) d
    GROUP BY d.site_id, d.instance_type_id, d.domain_uuid
    HAVING sum(d.free) <> 0 OR sum(d.used) <> 0
    ORDER BY d.site_id, d.instance_type_id, d.domain_uuid
    ON CONFLICT (site_id, instance_type_id, domain_uuid)
    DO UPDATE SET free = c.free + excluded.free, used = c.used + excluded.used;
    """


FUNCTION = f"""
CREATE FUNCTION domain_capacity_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        {_upsert(_deltas("new_machines", ""))}
    ELSIF TG_OP = 'UPDATE' THEN
        {_upsert(_deltas("new_machines", "") + " UNION ALL " + _deltas("old_machines", "-"))}
    ELSE
        {_upsert(_deltas("old_machines", "-"))}
    END IF;
    RETURN NULL;
END
$$;
"""

TRIGGERS = [
    ("domain_capacity_insert", "INSERT", "REFERENCING NEW TABLE AS new_machines"),
    ("domain_capacity_update", "UPDATE", "REFERENCING OLD TABLE AS old_machines NEW TABLE AS new_machines"),
    ("domain_capacity_delete", "DELETE", "REFERENCING OLD TABLE AS old_machines"),
]


def upgrade() -> None:
    op.create_table(
        "domain_capacity",
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("instance_type_id", sa.Uuid(), nullable=False),
        sa.Column("domain_uuid", sa.Uuid(), nullable=False),
        sa.Column("free", sa.Integer(), server_default="0", nullable=False),
        sa.Column("used", sa.Integer(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint(
            "site_id", "instance_type_id", "domain_uuid", name=op.f("pk_domain_capacity")
        ),
    )
    op.execute(FUNCTION)
    for name, event, referencing in TRIGGERS:
        op.execute(
            f"CREATE TRIGGER {name} AFTER {event} ON machine {referencing} "
            "FOR EACH STATEMENT EXECUTE FUNCTION domain_capacity_follow()"
        )
    op.execute(_upsert(_deltas("machine", "")))  # backfill: the machines there are


def downgrade() -> None:
    for name, _, _ in TRIGGERS:
        op.execute(f"DROP TRIGGER {name} ON machine")
    op.execute("DROP FUNCTION domain_capacity_follow()")
    op.drop_table("domain_capacity")
