"""Machines held by partitions nico did not make are not free

A partition another manager made (NICo, Base Command Manager, an operator through NMX-M) is kept
whole by default, and a machine with a GPU in one cannot be given to a tenant. The reconciler now
records, after each pass, how many of a machine's GPUs the fabric showed in such a partition
(``machine.foreign_gpus``) and how many GPUs of the domain are in one (``nvlink_domain.foreign_gpus``).
The machine pick skips held machines and the domain capacity counts do not count them free: the
rules ``machine_pick`` and ``capacity`` are applied at their new digests (every machine starts at 0,
so the stored counts stay equal to a recount). Downgrade recounts ``domain_capacity`` by the old rule
before the column goes.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from nico.db import sql as rules

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPLIED = {"capacity": "ccc2f3c522273ac1", "machine_pick": "cd18aec13b562878"}
BEFORE = {"capacity": "9e19029d425af52f", "machine_pick": "7c81501b3dc9d49e"}

_RECOUNT = """
DELETE FROM domain_capacity;
INSERT INTO domain_capacity (site_id, instance_type_id, domain_uuid, free, used)
SELECT m.site_id, m.instance_type_id, coalesce(m.domain_uuid, '00000000-0000-0000-0000-000000000000'::uuid),
       count(*) FILTER (WHERE m.instance_id IS NULL AND m.status = 'Ready' AND NOT m.is_missing_on_site),
       count(*) FILTER (WHERE m.instance_id IS NOT NULL)
FROM machine m WHERE m.instance_type_id IS NOT NULL
GROUP BY 1, 2, 3
"""


def upgrade() -> None:
    op.add_column("machine", sa.Column("foreign_gpus", sa.SmallInteger(), server_default="0", nullable=False))
    op.create_check_constraint(op.f("ck_machine_foreign_gpus"), "machine", "foreign_gpus >= 0")
    op.add_column(
        "nvlink_domain", sa.Column("foreign_gpus", sa.Integer(), server_default="0", nullable=False)
    )
    for name, digest in APPLIED.items():
        rules.apply(op, name, digest)


def downgrade() -> None:
    for name, digest in BEFORE.items():
        rules.apply(op, name, digest)
    op.execute(_RECOUNT)
    op.drop_column("nvlink_domain", "foreign_gpus")
    op.drop_constraint(op.f("ck_machine_foreign_gpus"), "machine", type_="check")
    op.drop_column("machine", "foreign_gpus")
