"""the reconciler's per-domain statements at scale: room on gpu pages, two indexes

``gpu`` keeps 30% of each page free (fillfactor 70). The reconciler rewrites a GPU's row when its
health changes (every GPU once when a site's health is first read) and when its observed partition
changes. With full pages every such update put the new row version on another page and added an entry
to each of the table's three indexes; with room on the page a health update (no indexed column) is a
HOT update, with no index entry at all: one domain's 72 health updates 10.9 -> 2.7 ms (100 domains,
one session). Pages written from now on keep the room; existing ones gain it as their rows are updated
and vacuumed (no rewrite of the table here: it would lock it for the duration).

``ix_nvlink_nmxc_endpoint_serial``: a domain's pass reads the registry rows of its chassis by their
trimmed serial; without an index on it every pass read the whole registry (1.2 ms a pass at 2,000
racks, growing with the site).

``ix_logical_partition_deleting``: each pass looks for logical partitions being deleted with nothing
left on the fabric; without an index every pass read every logical partition of the site.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE gpu SET (fillfactor = 70)")
    op.execute("CREATE INDEX ix_nvlink_nmxc_endpoint_serial ON nvlink_nmxc_endpoint (btrim(chassis_serial))")
    op.execute(
        "CREATE INDEX ix_logical_partition_deleting ON logical_partition (id) WHERE status = 'Deleting'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX ix_logical_partition_deleting")
    op.execute("DROP INDEX ix_nvlink_nmxc_endpoint_serial")
    op.execute("ALTER TABLE gpu RESET (fillfactor)")
