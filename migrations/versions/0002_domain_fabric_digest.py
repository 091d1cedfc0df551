"""nvlink_domain: digest of the fabric at the last settled pass, so full passes skip quiet domains

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("nvlink_domain", sa.Column("fabric_digest", sa.String(length=64), nullable=True))
    op.add_column("nvlink_domain", sa.Column("settled", sa.Boolean(), server_default="false", nullable=False))


def downgrade() -> None:
    op.drop_column("nvlink_domain", "settled")
    op.drop_column("nvlink_domain", "fabric_digest")
