"""``/subnet``: a tenant's thin subnets (no IP address management)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from nico.api import messages, query
from nico.api.deps import SessionDep, TenantAdmin
from nico.api.listing import render_page
from nico.api.openapi import json_body
from nico.api.pagination import PAGED, Page
from nico.api.parsing import checked_body, paging, parse_uuid, path_id, relations
from nico.api.rendering import deletion_accepted, json_response
from nico.api.schemas.subnet import Subnet, SubnetCreateRequest, SubnetUpdateRequest
from nico.services import subnet as subnets

router = APIRouter(tags=["subnet"])


async def org_tenant(org: str, session: SessionDep) -> subnets.OrgTenant:
    return await subnets.tenant_of(session, org)


SubnetId = Annotated[uuid.UUID, path_id("subnetId", messages.SUBNET_ID)]
Relations = Annotated[frozenset[str], relations(subnets.RELATIONS)]
Paging = Annotated[Page, paging(subnets.ORDER_COLUMNS)]
OrgTenant = Annotated[subnets.OrgTenant, Depends(org_tenant)]
CreateBody = Annotated[SubnetCreateRequest, checked_body(SubnetCreateRequest, messages.SUBNET_CREATE_INVALID)]
UpdateBody = Annotated[SubnetUpdateRequest, checked_body(SubnetUpdateRequest, messages.SUBNET_UPDATE_INVALID)]


@router.post(
    "/subnet",
    operation_id="create-subnet",
    response_model=Subnet,
    status_code=201,
    summary="Create a subnet in one of the tenant's VPCs (Ready at once)",
    openapi_extra=json_body(SubnetCreateRequest),
)
async def create_subnet(org: str, _: TenantAdmin, body: CreateBody, session: SessionDep) -> Response:
    vpc_id = parse_uuid(body.vpc_id)
    assert body.name is not None and vpc_id is not None
    view = await subnets.create_subnet(
        session,
        org,
        name=body.name,
        description=body.description,
        vpc_id=vpc_id,
        ipv4_block_id=parse_uuid(body.ipv4_block_id),
        prefix_length=body.prefix_length,
    )
    return json_response(Subnet.of(view), 201)


# The list's filters, in the order the handler checks them.
SITE_ID = query.uuids(
    "siteId",
    "Only subnets at this site (403 when the tenant has no access to it)",
    "Failed to retrieve Site specified in query param, invalid ID or DB error",
    repeat=False,
)
VPC_ID = query.uuids(
    "vpcId", "Only subnets of this VPC (404 when unknown)", "Invalid VPC ID in query", repeat=False
)
STATUS = query.choice(
    "status", subnets.STATUSES, "Only subnets in this state", "Invalid Status value in query", repeat=False
)


@router.get(
    "/subnet",
    operation_id="get-all-subnet",
    response_model=list[Subnet],
    responses=PAGED,
    summary="List the tenant's subnets",
    openapi_extra=query.declared(SITE_ID, VPC_ID, STATUS, query.SEARCH),
)
async def list_subnets(
    _: TenantAdmin,
    page: Paging,
    included: Relations,
    tenant: OrgTenant,
    request: Request,
    session: SessionDep,
) -> Response:
    site_id, vpc_id = SITE_ID.uuid_value(request), VPC_ID.uuid_value(request)
    wanted_status = STATUS.value(request)
    if wanted_status is not None and wanted_status not in subnets.STATUSES:
        raise STATUS.refused(wanted_status)
    filters = subnets.SubnetFilters(
        site_id=site_id, vpc_id=vpc_id, status=wanted_status, query=query.SEARCH.value(request)
    )
    found = subnets.list_subnets(session, tenant, filters, page, included)
    return await render_page(page, found, Subnet.of)


@router.get("/subnet/{subnetId}", operation_id="get-subnet", response_model=Subnet, summary="Get a subnet")
async def get_subnet(
    org: str, _: TenantAdmin, subnet_id: SubnetId, included: Relations, session: SessionDep
) -> Response:
    return json_response(Subnet.of(await subnets.get_subnet(session, org, subnet_id, included)))


@router.patch(
    "/subnet/{subnetId}",
    operation_id="update-subnet",
    response_model=Subnet,
    summary="Rename or describe a subnet",
    openapi_extra=json_body(SubnetUpdateRequest),
)
async def update_subnet(
    org: str, _: TenantAdmin, subnet_id: SubnetId, body: UpdateBody, session: SessionDep
) -> Response:
    view = await subnets.update_subnet(session, org, subnet_id, name=body.name, description=body.description)
    return json_response(Subnet.of(view))


@router.delete(
    "/subnet/{subnetId}",
    operation_id="delete-subnet",
    status_code=202,
    response_model=str,
    summary="Delete a subnet (none of the tenant's instances may use it)",
)
async def delete_subnet(org: str, _: TenantAdmin, subnet_id: SubnetId, session: SessionDep) -> Response:
    await subnets.delete_subnet(session, org, subnet_id)
    return deletion_accepted()
