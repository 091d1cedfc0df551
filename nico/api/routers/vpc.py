"""``/vpc``: create, list, get, update (incl. the default NVLink logical partition), delete (spec §7).
TENANT_ADMIN only."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api import messages, query
from nico.api.deps import ReadSessionDep, SessionDep, TenantAdmin
from nico.api.listing import render_page
from nico.api.openapi import json_body
from nico.api.pagination import PAGED, Page
from nico.api.parsing import (
    checked_body,
    paging,
    path_id,
    relations,
)
from nico.api.rendering import deletion_accepted, json_response
from nico.api.schemas.vpc import Vpc, VpcCreateRequest, VpcUpdateRequest
from nico.services import vpc

router = APIRouter(tags=["vpc"])

PATH = "/vpc"
ITEM = PATH + "/{vpcId}"

VpcId = Annotated[uuid.UUID, path_id("vpcId", messages.VPC_ID)]
Relations = Annotated[frozenset[str], relations(vpc.RELATIONS)]
CreateBody = Annotated[VpcCreateRequest, checked_body(VpcCreateRequest, messages.VPC_CREATE_INVALID)]
UpdateBody = Annotated[VpcUpdateRequest, checked_body(VpcUpdateRequest, messages.VPC_UPDATE_INVALID)]


@router.post(
    PATH,
    operation_id="create-vpc",
    response_model=Vpc,
    status_code=201,
    openapi_extra=json_body(VpcCreateRequest),
    summary="Create a VPC",
)
async def create_vpc(org: str, _: TenantAdmin, body: CreateBody, session: SessionDep) -> Response:
    return json_response(Vpc.of(await vpc.create(session, org, body)), 201)


# The list's filters (spec §7.4), in the order the handler checks them.
PROVIDER_ID = query.uuids(
    "infrastructureProviderId",
    "Only VPCs of this infrastructure provider",
    "Invalid Infrastructure Provider ID: {value} in query",
    repeat=False,
)
SITE_IDS = query.uuids(
    "siteId",
    "Only VPCs at these sites (403 when the tenant is not associated with one)",
    "Invalid Site ID: {value} in query",
)
STATUSES = query.choice("status", vpc.STATUSES, "Only VPCs in these states", "Invalid Status value in query")
PARTITION_IDS = query.uuids(
    "nvLinkLogicalPartitionId",
    "Only VPCs whose default NVLink logical partition is one of these (400 when one is not the tenant's)",
    "Invalid NVLink Logical Partition ID: {value} in query",
)
SECURITY_GROUP_IDS = query.uuids(
    "networkSecurityGroupId",
    "nico records no network security groups: given, the list is empty",
    "Invalid Network Security Group ID: {value} in query",
)


@router.get(
    PATH,
    operation_id="get-all-vpc",
    response_model=list[Vpc],
    responses=PAGED,
    summary="List VPCs",
    openapi_extra=query.declared(
        PROVIDER_ID, SITE_IDS, STATUSES, PARTITION_IDS, SECURITY_GROUP_IDS, query.SEARCH
    ),
)
async def list_vpcs(
    org: str,
    _: TenantAdmin,
    included: Relations,
    page: Annotated[Page, paging(vpc.ORDER_FIELDS)],
    request: Request,
    session: ReadSessionDep,
) -> Response:
    provider_id = PROVIDER_ID.uuid_value(request)
    where = vpc.VpcFilter(
        site_ids=SITE_IDS.uuid_values(request),
        statuses=STATUSES.values(request),
        partition_ids=PARTITION_IDS.uuid_values(request),
        security_group_ids=SECURITY_GROUP_IDS.uuid_values(request),
        provider_id=provider_id,
        query=query.SEARCH.value(request),
    )
    return await render_page(page, vpc.list_vpcs(session, org, where, included, page), Vpc.of)


@router.get(ITEM, operation_id="get-vpc", response_model=Vpc, summary="Get a VPC")
async def get_vpc(
    org: str, _: TenantAdmin, included: Relations, vpc_id: VpcId, session: ReadSessionDep
) -> Response:
    return json_response(Vpc.of(await vpc.get(session, org, vpc_id, included)))


@router.patch(
    ITEM,
    operation_id="update-vpc",
    response_model=Vpc,
    openapi_extra=json_body(VpcUpdateRequest),
    summary="Update a VPC",
)
async def update_vpc(
    org: str,
    _: TenantAdmin,
    body: UpdateBody,
    vpc_id: Annotated[uuid.UUID, path_id("vpcId", messages.VPC_ID_UPDATE)],
    session: SessionDep,
) -> Response:
    return json_response(Vpc.of(await vpc.update(session, org, vpc_id, body)))


@router.delete(ITEM, operation_id="delete-vpc", status_code=202, response_model=str, summary="Delete a VPC")
async def delete_vpc(org: str, _: TenantAdmin, vpc_id: VpcId, session: SessionDep) -> Response:
    await vpc.delete_vpc(session, org, vpc_id)
    return deletion_accepted()
