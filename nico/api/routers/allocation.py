"""``/allocation``: a provider's reservations of machines for tenants, and their one constraint."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api import messages, query
from nico.api.deps import ProviderAdmin, SessionDep, Viewer
from nico.api.listing import render_page
from nico.api.openapi import json_body
from nico.api.pagination import PAGED, Page
from nico.api.parsing import (
    checked_body,
    paging,
    parse_uuid,
    path_id,
    relations,
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


# The list's filters, each repeatable but the text, in the order the handler checks them.
SITE_IDS = query.uuids(
    "siteId",
    "Only allocations at these sites (400 when one is unknown)",
    "Failed to retrieve site from request",
)
STATUSES = query.choice(
    "status", allocations.STATUSES, "Only allocations in these states", "Invalid Status value in query"
)
RESOURCE_TYPES = query.choice(
    "resourceType",
    allocations.RESOURCE_TYPES,
    "Only allocations with constraints on this kind of resource",
    "Invalid resourceType value in query: {value}",
)
RESOURCE_TYPE_IDS = query.uuids(
    "resourceTypeId",
    "Only allocations with constraints on these resources",
    "Invalid ResourceType ID in query",
)
CONSTRAINT_TYPES = query.choice(
    "constraintType",
    allocations.CONSTRAINT_TYPES,
    "Only allocations with constraints of this type",
    "Invalid constraintType value in query: {value}",
)
CONSTRAINT_VALUES = query.integer(
    "constraintValue",
    "Only allocations with constraints of this value",
    "Invalid Constraint Value in query",
    repeat=True,
)
IDS = query.uuids("id", "Only these allocations", "Invalid Allocation ID in query")
TENANT_IDS = query.uuids(
    "tenantId", "Only allocations to these tenants", "Invalid Tenant ID: {value} in query"
)


@router.get(
    "/allocation",
    operation_id="get-all-allocation",
    response_model=list[Allocation],
    responses=PAGED,
    summary="List the provider's allocations and the tenant's own",
    openapi_extra=query.declared(
        SITE_IDS,
        STATUSES,
        RESOURCE_TYPES,
        RESOURCE_TYPE_IDS,
        CONSTRAINT_TYPES,
        CONSTRAINT_VALUES,
        IDS,
        TENANT_IDS,
        query.SEARCH,
    ),
)
async def list_allocations(
    page: Paging, included: Relations, viewer: Viewer, request: Request, session: SessionDep
) -> Response:
    site_ids = []
    for value in SITE_IDS.values(request):
        parsed = parse_uuid(value)
        if parsed is None:
            raise SITE_IDS.refused(value, {"siteId": value})
        site_ids.append(parsed)
    missing = await allocations.missing_sites(session, site_ids)
    if missing:
        raise SITE_IDS.refused(str(missing[0]), {"siteId": str(missing[0])})
    statuses = STATUSES.values(request)
    for value in statuses:
        if value not in allocations.STATUSES:
            raise STATUSES.refused(value, {"status": value})
    resource_types = RESOURCE_TYPES.values(request)
    for value in resource_types:
        if value not in allocations.RESOURCE_TYPES:
            raise RESOURCE_TYPES.refused(value)
    resource_type_ids = RESOURCE_TYPE_IDS.uuid_values(request)
    constraint_types = CONSTRAINT_TYPES.values(request)
    for value in constraint_types:
        if value not in allocations.CONSTRAINT_TYPES:
            raise CONSTRAINT_TYPES.refused(value)
    constraint_values = []
    for value in CONSTRAINT_VALUES.values(request):
        try:
            constraint_values.append(int(value))
        except ValueError:
            raise CONSTRAINT_VALUES.refused(value) from None
    filters = allocations.AllocationFilters(
        site_ids=site_ids,
        statuses=statuses,
        resource_types=resource_types,
        resource_type_ids=resource_type_ids,
        constraint_types=constraint_types,
        constraint_values=constraint_values,
        ids=IDS.uuid_values(request),
        tenant_ids=TENANT_IDS.uuid_values(request),
        query=query.SEARCH.value(request),
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
