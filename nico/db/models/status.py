"""Status history of every resource that shows ``statusHistory``.

One table, one nullable foreign key per owner kind with ON DELETE CASCADE, exactly one set.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, DateTime, ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base, utcnow

OWNER_COLUMNS = (
    "site_id",
    "instance_type_id",
    "allocation_id",
    "vpc_id",
    "subnet_id",
    "logical_partition_id",
    "instance_id",
    "machine_id",
)


class StatusDetail(Base):
    __tablename__ = "status_detail"
    __table_args__ = (
        CheckConstraint(f"num_nonnulls({', '.join(OWNER_COLUMNS)}) = 1", name="one_owner"),
        *(
            Index(f"ix_status_detail_{col}", col, "created", postgresql_where=text(f"{col} IS NOT NULL"))
            for col in OWNER_COLUMNS
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    site_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("site.id", ondelete="CASCADE"))
    instance_type_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("instance_type.id", ondelete="CASCADE")
    )
    allocation_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("allocation.id", ondelete="CASCADE"))
    vpc_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("vpc.id", ondelete="CASCADE"))
    subnet_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("subnet.id", ondelete="CASCADE"))
    logical_partition_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("logical_partition.id", ondelete="CASCADE")
    )
    instance_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("instance.id", ondelete="CASCADE"))
    machine_id: Mapped[str | None] = mapped_column(ForeignKey("machine.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(32))
    message: Mapped[str | None] = mapped_column(Text)
    created: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, server_default=text("clock_timestamp()")
    )
    updated: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, server_default=text("clock_timestamp()")
    )
