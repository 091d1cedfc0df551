"""``/subnet``: a tenant's thin subnets (no IP address management)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Annotated

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api import messages
from nico.api.binding import checked_body, include_relations, parse_uuid, path_id, relations, single_param
from nico.api.deps import SessionDep, TenantAdmin
from nico.api.openapi import json_body
from nico.api.pagination import parse_page
from nico.api.rendering import deletion_accepted, json_response, paged_response
from nico.api.schemas.common import StatusDetail
from nico.api.schemas.site import SiteSummary
from nico.api.schemas.subnet import Subnet, SubnetCreateRequest, SubnetUpdateRequest
from nico.api.schemas.vpc import VpcSummary
from nico.db.enums import SubnetStatus
from nico.db.models import StatusDetail as StatusDetailRow
from nico.db.models import Subnet as SubnetRow
from nico.db.models import Tenant
from nico.services import orgs, status
from nico.services import site as sites
from nico.services import subnet as subnets
from nico.services import vpc as vpc_service
from nico.services.errors import bad_request

router = APIRouter(tags=["subnet"])

# Only Site is rendered: nico keeps no IP blocks, and Tenant renders nothing in the reference either.
RELATIONS = ("Site", "Vpc", "Tenant", "IPv4Block", "IPv6Block")
PATCH_HISTORY_LIMIT = 100
NO_TENANT = "Error retrieving Tenant from org"


SubnetId = Annotated[uuid.UUID, path_id("subnetId", messages.SUBNET_ID)]
Relations = Annotated[frozenset[str], relations(RELATIONS)]
CreateBody = Annotated[SubnetCreateRequest, checked_body(SubnetCreateRequest, messages.SUBNET_CREATE_INVALID)]
UpdateBody = Annotated[SubnetUpdateRequest, checked_body(SubnetUpdateRequest, messages.SUBNET_UPDATE_INVALID)]


async def tenant_of(session: SessionDep, org: str) -> Tenant:
    tenant = await orgs.tenant_of(session, org)
    if tenant is None:
        raise bad_request(NO_TENANT)
    return tenant


async def render(
    session: SessionDep,
    rows: Sequence[SubnetRow],
    *,
    relations: AbstractSet[str] = frozenset(),
    history: dict[uuid.UUID | str, list[StatusDetailRow]] | None = None,
) -> list[Subnet]:
    if history is None:
        history = await status.history(session, "subnet_id", [row.id for row in rows])
    at = await sites.sites_by_id(session, (row.site_id for row in rows)) if "Site" in relations else {}
    vpcs = await vpc_service.vpcs_by_id(session, (r.vpc_id for r in rows)) if "Vpc" in relations else {}
    return [
        Subnet.of(
            row,
            history.get(row.id, []),
            site=SiteSummary.of(at[row.site_id]) if row.site_id in at else None,
            vpc=VpcSummary.of(vpcs[row.vpc_id]) if row.vpc_id in vpcs else None,
        )
        for row in rows
    ]


@router.post(
    "/subnet",
    operation_id="create-subnet",
    response_model=Subnet,
    status_code=201,
    summary="Create a subnet in one of the tenant's VPCs (Ready at once)",
    openapi_extra=json_body(SubnetCreateRequest),
)
async def create_subnet(org: str, _: TenantAdmin, body: CreateBody, session: SessionDep) -> Response:
    tenant = await tenant_of(session, org)
    vpc_id = parse_uuid(body.vpc_id)
    assert body.name is not None and vpc_id is not None
    row, entries = await subnets.create_subnet(
        session,
        tenant,
        name=body.name,
        description=body.description,
        vpc_id=vpc_id,
        ipv4_block_id=parse_uuid(body.ipv4_block_id),
        prefix_length=body.prefix_length,
    )
    rendered = Subnet.of(row, entries)
    rendered.status_history = StatusDetail.many(entries)
    return json_response(rendered, 201)


@router.get(
    "/subnet", operation_id="get-all-subnet", response_model=list[Subnet], summary="List the tenant's subnets"
)
async def list_subnets(org: str, _: TenantAdmin, request: Request, session: SessionDep) -> Response:
    page = parse_page(request, frozenset(subnets.ORDER_COLUMNS))
    relations = include_relations(request, RELATIONS)
    tenant = await tenant_of(session, org)
    raw_site, raw_vpc = single_param(request, "siteId"), single_param(request, "vpcId")
    site_id = parse_uuid(raw_site) if raw_site is not None else None
    if raw_site is not None and site_id is None:
        raise bad_request("Failed to retrieve Site specified in query param, invalid ID or DB error")
    vpc_id = parse_uuid(raw_vpc) if raw_vpc is not None else None
    if raw_vpc is not None and vpc_id is None:
        raise bad_request("Invalid VPC ID in query")
    wanted_status = single_param(request, "status")
    if wanted_status is not None and wanted_status not in set(SubnetStatus):
        raise bad_request("Invalid Status value in query")
    filters = subnets.SubnetFilters(
        site_id=site_id, vpc_id=vpc_id, status=wanted_status, query=request.query_params.get("query")
    )
    rows, total = await subnets.list_subnets(session, tenant, filters, page)
    return paged_response(await render(session, rows, relations=relations), page, total)


@router.get("/subnet/{subnetId}", operation_id="get-subnet", response_model=Subnet, summary="Get a subnet")
async def get_subnet(
    org: str, _: TenantAdmin, subnet_id: SubnetId, included: Relations, session: SessionDep
) -> Response:
    tenant = await tenant_of(session, org)
    row = await subnets.own_subnet(session, tenant, subnet_id)
    return json_response((await render(session, [row], relations=included))[0])


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
    tenant = await tenant_of(session, org)
    row = await subnets.update_subnet(
        session, tenant, subnet_id, name=body.name, description=body.description
    )
    history = await status.history(session, "subnet_id", [row.id], limit=PATCH_HISTORY_LIMIT)
    return json_response((await render(session, [row], history=history))[0])


@router.delete(
    "/subnet/{subnetId}",
    operation_id="delete-subnet",
    status_code=202,
    response_model=str,
    summary="Delete a subnet (none of the tenant's instances may use it)",
)
async def delete_subnet(org: str, _: TenantAdmin, subnet_id: SubnetId, session: SessionDep) -> Response:
    await subnets.delete_subnet(session, await tenant_of(session, org), subnet_id)
    return deletion_accepted()
