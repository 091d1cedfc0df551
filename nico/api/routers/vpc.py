"""``/vpc``: create, list, get, update (incl. the default NVLink logical partition), delete (spec §7).
TENANT_ADMIN only."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api import messages
from nico.api.deps import ReadSessionDep, SessionDep, TenantAdmin
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
    single_param,
    uuid_params,
)
from nico.api.rendering import deletion_accepted, json_response
from nico.api.schemas.vpc import Vpc, VpcCreateRequest, VpcUpdateRequest
from nico.services import vpc
from nico.services.errors import bad_request

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


@router.get(PATH, operation_id="get-all-vpc", response_model=list[Vpc], responses=PAGED, summary="List VPCs")
async def list_vpcs(
    org: str,
    _: TenantAdmin,
    included: Relations,
    page: Annotated[Page, paging(vpc.ORDER_FIELDS)],
    request: Request,
    session: ReadSessionDep,
) -> Response:
    raw_provider = single_param(request, "infrastructureProviderId")
    provider_id = parse_uuid(raw_provider) if raw_provider is not None else None
    if raw_provider is not None and provider_id is None:
        raise bad_request(f"Invalid Infrastructure Provider ID: {raw_provider} in query")
    where = vpc.VpcFilter(
        site_ids=uuid_params(request, "siteId", "Invalid Site ID: {value} in query"),
        statuses=list_param(request, "status"),
        partition_ids=uuid_params(
            request, "nvLinkLogicalPartitionId", "Invalid NVLink Logical Partition ID: {value} in query"
        ),
        security_group_ids=uuid_params(
            request, "networkSecurityGroupId", "Invalid Network Security Group ID: {value} in query"
        ),
        provider_id=provider_id,
        query=single_param(request, "query"),
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
