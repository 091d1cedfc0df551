"""domain_capacity: free and used machines per (site, instance type, NVLink domain), kept by triggers

Placement counted every machine of a site per request (a grouped scan of the machine table: 26 ms at
2,000 racks). It now reads per-domain rows from ``domain_capacity``. A row trigger on ``machine``
(a constraint trigger, deferred to the commit) adds each changed machine's difference in the same
transaction, so every path that assigns, frees, registers, removes or changes a machine keeps the
counts equal to a recount; a change that moves no count writes nothing. Deferred: the counter row of
a domain is locked only while the transaction commits, so concurrent creates in one domain do not
queue behind each other's inserts.

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

BACKFILL = f"""
INSERT INTO domain_capacity (site_id, instance_type_id, domain_uuid, free, used)
SELECT m.site_id, m.instance_type_id, coalesce(m.domain_uuid, {NO_DOMAIN}),
       count(*) FILTER (WHERE m.instance_id IS NULL AND m.status = 'Ready' AND NOT m.is_missing_on_site),
       count(*) FILTER (WHERE m.instance_id IS NOT NULL)
FROM machine m WHERE m.instance_type_id IS NOT NULL
GROUP BY 1, 2, 3
"""

ADD = """
CREATE FUNCTION domain_capacity_add(site uuid, itype uuid, domain uuid, free_delta int, used_delta int)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO domain_capacity AS c (site_id, instance_type_id, domain_uuid, free, used)
    VALUES (site, itype, domain, free_delta, used_delta)
    ON CONFLICT (site_id, instance_type_id, domain_uuid)
    DO UPDATE SET free = c.free + excluded.free, used = c.used + excluded.used
$$
"""

# One machine row's change: what it counted before (OLD) comes off, what it counts now (NEW) goes on;
# nothing is written when neither its key nor its counts changed.
FOLLOW = f"""
CREATE FUNCTION domain_capacity_follow() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_free int := 0; old_used int := 0; new_free int := 0; new_used int := 0;
    old_domain uuid; new_domain uuid;
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.instance_type_id IS NOT NULL THEN
        old_free := (OLD.instance_id IS NULL AND OLD.status = 'Ready' AND NOT OLD.is_missing_on_site)::int;
        old_used := (OLD.instance_id IS NOT NULL)::int;
        old_domain := coalesce(OLD.domain_uuid, {NO_DOMAIN});
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.instance_type_id IS NOT NULL THEN
        new_free := (NEW.instance_id IS NULL AND NEW.status = 'Ready' AND NOT NEW.is_missing_on_site)::int;
        new_used := (NEW.instance_id IS NOT NULL)::int;
        new_domain := coalesce(NEW.domain_uuid, {NO_DOMAIN});
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.instance_type_id IS NOT NULL AND NEW.instance_type_id IS NOT NULL
       AND OLD.site_id = NEW.site_id AND OLD.instance_type_id = NEW.instance_type_id
       AND old_domain = new_domain THEN
        IF new_free <> old_free OR new_used <> old_used THEN
            PERFORM domain_capacity_add(NEW.site_id, NEW.instance_type_id, new_domain,
                                        new_free - old_free, new_used - old_used);
        END IF;
        RETURN NULL;
    END IF;
    IF old_domain IS NOT NULL AND (old_free <> 0 OR old_used <> 0) THEN
        PERFORM domain_capacity_add(OLD.site_id, OLD.instance_type_id, old_domain, -old_free, -old_used);
    END IF;
    IF new_domain IS NOT NULL AND (new_free <> 0 OR new_used <> 0) THEN
        PERFORM domain_capacity_add(NEW.site_id, NEW.instance_type_id, new_domain, new_free, new_used);
    END IF;
    RETURN NULL;
END
$$
"""

# Deferred to the commit: a create's lock on its domain's row is then held only while it commits,
# not from its insert on (requests for the same domain do not queue behind each other's work).
TRIGGER = """
CREATE CONSTRAINT TRIGGER domain_capacity_follow
AFTER INSERT OR DELETE OR UPDATE OF site_id, instance_type_id, domain_uuid, instance_id, status,
    is_missing_on_site ON machine
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION domain_capacity_follow()
"""


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
    op.execute(ADD)
    op.execute(FOLLOW)
    op.execute(TRIGGER)
    op.execute(BACKFILL)  # the machines there are


def downgrade() -> None:
    op.execute("DROP TRIGGER domain_capacity_follow ON machine")
    op.execute("DROP FUNCTION domain_capacity_follow()")
    op.execute("DROP FUNCTION domain_capacity_add(uuid, uuid, uuid, int, int)")
    op.drop_table("domain_capacity")
