"""Allocation and allocation constraint bodies (note the reference's ``ResourceTypeID`` wire key)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field

from nico.api.parsing import REQUIRED, FieldErrors, description_problem, name_problem, uuid_problem
from nico.api.schemas.common import (
    DESCRIPTION_SCHEMA,
    NAME_SCHEMA,
    UUID_SCHEMA,
    MaxItems,
    RequestModel,
    ResponseModel,
    StatusDetail,
    declared,
    nullable,
    omit_if_none,
    required,
)
from nico.api.schemas.instance_type import InstanceTypeSummary
from nico.api.schemas.org import InfrastructureProviderSummary, TenantSummary
from nico.api.schemas.site import SiteSummary
from nico.services.allocation import CONSTRAINT_TYPES, RESOURCE_TYPES, AllocationView, ConstraintView

INT32_MAX = 2**31 - 1
# constraint_value_problem: 0 (Go's zero value) reads as absent
CONSTRAINT_VALUE_SCHEMA = {"type": "integer", "minimum": 1, "maximum": INT32_MAX}


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
    def of(cls, view: ConstraintView) -> AllocationConstraint:
        row, itype = view.constraint, view.instance_type
        return cls(
            id=row.id,
            allocation_id=row.allocation_id,
            resource_type=row.resource_type,
            resource_type_id=row.resource_type_id,
            constraint_type=row.constraint_type,
            constraint_value=row.constraint_value,
            derived_resource_id=row.derived_resource_id,
            instance_type=InstanceTypeSummary.of(itype) if itype else None,
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
    def of(cls, view: AllocationView) -> Allocation:
        row = view.allocation
        return cls(
            id=row.id,
            name=row.name,
            description=row.description,
            infrastructure_provider_id=row.infrastructure_provider_id,
            infrastructure_provider=InfrastructureProviderSummary.of(view.provider)
            if view.provider
            else None,
            tenant_id=row.tenant_id,
            tenant=TenantSummary.of(view.tenant) if view.tenant else None,
            site_id=row.site_id,
            site=SiteSummary.of(view.site) if view.site else None,
            status=row.status,
            status_history=StatusDetail.many(view.history),
            created=row.created,
            updated=row.updated,
            allocation_constraints=[AllocationConstraint.of(c) for c in view.constraints],
        )


class AllocationConstraintRequest(RequestModel):
    model_config = required("resourceType", "resourceTypeId", "constraintType", "constraintValue")

    resource_type: Annotated[
        str | None, declared({"type": "string", "enum": sorted(str(t) for t in RESOURCE_TYPES)})
    ] = None
    resource_type_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    # the binding knows three types; the service takes Reserved only (400 "Only Constraint Type: Reserved
    # is supported at this time")
    constraint_type: Annotated[str | None, declared({"type": "string", "enum": ["Reserved"]})] = None
    constraint_value: Annotated[int | None, declared(CONSTRAINT_VALUE_SCHEMA)] = None


class AllocationCreateRequest(RequestModel):
    model_config = required("name", "tenantId", "siteId", "allocationConstraints")

    name: Annotated[str | None, declared(NAME_SCHEMA)] = None
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None
    tenant_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    site_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    allocation_constraints: Annotated[
        list[AllocationConstraintRequest] | None,
        MaxItems(1, "at least one (and at most one) Allocation Constraint must be specified"),
    ] = Field(default=None, json_schema_extra={"type": "array", "minItems": 1, "maxItems": 1})

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name))
        errors.add("description", description_problem(self.description))
        errors.add("tenantId", uuid_problem(self.tenant_id))
        errors.add("siteId", uuid_problem(self.site_id))
        for key, value in constraint_problems(self.allocation_constraints).items():
            errors.add(key, value)


class AllocationUpdateRequest(RequestModel):
    name: Annotated[str | None, declared(nullable(NAME_SCHEMA))] = None
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name, required=False))
        errors.add("description", description_problem(self.description))


class AllocationConstraintUpdateRequest(RequestModel):
    model_config = required("constraintValue")

    constraint_value: Annotated[int | None, declared(CONSTRAINT_VALUE_SCHEMA)] = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("constraintValue", constraint_value_problem(self.constraint_value))


def constraint_problems(items: list[AllocationConstraintRequest] | None) -> dict[str, Any]:
    """Rules of the one constraint; its messages appear at the top level of ``data``."""
    if not items or len(items) != 1:
        return {
            "allocationConstraints": "at least one (and at most one) Allocation Constraint must be specified"
        }
    item = items[0]
    errors = FieldErrors()
    if not item.resource_type:
        errors.add("resourceType", REQUIRED)
    elif item.resource_type not in RESOURCE_TYPES:
        errors.add("resourceType", "Resource Type must be InstanceType or IPBlock")
    errors.add("resourceTypeId", uuid_problem(item.resource_type_id))
    if not item.constraint_type:
        errors.add("constraintType", REQUIRED)
    elif item.constraint_type not in CONSTRAINT_TYPES:
        errors.add("constraintType", "Constraint Type should be Reserved, OnDemand or Preemptible")
    errors.add("constraintValue", constraint_value_problem(item.constraint_value))
    return dict(errors.errors)


def constraint_value_problem(value: int | None) -> str | None:
    if not value:
        return REQUIRED
    if not 1 <= value <= INT32_MAX:
        return f"must be between 1 and {INT32_MAX}"
    return None
