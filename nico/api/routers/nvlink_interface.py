"""``/nvlink-interface`` and ``/instance/{instanceId}/nvlink-interface``: the tenant's NVLink
interfaces (spec §4.4). TENANT_ADMIN only."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api.binding import include_relations, list_param, parse_uuid, uuid_params
from nico.api.deps import PrincipalDep, ReadSessionDep, SessionDep
from nico.api.pagination import parse_page
from nico.api.rendering import paged_response
from nico.api.schemas.nvlink_interface import NVLinkInterface
from nico.services import nvlink_interface
from nico.services.errors import bad_request

router = APIRouter(tags=["nvlink-interface"])


async def _list(
    org: str, request: Request, principal: PrincipalDep, session: SessionDep, path_instance: str | None
) -> Response:
    principal.require_tenant_admin(org)
    relations = frozenset(include_relations(request, nvlink_interface.RELATIONS))
    page = parse_page(request, nvlink_interface.ORDER_FIELDS)
    if path_instance is not None:
        instance_id = parse_uuid(path_instance)
        if instance_id is None:
            raise bad_request(f"Invalid Instance ID: {path_instance} specified in request")
        instance_ids = [instance_id]
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
    views, total = await nvlink_interface.list_interfaces(session, org, where, relations, page)
    return paged_response([NVLinkInterface.of(v) for v in views], page, total)


@router.get(
    "/nvlink-interface",
    operation_id="get-all-nvlink-interface",
    response_model=list[NVLinkInterface],
    summary="List the tenant's NVLink interfaces",
)
async def list_interfaces(
    org: str, request: Request, principal: PrincipalDep, session: ReadSessionDep
) -> Response:
    return await _list(org, request, principal, session, None)


@router.get(
    "/instance/{instanceId}/nvlink-interface",
    operation_id="get-all-instance-nvlink-interface",
    response_model=list[NVLinkInterface],
    summary="List an instance's NVLink interfaces",
)
async def list_instance_interfaces(
    org: str, instanceId: str, request: Request, principal: PrincipalDep, session: ReadSessionDep
) -> Response:
    return await _list(org, request, principal, session, instanceId)
