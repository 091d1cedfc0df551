"""``/nvlink-interface`` and ``/instance/{instanceId}/nvlink-interface``: the tenant's NVLink
interfaces (spec §4.4). TENANT_ADMIN only."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api import messages, query
from nico.api.deps import ReadSessionDep, SessionDep, TenantAdmin
from nico.api.listing import render_page
from nico.api.pagination import PAGED, Page
from nico.api.parsing import paging, path_id, relations
from nico.api.schemas.nvlink_interface import NVLinkInterface
from nico.services import nvlink_interface

router = APIRouter(tags=["nvlink-interface"])

Relations = Annotated[frozenset[str], relations(nvlink_interface.RELATIONS)]
Paging = Annotated[Page, paging(nvlink_interface.ORDER_FIELDS)]
InstanceId = Annotated[uuid.UUID, path_id("instanceId", messages.INSTANCE_ID_OF_INTERFACES)]

# The filters (spec §4.4), each repeatable, in the order the handler checks them.
INSTANCE_IDS = query.uuids(
    "instanceId", "Only interfaces of these instances", "Invalid Instance ID: {value} in query"
)
SITE_IDS = query.uuids(
    "siteId", "Only interfaces at these sites", "Invalid Site ID: {value} specified in query"
)
PARTITION_IDS = query.uuids(
    "nvLinkLogicalPartitionId",
    "Only interfaces in these logical partitions (403 when one is not the tenant's)",
    "Invalid NVLink Logical Partition ID: {value} in query",
)
DOMAIN_IDS = query.uuids(
    "nvLinkDomainId", "Only interfaces in these NVLink domains", "Invalid NVLink Domain ID: {value} in query"
)
STATUSES = query.choice(
    "status",
    nvlink_interface.STATUSES,
    "Only interfaces in these states",
    "Invalid Status value: {value} in query",
)


async def _list(
    org: str,
    request: Request,
    session: SessionDep,
    included: frozenset[str],
    page: Page,
    path_instance: uuid.UUID | None,
) -> Response:
    if path_instance is not None:
        instance_ids = [path_instance]
    else:
        instance_ids = INSTANCE_IDS.uuid_values(request)
    where = nvlink_interface.InterfaceFilter(
        site_ids=SITE_IDS.uuid_values(request),
        instance_ids=instance_ids,
        partition_ids=PARTITION_IDS.uuid_values(request),
        domain_ids=DOMAIN_IDS.uuid_values(request),
        statuses=STATUSES.values(request),
        in_path=path_instance is not None,
    )
    found = nvlink_interface.list_interfaces(session, org, where, included, page)
    return await render_page(page, found, NVLinkInterface.of)


@router.get(
    "/nvlink-interface",
    operation_id="get-all-nvlink-interface",
    response_model=list[NVLinkInterface],
    responses=PAGED,
    summary="List the tenant's NVLink interfaces",
    openapi_extra=query.declared(INSTANCE_IDS, SITE_IDS, PARTITION_IDS, DOMAIN_IDS, STATUSES),
)
async def list_interfaces(
    org: str, _: TenantAdmin, included: Relations, page: Paging, request: Request, session: ReadSessionDep
) -> Response:
    return await _list(org, request, session, included, page, None)


@router.get(
    "/instance/{instanceId}/nvlink-interface",
    operation_id="get-all-instance-nvlink-interface",
    response_model=list[NVLinkInterface],
    responses=PAGED,
    summary="List an instance's NVLink interfaces",
    openapi_extra=query.declared(SITE_IDS, PARTITION_IDS, DOMAIN_IDS, STATUSES),
)
async def list_instance_interfaces(
    org: str,
    _: TenantAdmin,
    included: Relations,
    page: Paging,
    instance_id: InstanceId,
    request: Request,
    session: ReadSessionDep,
) -> Response:
    return await _list(org, request, session, included, page, instance_id)
