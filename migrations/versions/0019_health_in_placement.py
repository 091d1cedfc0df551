"""health in placement: a machine whose GPUs report anything but healthy is not free, and the
scheduler feed carries GPU health changes

``machine.held_unhealthy``: the reconciler's health read sets it when a GPU of the machine reports
anything but HEALTHY (unless ``[nvlink_config] place_on_unhealthy``) and clears it when all are
healthy again. The machine pick (rule machine_pick) and the capacity counts (rule capacity) both
leave such machines out of the free ones, so placement and the figures agree.
``placement_event.health``: the GPU health an event reports; rule feed_health (new) logs one event
per live NVLink interface whose GPU's health changes.

Downgrade clears the holds first (the counts follow through the capacity triggers), then restores
the rules as revision 0018 left them.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from nico.db import sql as rules

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPLIED = {
    "capacity": "c61e4d46a6593cfa",
    "machine_pick": "6cb67c86f8ca62c2",
    "feed_health": "d3e580fa9265cda8",
}
BEFORE = {"capacity": "3bc0ea20acc55d7e", "machine_pick": "8adf3f7da329576d"}


def upgrade() -> None:
    op.add_column(
        "machine", sa.Column("held_unhealthy", sa.Boolean(), server_default="false", nullable=False)
    )
    op.add_column("placement_event", sa.Column("health", sa.String(length=32), nullable=True))
    for name, digest in APPLIED.items():
        rules.apply(op, name, digest)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS trg_placement_event_health ON gpu")
    op.execute("DROP FUNCTION IF EXISTS nico_placement_event_health()")
    op.execute("UPDATE machine SET held_unhealthy = false WHERE held_unhealthy")
    for name, digest in BEFORE.items():
        rules.apply(op, name, digest)
    op.drop_column("placement_event", "health")
    op.drop_column("machine", "held_unhealthy")
