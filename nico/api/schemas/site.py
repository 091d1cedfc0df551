"""Site bodies. ``SiteSummary`` is what other resources embed with ``includeRelation=Site``."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from pydantic import Field

from nico.api.schemas.common import RequestModel, ResponseModel, StatusDetail, omit_if_none
from nico.api.schemas.org import InfrastructureProviderSummary
from nico.db.enums import SiteStatus
from nico.db.models import InfrastructureProvider as ProviderRow
from nico.db.models import Site as SiteRow
from nico.db.models import StatusDetail as StatusDetailRow


class SiteCapabilities(ResponseModel):
    native_networking: bool
    network_security_group: bool
    nv_link_partition: bool = Field(serialization_alias="nvLinkPartition")
    flow: bool
    image_based_operating_system: bool

    @classmethod
    def of(cls, row: SiteRow) -> SiteCapabilities:
        return cls(
            native_networking=row.native_networking,
            network_security_group=row.network_security_group,
            nv_link_partition=row.nvlink_partition,
            flow=row.flow,
            image_based_operating_system=row.image_based_operating_system,
        )


class SiteSummary(ResponseModel):
    id: uuid.UUID
    name: str
    infrastructure_provider_id: uuid.UUID
    infrastructure_provider: InfrastructureProviderSummary | None = Field(
        default=None, exclude_if=omit_if_none
    )
    is_serial_console_enabled: bool
    is_online: bool
    status: str
    capabilities: SiteCapabilities

    @classmethod
    def of(cls, row: SiteRow, provider: ProviderRow | None = None) -> SiteSummary:
        return cls(
            id=row.id,
            name=row.name,
            infrastructure_provider_id=row.infrastructure_provider_id,
            infrastructure_provider=InfrastructureProviderSummary.of(provider) if provider else None,
            is_serial_console_enabled=row.is_serial_console_enabled,
            is_online=row.status == SiteStatus.REGISTERED,
            status=row.status,
            capabilities=SiteCapabilities.of(row),
        )


class SiteLocation(ResponseModel):
    city: str | None = None
    state: str | None = None
    country: str | None = None


class SiteContact(ResponseModel):
    email: str | None = None


class MachineStats(ResponseModel):
    """Machine counts of a site (``includeMachineStats=true``, provider view)."""

    total: int
    total_by_status: dict[str, int]
    total_by_health: dict[str, int]
    total_by_status_and_health: dict[str, dict[str, int]]
    total_by_allocation: dict[str, int]


class Site(ResponseModel):
    id: uuid.UUID
    name: str
    description: str | None
    org: str
    infrastructure_provider_id: uuid.UUID
    infrastructure_provider: InfrastructureProviderSummary | None = Field(
        default=None, exclude_if=omit_if_none
    )
    site_controller_version: str | None
    site_agent_version: str | None
    registration_token: str | None
    registration_token_expiration: datetime | None
    serial_console_hostname: str | None
    is_serial_console_enabled: bool
    serial_console_idle_timeout: int | None
    serial_console_max_session_length: int | None
    is_serial_console_ssh_keys_enabled: bool | None = Field(
        default=None, serialization_alias="isSerialConsoleSSHKeysEnabled", exclude_if=omit_if_none
    )
    is_online: bool
    status: str
    status_history: list[StatusDetail]
    created: datetime
    updated: datetime
    location: SiteLocation | None
    contact: SiteContact | None
    machine_stats: MachineStats | None = None
    capabilities: SiteCapabilities

    @classmethod
    def of(
        cls,
        row: SiteRow,
        owner: ProviderRow,
        history: Iterable[StatusDetailRow],
        *,
        include_provider: bool = False,
        tenant_view: bool = False,
        machine_stats: MachineStats | None = None,
    ) -> Site:
        """``owner`` is the site's provider (its org is always shown); ``tenant_view`` renders the
        fields the reference shows a tenant holding the site (no serial-console SSH key setting is
        kept by nico, so it reads false)."""
        return cls(
            id=row.id,
            name=row.name,
            description=row.description,
            org=owner.org,
            infrastructure_provider_id=row.infrastructure_provider_id,
            infrastructure_provider=InfrastructureProviderSummary.of(owner) if include_provider else None,
            site_controller_version=row.site_controller_version,
            site_agent_version=row.site_agent_version,
            registration_token=None,
            registration_token_expiration=None,
            serial_console_hostname=row.serial_console_hostname,
            is_serial_console_enabled=row.is_serial_console_enabled,
            serial_console_idle_timeout=row.serial_console_idle_timeout,
            serial_console_max_session_length=row.serial_console_max_session_length,
            is_serial_console_ssh_keys_enabled=False if tenant_view else None,
            is_online=row.status == SiteStatus.REGISTERED,
            status=row.status,
            status_history=StatusDetail.many(history),
            created=row.created,
            updated=row.updated,
            location=SiteLocation.model_validate(row.location) if row.location else None,
            contact=SiteContact.model_validate(row.contact) if row.contact else None,
            machine_stats=machine_stats,
            capabilities=SiteCapabilities.of(row),
        )


class LocationRequest(RequestModel):
    city: str | None = None
    state: str | None = None
    country: str | None = None


class ContactRequest(RequestModel):
    email: str | None = None


class CapabilitiesRequest(RequestModel):
    """Site feature flags; absent keys are left as they are."""

    native_networking: bool | None = None
    network_security_group: bool | None = None
    nv_link_partition: bool | None = Field(default=None, alias="nvLinkPartition")
    flow: bool | None = None
    image_based_operating_system: bool | None = None

    def changes(self) -> dict[str, bool]:
        """Column -> value for the flags that were given."""
        given = {
            "native_networking": self.native_networking,
            "network_security_group": self.network_security_group,
            "nvlink_partition": self.nv_link_partition,
            "flow": self.flow,
            "image_based_operating_system": self.image_based_operating_system,
        }
        return {column: value for column, value in given.items() if value is not None}


class SiteCreateRequest(RequestModel):
    name: str | None = None
    description: str | None = None
    serial_console_hostname: str | None = None
    location: LocationRequest | None = None
    contact: ContactRequest | None = None
    capabilities: CapabilitiesRequest | None = Field(
        default=None,
        description="nico extension: feature flags of the new site (the reference only sets them by PATCH).",
    )


class SiteUpdateRequest(RequestModel):
    name: str | None = None
    description: str | None = None
    renew_registration_token: bool | None = None
    serial_console_hostname: str | None = None
    is_serial_console_enabled: bool | None = None
    serial_console_idle_timeout: int | None = None
    serial_console_max_session_length: int | None = None
    is_serial_console_ssh_keys_enabled: bool | None = Field(
        default=None, alias="isSerialConsoleSSHKeysEnabled"
    )
    location: LocationRequest | None = None
    contact: ContactRequest | None = None
    capabilities: CapabilitiesRequest | None = None
