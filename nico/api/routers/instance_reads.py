"""``/instance/{instanceId}/status-history`` and ``/instance/{instanceId}/interface`` (the
reference's get-instance-status-history and get-all-interface). TENANT_ADMIN of the instance's
tenant."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api import messages
from nico.api.deps import ReadSessionDep, TenantAdmin
from nico.api.pagination import PAGED, newest_first, parse_page
from nico.api.parsing import list_param, path_id
from nico.api.rendering import paged_response
from nico.api.schemas.common import StatusDetail
from nico.api.schemas.instance import InstanceInterface
from nico.services import instance_reads, status

router = APIRouter(tags=["instance"])

InstanceId = Annotated[uuid.UUID, path_id("instanceId", messages.INSTANCE_ID)]


@router.get(
    "/instance/{instanceId}/status-history",
    operation_id="get-instance-status-history",
    response_model=list[StatusDetail],
    responses=PAGED,
    summary="Retrieve Instance status history",
)
async def instance_status_history(
    org: str, _: TenantAdmin, instance_id: InstanceId, request: Request, session: ReadSessionDep
) -> Response:
    page = parse_page(request, status.ORDER_FIELDS)
    entries, total = await instance_reads.status_history(session, org, instance_id, newest_first(page))
    return paged_response(StatusDetail.many(entries), page, total)


@router.get(
    "/instance/{instanceId}/interface",
    operation_id="get-all-interface",
    response_model=list[InstanceInterface],
    responses=PAGED,
    summary="Retrieve all Interfaces",
)
async def instance_interfaces(
    org: str, _: TenantAdmin, instance_id: InstanceId, request: Request, session: ReadSessionDep
) -> Response:
    page = parse_page(request, instance_reads.INTERFACE_ORDER_FIELDS)
    rows, total = await instance_reads.interfaces(
        session, org, instance_id, list_param(request, "status"), page
    )
    return paged_response(
        [InstanceInterface.model_validate(r, from_attributes=True) for r in rows], page, total
    )
