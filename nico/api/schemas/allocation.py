"""Allocation and allocation constraint bodies (note the reference's ``ResourceTypeID`` wire key)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from pydantic import Field

from nico.api.schemas.common import RequestModel, ResponseModel, StatusDetail, omit_if_none
from nico.api.schemas.instance_type import InstanceTypeSummary
from nico.api.schemas.org import InfrastructureProviderSummary, TenantSummary
from nico.api.schemas.site import SiteSummary
from nico.db.models import Allocation as AllocationRow
from nico.db.models import AllocationConstraint as ConstraintRow
from nico.db.models import StatusDetail as StatusDetailRow


class AllocationConstraint(ResponseModel):
    id: uuid.UUID
    allocation_id: uuid.UUID
    resource_type: str
    # The reference's Go field has no JSON tag, so its wire key is the field name itself.
    resource_type_id: uuid.UUID = Field(serialization_alias="ResourceTypeID")
    constraint_type: str
    constraint_value: int
    derived_resource_id: uuid.UUID | None
    instance_type: InstanceTypeSummary | None = Field(default=None, exclude_if=omit_if_none)
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, row: ConstraintRow, instance_type: InstanceTypeSummary | None = None) -> AllocationConstraint:
        return cls(
            id=row.id,
            allocation_id=row.allocation_id,
            resource_type=row.resource_type,
            resource_type_id=row.resource_type_id,
            constraint_type=row.constraint_type,
            constraint_value=row.constraint_value,
            derived_resource_id=row.derived_resource_id,
            instance_type=instance_type,
            created=row.created,
            updated=row.updated,
        )


class Allocation(ResponseModel):
    id: uuid.UUID
    name: str
    description: str | None
    infrastructure_provider_id: uuid.UUID
    infrastructure_provider: InfrastructureProviderSummary | None = Field(
        default=None, exclude_if=omit_if_none
    )
    tenant_id: uuid.UUID
    tenant: TenantSummary | None = Field(default=None, exclude_if=omit_if_none)
    site_id: uuid.UUID
    site: SiteSummary | None = Field(default=None, exclude_if=omit_if_none)
    status: str
    status_history: list[StatusDetail]
    created: datetime
    updated: datetime
    allocation_constraints: list[AllocationConstraint]

    @classmethod
    def of(
        cls,
        row: AllocationRow,
        constraints: list[AllocationConstraint],
        history: Iterable[StatusDetailRow],
        *,
        provider: InfrastructureProviderSummary | None = None,
        tenant: TenantSummary | None = None,
        site: SiteSummary | None = None,
    ) -> Allocation:
        return cls(
            id=row.id,
            name=row.name,
            description=row.description,
            infrastructure_provider_id=row.infrastructure_provider_id,
            infrastructure_provider=provider,
            tenant_id=row.tenant_id,
            tenant=tenant,
            site_id=row.site_id,
            site=site,
            status=row.status,
            status_history=StatusDetail.many(history),
            created=row.created,
            updated=row.updated,
            allocation_constraints=constraints,
        )


class AllocationConstraintRequest(RequestModel):
    resource_type: str | None = None
    resource_type_id: str | None = None
    constraint_type: str | None = None
    constraint_value: int | None = None


class AllocationCreateRequest(RequestModel):
    name: str | None = None
    description: str | None = None
    tenant_id: str | None = None
    site_id: str | None = None
    allocation_constraints: list[AllocationConstraintRequest] | None = None


class AllocationUpdateRequest(RequestModel):
    name: str | None = None
    description: str | None = None


class AllocationConstraintUpdateRequest(RequestModel):
    constraint_value: int | None = None
