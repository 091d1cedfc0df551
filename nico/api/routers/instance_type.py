"""``/instance/type``: instance types with their capabilities, and their machine associations.

Mounted before the tenant-side ``instance`` router so that ``/instance/type`` is never read as an
instance id.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from nico.api import messages, query
from nico.api.deps import ProviderAdmin, ProviderOrTenant, SessionDep, Viewer
from nico.api.listing import render_page
from nico.api.openapi import json_body
from nico.api.pagination import PAGED, Page
from nico.api.parsing import (
    checked_body,
    paging,
    parse_uuid,
    path_id,
    path_text,
    relations,
)
from nico.api.rendering import deletion_accepted, json_response, list_response
from nico.api.schemas.instance_type import (
    InstanceType,
    InstanceTypeCreateRequest,
    InstanceTypeUpdateRequest,
    MachineAssociationRequest,
    MachineInstanceType,
)
from nico.services import instance_type as types
from nico.services.errors import forbidden

router = APIRouter(tags=["instance-type"])

TypeId = Annotated[uuid.UUID, path_id("instanceTypeId", messages.INSTANCE_TYPE_ID)]


async def owned(org: str, type_id: TypeId, session: SessionDep) -> types.OwnedInstanceType:
    """The org's provider's instance type, locked for the change the handler makes."""
    return await types.org_instance_type(session, org, type_id, lock=True)


async def owned_for_machines(org: str, type_id: TypeId, session: SessionDep) -> types.OwnedInstanceType:
    return await types.org_instance_type(session, org, type_id, missing="Instance Type not found")


async def owned_for_machine_removal(
    org: str, type_id: TypeId, session: SessionDep
) -> types.OwnedInstanceType:
    return await types.org_instance_type(session, org, type_id, missing="Instance Type not found", lock=True)


Owned = Annotated[types.OwnedInstanceType, Depends(owned)]
OwnedForMachines = Annotated[types.OwnedInstanceType, Depends(owned_for_machines)]
OwnedForMachineRemoval = Annotated[types.OwnedInstanceType, Depends(owned_for_machine_removal)]
Relations = Annotated[frozenset[str], relations(types.RELATIONS)]
Paging = Annotated[Page, paging(types.ORDER_COLUMNS)]
AssociationPaging = Annotated[Page, paging(types.ASSOCIATION_ORDER_COLUMNS)]
CreateBody = Annotated[
    InstanceTypeCreateRequest, checked_body(InstanceTypeCreateRequest, messages.INSTANCE_TYPE_CREATE_INVALID)
]
UpdateBody = Annotated[
    InstanceTypeUpdateRequest, checked_body(InstanceTypeUpdateRequest, messages.INSTANCE_TYPE_UPDATE_INVALID)
]
AssociationBody = Annotated[
    MachineAssociationRequest,
    checked_body(MachineAssociationRequest, messages.MACHINE_ASSOCIATION_CREATE_INVALID),
]


WITH_ASSIGNMENT = query.flag(
    "includeMachineAssignment", "Attach the machines associated (provider only: 403 for a tenant)"
)
WITH_STATS = query.flag("includeAllocationStats", "Attach the allocation counts")
# The list's filters, in the order the handler checks them (the two above between STATUS and the last).
SITE_ID = query.uuids("siteId", "Only instance types at this site", "Invalid Site ID in query", repeat=False)
STATUS = query.choice(
    "status",
    types.STATUSES,
    "Only instance types in this state",
    "Invalid Status value in query",
    repeat=False,
)
EXCLUDE_UNALLOCATED = query.flag(
    "excludeUnallocated",
    "Tenant only (403 for a provider): leave out types the tenant holds no allocation for",
)


def assignment_wanted(request: Request, viewer: Viewer) -> bool:
    with_associations = WITH_ASSIGNMENT.boolean(request)
    if with_associations and viewer.provider is None:
        raise forbidden("Only Provider can specify query param `includeMachineAssignment`")
    return with_associations


@router.post(
    "/instance/type",
    operation_id="create-instance-type",
    response_model=InstanceType,
    status_code=201,
    summary="Create an instance type at a site",
    openapi_extra=json_body(InstanceTypeCreateRequest),
)
async def create_instance_type(org: str, _: ProviderAdmin, body: CreateBody, session: SessionDep) -> Response:
    site_id = parse_uuid(body.site_id)
    assert body.name is not None and site_id is not None
    view = await types.create_instance_type(
        session,
        org,
        name=body.name,
        description=body.description,
        site_id=site_id,
        labels=body.labels,
        controller_machine_type=body.controller_machine_type,
        capabilities=[item.spec() for item in body.machine_capabilities or []],
    )
    return json_response(InstanceType.of(view), 201)


@router.get(
    "/instance/type",
    operation_id="get-all-instance-type",
    response_model=list[InstanceType],
    responses=PAGED,
    summary="List the instance types of the org's provider and those at its tenant's sites",
    openapi_extra=query.declared(
        SITE_ID, STATUS, WITH_ASSIGNMENT, WITH_STATS, EXCLUDE_UNALLOCATED, query.SEARCH
    ),
)
async def list_instance_types(
    _: ProviderOrTenant,
    page: Paging,
    included: Relations,
    viewer: Viewer,
    request: Request,
    session: SessionDep,
) -> Response:
    site_id = SITE_ID.uuid_value(request)
    wanted_status = STATUS.value(request)
    if wanted_status is not None and wanted_status not in types.STATUSES:
        raise STATUS.refused(wanted_status)
    with_associations = assignment_wanted(request, viewer)
    with_stats = WITH_STATS.boolean(request)
    exclude_unallocated = EXCLUDE_UNALLOCATED.boolean(request)
    if exclude_unallocated and viewer.tenant is None:
        raise forbidden("Only Tenant can specify query param `excludeUnallocated`")
    filters = types.InstanceTypeFilters(
        site_id=site_id,
        status=wanted_status,
        query=query.SEARCH.value(request),
        exclude_unallocated=exclude_unallocated,
    )
    found = types.list_instance_types(
        session,
        viewer,
        filters,
        page,
        relations=included,
        with_associations=with_associations,
        with_stats=with_stats,
    )
    return await render_page(page, found, InstanceType.of)


@router.get(
    "/instance/type/{instanceTypeId}",
    operation_id="get-instance-type",
    response_model=InstanceType,
    summary="Get an instance type",
    openapi_extra=query.declared(WITH_ASSIGNMENT, WITH_STATS),
)
async def get_instance_type(
    viewer: Viewer, type_id: TypeId, included: Relations, request: Request, session: SessionDep
) -> Response:
    view = await types.get_instance_type(
        session,
        viewer,
        type_id,
        relations=included,
        with_associations=assignment_wanted(request, viewer),
        with_stats=WITH_STATS.boolean(request),
    )
    return json_response(InstanceType.of(view))


@router.patch(
    "/instance/type/{instanceTypeId}",
    operation_id="update-instance-type",
    response_model=InstanceType,
    summary="Update an instance type (capabilities only while no machine is associated)",
    openapi_extra=json_body(InstanceTypeUpdateRequest),
    responses={412: {"description": "Capabilities changed while machines are associated"}},
)
async def update_instance_type(
    _: ProviderAdmin, owned: Owned, body: UpdateBody, session: SessionDep
) -> Response:
    changes = types.InstanceTypeChanges(
        name=body.name,
        description=body.description,
        labels=body.labels,
        capabilities=[item.spec() for item in body.machine_capabilities]
        if body.machine_capabilities is not None
        else None,
    )
    return json_response(InstanceType.of(await types.update_instance_type(session, owned, changes)))


@router.delete(
    "/instance/type/{instanceTypeId}",
    operation_id="delete-instance-type",
    status_code=202,
    response_model=str,
    summary="Delete an instance type (no instances or allocations may use it)",
)
async def delete_instance_type(_: ProviderAdmin, owned: Owned, session: SessionDep) -> Response:
    await types.delete_instance_type(session, owned)
    return deletion_accepted()


@router.post(
    "/instance/type/{instanceTypeId}/machine",
    operation_id="create-instance-type-machine-association",
    response_model=list[MachineInstanceType],
    status_code=201,
    summary="Associate machines with an instance type",
    openapi_extra=json_body(MachineAssociationRequest),
)
async def create_association(
    _: ProviderAdmin, owned: OwnedForMachines, body: AssociationBody, session: SessionDep
) -> Response:
    assert body.machine_ids is not None
    created = await types.associate(session, owned, body.machine_ids)
    return list_response([MachineInstanceType.of(item) for item in created], 201)


@router.get(
    "/instance/type/{instanceTypeId}/machine",
    operation_id="get-instance-type-machine-association",
    response_model=list[MachineInstanceType],
    responses=PAGED,
    summary="List the machines associated with an instance type",
)
async def list_associations(
    _: ProviderAdmin, owned: OwnedForMachines, page: AssociationPaging, session: SessionDep
) -> Response:
    found = types.list_associations(session, owned, page)
    return await render_page(page, found, MachineInstanceType.of)


@router.delete(
    "/instance/type/{instanceTypeId}/machine/{machineAssociationId}",
    operation_id="delete-instance-type-machine-association",
    status_code=202,
    response_model=str,
    summary="Dissociate a machine (by machine id, or the deprecated association id) from an instance type",
)
async def delete_association(
    _: ProviderAdmin,
    owned: OwnedForMachineRemoval,
    ref: Annotated[str, path_text("machineAssociationId")],
    session: SessionDep,
) -> Response:
    await types.dissociate(session, owned, ref)
    return deletion_accepted()
