"""One word per thing: the NVLink domain is ``domain_uuid``, the GPU's fabric id ``gpu_uid`` and the
fabric's integer partition id ``nmx_partition_id`` in every table, as in the code (docs/architecture.md).

Renames only: no row is rewritten. The placement-event trigger functions name these columns in their
bodies, so they are re-created with the new names (and the previous bodies on downgrade).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from alembic import op

from nico.db.migrate import sibling_revision

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = [  # (table, old, new)
    ("machine", "nvlink_domain_uuid", "domain_uuid"),
    ("nvlink_interface", "nvlink_domain_uuid", "domain_uuid"),
    ("nvlink_interface", "gpu_guid", "gpu_uid"),
    ("physical_partition", "fabric_partition_id", "nmx_partition_id"),
    ("gpu", "fabric_partition_id", "nmx_partition_id"),
]
CONSTRAINTS = [  # (table, old, new): names the naming convention derives from the column names
    ("machine", "fk_machine_nvlink_domain_uuid_nvlink_domain", "fk_machine_domain_uuid_nvlink_domain"),
    ("nvlink_interface", "ck_nvlink_interface_gpu_guid_u64", "ck_nvlink_interface_gpu_uid_u64"),
    (
        "physical_partition",
        "ck_physical_partition_fabric_partition_id_u32",
        "ck_physical_partition_nmx_partition_id_u32",
    ),
    ("gpu", "ck_gpu_fabric_partition_id_u32", "ck_gpu_nmx_partition_id_u32"),
    (
        "physical_partition",
        "uq_physical_partition_domain_uuid_fabric_partition_id",
        "uq_physical_partition_domain_uuid_nmx_partition_id",
    ),
]
INDEXES = [("ix_machine_nvlink_domain_uuid", "ix_machine_domain_uuid")]


def _placement_events() -> ModuleType:
    """Revision 0005, whose trigger functions name the old columns."""
    return sibling_revision(__file__, "0005")


def _functions(renamed: bool) -> list[str]:
    source = _placement_events()
    bodies = [source._INTERFACE_FUNCTION, source._PARTITION_FUNCTION]
    out = []
    for body in bodies:
        body = body.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
        if renamed:
            for _, old, new in COLUMNS:
                body = body.replace(old, new)
        out.append(body)
    return out


def _rename(forward: bool) -> None:
    for table, old, new in COLUMNS:
        a, b = (old, new) if forward else (new, old)
        op.alter_column(table, a, new_column_name=b)
    for table, old, new in CONSTRAINTS:
        a, b = (old, new) if forward else (new, old)
        op.execute(f'ALTER TABLE {table} RENAME CONSTRAINT "{a}" TO "{b}"')
    for old, new in INDEXES:
        a, b = (old, new) if forward else (new, old)
        op.execute(f'ALTER INDEX "{a}" RENAME TO "{b}"')
    for body in _functions(renamed=forward):
        op.execute(body)


def upgrade() -> None:
    _rename(forward=True)


def downgrade() -> None:
    _rename(forward=False)
