"""Partitions: the tenant's logical partitions and the physical partitions nico owns on the fabric."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base, check_in, created_at, updated_at, uuid_pk
from nico.db.enums import LogicalPartitionStatus
from nico.db.types import U32_MAX


class LogicalPartition(Base):
    """Tenant object: "these GPUs share memory". Names are unique per tenant across all sites."""

    __tablename__ = "logical_partition"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name"),
        CheckConstraint(check_in("status", LogicalPartitionStatus), name="status"),
        CheckConstraint(
            "multicast_groups_limit >= 0 AND multicast_groups_limit % 4 = 0", name="multicast_groups_limit"
        ),
        # Each reconciler pass looks for the ones being deleted (migration 0021).
        Index("ix_logical_partition_deleting", "id", postgresql_where=text("status = 'Deleting'")),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenant.id", ondelete="RESTRICT"))
    site_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("site.id", ondelete="RESTRICT"), index=True)
    name: Mapped[str] = mapped_column(String(256))
    description: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(32), default=LogicalPartitionStatus.PENDING)
    created_by: Mapped[str | None] = mapped_column(String(256))
    # Multicast groups each of its physical partitions asks the fabric for (NMX PartitionAttr), drawn
    # from the domain's budget (NvlinkDomain.max_multicast_groups).
    multicast_groups_limit: Mapped[int] = mapped_column(default=16, server_default="16")
    # True: its GPUs never spread over a second NVLink domain (a create that would is a 409).
    single_nvlink_domain: Mapped[bool] = mapped_column(default=False, server_default=false())
    # The instance type of the machines it holds in reserve (``Machine.reserved_lp_id``); None: none.
    reservation_instance_type_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("instance_type.id", ondelete="SET NULL")
    )
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class PhysicalPartition(Base):
    """A partition that exists on the fabric and belongs to nico: at most one per (LP, domain).

    ``nmx_partition_id`` is the NMX network partition id (u32; NMX-C assigns it), ``fabric_ref``
    the handle used to change it (the NMX-M entity ``ID``, or the decimal id for NMX-C), ``name`` the
    deterministic name nico gave it, which is how a partition created before a crash is recognised.
    """

    __tablename__ = "physical_partition"
    __table_args__ = (
        UniqueConstraint("logical_partition_id", "domain_uuid"),
        UniqueConstraint("domain_uuid", "nmx_partition_id"),
        UniqueConstraint("domain_uuid", "name"),
        CheckConstraint(f"nmx_partition_id BETWEEN 0 AND {U32_MAX}", name="nmx_partition_id_u32"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    # RESTRICT: a logical partition is only removed after its physical partitions are gone.
    logical_partition_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("logical_partition.id", ondelete="RESTRICT")
    )
    domain_uuid: Mapped[uuid.UUID] = mapped_column(ForeignKey("nvlink_domain.uuid", ondelete="RESTRICT"))
    nmx_partition_id: Mapped[int] = mapped_column(BigInteger)
    fabric_ref: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(256))
    health: Mapped[str | None] = mapped_column(String(32))  # as the fabric last reported it
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()
