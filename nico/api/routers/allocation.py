"""``/allocation``: a provider's reservations of machines for tenants, and their one constraint."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api.binding import (
    REQUIRED,
    FieldErrors,
    description_problem,
    include_relations,
    list_param,
    name_problem,
    parse_uuid,
    read_body,
    uuid_params,
    uuid_problem,
)
from nico.api.deps import PrincipalDep, SessionDep
from nico.api.openapi import json_body
from nico.api.pagination import parse_page
from nico.api.rendering import deletion_accepted, json_response, paged_response
from nico.api.schemas.allocation import (
    Allocation,
    AllocationConstraint,
    AllocationConstraintRequest,
    AllocationConstraintUpdateRequest,
    AllocationCreateRequest,
    AllocationUpdateRequest,
)
from nico.api.schemas.common import StatusDetail
from nico.api.schemas.instance_type import InstanceTypeSummary
from nico.api.schemas.org import InfrastructureProviderSummary, TenantSummary
from nico.api.schemas.site import SiteSummary
from nico.db.enums import AllocationStatus, ConstraintType, ResourceType
from nico.db.models import Allocation as AllocationRow
from nico.db.models import StatusDetail as StatusDetailRow
from nico.services import allocation as allocations
from nico.services import instance_type as types
from nico.services import orgs, status
from nico.services import site as sites
from nico.services.errors import ServiceError, bad_request

router = APIRouter(tags=["allocation"])

RELATIONS = ("InfrastructureProvider", "Tenant", "Site")
INT32_MAX = 2**31 - 1
CONSTRAINT_PARSE_ERROR = "Failed to parse request data, invalid JSON structure"


def allocation_id_of(raw: str) -> uuid.UUID:
    parsed = parse_uuid(raw)
    if parsed is None:
        raise bad_request("Invalid Allocation ID in URL")
    return parsed


async def render(
    session: SessionDep,
    rows: Sequence[AllocationRow],
    *,
    relations: AbstractSet[str] = frozenset(),
    history: dict[uuid.UUID | str, list[StatusDetailRow]] | None = None,
) -> list[Allocation]:
    ids = [row.id for row in rows]
    constraints = await allocations.constraints_of(session, ids)
    type_ids = {c.instance_type_id for cs in constraints.values() for c in cs if c.instance_type_id}
    itypes = await types.instance_types_by_id(session, type_ids)
    if history is None:
        history = await status.history(session, "allocation_id", ids)
    providers = (
        await orgs.providers_by_id(session, (row.infrastructure_provider_id for row in rows))
        if "InfrastructureProvider" in relations
        else {}
    )
    tenants = (
        await orgs.tenants_by_id(session, (row.tenant_id for row in rows)) if "Tenant" in relations else {}
    )
    site_rows = await sites.sites_by_id(session, (row.site_id for row in rows)) if "Site" in relations else {}
    out = []
    for row in rows:
        provider = providers.get(row.infrastructure_provider_id)
        tenant = tenants.get(row.tenant_id)
        site = site_rows.get(row.site_id)
        out.append(
            Allocation.of(
                row,
                [
                    AllocationConstraint.of(
                        c,
                        InstanceTypeSummary.of(itypes[c.instance_type_id])
                        if c.instance_type_id in itypes
                        else None,
                    )
                    for c in constraints.get(row.id, [])
                ],
                history.get(row.id, []),
                provider=InfrastructureProviderSummary.of(provider) if provider else None,
                tenant=TenantSummary.of(tenant) if tenant else None,
                site=SiteSummary.of(site) if site else None,
            )
        )
    return out


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
    elif item.resource_type not in set(ResourceType):
        errors.add("resourceType", "Resource Type must be InstanceType or IPBlock")
    errors.add("resourceTypeId", uuid_problem(item.resource_type_id))
    if not item.constraint_type:
        errors.add("constraintType", REQUIRED)
    elif item.constraint_type not in set(ConstraintType):
        errors.add("constraintType", "Constraint Type should be Reserved, OnDemand or Preemptible")
    errors.add("constraintValue", constraint_value_problem(item.constraint_value))
    return dict(errors.errors)


def constraint_value_problem(value: int | None) -> str | None:
    if not value:
        return REQUIRED
    if not 1 <= value <= INT32_MAX:
        return f"must be between 1 and {INT32_MAX}"
    return None


@router.post(
    "/allocation",
    operation_id="create-allocation",
    response_model=Allocation,
    status_code=201,
    summary="Reserve machines of an instance type at a site for a tenant",
    openapi_extra=json_body(AllocationCreateRequest),
)
async def create_allocation(
    org: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    principal.require_provider_admin(org)
    body = await read_body(request, AllocationCreateRequest)
    errors = FieldErrors()
    errors.add("name", name_problem(body.name))
    errors.add("description", description_problem(body.description))
    errors.add("tenantId", uuid_problem(body.tenant_id))
    errors.add("siteId", uuid_problem(body.site_id))
    data: dict[str, Any] = {**errors.errors}
    for key, value in constraint_problems(body.allocation_constraints).items():
        data.setdefault(key, value)
    if data:
        raise ServiceError(400, "Error validating Allocation creation request data", data)
    item = (body.allocation_constraints or [])[0]
    tenant_id, site_id, type_id = (
        parse_uuid(body.tenant_id),
        parse_uuid(body.site_id),
        parse_uuid(item.resource_type_id),
    )
    assert body.name and tenant_id and site_id and type_id and item.resource_type and item.constraint_type
    assert item.constraint_value is not None
    provider = await orgs.provider_of(session, org)
    row, _, entries = await allocations.create_allocation(
        session,
        provider,
        name=body.name,
        description=body.description,
        tenant_id=tenant_id,
        site_id=site_id,
        constraint=allocations.ConstraintSpec(
            item.resource_type, type_id, item.constraint_type, item.constraint_value
        ),
    )
    rendered = (await render(session, [row], history={row.id: entries}))[0]
    rendered.status_history = StatusDetail.many(entries)
    return json_response(rendered, 201)


@router.get(
    "/allocation",
    operation_id="get-all-allocation",
    response_model=list[Allocation],
    summary="List the provider's allocations and the tenant's own",
)
async def list_allocations(
    org: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    provider_role, tenant_role = principal.require_provider_or_tenant(org)
    page = parse_page(request, frozenset(allocations.ORDER_COLUMNS))
    relations = include_relations(request, RELATIONS)
    viewer = await orgs.viewer(session, org, provider_role=provider_role, tenant_role=tenant_role)
    site_ids = []
    for value in list_param(request, "siteId"):
        parsed = parse_uuid(value)
        if parsed is None:
            raise bad_request("Failed to retrieve site from request", {"siteId": value})
        site_ids.append(parsed)
    missing = await allocations.missing_sites(session, site_ids)
    if missing:
        raise bad_request("Failed to retrieve site from request", {"siteId": str(missing[0])})
    statuses = list_param(request, "status")
    for value in statuses:
        if value not in set(AllocationStatus):
            raise bad_request("Invalid Status value in query", {"status": value})
    resource_types = list_param(request, "resourceType")
    for value in resource_types:
        if value not in set(ResourceType):
            raise bad_request(f"Invalid resourceType value in query: {value}")
    resource_type_ids = uuid_params(request, "resourceTypeId", "Invalid ResourceType ID in query")
    constraint_types = list_param(request, "constraintType")
    for value in constraint_types:
        if value not in set(ConstraintType):
            raise bad_request(f"Invalid constraintType value in query: {value}")
    constraint_values = []
    for value in list_param(request, "constraintValue"):
        try:
            constraint_values.append(int(value))
        except ValueError:
            raise bad_request("Invalid Constraint Value in query") from None
    ids = uuid_params(request, "id", "Invalid Allocation ID in query")
    tenant_ids = uuid_params(request, "tenantId", "Invalid Tenant ID: {value} in query")
    filters = allocations.AllocationFilters(
        site_ids=site_ids,
        statuses=statuses,
        resource_types=resource_types,
        resource_type_ids=resource_type_ids,
        constraint_types=constraint_types,
        constraint_values=constraint_values,
        ids=ids,
        tenant_ids=tenant_ids,
        query=request.query_params.get("query"),
    )
    rows, total = await allocations.list_allocations(session, viewer, filters, page)
    return paged_response(await render(session, rows, relations=relations), page, total)


@router.get(
    "/allocation/{allocationId}",
    operation_id="get-allocation",
    response_model=Allocation,
    summary="Get an allocation",
)
async def get_allocation(
    org: str, allocationId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    provider_role, tenant_role = principal.require_provider_or_tenant(org)
    viewer = await orgs.viewer(session, org, provider_role=provider_role, tenant_role=tenant_role)
    allocation_id = allocation_id_of(allocationId)
    relations = include_relations(request, RELATIONS)
    row = await allocations.visible_allocation(session, viewer, allocation_id)
    return json_response((await render(session, [row], relations=relations))[0])


@router.patch(
    "/allocation/{allocationId}",
    operation_id="update-allocation",
    response_model=Allocation,
    summary="Rename or describe an allocation",
    openapi_extra=json_body(AllocationUpdateRequest),
)
async def update_allocation(
    org: str, allocationId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    principal.require_provider_admin(org)
    allocation_id = allocation_id_of(allocationId)
    body = await read_body(request, AllocationUpdateRequest)
    errors = FieldErrors()
    errors.add("name", name_problem(body.name, required=False))
    errors.add("description", description_problem(body.description))
    errors.raise_if_any("Error validating Allocation update request data")
    row = await allocations.update_allocation(
        session,
        await orgs.provider_of(session, org),
        allocation_id,
        name=body.name,
        description=body.description,
    )
    return json_response((await render(session, [row]))[0])


@router.delete(
    "/allocation/{allocationId}",
    operation_id="delete-allocation",
    status_code=202,
    response_model=str,
    summary="Delete an allocation (its tenant's instances must still fit in what remains reserved)",
)
async def delete_allocation(
    org: str, allocationId: str, principal: PrincipalDep, session: SessionDep
) -> Response:
    principal.require_provider_admin(org)
    allocation_id = allocation_id_of(allocationId)
    await allocations.delete_allocation(session, await orgs.provider_of(session, org), allocation_id)
    return deletion_accepted()


@router.patch(
    "/allocation/{allocationId}/constraint/{allocationConstraintId}",
    operation_id="update-allocation-constraint",
    response_model=AllocationConstraint,
    summary="Change the number of machines an allocation reserves",
    openapi_extra=json_body(AllocationConstraintUpdateRequest),
)
async def update_allocation_constraint(
    org: str,
    allocationId: str,
    allocationConstraintId: str,
    request: Request,
    principal: PrincipalDep,
    session: SessionDep,
) -> Response:
    principal.require_provider_admin(org)
    allocation_id = allocation_id_of(allocationId)
    constraint_id = parse_uuid(allocationConstraintId)
    if constraint_id is None:
        raise bad_request("Invalid Allocation Constraint ID in URL")
    try:
        body = await read_body(request, AllocationConstraintUpdateRequest)
    except ServiceError as exc:
        raise bad_request(CONSTRAINT_PARSE_ERROR, exc.data) from None
    problem = constraint_value_problem(body.constraint_value)
    if problem:
        raise bad_request(
            "Error validating Allocation Constraint update request data", {"constraintValue": problem}
        )
    assert body.constraint_value is not None
    constraint, itype = await allocations.update_constraint(
        session, await orgs.provider_of(session, org), allocation_id, constraint_id, body.constraint_value
    )
    return json_response(
        AllocationConstraint.of(constraint, InstanceTypeSummary.of(itype) if itype else None)
    )
