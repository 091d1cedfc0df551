"""Organisations: the infrastructure provider, tenants, and the tenant-site association."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base, created_at, updated_at, uuid_pk


class InfrastructureProvider(Base):
    __tablename__ = "infrastructure_provider"

    id: Mapped[uuid.UUID] = uuid_pk()
    org: Mapped[str] = mapped_column(String(256), unique=True)
    org_display_name: Mapped[str | None] = mapped_column(String(256))
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class Tenant(Base):
    __tablename__ = "tenant"

    id: Mapped[uuid.UUID] = uuid_pk()
    org: Mapped[str] = mapped_column(String(256), unique=True)
    org_display_name: Mapped[str | None] = mapped_column(String(256))
    targeted_instance_creation: Mapped[bool] = mapped_column(default=False, server_default="false")
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class TenantSite(Base):
    """A tenant may use a site: created with the tenant's first allocation there, removed with its last."""

    __tablename__ = "tenant_site"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenant.id", ondelete="CASCADE"), primary_key=True
    )
    site_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("site.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    created: Mapped[datetime] = created_at()
