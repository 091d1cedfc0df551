"""nvlink_interface.placed_domain_uuid: the NVLink domain of the binding's machine, recorded when the
binding is made, so placement finds where a logical partition is about to be in O(domains)

Placement prefers the domains where a requested logical partition is present: its physical
partitions, plus the domains of the machines whose instances have bindings to it the fabric does not
hold yet. That second half joined every unsettled binding of the partition to its machine: few while
the reconciler keeps up, but 13,000 in ``benchmarks/api_bench.py`` (no reconciler) or on a site whose
fabric manager is down, where it cost 9 ms of every create. The binding now carries its machine's
domain as placement saw it (``domain_uuid`` stays the fabric's, null until the binding is Ready: the
API's ``nvLinkDomainId``), and the unsettled-binding index becomes (partition, placed domain), which
a skip scan reads once per domain. Existing bindings get their machine's domain.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNSETTLED = "status IN ('Pending', 'Provisioning', 'Error')"


def upgrade() -> None:
    op.add_column("nvlink_interface", sa.Column("placed_domain_uuid", sa.Uuid(), nullable=True))
    op.execute(
        "UPDATE nvlink_interface n SET placed_domain_uuid = m.domain_uuid "
        "FROM machine m WHERE m.instance_id = n.instance_id AND m.domain_uuid IS NOT NULL"
    )
    op.drop_index("ix_nvlink_interface_unsettled", table_name="nvlink_interface")
    op.create_index(
        "ix_nvlink_interface_unsettled",
        "nvlink_interface",
        ["logical_partition_id", "placed_domain_uuid"],
        postgresql_where=sa.text(UNSETTLED),
    )


def downgrade() -> None:
    op.drop_index("ix_nvlink_interface_unsettled", table_name="nvlink_interface")
    op.create_index(
        "ix_nvlink_interface_unsettled",
        "nvlink_interface",
        ["logical_partition_id"],
        postgresql_where=sa.text(UNSETTLED),
    )
    op.drop_column("nvlink_interface", "placed_domain_uuid")
