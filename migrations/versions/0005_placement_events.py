"""placement_event: an append-only log of NVLink placement changes, written by triggers

Every change to where an NVLink interface is (added, status, domain or logical partition changed,
removed) and every change to the physical partition under Ready interfaces (created, renumbered,
removed: their clique id changes) inserts one row per interface and sends NOTIFY nico_placement
(empty payload, so one transaction wakes listeners once). API replicas stream the table to
schedulers (/nvlink-topology/events); because it is written by the database, every replica sees the
same ordered events whichever process made the change. Rows carry the writing transaction's id:
readers take them in (txid, id) order and only from transactions older than every running one, so
an event committed late by a slow transaction is never skipped by a reader that moved past its id.

Revision ID: 0005
Revises: 0003
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The clique id the GPU driver reports for a Ready interface: <ClusterUUID>.<CliqueId>, the NVLink
# domain's UUID and the NMX partition id of the interface's physical partition in that domain.
_INTERFACE_FUNCTION = """
CREATE FUNCTION nico_placement_event_interface() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r nvlink_interface;
    event_kind text;
    domain uuid;
    clique text;
BEGIN
    IF TG_OP = 'DELETE' THEN
        r := OLD;
        event_kind := 'Removed';
    ELSE
        r := NEW;
        event_kind := NEW.status;
        IF TG_OP = 'UPDATE'
           AND NEW.status IS NOT DISTINCT FROM OLD.status
           AND NEW.nvlink_domain_uuid IS NOT DISTINCT FROM OLD.nvlink_domain_uuid
           AND NEW.logical_partition_id IS NOT DISTINCT FROM OLD.logical_partition_id THEN
            RETURN NULL;
        END IF;
    END IF;
    domain := coalesce(
        r.nvlink_domain_uuid,
        (SELECT m.nvlink_domain_uuid FROM machine m WHERE m.instance_id = r.instance_id LIMIT 1)
    );
    IF event_kind = 'Ready' AND r.nvlink_domain_uuid IS NOT NULL THEN
        SELECT r.nvlink_domain_uuid::text || '.' || p.fabric_partition_id::text INTO clique
        FROM physical_partition p
        WHERE p.logical_partition_id = r.logical_partition_id AND p.domain_uuid = r.nvlink_domain_uuid;
    END IF;
    INSERT INTO placement_event (txid, tenant_id, site_id, instance_id, instance_name, interface_id,
                                 device_instance, kind, domain_uuid, logical_partition_id, clique_id)
    VALUES (pg_current_xact_id()::text::bigint, (SELECT lp.tenant_id FROM logical_partition lp WHERE lp.id = r.logical_partition_id),
            r.site_id, r.instance_id, (SELECT i.name FROM instance i WHERE i.id = r.instance_id), r.id,
            r.device_instance, event_kind, domain, r.logical_partition_id, clique);
    PERFORM pg_notify('nico_placement', '');
    RETURN NULL;
END
$$
"""

_PARTITION_FUNCTION = """
CREATE FUNCTION nico_placement_event_partition() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r physical_partition;
    clique text;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.fabric_partition_id IS NOT DISTINCT FROM OLD.fabric_partition_id
       AND NEW.domain_uuid IS NOT DISTINCT FROM OLD.domain_uuid
       AND NEW.logical_partition_id IS NOT DISTINCT FROM OLD.logical_partition_id THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        r := OLD;
        clique := NULL;
    ELSE
        r := NEW;
        clique := NEW.domain_uuid::text || '.' || NEW.fabric_partition_id::text;
    END IF;
    INSERT INTO placement_event (txid, tenant_id, site_id, instance_id, instance_name, interface_id,
                                 device_instance, kind, domain_uuid, logical_partition_id, clique_id)
    SELECT pg_current_xact_id()::text::bigint, lp.tenant_id, n.site_id, n.instance_id, i.name, n.id, n.device_instance, n.status,
           n.nvlink_domain_uuid, n.logical_partition_id, clique
    FROM nvlink_interface n
    JOIN logical_partition lp ON lp.id = n.logical_partition_id
    LEFT JOIN instance i ON i.id = n.instance_id
    WHERE n.logical_partition_id = r.logical_partition_id AND n.nvlink_domain_uuid = r.domain_uuid
      AND n.status = 'Ready';
    IF FOUND THEN
        PERFORM pg_notify('nico_placement', '');
    END IF;
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "placement_event",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("txid", sa.BigInteger(), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=True),
        sa.Column("site_id", sa.Uuid(), nullable=False),
        sa.Column("instance_id", sa.Uuid(), nullable=False),
        sa.Column("instance_name", sa.String(length=256), nullable=True),
        sa.Column("interface_id", sa.Uuid(), nullable=False),
        sa.Column("device_instance", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("domain_uuid", sa.Uuid(), nullable=True),
        sa.Column("logical_partition_id", sa.Uuid(), nullable=False),
        sa.Column("clique_id", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_placement_event")),
    )
    op.create_index("ix_placement_event_tenant", "placement_event", ["tenant_id", "txid", "id"])
    op.create_index("ix_placement_event_site", "placement_event", ["site_id", "txid", "id"])
    op.create_index("ix_placement_event_order", "placement_event", ["txid", "id"])
    op.create_index("ix_placement_event_created", "placement_event", ["created"])
    op.execute(_INTERFACE_FUNCTION)
    op.execute(_PARTITION_FUNCTION)
    op.execute(
        "CREATE TRIGGER trg_placement_event_interface "
        "AFTER INSERT OR DELETE OR UPDATE OF status, nvlink_domain_uuid, logical_partition_id "
        "ON nvlink_interface FOR EACH ROW EXECUTE FUNCTION nico_placement_event_interface()"
    )
    op.execute(
        "CREATE TRIGGER trg_placement_event_partition "
        "AFTER INSERT OR DELETE OR UPDATE OF fabric_partition_id, domain_uuid, logical_partition_id "
        "ON physical_partition FOR EACH ROW EXECUTE FUNCTION nico_placement_event_partition()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER trg_placement_event_partition ON physical_partition")
    op.execute("DROP TRIGGER trg_placement_event_interface ON nvlink_interface")
    op.execute("DROP FUNCTION nico_placement_event_partition()")
    op.execute("DROP FUNCTION nico_placement_event_interface()")
    op.drop_index("ix_placement_event_created", table_name="placement_event")
    op.drop_index("ix_placement_event_order", table_name="placement_event")
    op.drop_index("ix_placement_event_site", table_name="placement_event")
    op.drop_index("ix_placement_event_tenant", table_name="placement_event")
    op.drop_table("placement_event")
