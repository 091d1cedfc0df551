"""Site bodies. ``SiteSummary`` is what other resources embed with ``includeRelation=Site``."""

from __future__ import annotations

import uuid

from pydantic import Field

from nico.api.schemas.common import ResponseModel, omit_if_none
from nico.api.schemas.org import InfrastructureProviderSummary
from nico.db.enums import SiteStatus
from nico.db.models import InfrastructureProvider as ProviderRow
from nico.db.models import Site as SiteRow


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
