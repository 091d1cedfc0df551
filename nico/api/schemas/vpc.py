"""VPC bodies: create/update requests, the VPC object and ``VpcSummary`` (embedded by partitions and
instances)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Protocol

from pydantic import Field

from nico.api.parsing import (
    FieldErrors,
    description_problem,
    labels_problem,
    name_problem,
    uuid_problem,
)
from nico.api.schemas.common import (
    DESCRIPTION_SCHEMA,
    LABELS_BOUND,
    LABELS_SCHEMA,
    NAME_SCHEMA,
    OPTIONAL_UUID_SCHEMA,
    UUID_SCHEMA,
    RequestModel,
    ResponseModel,
    StatusDetail,
    Summarised,
    declared,
    nullable,
    omit_if_none,
    required,
)
from nico.api.schemas.nvlink_interface import NVLinkLogicalPartitionSummary
from nico.api.schemas.org import InfrastructureProviderSummary, TenantSummary
from nico.api.schemas.site import SiteSummary
from nico.services.vpc import NETWORK_VIRTUALIZATION_TYPES, VpcView

VNI_MAX = 65535
UNSUPPORTED = "is not supported by nico"
# a non-empty networkSecurityGroupId answers 400
NO_NSG_SCHEMA = {
    "type": ["string", "null"],
    "maxLength": 0,
    "description": f"Network Security Groups {UNSUPPORTED}",
}


class VpcCreateRequest(RequestModel):
    model_config = required("name", "siteId")

    name: Annotated[str | None, declared(NAME_SCHEMA)] = None
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None
    site_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    id: Annotated[str | None, declared(OPTIONAL_UUID_SCHEMA)] = None
    network_virtualization_type: Annotated[
        str | None,
        declared({"type": ["string", "null"], "enum": [*sorted(NETWORK_VIRTUALIZATION_TYPES), None]}),
    ] = None
    labels: Annotated[dict[str, str] | None, LABELS_BOUND, declared(LABELS_SCHEMA)] = None
    network_security_group_id: Annotated[str | None, declared(NO_NSG_SCHEMA)] = None
    vni: Annotated[int | None, declared({"type": ["integer", "null"], "minimum": 0, "maximum": VNI_MAX})] = (
        None
    )
    routing_profile: Annotated[
        str | None, declared({"type": ["string", "null"], "minLength": 1, "maxLength": 64})
    ] = None
    nv_link_logical_partition_id: Annotated[str | None, declared(nullable(UUID_SCHEMA))] = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name))
        errors.add("description", description_problem(self.description))
        errors.add("siteId", uuid_problem(self.site_id))
        errors.add("id", uuid_problem(self.id, required=False))
        if (
            self.network_virtualization_type is not None
            and self.network_virtualization_type not in NETWORK_VIRTUALIZATION_TYPES
        ):
            errors.add("networkVirtualizationType", "must be a valid value")
        errors.add("labels", labels_problem(self.labels))
        if self.network_security_group_id:
            errors.add("networkSecurityGroupId", f"Network Security Groups {UNSUPPORTED}")
        if self.vni is not None and not 0 <= self.vni <= VNI_MAX:
            errors.add(
                "vni", f"must be no greater than {VNI_MAX}" if self.vni > 0 else "must be no less than 0"
            )
        if self.routing_profile is not None and not 1 <= len(self.routing_profile) <= 64:
            errors.add("routingProfile", "the length must be between 1 and 64")


class VpcUpdateRequest(RequestModel):
    name: Annotated[str | None, declared(nullable(NAME_SCHEMA))] = None
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None
    labels: Annotated[dict[str, str] | None, LABELS_BOUND, declared(LABELS_SCHEMA)] = None
    network_security_group_id: Annotated[str | None, declared(NO_NSG_SCHEMA)] = None
    # "" clears the VPC's default partition
    nv_link_logical_partition_id: Annotated[
        str | None,
        declared({"anyOf": [UUID_SCHEMA, {"type": "string", "maxLength": 0}, {"type": "null"}]}),
    ] = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name, required=False))
        errors.add("description", description_problem(self.description))
        errors.add("labels", labels_problem(self.labels))
        if self.network_security_group_id:
            errors.add("networkSecurityGroupId", f"Network Security Groups {UNSUPPORTED}")


class VpcRow(Summarised, Protocol):
    """What a VPC summary reads of a VPC (the services' record of it)."""

    @property
    def network_virtualization_type(self) -> str: ...


class VpcSummary(ResponseModel):
    id: uuid.UUID
    name: str
    controller_vpc_id: uuid.UUID
    network_virtualization_type: str
    status: str

    @classmethod
    def of(cls, row: VpcRow) -> VpcSummary:
        return cls(
            id=row.id,
            name=row.name,
            controller_vpc_id=row.id,
            network_virtualization_type=row.network_virtualization_type,
            status=row.status,
        )


class Vpc(ResponseModel):
    id: uuid.UUID
    name: str
    description: str | None
    org: str
    infrastructure_provider_id: uuid.UUID
    infrastructure_provider: InfrastructureProviderSummary | None = Field(
        default=None, exclude_if=omit_if_none
    )
    tenant_id: uuid.UUID
    tenant: TenantSummary | None = Field(default=None, exclude_if=omit_if_none)
    site_id: uuid.UUID
    site: SiteSummary | None = Field(default=None, exclude_if=omit_if_none)
    network_virtualization_type: str
    controller_vpc_id: uuid.UUID
    labels: dict[str, Any] | None
    nv_link_logical_partition_id: uuid.UUID | None
    nv_link_logical_partition_summary: NVLinkLogicalPartitionSummary | None = Field(
        default=None, exclude_if=omit_if_none
    )
    network_security_group_id: uuid.UUID | None = None
    network_security_group_propagation_details: dict[str, Any] | None = None
    routing_profile: str | None
    requested_vni: int | None
    vni: int | None
    status: str
    status_history: list[StatusDetail]
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, view: VpcView) -> Vpc:
        row, relations = view.vpc, view.relations
        return cls(
            id=row.id,
            name=row.name,
            description=row.description,
            org=view.tenant.org,
            infrastructure_provider_id=view.site.infrastructure_provider_id,
            infrastructure_provider=(
                InfrastructureProviderSummary.of(view.provider) if view.provider is not None else None
            ),
            tenant_id=row.tenant_id,
            tenant=TenantSummary.of(view.tenant) if "Tenant" in relations else None,
            site_id=row.site_id,
            site=SiteSummary.of(view.site) if "Site" in relations else None,
            network_virtualization_type=row.network_virtualization_type,
            controller_vpc_id=row.id,
            labels=row.labels,
            nv_link_logical_partition_id=row.nvlink_logical_partition_id,
            nv_link_logical_partition_summary=(
                NVLinkLogicalPartitionSummary.of(view.partition) if view.partition is not None else None
            ),
            routing_profile=row.routing_profile,
            requested_vni=row.requested_vni,
            vni=row.vni,
            status=row.status,
            status_history=StatusDetail.many(view.history),
            created=row.created,
            updated=row.updated,
        )
