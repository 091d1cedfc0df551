"""Site bodies. ``SiteSummary`` is what other resources embed with ``includeRelation=Site``."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated, Protocol

from pydantic import Field

from nico.api.parsing import FieldErrors, description_problem, hostname_problem, name_problem
from nico.api.schemas.common import (
    DESCRIPTION_SCHEMA,
    NAME_SCHEMA,
    RequestModel,
    ResponseModel,
    StatusDetail,
    Summarised,
    declared,
    nullable,
    omit_if_none,
    required,
)
from nico.api.schemas.org import InfrastructureProviderSummary
from nico.services.site import ONLINE, SiteView

LOCATION_LIMIT = 256
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
NOT_BY_TENANT = "value is not configurable by Tenant"
# parsing.hostname_problem: "" or RFC 1123 labels, 253 characters at most
_LABEL = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOSTNAME_SCHEMA = {
    "type": ["string", "null"],
    "maxLength": 253,
    "pattern": f"^({_LABEL}(\\.{_LABEL})*\\.?)?$",
}
PLACE_SCHEMA = {"type": ["string", "null"], "maxLength": LOCATION_LIMIT}
# place_problems: "" or an address of at most 254 characters
EMAIL_SCHEMA = {"type": ["string", "null"], "maxLength": 254, "pattern": "^([^@\\s]+@[^@\\s]+\\.[^@\\s]+)?$"}


class SiteRow(Summarised, Protocol):
    """What a site summary reads of a site (the services' record of it)."""

    @property
    def infrastructure_provider_id(self) -> uuid.UUID: ...

    @property
    def is_serial_console_enabled(self) -> bool: ...

    @property
    def native_networking(self) -> bool: ...

    @property
    def network_security_group(self) -> bool: ...

    @property
    def nvlink_partition(self) -> bool: ...

    @property
    def flow(self) -> bool: ...

    @property
    def image_based_operating_system(self) -> bool: ...


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
    def of(cls, row: SiteRow) -> SiteSummary:
        return cls(
            id=row.id,
            name=row.name,
            infrastructure_provider_id=row.infrastructure_provider_id,
            is_serial_console_enabled=row.is_serial_console_enabled,
            is_online=row.status == ONLINE,
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
    def of(cls, view: SiteView) -> Site:
        """``tenant_view`` renders the fields the reference shows a tenant holding the site (no
        serial-console SSH key setting is kept by nico, so it reads false)."""
        row, owner = view.site, view.owner
        return cls(
            id=row.id,
            name=row.name,
            description=row.description,
            org=owner.org,
            infrastructure_provider_id=row.infrastructure_provider_id,
            infrastructure_provider=InfrastructureProviderSummary.of(owner)
            if view.include_provider
            else None,
            site_controller_version=row.site_controller_version,
            site_agent_version=row.site_agent_version,
            registration_token=None,
            registration_token_expiration=None,
            serial_console_hostname=row.serial_console_hostname,
            is_serial_console_enabled=row.is_serial_console_enabled,
            serial_console_idle_timeout=row.serial_console_idle_timeout,
            serial_console_max_session_length=row.serial_console_max_session_length,
            is_serial_console_ssh_keys_enabled=False if view.tenant_view else None,
            is_online=row.status == ONLINE,
            status=row.status,
            status_history=StatusDetail.many(view.history),
            created=row.created,
            updated=row.updated,
            location=SiteLocation.model_validate(row.location) if row.location else None,
            contact=SiteContact.model_validate(row.contact) if row.contact else None,
            machine_stats=MachineStats.model_validate(view.machine_stats)
            if view.machine_stats is not None
            else None,
            capabilities=SiteCapabilities.of(row),
        )


class LocationRequest(RequestModel):
    city: Annotated[str | None, declared(PLACE_SCHEMA)] = None
    state: Annotated[str | None, declared(PLACE_SCHEMA)] = None
    country: Annotated[str | None, declared(PLACE_SCHEMA)] = None


class ContactRequest(RequestModel):
    email: Annotated[str | None, declared(EMAIL_SCHEMA)] = None


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
    model_config = required("name")

    name: Annotated[str | None, declared(NAME_SCHEMA)] = None
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None
    serial_console_hostname: Annotated[str | None, declared(HOSTNAME_SCHEMA)] = None
    location: LocationRequest | None = None
    contact: ContactRequest | None = None
    capabilities: CapabilitiesRequest | None = Field(
        default=None,
        description="nico extension: feature flags of the new site (the reference only sets them by PATCH).",
    )

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name))
        errors.add("description", description_problem(self.description))
        errors.add("serialConsoleHostname", hostname_problem(self.serial_console_hostname))
        place_problems(errors, self.location, self.contact)


class SiteUpdateRequest(RequestModel):
    """A site update. The provider may set every field but ``isSerialConsoleSSHKeysEnabled``, which no
    caller may set; a tenant holding the site may set none (400 ``value is not configurable by Tenant``)."""

    name: Annotated[str | None, declared(nullable(NAME_SCHEMA))] = None
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None
    renew_registration_token: bool | None = None
    serial_console_hostname: Annotated[str | None, declared(HOSTNAME_SCHEMA)] = None
    is_serial_console_enabled: bool | None = None
    serial_console_idle_timeout: Annotated[
        int | None, declared({"type": ["integer", "null"], "minimum": 1})
    ] = None
    serial_console_max_session_length: Annotated[
        int | None, declared({"type": ["integer", "null"], "minimum": 1})
    ] = None
    is_serial_console_ssh_keys_enabled: Annotated[
        bool | None,
        declared({"type": "null", "description": "no longer configurable (update SSH Key Groups instead)"}),
    ] = Field(default=None, alias="isSerialConsoleSSHKeysEnabled")
    location: LocationRequest | None = None
    contact: ContactRequest | None = None
    capabilities: CapabilitiesRequest | None = None


class SiteUpdateByProvider(SiteUpdateRequest):
    """A site update by its provider: every field but the serial-console SSH key setting."""

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name, required=False))
        errors.add("description", description_problem(self.description))
        errors.add("serialConsoleHostname", hostname_problem(self.serial_console_hostname))
        for field, value in (
            ("serialConsoleIdleTimeout", self.serial_console_idle_timeout),
            ("serialConsoleMaxSessionLength", self.serial_console_max_session_length),
        ):
            if value is not None and value <= 0:
                errors.add(field, "must be greater than 0")
        if self.is_serial_console_ssh_keys_enabled is not None:
            errors.add("isSerialConsoleSSHKeysEnabled", "value is not configurable by Provider")
        place_problems(errors, self.location, self.contact)


class SiteUpdateByTenant(SiteUpdateRequest):
    """A site update by a tenant holding it: nothing is configurable."""

    def check(self, errors: FieldErrors) -> None:
        for field in SiteUpdateRequest.model_fields:
            if field != "is_serial_console_ssh_keys_enabled" and getattr(self, field) is not None:
                errors.add(SiteUpdateRequest.model_fields[field].alias or field, NOT_BY_TENANT)
        if self.is_serial_console_ssh_keys_enabled is not None:
            errors.add(
                "isSerialConsoleSSHKeysEnabled",
                "configuring this value is no longer supported, update SSH Key Groups to remove Site instead",
            )


def place_problems(
    errors: FieldErrors, location: LocationRequest | None, contact: ContactRequest | None
) -> None:
    if location is not None and any(
        len(part or "") > LOCATION_LIMIT for part in (location.city, location.state, location.country)
    ):
        errors.add("location", f"city, state and country must be at most {LOCATION_LIMIT} characters each")
    if contact is not None and contact.email and (len(contact.email) > 254 or not EMAIL.match(contact.email)):
        errors.add("contact", "must be a valid email address")
