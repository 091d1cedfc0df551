"""A site: one datacenter location with its capability flags."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base, check_in, created_at, updated_at, uuid_pk
from nico.db.enums import SiteStatus


class Site(Base):
    __tablename__ = "site"
    __table_args__ = (
        UniqueConstraint("infrastructure_provider_id", "name"),
        CheckConstraint(check_in("status", SiteStatus), name="status"),
    )

    id: Mapped[uuid.UUID] = uuid_pk()
    infrastructure_provider_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("infrastructure_provider.id", ondelete="RESTRICT")
    )
    name: Mapped[str] = mapped_column(String(256))
    description: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(32), default=SiteStatus.PENDING)
    serial_console_hostname: Mapped[str | None] = mapped_column(String(256))
    is_serial_console_enabled: Mapped[bool] = mapped_column(default=False, server_default="false")
    serial_console_idle_timeout: Mapped[int | None]
    serial_console_max_session_length: Mapped[int | None]
    location: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    contact: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    native_networking: Mapped[bool] = mapped_column(default=False, server_default="false")
    network_security_group: Mapped[bool] = mapped_column(default=True, server_default="true")
    nvlink_partition: Mapped[bool] = mapped_column(default=False, server_default="false")
    flow: Mapped[bool] = mapped_column(default=False, server_default="false")
    image_based_operating_system: Mapped[bool] = mapped_column(default=False, server_default="false")
    site_controller_version: Mapped[str | None] = mapped_column(String(64))
    site_agent_version: Mapped[str | None] = mapped_column(String(64))
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()
