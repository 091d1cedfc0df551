"""``/nvlink-logical-partition``: create, list, get, update, delete (spec §3). TENANT_ADMIN only."""

from __future__ import annotations

import uuid
from contextlib import nullcontext
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from nico.api import messages, query
from nico.api.deps import CtxDep, ReadSessionDep, SessionDep, TenantAdmin
from nico.api.listing import render_page
from nico.api.openapi import json_body
from nico.api.pagination import PAGED, Page
from nico.api.parsing import checked_body, paging, parse_uuid, path_id, relations
from nico.api.rate_limit import RATE_LIMITED, FabricRequest
from nico.api.rendering import deletion_accepted, json_response
from nico.logical_partition import service as partition
from nico.logical_partition.schemas import (
    LogicalPartitionCreateRequest,
    LogicalPartitionUpdateRequest,
    NVLinkLogicalPartition,
)

router = APIRouter(tags=["nvlink-logical-partition"])

PATH = "/nvlink-logical-partition"
ITEM = PATH + "/{nvLinkLogicalPartitionId}"
RELATIONS = ("Site", "Tenant")


# What a partition is answered with (spec §3.3), read by ``includes`` in this order.
WITH_INTERFACES = query.flag("includeInterfaces", "Attach each partition's NVLink interfaces")
WITH_VPCS = query.flag("includeVpcs", "Attach the VPCs whose default partition it is")
WITH_STATS = query.flag("includeStats", "Attach the partition's interface counts by status")
# The list's filters, read after those.
SITE_ID = query.uuids(
    "siteId",
    "Only partitions at this site (400 when unknown, 403 when the tenant has no access to it)",
    partition.BAD_SITE,
    repeat=False,
)
STATUS = query.choice(
    "status",
    partition.STATUSES,
    "Only partitions in this state",
    "Invalid Status value in query",
    repeat=False,
)


async def includes(
    included: Annotated[frozenset[str], relations(RELATIONS)], request: Request
) -> partition.Include:
    return partition.Include(
        relations=included,
        interfaces=WITH_INTERFACES.boolean(request),
        vpcs=WITH_VPCS.boolean(request),
        stats=WITH_STATS.boolean(request),
    )


PartitionId = Annotated[uuid.UUID, path_id("nvLinkLogicalPartitionId", messages.PARTITION_ID)]
Includes = Annotated[partition.Include, Depends(includes)]
CreateBody = Annotated[
    LogicalPartitionCreateRequest,
    checked_body(LogicalPartitionCreateRequest, messages.PARTITION_CREATE_INVALID),
]
UpdateBody = Annotated[
    LogicalPartitionUpdateRequest,
    checked_body(LogicalPartitionUpdateRequest, messages.PARTITION_UPDATE_INVALID),
]


@router.post(
    PATH,
    operation_id="create-nvlink-logical-partition",
    response_model=NVLinkLogicalPartition,
    status_code=201,
    openapi_extra=json_body(LogicalPartitionCreateRequest),
    responses=RATE_LIMITED,
    summary="Create an NVLink logical partition",
)
async def create_partition(
    org: str, principal: TenantAdmin, body: CreateBody, _rate: FabricRequest, ctx: CtxDep
) -> Response:
    site_id = parse_uuid(body.site_id)
    assert site_id is not None and body.name is not None
    reservation = body.wanted_reservation()
    # a hot path: two statements, no session (one transaction when a reservation comes with it)
    async with (
        ctx.raw.connection() as conn,
        conn.transaction() if reservation and reservation.count else nullcontext(),
    ):
        view = await partition.create(
            conn,
            org,
            name=body.name,
            description=body.description,
            site_id=site_id,
            created_by=principal.subject or None,
            multicast_groups_limit=body.multicast_groups_limit,
            single_nvlink_domain=bool(body.single_nv_link_domain),
            reservation=reservation,
            quota=ctx.settings.quotas.partitions_for(org),
        )
    return json_response(NVLinkLogicalPartition.of(view), 201)


@router.get(
    PATH,
    operation_id="get-all-nvlink-logical-partition",
    response_model=list[NVLinkLogicalPartition],
    responses=PAGED,
    summary="List NVLink logical partitions",
    openapi_extra=query.declared(WITH_INTERFACES, WITH_VPCS, WITH_STATS, SITE_ID, STATUS, query.SEARCH),
)
async def list_partitions(
    org: str,
    _: TenantAdmin,
    include: Includes,
    page: Annotated[Page, paging(partition.ORDER_FIELDS)],
    request: Request,
    session: ReadSessionDep,
) -> Response:
    found = partition.list_partitions(
        session,
        org,
        site_id=SITE_ID.uuid_value(request),
        status_value=STATUS.value(request),
        query=query.SEARCH.value(request),
        include=include,
        page=page,
    )
    return await render_page(page, found, NVLinkLogicalPartition.of)


@router.get(
    ITEM,
    operation_id="get-nvlink-logical-partition",
    response_model=NVLinkLogicalPartition,
    summary="Get an NVLink logical partition",
    openapi_extra=query.declared(WITH_INTERFACES, WITH_VPCS, WITH_STATS),
)
async def get_partition(
    org: str,
    _: TenantAdmin,
    include: Includes,
    partition_id: Annotated[uuid.UUID, path_id("nvLinkLogicalPartitionId", messages.PARTITION_ID_GET)],
    session: ReadSessionDep,
) -> Response:
    return json_response(NVLinkLogicalPartition.of(await partition.get(session, org, partition_id, include)))


@router.patch(
    ITEM,
    operation_id="update-nvlink-logical-partition",
    response_model=NVLinkLogicalPartition,
    openapi_extra=json_body(LogicalPartitionUpdateRequest),
    summary="Rename or re-describe an NVLink logical partition, or change where its GPUs may go",
)
async def update_partition(
    org: str, _: TenantAdmin, partition_id: PartitionId, body: UpdateBody, session: SessionDep
) -> Response:
    view = await partition.update(
        session,
        org,
        partition_id,
        name=body.name,
        description=body.description,
        single_nvlink_domain=body.single_nv_link_domain,
        reservation=body.wanted_reservation(),
    )
    return json_response(NVLinkLogicalPartition.of(view))


@router.delete(
    ITEM,
    operation_id="delete-nvlink-logical-partition",
    status_code=202,
    response_model=str,
    responses=RATE_LIMITED,
    summary="Delete an NVLink logical partition",
)
async def delete_partition(
    org: str, _: TenantAdmin, partition_id: PartitionId, _rate: FabricRequest, session: SessionDep
) -> Response:
    await partition.delete_partition(session, org, partition_id)
    return deletion_accepted()
