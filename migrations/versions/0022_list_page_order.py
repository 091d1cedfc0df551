"""list pages at the largest sites: the orders they page in, on indexes, and counts that read one index

At 10,000 racks (200,000 NVLink interfaces, 180,000 machines, 50,000 instances) every page of these
lists sorted all of its keys and counted them through a join, ~0.1-0.3 s a page; each now walks an
index in the page's order (a deep page reads the index entries before it, no table rows) and counts on
an index alone:

* ``nvlink_interface.tenant_id``: the tenant of the interface's instance, set by rule interface_tenant
  (new) as the row is inserted and filled here; ``ix_nvlink_interface_tenant_order`` (tenant, created,
  id) pages a tenant's interfaces and ``ix_nvlink_interface_tenant`` counts them (one tenant's entries
  deduplicated into a few pages: PostgreSQL reads it alone instead of scanning the table with parallel
  workers), without joining them to their instances. Nullable: when the instance is gone the insert's
  foreign key, not this copy, says so.
* ``ix_machine_created`` (created, id, with the site): the provider's machines in the list's default
  order.
* ``ix_instance_tenant_name`` and ``ix_instance_name`` (name, id, with the site): the scheduler
  export's nodes in name order, of a tenant and at a provider's sites; ``ix_machine_placed_instance``:
  the instances whose machine is in an NVLink domain (the export's nodes), read from an index.
* ``ix_nvlink_domain_rack_order`` (site, rack serial, uuid): the topology pages read each site's
  domains in rack order from it; sorting a site's 10,000 domains by their serial (a collation compare
  each) cost ~40 ms a deep page.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from nico.db import sql as rules

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPLIED = {"interface_tenant": "2063cbe65c3471f0"}


def upgrade() -> None:
    op.add_column("nvlink_interface", sa.Column("tenant_id", sa.Uuid(), nullable=True))
    op.execute(
        "UPDATE nvlink_interface n SET tenant_id = i.tenant_id FROM instance i WHERE i.id = n.instance_id"
    )
    for name, digest in APPLIED.items():
        rules.apply(op, name, digest)
    op.execute("CREATE INDEX ix_nvlink_interface_tenant_order ON nvlink_interface (tenant_id, created, id)")
    op.execute("CREATE INDEX ix_nvlink_interface_tenant ON nvlink_interface (tenant_id)")
    op.execute("CREATE INDEX ix_machine_created ON machine (created, id) INCLUDE (site_id)")
    op.execute(
        "CREATE INDEX ix_machine_placed_instance ON machine (instance_id) "
        "WHERE instance_id IS NOT NULL AND domain_uuid IS NOT NULL"
    )
    op.execute("CREATE INDEX ix_instance_tenant_name ON instance (tenant_id, name, id) INCLUDE (site_id)")
    op.execute("CREATE INDEX ix_instance_name ON instance (name, id) INCLUDE (site_id)")
    op.execute(
        "CREATE INDEX ix_nvlink_domain_rack_order ON nvlink_domain (site_id, rack_serial NULLS FIRST, uuid)"
    )


def downgrade() -> None:
    for index in (
        "ix_nvlink_domain_rack_order",
        "ix_instance_name",
        "ix_instance_tenant_name",
        "ix_machine_placed_instance",
        "ix_machine_created",
        "ix_nvlink_interface_tenant",
        "ix_nvlink_interface_tenant_order",
    ):
        op.execute(f"DROP INDEX {index}")
    op.execute("DROP TRIGGER IF EXISTS trg_interface_tenant ON nvlink_interface")
    op.execute("DROP FUNCTION IF EXISTS nico_interface_tenant()")
    op.drop_column("nvlink_interface", "tenant_id")
