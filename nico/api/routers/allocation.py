"""``/allocation``: a provider's reservations of machines for tenants, and their one constraint."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api import messages
from nico.api.deps import ProviderAdmin, SessionDep, Viewer
from nico.api.listing import render_page
from nico.api.openapi import json_body
from nico.api.pagination import PAGED, Page
from nico.api.parsing import (
    checked_body,
    list_param,
    paging,
    parse_uuid,
    path_id,
    relations,
    uuid_params,
)
from nico.api.rendering import deletion_accepted, json_response
from nico.api.schemas.allocation import (
    Allocation,
    AllocationConstraint,
    AllocationConstraintUpdateRequest,
    AllocationCreateRequest,
    AllocationUpdateRequest,
)
from nico.services import allocation as allocations
from nico.services.errors import bad_request

router = APIRouter(tags=["allocation"])

AllocationId = Annotated[uuid.UUID, path_id("allocationId", messages.ALLOCATION_ID)]
ConstraintId = Annotated[uuid.UUID, path_id("allocationConstraintId", messages.ALLOCATION_CONSTRAINT_ID)]
Relations = Annotated[frozenset[str], relations(allocations.RELATIONS)]
Paging = Annotated[Page, paging(allocations.ORDER_COLUMNS)]
CreateBody = Annotated[
    AllocationCreateRequest, checked_body(AllocationCreateRequest, messages.ALLOCATION_CREATE_INVALID)
]
UpdateBody = Annotated[
    AllocationUpdateRequest, checked_body(AllocationUpdateRequest, messages.ALLOCATION_UPDATE_INVALID)
]
ConstraintBody = Annotated[
    AllocationConstraintUpdateRequest,
    checked_body(
        AllocationConstraintUpdateRequest,
        messages.ALLOCATION_CONSTRAINT_UPDATE_INVALID,
        messages.ALLOCATION_CONSTRAINT_PARSE_ERROR,
    ),
]


def checked_uuid(value: str | None) -> uuid.UUID:
    """A UUID the body checks have already accepted."""
    parsed = parse_uuid(value)
    assert parsed is not None
    return parsed


@router.post(
    "/allocation",
    operation_id="create-allocation",
    response_model=Allocation,
    status_code=201,
    summary="Reserve machines of an instance type at a site for a tenant",
    openapi_extra=json_body(AllocationCreateRequest),
)
async def create_allocation(org: str, _: ProviderAdmin, body: CreateBody, session: SessionDep) -> Response:
    item = (body.allocation_constraints or [])[0]
    assert body.name and item.resource_type and item.constraint_type and item.constraint_value is not None
    view = await allocations.create_allocation(
        session,
        org,
        name=body.name,
        description=body.description,
        tenant_id=checked_uuid(body.tenant_id),
        site_id=checked_uuid(body.site_id),
        constraint=allocations.ConstraintSpec(
            item.resource_type,
            checked_uuid(item.resource_type_id),
            item.constraint_type,
            item.constraint_value,
        ),
    )
    return json_response(Allocation.of(view), 201)


@router.get(
    "/allocation",
    operation_id="get-all-allocation",
    response_model=list[Allocation],
    responses=PAGED,
    summary="List the provider's allocations and the tenant's own",
)
async def list_allocations(
    page: Paging, included: Relations, viewer: Viewer, request: Request, session: SessionDep
) -> Response:
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
        if value not in allocations.STATUSES:
            raise bad_request("Invalid Status value in query", {"status": value})
    resource_types = list_param(request, "resourceType")
    for value in resource_types:
        if value not in allocations.RESOURCE_TYPES:
            raise bad_request(f"Invalid resourceType value in query: {value}")
    resource_type_ids = uuid_params(request, "resourceTypeId", "Invalid ResourceType ID in query")
    constraint_types = list_param(request, "constraintType")
    for value in constraint_types:
        if value not in allocations.CONSTRAINT_TYPES:
            raise bad_request(f"Invalid constraintType value in query: {value}")
    constraint_values = []
    for value in list_param(request, "constraintValue"):
        try:
            constraint_values.append(int(value))
        except ValueError:
            raise bad_request("Invalid Constraint Value in query") from None
    filters = allocations.AllocationFilters(
        site_ids=site_ids,
        statuses=statuses,
        resource_types=resource_types,
        resource_type_ids=resource_type_ids,
        constraint_types=constraint_types,
        constraint_values=constraint_values,
        ids=uuid_params(request, "id", "Invalid Allocation ID in query"),
        tenant_ids=uuid_params(request, "tenantId", "Invalid Tenant ID: {value} in query"),
        query=request.query_params.get("query"),
    )
    found = allocations.list_allocations(session, viewer, filters, page, included)
    return await render_page(page, found, Allocation.of)


@router.get(
    "/allocation/{allocationId}",
    operation_id="get-allocation",
    response_model=Allocation,
    summary="Get an allocation",
)
async def get_allocation(
    viewer: Viewer, allocation_id: AllocationId, included: Relations, session: SessionDep
) -> Response:
    return json_response(
        Allocation.of(await allocations.visible_allocation(session, viewer, allocation_id, included))
    )


@router.patch(
    "/allocation/{allocationId}",
    operation_id="update-allocation",
    response_model=Allocation,
    summary="Rename or describe an allocation",
    openapi_extra=json_body(AllocationUpdateRequest),
)
async def update_allocation(
    org: str, _: ProviderAdmin, allocation_id: AllocationId, body: UpdateBody, session: SessionDep
) -> Response:
    view = await allocations.update_allocation(
        session, org, allocation_id, name=body.name, description=body.description
    )
    return json_response(Allocation.of(view))


@router.delete(
    "/allocation/{allocationId}",
    operation_id="delete-allocation",
    status_code=202,
    response_model=str,
    summary="Delete an allocation (its tenant's instances must still fit in what remains reserved)",
)
async def delete_allocation(
    org: str, _: ProviderAdmin, allocation_id: AllocationId, session: SessionDep
) -> Response:
    await allocations.delete_allocation(session, org, allocation_id)
    return deletion_accepted()


@router.patch(
    "/allocation/{allocationId}/constraint/{allocationConstraintId}",
    operation_id="update-allocation-constraint",
    response_model=AllocationConstraint,
    summary="Change the number of machines an allocation reserves",
    openapi_extra=json_body(AllocationConstraintUpdateRequest, required=True),  # constraintValue is required
)
async def update_allocation_constraint(
    org: str,
    _: ProviderAdmin,
    allocation_id: AllocationId,
    constraint_id: ConstraintId,
    body: ConstraintBody,
    session: SessionDep,
) -> Response:
    assert body.constraint_value is not None
    view = await allocations.update_constraint(
        session, org, allocation_id, constraint_id, body.constraint_value
    )
    return json_response(AllocationConstraint.of(view))
