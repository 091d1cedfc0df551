"""Instances, their Ethernet interfaces and their NVLink interfaces (GPU -> logical partition)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base, check_in, created_at, updated_at, utcnow, uuid_pk
from nico.db.enums import InstanceStatus, InterfaceStatus, NvLinkInterfaceStatus
from nico.db.types import GpuUid, u64_check

# What nico_check_nvlink_changes_quota (tenant_limits.sql) counts as a change in flight: the
# predicate of ix_instance_in_flight, written as that statement writes it so the planner proves it.
# Migration 0026 also keeps statistics st_instance_in_flight on the expression (which SQLAlchemy does
# not model): without them the planner takes most instances for in flight and reads them all.
IN_FLIGHT = (
    "(status = 'Terminating' OR nvlink_applied_version IS DISTINCT FROM nvlink_config_version) IS TRUE"
)


class Instance(Base):
    """A tenant instance on one machine (the machine row records the assignment).

    ``nvlink_config_version`` is bumped by every change of desired NVLink state;
    ``nvlink_applied_version`` is the version the reconciler last saw realised on the fabric.
    """

    __tablename__ = "instance"
    __table_args__ = (
        UniqueConstraint("tenant_id", "site_id", "name"),
        CheckConstraint(check_in("status", InstanceStatus), name="status"),
        CheckConstraint("nvlink_config_version >= 1", name="nvlink_config_version"),
        # The scheduler export's nodes in name order, of a tenant and at a provider's sites (migration 0022).
        Index("ix_instance_tenant_name", "tenant_id", "name", "id", postgresql_include=["site_id"]),
        Index("ix_instance_name", "name", "id", postgresql_include=["site_id"]),
        # A tenant's instances in the list's default order (migration 0024).
        Index("ix_instance_tenant_order", "tenant_id", "created", "id"),
        # A tenant's instances whose NVLink change is in flight, at a create's limit check: a few
        # entries however many instances the tenant holds (migration 0026).
        Index(
            "ix_instance_in_flight",
            "tenant_id",
            "site_id",
            postgresql_where=text(IN_FLIGHT),
        ),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenant.id", ondelete="RESTRICT"))
    site_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("site.id", ondelete="RESTRICT"), index=True)
    instance_type_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("instance_type.id", ondelete="RESTRICT"), index=True
    )
    vpc_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("vpc.id", ondelete="RESTRICT"), index=True)
    name: Mapped[str] = mapped_column(String(256))
    description: Mapped[str | None] = mapped_column(Text)
    operating_system_id: Mapped[uuid.UUID | None]
    ipxe_script: Mapped[str | None] = mapped_column(Text)
    user_data: Mapped[str | None] = mapped_column(Text)
    always_boot_with_custom_ipxe: Mapped[bool] = mapped_column(default=False, server_default="false")
    phone_home_enabled: Mapped[bool] = mapped_column(default=False, server_default="false")
    labels: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    status: Mapped[str] = mapped_column(String(32), default=InstanceStatus.PENDING)
    nvlink_config_version: Mapped[int] = mapped_column(BigInteger, default=1, server_default="1")
    nvlink_config_changed_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, server_default=text("now()")
    )
    nvlink_applied_version: Mapped[int | None] = mapped_column(BigInteger)
    created_by: Mapped[str | None] = mapped_column(String(256))
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class InstanceInterface(Base):
    __tablename__ = "instance_interface"
    __table_args__ = (CheckConstraint(check_in("status", InterfaceStatus), name="status"),)

    id: Mapped[uuid.UUID] = uuid_pk()
    instance_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("instance.id", ondelete="CASCADE"), index=True)
    # RESTRICT: a subnet in use by an instance cannot be deleted.
    subnet_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("subnet.id", ondelete="RESTRICT"), index=True)
    is_physical: Mapped[bool] = mapped_column(default=False, server_default="false")
    status: Mapped[str] = mapped_column(String(32), default=InterfaceStatus.PENDING)
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class NvlinkInterface(Base):
    """Binding of one instance GPU (``device_instance`` = device_id - 1) to one logical partition.

    A GPU has at most one live (non-``Deleting``) binding; ``domain_uuid`` and ``gpu_uid``
    are filled by the reconciler when it has seen the binding realised on the fabric;
    ``placed_domain_uuid`` when the binding is made.
    """

    __tablename__ = "nvlink_interface"
    __table_args__ = (
        CheckConstraint(check_in("status", NvLinkInterfaceStatus), name="status"),
        CheckConstraint("device_instance >= 0", name="device_instance"),
        CheckConstraint(f"gpu_uid IS NULL OR ({u64_check('gpu_uid')})", name="gpu_uid_u64"),
        Index(
            "uq_nvlink_interface_live_gpu",
            "instance_id",
            "device_instance",
            unique=True,
            postgresql_where=text("status <> 'Deleting'"),
        ),
        # Bindings the fabric does not hold yet, by partition and placed domain: placement finds the
        # domains where a partition is about to be with a skip scan, one probe per domain, however
        # many such bindings there are (migration 0012).
        Index(
            "ix_nvlink_interface_unsettled",
            "logical_partition_id",
            "placed_domain_uuid",
            postgresql_where=text("status IN ('Pending', 'Provisioning', 'Error')"),
        ),
        # A tenant's interfaces in the list's default order, paged on the first index, counted on the
        # second (a tenant's entries deduplicated into a few pages: no parallel scan of the table to count
        # them) (migration 0022).
        Index("ix_nvlink_interface_tenant_order", "tenant_id", "created", "id"),
        Index("ix_nvlink_interface_tenant", "tenant_id"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    instance_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("instance.id", ondelete="CASCADE"), index=True)
    # RESTRICT: a logical partition with bindings (even Deleting ones) cannot be removed.
    logical_partition_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("logical_partition.id", ondelete="RESTRICT"), index=True
    )
    site_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("site.id", ondelete="RESTRICT"))
    device_instance: Mapped[int]
    device: Mapped[str | None] = mapped_column(String(256))
    status: Mapped[str] = mapped_column(String(32), default=NvLinkInterfaceStatus.PENDING)
    domain_uuid: Mapped[uuid.UUID | None]
    gpu_uid: Mapped[int | None] = mapped_column(GpuUid)
    # The domain of the instance's machine when the binding was made (placement's view; ``domain_uuid``
    # is the fabric's, set when Ready): where the partition is about to be, for placement.
    placed_domain_uuid: Mapped[uuid.UUID | None]
    # The instance's tenant, set by the database as the row is inserted (rule interface_tenant): the
    # inserts leave it out. None only if the instance is gone (then the foreign key refuses the row).
    tenant_id: Mapped[uuid.UUID | None]
    created_by: Mapped[str | None] = mapped_column(String(256))
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class InstanceTypeCount(Base):
    """A tenant's instances of one instance type, kept equal to a recount of ``instance`` by the
    triggers of rule ``instance_count`` (migration 0026): the quota check reads one row, not every
    instance of the tenant. Nothing in Python writes it. No foreign keys, as ``domain_capacity``: the
    rows are derived data, and a row whose instances are gone stays at zero."""

    __tablename__ = "instance_type_count"

    tenant_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    instance_type_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    instances: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
