"""Fabric bookkeeping: recorded intents, the NMX-C endpoint registry and NMX-M credentials."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text, func, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base, check_in, created_at, updated_at, uuid_pk
from nico.db.enums import FabricOperation, IntentState
from nico.db.types import GpuUid


class FabricIntent(Base):
    """What the reconciler is about to ask of the fabric, written before the call.

    After a crash, or when an NMX-M operation completes after its deadline, a partition found on the
    fabric with ``partition_name`` in ``domain_uuid`` is adopted instead of being torn down.
    """

    __tablename__ = "fabric_intent"
    __table_args__ = (
        CheckConstraint(check_in("operation", FabricOperation), name="operation"),
        CheckConstraint(check_in("state", IntentState), name="state"),
        Index("ix_fabric_intent_open", "domain_uuid", "state"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    domain_uuid: Mapped[uuid.UUID] = mapped_column(ForeignKey("nvlink_domain.uuid", ondelete="CASCADE"))
    # SET NULL: the intent outlives its logical partition as an audit record.
    logical_partition_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("logical_partition.id", ondelete="SET NULL"), index=True
    )
    operation: Mapped[str] = mapped_column(String(32))
    partition_name: Mapped[str] = mapped_column(String(256))
    fabric_ref: Mapped[str | None] = mapped_column(String(64))
    gpu_uids: Mapped[list[int]] = mapped_column(ARRAY(GpuUid))
    operation_id: Mapped[str | None] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(32), default=IntentState.PENDING)
    error: Mapped[str | None] = mapped_column(Text)
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class NvlinkNmxcEndpoint(Base):
    """Rack chassis serial -> NMX-C endpoint URL (several serials may share one endpoint)."""

    __tablename__ = "nvlink_nmxc_endpoint"
    __table_args__ = (
        CheckConstraint("length(chassis_serial) > 0", name="chassis_serial"),
        CheckConstraint("length(endpoint) > 0", name="endpoint"),
        # A domain's pass reads the rows of its chassis by trimmed serial (migration 0021).
        Index("ix_nvlink_nmxc_endpoint_serial", func.btrim(text("chassis_serial"))),
    )

    chassis_serial: Mapped[str] = mapped_column(String(256), primary_key=True)
    endpoint: Mapped[str] = mapped_column(Text)
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class FabricCredential(Base):
    """Basic-auth credentials for a fabric manager (NMX-M). The password is never printed or logged."""

    __tablename__ = "fabric_credential"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    username: Mapped[str] = mapped_column(String(256))
    password: Mapped[str] = mapped_column(Text)
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()
