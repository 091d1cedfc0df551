"""Statement triggers: placement events and domain capacity follow a whole statement at once

A batch create is one statement that inserts 72 NVLink bindings and assigns 18 machines. The row
triggers of migrations 0005 and 0009 ran once per row: three lookups and an insert per binding for
the placement events (a third of the statement's time), and 18 upserts of one counter row (18 row
versions) at the commit. Both now run once per statement over its transition tables:

* ``placement_event``: one insert of every changed binding's event (in the statement's row order,
  with the same fields: the tenant of the logical partition, the instance name, the binding's domain
  or else its machine's, the clique id of a Ready binding) and one NOTIFY when there was any.
  Transition tables allow no column list, so updates of any column fire it; the rows whose status,
  domain and logical partition are all unchanged give no event, as before.
* ``domain_capacity``: the statement's changes of the machine table are summed per (site, instance
  type, domain) into ``domain_capacity_delta`` (unlogged: its rows live only inside the transaction
  that wrote them), one row per key that moved; a constraint trigger on that table, deferred to the
  commit, adds each row to ``domain_capacity`` and deletes it. The counter rows are still locked only
  while the transaction commits, once per domain and statement instead of once per machine, and a
  statement's keys in key order.

The partition trigger of 0005 (rare, one per physical partition) stays a row trigger.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from nico.db.migrate import sibling_revision

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NO_DOMAIN = "'00000000-0000-0000-0000-000000000000'::uuid"

# The event of each binding row ``r`` (k: its place in the statement), as 0005's row function wrote it.
# The lookups are correlated subqueries on unique keys: index probes whatever the planner believes of
# the tables' sizes (the plan is cached for the connection's life; a hash join planned while a table
# was small would scan it whole on every statement later).
_EVENTS_OF = """
    INSERT INTO placement_event (txid, tenant_id, site_id, instance_id, instance_name, interface_id,
                                 device_instance, kind, domain_uuid, logical_partition_id, clique_id)
    SELECT pg_current_xact_id()::text::bigint,
           (SELECT lp.tenant_id FROM logical_partition lp WHERE lp.id = r.logical_partition_id),
           r.site_id, r.instance_id, (SELECT i.name FROM instance i WHERE i.id = r.instance_id), r.id,
           r.device_instance, r.kind,
           coalesce(r.domain_uuid, (SELECT m.domain_uuid FROM machine m WHERE m.instance_id = r.instance_id LIMIT 1)),
           r.logical_partition_id,
           CASE WHEN r.kind = 'Ready' AND r.domain_uuid IS NOT NULL THEN (
               SELECT r.domain_uuid::text || '.' || p.nmx_partition_id::text FROM physical_partition p
               WHERE p.logical_partition_id = r.logical_partition_id AND p.domain_uuid = r.domain_uuid) END
    FROM ({rows}) r
    ORDER BY r.k;
"""
_INSERTED = """SELECT n.*, n.status AS kind, row_number() OVER () AS k FROM new_rows n"""
_DELETED = """SELECT o.*, 'Removed'::text AS kind, row_number() OVER () AS k FROM old_rows o"""
_UPDATED = """
        SELECT n.*, n.status AS kind FROM (SELECT n.*, row_number() OVER () AS k FROM new_rows n) n
        JOIN old_rows o ON o.id = n.id
        WHERE n.status IS DISTINCT FROM o.status OR n.domain_uuid IS DISTINCT FROM o.domain_uuid
           OR n.logical_partition_id IS DISTINCT FROM o.logical_partition_id"""

INTERFACE_EVENTS = f"""
CREATE FUNCTION nico_placement_events_of_interfaces() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    emitted bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        {_EVENTS_OF.format(rows=_INSERTED)}
    ELSIF TG_OP = 'UPDATE' THEN
        {_EVENTS_OF.format(rows=_UPDATED)}
    ELSE
        {_EVENTS_OF.format(rows=_DELETED)}
    END IF;
    GET DIAGNOSTICS emitted = ROW_COUNT;
    IF emitted > 0 THEN
        PERFORM pg_notify('nico_placement', '');
    END IF;
    RETURN NULL;
END
$$
"""
# (event, transition tables): one trigger per event, as a trigger with transition tables takes no
# column list and each event has its own tables.
_INTERFACE_TRIGGERS = [
    ("insert", "INSERT", "NEW TABLE AS new_rows"),
    ("update", "UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    ("delete", "DELETE", "OLD TABLE AS old_rows"),
]

# A machine row counts as free (Ready, unassigned, present) or used (assigned), under its (site,
# type, domain); machines without a type count nowhere.
_COUNTS_OF = f"""
        SELECT x.site_id, x.instance_type_id, coalesce(x.domain_uuid, {NO_DOMAIN}) AS domain_uuid,
               {{sign}} (x.instance_id IS NULL AND x.status = 'Ready' AND NOT x.is_missing_on_site)::int AS free,
               {{sign}} (x.instance_id IS NOT NULL)::int AS used
        FROM {{rows}} x WHERE x.instance_type_id IS NOT NULL"""
_COLLECT = """
        INSERT INTO domain_capacity_delta (site_id, instance_type_id, domain_uuid, free, used)
        SELECT d.site_id, d.instance_type_id, d.domain_uuid, sum(d.free), sum(d.used)
        FROM ({changes}) d
        GROUP BY d.site_id, d.instance_type_id, d.domain_uuid
        HAVING sum(d.free) <> 0 OR sum(d.used) <> 0
        ORDER BY d.site_id, d.instance_type_id, d.domain_uuid;"""

CAPACITY_COLLECT = f"""
CREATE FUNCTION domain_capacity_collect() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        {_COLLECT.format(changes=_COUNTS_OF.format(sign="", rows="new_rows"))}
    ELSIF TG_OP = 'UPDATE' THEN
        {_COLLECT.format(changes=_COUNTS_OF.format(sign="-", rows="old_rows") + " UNION ALL " + _COUNTS_OF.format(sign="", rows="new_rows"))}
    ELSE
        {_COLLECT.format(changes=_COUNTS_OF.format(sign="-", rows="old_rows"))}
    END IF;
    RETURN NULL;
END
$$
"""
_MACHINE_TRIGGERS = _INTERFACE_TRIGGERS

CAPACITY_APPLY = """
CREATE FUNCTION domain_capacity_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM domain_capacity_add(NEW.site_id, NEW.instance_type_id, NEW.domain_uuid, NEW.free, NEW.used);
    DELETE FROM domain_capacity_delta WHERE id = NEW.id;
    RETURN NULL;
END
$$
"""
# Deferred to the commit: a create's lock on its domain's counter row is held only while it commits.
APPLY_TRIGGER = """
CREATE CONSTRAINT TRIGGER domain_capacity_apply AFTER INSERT ON domain_capacity_delta
DEFERRABLE INITIALLY DEFERRED
FOR EACH ROW EXECUTE FUNCTION domain_capacity_apply()
"""

_OLD_INTERFACE_TRIGGER = (
    "CREATE TRIGGER trg_placement_event_interface "
    "AFTER INSERT OR DELETE OR UPDATE OF status, domain_uuid, logical_partition_id "
    "ON nvlink_interface FOR EACH ROW EXECUTE FUNCTION nico_placement_event_interface()"
)


def upgrade() -> None:
    op.execute("DROP TRIGGER trg_placement_event_interface ON nvlink_interface")
    op.execute("DROP FUNCTION nico_placement_event_interface()")
    op.execute(INTERFACE_EVENTS)
    for name, event, tables in _INTERFACE_TRIGGERS:
        op.execute(
            f"CREATE TRIGGER trg_placement_events_{name} AFTER {event} ON nvlink_interface "
            f"REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION nico_placement_events_of_interfaces()"
        )

    op.execute("DROP TRIGGER domain_capacity_follow ON machine")
    op.execute("DROP FUNCTION domain_capacity_follow()")
    op.create_table(
        "domain_capacity_delta",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("instance_type_id", sa.Uuid(), nullable=False),
        sa.Column("domain_uuid", sa.Uuid(), nullable=False),
        sa.Column("free", sa.Integer(), nullable=False),
        sa.Column("used", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_domain_capacity_delta")),
        prefixes=["UNLOGGED"],
    )
    op.execute(CAPACITY_APPLY)
    op.execute(APPLY_TRIGGER)
    op.execute(CAPACITY_COLLECT)
    for name, event, tables in _MACHINE_TRIGGERS:
        op.execute(
            f"CREATE TRIGGER domain_capacity_collect_{name} AFTER {event} ON machine "
            f"REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION domain_capacity_collect()"
        )


def downgrade() -> None:
    capacity = sibling_revision(__file__, "0009")
    for name, _, _ in _MACHINE_TRIGGERS:
        op.execute(f"DROP TRIGGER domain_capacity_collect_{name} ON machine")
    op.execute("DROP FUNCTION domain_capacity_collect()")
    op.execute("DROP TRIGGER domain_capacity_apply ON domain_capacity_delta")
    op.execute("DROP FUNCTION domain_capacity_apply()")
    op.drop_table("domain_capacity_delta")  # empty outside transactions
    op.execute(capacity.FOLLOW)
    op.execute(capacity.TRIGGER)

    renamed = sibling_revision(__file__, "0008")
    for name, _, _ in _INTERFACE_TRIGGERS:
        op.execute(f"DROP TRIGGER trg_placement_events_{name} ON nvlink_interface")
    op.execute("DROP FUNCTION nico_placement_events_of_interfaces()")
    op.execute(renamed._functions(renamed=True)[0])  # 0005's row function, 0008's column names
    op.execute(_OLD_INTERFACE_TRIGGER)
