"""Tenant networking: VPCs (with an optional default NVLink logical partition) and thin subnets."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base, check_in, created_at, updated_at, uuid_pk
from nico.db.enums import NetworkVirtualizationType, SubnetStatus, VpcStatus


class Vpc(Base):
    __tablename__ = "vpc"
    __table_args__ = (
        UniqueConstraint("tenant_id", "site_id", "name"),
        CheckConstraint(check_in("status", VpcStatus), name="status"),
        CheckConstraint(check_in("network_virtualization_type", NetworkVirtualizationType), name="nvt"),
        CheckConstraint("vni IS NULL OR vni BETWEEN 0 AND 16777215", name="vni"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenant.id", ondelete="RESTRICT"))
    site_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("site.id", ondelete="RESTRICT"), index=True)
    name: Mapped[str] = mapped_column(String(256))
    description: Mapped[str | None] = mapped_column(Text)
    network_virtualization_type: Mapped[str] = mapped_column(
        String(32), default=NetworkVirtualizationType.ETHERNET_VIRTUALIZER
    )
    labels: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # RESTRICT: a logical partition cannot disappear while it is some VPC's default.
    nvlink_logical_partition_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("logical_partition.id", ondelete="RESTRICT"), index=True
    )
    routing_profile: Mapped[str | None] = mapped_column(String(64))
    requested_vni: Mapped[int | None]
    vni: Mapped[int | None]
    status: Mapped[str] = mapped_column(String(32), default=VpcStatus.PENDING)
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class Subnet(Base):
    """A thin subnet: nico does no IP address management, so a subnet is Ready once created."""

    __tablename__ = "subnet"
    __table_args__ = (
        UniqueConstraint("tenant_id", "site_id", "name"),
        CheckConstraint(check_in("status", SubnetStatus), name="status"),
        CheckConstraint("prefix_length IS NULL OR prefix_length BETWEEN 8 AND 30", name="prefix_length"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenant.id", ondelete="RESTRICT"))
    site_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("site.id", ondelete="RESTRICT"))
    vpc_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("vpc.id", ondelete="RESTRICT"), index=True)
    name: Mapped[str] = mapped_column(String(256))
    description: Mapped[str | None] = mapped_column(Text)
    ipv4_prefix: Mapped[str | None] = mapped_column(String(64))
    ipv4_block_id: Mapped[uuid.UUID | None]
    ipv4_gateway: Mapped[str | None] = mapped_column(String(64))
    prefix_length: Mapped[int | None]
    routing_type: Mapped[str | None] = mapped_column(String(32))
    mtu: Mapped[int | None]
    status: Mapped[str] = mapped_column(String(32), default=SubnetStatus.PENDING)
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()
