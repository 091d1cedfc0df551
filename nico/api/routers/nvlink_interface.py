"""``/nvlink-interface`` and ``/instance/{instanceId}/nvlink-interface``: the tenant's NVLink
interfaces (spec §4.4). TENANT_ADMIN only."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api import messages
from nico.api.deps import ReadSessionDep, SessionDep, TenantAdmin
from nico.api.listing import render_page
from nico.api.pagination import PAGED, Page
from nico.api.parsing import list_param, paging, path_id, relations, uuid_params
from nico.api.schemas.nvlink_interface import NVLinkInterface
from nico.services import nvlink_interface

router = APIRouter(tags=["nvlink-interface"])

Relations = Annotated[frozenset[str], relations(nvlink_interface.RELATIONS)]
Paging = Annotated[Page, paging(nvlink_interface.ORDER_FIELDS)]
InstanceId = Annotated[uuid.UUID, path_id("instanceId", messages.INSTANCE_ID_OF_INTERFACES)]


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
        instance_ids = uuid_params(request, "instanceId", "Invalid Instance ID: {value} in query")
    where = nvlink_interface.InterfaceFilter(
        site_ids=uuid_params(request, "siteId", "Invalid Site ID: {value} specified in query"),
        instance_ids=instance_ids,
        partition_ids=uuid_params(
            request, "nvLinkLogicalPartitionId", "Invalid NVLink Logical Partition ID: {value} in query"
        ),
        domain_ids=uuid_params(request, "nvLinkDomainId", "Invalid NVLink Domain ID: {value} in query"),
        statuses=list_param(request, "status"),
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
