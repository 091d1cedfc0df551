"""``/instance`` and ``/instance/batch``: create, batch create, list, get, update, delete (spec §5,
§6), and an instance's ``/status-history`` and ``/interface`` (the reference's
get-instance-status-history and get-all-interface). TENANT_ADMIN only. ``/instance/batch`` is declared
before ``/instance/{instanceId}``."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from nico.api import messages, query
from nico.api.auth import Principal
from nico.api.deps import (
    ReadSessionDep,
    SessionDep,
    TenantAdmin,
    context_of,
    get_principal,
    request_transaction,
)
from nico.api.listing import render_page
from nico.api.openapi import json_body
from nico.api.pagination import PAGED, Page, newest_first, parse_page
from nico.api.parsing import (
    RELATIONS_DESCRIPTION,
    UUID_PATH,
    checked_body,
    checked_id,
    checked_relations,
    paging,
    parse_uuid,
    path_id,
    read_checked,
    relations,
    relations_schema,
)
from nico.api.rate_limit import RATE_LIMITED, FabricRequest, spend_fabric_token
from nico.api.rendering import (
    deletion_accepted,
    json_response,
    json_response_when_sent,
    list_response_when_sent,
)
from nico.api.routers import HotRoute
from nico.api.schemas.common import StatusDetail
from nico.api.schemas.nvlink_interface import WireKeys
from nico.instance import creation, service
from nico.instance.schemas import (
    BatchInstanceCreateRequest,
    Instance,
    InstanceCreateRequest,
    InstanceDeleteRequest,
    InstanceFields,
    InstanceInterface,
    InstanceUpdateRequest,
)
from nico.instance.service import RELATIONS
from nico.instance.views import InstanceFilter, InstanceSpec, Port
from nico.services import status

router = APIRouter(tags=["instance"])

PATH = "/instance"
ITEM = PATH + "/{instanceId}"

InstanceId = Annotated[uuid.UUID, path_id("instanceId", messages.INSTANCE_ID)]
Relations = Annotated[frozenset[str], relations(RELATIONS)]
BatchBody = Annotated[
    BatchInstanceCreateRequest,
    checked_body(BatchInstanceCreateRequest, messages.BATCH_INSTANCE_CREATE_INVALID),
]
CreateBody = Annotated[
    InstanceCreateRequest, checked_body(InstanceCreateRequest, messages.INSTANCE_CREATE_INVALID)
]
UpdateBody = Annotated[
    InstanceUpdateRequest, checked_body(InstanceUpdateRequest, messages.INSTANCE_UPDATE_INVALID)
]
DeleteBody = Annotated[
    InstanceDeleteRequest, checked_body(InstanceDeleteRequest, messages.INSTANCE_DELETE_INVALID)
]
UPDATABLE = (
    "name",
    "description",
    "labels",
    "ipxe_script",
    "user_data",
    "phone_home_enabled",
    "always_boot_with_custom_ipxe",
)


def checked_uuid(value: str | None) -> uuid.UUID:
    """A UUID the request checks have already accepted."""
    parsed = parse_uuid(value)
    assert parsed is not None
    return parsed


def spec_of(body: InstanceFields, principal: Principal) -> InstanceSpec:
    """The checked body as the service's plain data."""
    return InstanceSpec(
        vpc_id=checked_uuid(body.vpc_id),
        ports=[Port(checked_uuid(i.subnet_id), bool(i.is_physical)) for i in body.interfaces or ()],
        nvlink=[item.binding() for item in body.nv_link_interfaces] if body.nv_link_interfaces else None,
        tenant_id=parse_uuid(body.tenant_id) if body.tenant_id else None,
        description=body.description,
        ipxe_script=body.ipxe_script,
        user_data=body.user_data,
        phone_home_enabled=bool(body.phone_home_enabled),
        always_boot_with_custom_ipxe=bool(body.always_boot_with_custom_ipxe),
        labels=body.labels,
        created_by=principal.subject or None,
    )


@router.post(
    PATH + "/batch",
    operation_id="batch-create-instance",
    response_model=list[Instance],
    status_code=201,
    openapi_extra=json_body(BatchInstanceCreateRequest),
    responses=RATE_LIMITED,
    summary="Create instances on one NVLink domain",
)
async def create_batch(
    org: str,
    principal: TenantAdmin,
    body: BatchBody,
    _rate: FabricRequest,
    request: Request,
    session: SessionDep,
) -> Response:
    assert body.name_prefix is not None and body.count is not None
    created = await creation.create_batch(
        session,
        org,
        spec_of(body, principal),
        name_prefix=body.name_prefix,
        count=body.count,
        instance_type_id=checked_uuid(body.instance_type_id),
        topology_optimized=body.optimized,
        in_flight_limit=context_of(request).settings.quotas.changes_for(org),
    )
    return list_response_when_sent(lambda: [Instance.of(v) for v in created.views()], 201)


@router.post(
    PATH,
    operation_id="create-instance",
    response_model=Instance,
    status_code=201,
    openapi_extra=json_body(InstanceCreateRequest),
    responses=RATE_LIMITED,
    summary="Create an instance",
)
async def create_instance(
    org: str,
    principal: TenantAdmin,
    body: CreateBody,
    _rate: FabricRequest,
    request: Request,
    session: SessionDep,
) -> Response:
    assert body.name is not None
    created = await creation.create(
        session,
        org,
        spec_of(body, principal),
        name=body.name,
        instance_type_id=checked_uuid(body.instance_type_id) if body.instance_type_id else None,
        machine_id=body.machine_id,
        in_flight_limit=context_of(request).settings.quotas.changes_for(org),
    )
    return json_response_when_sent(lambda: Instance.of(created.views()[0]), 201)


async def create_instance_hot(request: Request) -> Response:
    """:func:`create_instance` from a route of its own ahead of every router (``HOT_ROUTES``): its
    dependencies run by hand, in the order FastAPI runs them (token, role, body, rate, then the
    request's transaction around the handler); solving them cost more CPU than their work."""
    org: str = request.path_params["org"]
    principal = await get_principal(request)
    principal.require_tenant_admin(org)
    body = await read_checked(request, InstanceCreateRequest, messages.INSTANCE_CREATE_INVALID)
    await spend_fabric_token(request, org)
    async with request_transaction(request) as session:
        return await create_instance(org, principal, body, None, request, session)


# The list's filters (spec §5.5), in the order the handler checks them.
PROVIDER_ID = query.uuids(
    "infrastructureProviderId",
    "Only instances of this infrastructure provider",
    "Invalid Infrastructure Provider ID: {value} in query",
    repeat=False,
)
OPERATING_SYSTEM_IDS = query.uuids(
    "operatingSystemId",
    "nico records no operating systems: given, the list is empty",
    "Invalid Operating System ID: {value} in query",
)
SECURITY_GROUP_IDS = query.uuids(
    "networkSecurityGroupId",
    "nico records no network security groups: given, the list is empty",
    "Invalid Network Security Group ID: {value} in query",
)
IP_ADDRESSES = query.text("ipAddress", "nico records no IP addresses: given, the list is empty", repeat=True)
SITE_IDS = query.uuids(
    "siteId",
    "Only instances at these sites (403 when the tenant is not associated with one)",
    "Invalid Site ID: {value} in query",
)
VPC_IDS = query.uuids(
    "vpcId", "Only instances in these VPCs (404 when one is unknown)", "Invalid VPC ID: {value} in query"
)
TYPE_IDS = query.uuids(
    "instanceTypeId", "Only instances of these instance types", "Invalid Instance Type ID: {value} in query"
)
MACHINE_IDS = query.text("machineId", "Only instances on these machines", repeat=True)
STATUSES = query.choice(
    "status", service.STATUSES, "Only instances in these states", "Invalid Status value in query"
)
NAME = query.text("name", "Only the instance of this name")
LIST_FILTERS = (
    PROVIDER_ID,
    OPERATING_SYSTEM_IDS,
    SECURITY_GROUP_IDS,
    IP_ADDRESSES,
    SITE_IDS,
    VPC_IDS,
    TYPE_IDS,
    MACHINE_IDS,
    STATUSES,
    NAME,
    query.SEARCH,
)


@router.get(
    PATH,
    operation_id="get-all-instance",
    response_model=list[Instance],
    responses=PAGED,
    summary="List instances",
    openapi_extra=query.declared(LIST_FILTERS),
)
async def list_instances(
    org: str,
    _: TenantAdmin,
    included: Relations,
    page: Annotated[Page, paging(service.ORDER_FIELDS)],
    request: Request,
    session: ReadSessionDep,
) -> Response:
    provider_id = PROVIDER_ID.uuid_value(request)
    # nico records no operating systems, security groups or IP addresses: filtering by them finds nothing.
    untracked = [
        OPERATING_SYSTEM_IDS.uuid_values(request),
        SECURITY_GROUP_IDS.uuid_values(request),
        IP_ADDRESSES.values(request),
    ]
    where = InstanceFilter(
        site_ids=SITE_IDS.uuid_values(request),
        vpc_ids=VPC_IDS.uuid_values(request),
        instance_type_ids=TYPE_IDS.uuid_values(request),
        machine_ids=MACHINE_IDS.values(request),
        statuses=STATUSES.values(request),
        nothing=any(untracked),
        provider_id=provider_id,
        name=NAME.value(request),
        query=query.SEARCH.value(request),
    )
    return await render_page(page, service.list_instances(session, org, where, included, page), Instance.of)


@router.get(ITEM, operation_id="get-instance", response_model=Instance, summary="Get an instance")
async def get_instance(
    org: str,
    instanceId: UUID_PATH,  # the path's name; declared format uuid like every other instance route
    request: Request,
    include_relation: Annotated[
        list[str] | None,
        Query(alias="includeRelation", description=RELATIONS_DESCRIPTION),
        relations_schema(RELATIONS),
    ] = None,
) -> Response:
    return await answer_get(request, org, instanceId, include_relation)


async def get_instance_hot(request: Request) -> Response:
    """:func:`get_instance` from a route of its own ahead of every router (``HOT_ROUTES``): the same
    parameters, read from the request (each parameter FastAPI solves costs more than its check)."""
    path = request.path_params
    relations_asked = request.query_params.getlist("includeRelation") or None
    return await answer_get(request, path["org"], path["instanceId"], relations_asked)


async def answer_get(request: Request, org: str, raw_id: str, include_relation: list[str] | None) -> Response:
    """``GET /instance/{instanceId}``, the hottest request of the API. Its checks are the functions the
    dependencies of the other routes use, in their order: token, role, ``includeRelation``, id.
    Without relations the body is the one PostgreSQL writes (:mod:`nico.instance.document`)."""
    principal = await get_principal(request)
    principal.require_tenant_admin(org)
    included = checked_relations(include_relation, RELATIONS)
    instance_id = checked_id(raw_id, messages.INSTANCE_ID)
    ctx = context_of(request)
    if not included:
        async with ctx.raw.connection() as conn:  # one statement on a raw connection
            document = await service.get_document(
                conn, org, instance_id, deprecated_partition_key=WireKeys.emit_deprecated_partition_key
            )
        if document is not None:
            return Response(document, media_type="application/json")
    async with ctx.raw.connection() as conn:
        view = await service.get(conn, org, instance_id)
    if included:
        async with ctx.read_sessions() as session:
            (view,) = await service.with_relations(session, [view], included)
    return json_response(Instance.of(view))


# Served at the front of the app (see :mod:`nico.api.front`): GET of a canonical instance id, and
# POST of an instance. Any other id, /instance/type or /instance/batch, and GET of the list, reach the
# routers as before.
HOT_ROUTES: list[HotRoute] = [
    (PATH + "/{instanceId:canonical_uuid}", get_instance_hot, ["GET"]),
    (PATH, create_instance_hot, ["POST"]),
]


@router.patch(
    ITEM,
    operation_id="update-instance",
    response_model=Instance,
    openapi_extra=json_body(InstanceUpdateRequest),
    responses=RATE_LIMITED,
    summary="Update an instance (its NVLink interfaces above all)",
)
async def update_instance(
    org: str, _: TenantAdmin, instance_id: InstanceId, body: UpdateBody, request: Request, session: SessionDep
) -> Response:
    changes: dict[str, Any] = {
        field: getattr(body, field) for field in UPDATABLE if getattr(body, field) is not None
    }
    nvlink = (
        [item.binding() for item in body.nv_link_interfaces] if body.nv_link_interfaces is not None else None
    )
    if nvlink is not None:  # a change of NVLink interfaces is a fabric change: the tenant's rate
        await spend_fabric_token(request, org)
    limit = context_of(request).settings.quotas.changes_for(org)
    view = await service.update_instance(session, org, instance_id, changes, nvlink, limit)
    return json_response(Instance.of(view))


@router.delete(
    ITEM,
    operation_id="delete-instance",
    status_code=202,
    response_model=str,
    responses=RATE_LIMITED,
    summary="Delete an instance",
)
async def delete_instance(
    org: str,
    _: TenantAdmin,
    instance_id: InstanceId,
    body: DeleteBody,
    _rate: FabricRequest,
    session: SessionDep,
) -> Response:
    issue = body.machine_health_issue
    await service.delete_instance(
        session,
        org,
        instance_id,
        repair_tenant=bool(body.is_repair_tenant),
        health_issue=(
            f"Tenant reported a {issue.category} issue: {issue.summary}"
            + (f" ({issue.details})" if issue.details else "")
            if issue is not None
            else None
        ),
    )
    return deletion_accepted()


@router.get(
    ITEM + "/status-history",
    operation_id="get-instance-status-history",
    response_model=list[StatusDetail],
    responses=PAGED,
    summary="Retrieve Instance status history",
    openapi_extra=query.declared(query.page_params(status.ORDER_FIELDS)),
)
async def instance_status_history(
    org: str, _: TenantAdmin, instance_id: InstanceId, request: Request, session: ReadSessionDep
) -> Response:
    page = parse_page(request, status.ORDER_FIELDS)
    return await render_page(
        page, service.status_history(session, org, instance_id, newest_first(page)), StatusDetail.of
    )


INTERFACE_STATUSES = query.choice(
    "status",
    service.INTERFACE_STATUSES,
    "Only interfaces in these states",
    "Invalid Status value: {value} in query",
)


@router.get(
    ITEM + "/interface",
    operation_id="get-all-interface",
    response_model=list[InstanceInterface],
    responses=PAGED,
    summary="Retrieve all Interfaces",
    openapi_extra=query.declared(query.page_params(service.INTERFACE_ORDER_FIELDS), INTERFACE_STATUSES),
)
async def instance_interfaces(
    org: str, _: TenantAdmin, instance_id: InstanceId, request: Request, session: ReadSessionDep
) -> Response:
    page = parse_page(request, service.INTERFACE_ORDER_FIELDS)
    found = service.interfaces(session, org, instance_id, INTERFACE_STATUSES.values(request), page)
    return await render_page(page, found, InstanceInterface.of)
