"""Tenant, infrastructure provider and metadata bodies."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Protocol

from nico.api.schemas.common import ResponseModel


class ProviderRow(Protocol):
    """An infrastructure provider as services return it."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def org(self) -> str: ...

    @property
    def org_display_name(self) -> str | None: ...

    @property
    def created(self) -> datetime: ...

    @property
    def updated(self) -> datetime: ...


class TenantRow(ProviderRow, Protocol):
    """A tenant as services return it."""

    @property
    def targeted_instance_creation(self) -> bool: ...


class TenantCapabilities(ResponseModel):
    targeted_instance_creation: bool


class Tenant(ResponseModel):
    id: uuid.UUID
    org: str
    org_display_name: str | None
    capabilities: TenantCapabilities
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, row: TenantRow) -> Tenant:
        return cls(
            id=row.id,
            org=row.org,
            org_display_name=row.org_display_name,
            capabilities=TenantCapabilities(targeted_instance_creation=row.targeted_instance_creation),
            created=row.created,
            updated=row.updated,
        )


class TenantSummary(ResponseModel):
    org: str
    org_display_name: str | None
    capabilities: TenantCapabilities

    @classmethod
    def of(cls, row: TenantRow) -> TenantSummary:
        return cls(
            org=row.org,
            org_display_name=row.org_display_name,
            capabilities=TenantCapabilities(targeted_instance_creation=row.targeted_instance_creation),
        )


class InfrastructureProvider(ResponseModel):
    id: uuid.UUID
    org: str
    org_display_name: str | None
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, row: ProviderRow) -> InfrastructureProvider:
        return cls(
            id=row.id,
            org=row.org,
            org_display_name=row.org_display_name,
            created=row.created,
            updated=row.updated,
        )


class InfrastructureProviderSummary(ResponseModel):
    org: str
    org_display_name: str | None

    @classmethod
    def of(cls, row: ProviderRow) -> InfrastructureProviderSummary:
        return cls(org=row.org, org_display_name=row.org_display_name)


class Metadata(ResponseModel):
    version: str
    build_time: str
