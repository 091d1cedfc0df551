"""Single-domain logical partitions and reservations: a partition can refuse to spill into a second
NVLink domain, and can hold machines of one instance type in one domain for its future instances

``logical_partition.single_nvlink_domain`` (false: the reference's behaviour) makes a create, batch or
update that would put the partition's GPUs in a second domain a 409. ``logical_partition
.reservation_instance_type_id`` names the type a partition holds in reserve, and
``machine.reserved_lp_id`` marks each machine held: the partition's own creates take them first,
nobody else's ever does.

Three rules change with them (``nico/db/sql``): the machine pick leaves reserved machines out
(``machine_pick``), ``domain_capacity`` no longer counts them as free (``capacity``: no machine is
reserved yet, so the stored counts stay equal to a recount), and the quota check counts them
against the tenant's allocation (``quota``).

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from nico.db import sql as rules

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPLIED = {
    "capacity": "3bc0ea20acc55d7e",
    "machine_pick": "8adf3f7da329576d",
    "quota": "1b0843c64aea1620",
}
PREVIOUS = {
    "capacity": "ccc2f3c522273ac1",
    "machine_pick": "cd18aec13b562878",
    "quota": "89792ad570d94181",
}


def upgrade() -> None:
    op.add_column(
        "logical_partition",
        sa.Column("single_nvlink_domain", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("logical_partition", sa.Column("reservation_instance_type_id", sa.Uuid(), nullable=True))
    op.create_foreign_key(
        "fk_logical_partition_reservation_instance_type_id_instance_type",
        "logical_partition",
        "instance_type",
        ["reservation_instance_type_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.add_column("machine", sa.Column("reserved_lp_id", sa.Uuid(), nullable=True))
    op.create_foreign_key(
        "fk_machine_reserved_lp_id_logical_partition",
        "machine",
        "logical_partition",
        ["reserved_lp_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.create_index("ix_machine_reserved_lp_id", "machine", ["reserved_lp_id"])
    for name, digest in APPLIED.items():
        rules.apply(op, name, digest)


def downgrade() -> None:
    for name, digest in PREVIOUS.items():
        rules.apply(op, name, digest)
    op.drop_index("ix_machine_reserved_lp_id", table_name="machine")
    op.drop_constraint("fk_machine_reserved_lp_id_logical_partition", "machine", type_="foreignkey")
    op.drop_column("machine", "reserved_lp_id")
    op.drop_constraint(
        "fk_logical_partition_reservation_instance_type_id_instance_type",
        "logical_partition",
        type_="foreignkey",
    )
    op.drop_column("logical_partition", "reservation_instance_type_id")
    op.drop_column("logical_partition", "single_nvlink_domain")
