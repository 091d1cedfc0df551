"""Allocations: a provider reserves machines of an instance type at a site for a tenant."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base, check_in, created_at, updated_at, uuid_pk
from nico.db.enums import AllocationStatus, ConstraintType, ResourceType


class Allocation(Base):
    __tablename__ = "allocation"
    __table_args__ = (
        UniqueConstraint("tenant_id", "site_id", "name"),
        CheckConstraint(check_in("status", AllocationStatus), name="status"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    infrastructure_provider_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("infrastructure_provider.id", ondelete="RESTRICT"), index=True
    )
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenant.id", ondelete="RESTRICT"))
    site_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("site.id", ondelete="RESTRICT"), index=True)
    name: Mapped[str] = mapped_column(String(256))
    description: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(32), default=AllocationStatus.REGISTERED)
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class AllocationConstraint(Base):
    """The one constraint of an allocation. For ``InstanceType`` it reserves ``constraint_value``
    machines; ``instance_type_id`` mirrors ``resource_type_id`` so the instance type cannot vanish
    while reserved."""

    __tablename__ = "allocation_constraint"
    __table_args__ = (
        CheckConstraint(check_in("resource_type", ResourceType), name="resource_type"),
        CheckConstraint(check_in("constraint_type", ConstraintType), name="constraint_type"),
        CheckConstraint("constraint_value > 0", name="constraint_value"),
        CheckConstraint(
            "(resource_type = 'InstanceType') = (instance_type_id IS NOT NULL "
            "AND instance_type_id = resource_type_id)",
            name="instance_type_mirror",
        ),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    allocation_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("allocation.id", ondelete="CASCADE"), unique=True
    )
    resource_type: Mapped[str] = mapped_column(String(32))
    resource_type_id: Mapped[uuid.UUID]
    instance_type_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("instance_type.id", ondelete="RESTRICT"), index=True
    )
    constraint_type: Mapped[str] = mapped_column(String(32))
    constraint_value: Mapped[int]
    derived_resource_id: Mapped[uuid.UUID | None]
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()
