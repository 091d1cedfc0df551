"""instance list at the largest sites: a tenant's instances paged on an index in the list's order

At 10,000 racks (50,000 instances of one tenant) a page of ``GET /instance`` sorted every key of the
tenant's instances by (created, id), spilling to disk, to take 100 of them: ~60 ms of PostgreSQL a
deep page. ``ix_instance_tenant_order`` (tenant, created, id) pages them in order from the index (a
deep page reads the index entries before it, no table rows), as ``ix_nvlink_interface_tenant_order``
does for the NVLink interfaces.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_instance_tenant_order ON instance (tenant_id, created, id)")


def downgrade() -> None:
    op.execute("DROP INDEX ix_instance_tenant_order")
