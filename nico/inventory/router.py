"""``/machine``: the provider's machines (and what privileged tenants may see of them), plus nico's bulk
registration, which stands in for the reference's site-agent inventory."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from nico.api import messages, query
from nico.api.auth import PROVIDER_ADMIN, PROVIDER_VIEWER, TENANT_ADMIN
from nico.api.deps import PrincipalDep, ProviderAdmin, SessionDep
from nico.api.listing import render_page
from nico.api.openapi import json_body
from nico.api.pagination import PAGED, Page, newest_first, parse_page
from nico.api.parsing import (
    checked_body,
    paging,
    parse_uuid,
    path_text,
    relations,
)
from nico.api.query import QueryParam
from nico.api.rendering import json_response
from nico.api.schemas.common import StatusDetail
from nico.inventory import service as machines
from nico.inventory.schemas import (
    Machine,
    MachineRegistration,
    MachineRegistrationRequest,
    MachineUpdateRequest,
)
from nico.services import orgs, status
from nico.services.errors import bad_request, forbidden

router = APIRouter(tags=["machine"])


async def machine_viewer(org: str, principal: PrincipalDep, session: SessionDep) -> orgs.Viewer:
    """The reference's machine-side resolution: the provider role wins; each side needs its org row."""
    roles = principal.require_member(org)
    if roles & {PROVIDER_ADMIN, PROVIDER_VIEWER}:
        return await machines.provider_viewer(session, org)
    if TENANT_ADMIN in roles:
        tenant = await orgs.tenant_of(session, org)
        if tenant is None:
            raise forbidden("Organization doesn't have a Provider or Tenant associated")
        return orgs.Viewer(None, orgs.tenant_record(tenant))
    raise forbidden("User doesn't have Provider Admin or Tenant Admin role")


async def machine_editor(org: str, principal: PrincipalDep, session: SessionDep) -> orgs.Viewer:
    """Who may change a machine: a provider admin (with its tenant side too) or a tenant admin."""
    roles = principal.require_member(org)
    if PROVIDER_ADMIN in roles:
        viewer = await machines.provider_viewer(session, org)
        tenant = await orgs.tenant_of(session, org) if TENANT_ADMIN in roles else None
        return orgs.Viewer(viewer.provider, orgs.tenant_record(tenant) if tenant is not None else None)
    if TENANT_ADMIN in roles:
        return await machine_viewer(org, principal, session)
    # PROVIDER_VIEWER alone may write here in the reference; nico keeps viewers read-only.
    raise forbidden("User doesn't have Provider Admin or Tenant Admin role")


async def machine_owner(org: str, _: ProviderAdmin, session: SessionDep) -> orgs.Viewer:
    return await machines.provider_viewer(session, org)


MachineViewer = Annotated[orgs.Viewer, Depends(machine_viewer)]
MachineEditor = Annotated[orgs.Viewer, Depends(machine_editor)]
MachineOwner = Annotated[orgs.Viewer, Depends(machine_owner)]
MachineId = Annotated[str, path_text("machineId")]
Relations = Annotated[frozenset[str], relations(machines.RELATIONS)]
Paging = Annotated[Page, paging(machines.ORDER_COLUMNS)]
RegistrationBody = Annotated[
    MachineRegistrationRequest,
    checked_body(MachineRegistrationRequest, messages.MACHINE_REGISTRATION_INVALID),
]
UpdateBody = Annotated[
    MachineUpdateRequest, checked_body(MachineUpdateRequest, messages.MACHINE_UPDATE_INVALID)
]


@router.post(
    "/machine/registration",
    operation_id="register-machines",
    response_model=MachineRegistration,
    status_code=201,
    summary="nico extension: create or update machines at a site (all or nothing, idempotent)",
    openapi_extra=json_body(MachineRegistrationRequest),
)
async def register_machines(
    org: str, _: ProviderAdmin, body: RegistrationBody, session: SessionDep
) -> Response:
    records = body.records()
    site_id = parse_uuid(body.site_id)
    assert site_id is not None
    result = await machines.register_machines(
        session, org, site_id=site_id, machines=records, instance_type_id=parse_uuid(body.instance_type_id)
    )
    return json_response(MachineRegistration.of(result), 201)


# The list's filters, in the order the handler checks them.
SITE_ID = QueryParam(
    "siteId",
    query.UUID,
    "Only machines at this site; required for a tenant (see above)",
    "Could not find Site specified in query",
    status=404,
)
TYPE_IDS = QueryParam(
    "instanceTypeId",
    query.UUID,
    "Only machines of these instance types",
    "Could not find Instance Type specified in query",
    status=404,
    repeat=True,
)
HAS_TYPE = query.flag("hasInstanceType", "Only machines with (true) or without (false) an instance type")
HAS_INSTANCE = query.flag("hasInstance", "Only machines in use (true) or free (false); needs `siteId`")
STATUSES = query.choice(
    "status", machines.STATUSES, "Only machines in these states", "Invalid Status value in query"
)
CAPABILITY_TYPES = query.choice(
    "capabilityType",
    machines.CAPABILITY_TYPES,
    "Only machines with a capability of this type",
    "Invalid capabilityType value in query: {value}",
)
TENANT_IDS = query.uuids(
    "tenantId", "Only machines used by these tenants' instances", "Invalid Tenant ID: {value} in query"
)
CAPABILITY_NAMES = query.text("capabilityName", "Only machines with a capability of this name", repeat=True)
DEVICE_TYPES = query.text("hwSkuDeviceType", "Only machines of these hardware SKU device types", repeat=True)
MISSING = query.flag("isMissingOnSite", "Only machines the site reports missing (true) or present (false)")
IDS = query.text("id", "Only these machines", repeat=True)
QUERY = query.text("query", "Free text search")


@router.get(
    "/machine",
    operation_id="get-all-machine",
    response_model=list[Machine],
    responses=PAGED,
    summary="List the provider's machines (or, for a privileged tenant, those at one of its sites)",
    description="A tenant (one with targeted instance creation) must give `siteId`: without it the answer is "
    "400 `Site ID must be specified in query when retrieving Machines as a privileged Tenant`. The rule "
    "depends on the caller's role, which OpenAPI cannot express, so `siteId` is declared optional.",
    openapi_extra=query.declared(
        SITE_ID,
        TYPE_IDS,
        HAS_TYPE,
        HAS_INSTANCE,
        STATUSES,
        CAPABILITY_TYPES,
        TENANT_IDS,
        CAPABILITY_NAMES,
        DEVICE_TYPES,
        MISSING,
        IDS,
        QUERY,
    ),
)
async def list_machines(
    viewer: MachineViewer, page: Paging, included: Relations, request: Request, session: SessionDep
) -> Response:
    site_id = SITE_ID.uuid_value(request)
    type_ids = TYPE_IDS.uuid_values(request)
    has_type = HAS_TYPE.maybe_boolean(request)
    if has_type is False and type_ids:
        raise bad_request("`hasInstanceType` cannot be false when `instanceTypeId` is specified")
    has_instance = HAS_INSTANCE.maybe_boolean(request)
    if has_instance is not None and site_id is None:
        raise bad_request("Site ID must be specified in query when filtering by `hasInstance`")
    statuses = STATUSES.values(request)
    for value in statuses:
        if value not in machines.STATUSES:
            raise STATUSES.refused(value, {"status": value})
    capability_types = CAPABILITY_TYPES.values(request)
    for value in capability_types:
        if value not in machines.CAPABILITY_TYPES:
            raise CAPABILITY_TYPES.refused(value)
    tenant_ids = TENANT_IDS.uuid_values(request)
    filters = machines.MachineFilters(
        site_id=site_id,
        tenant_ids=tenant_ids,
        capability_types=capability_types,
        capability_names=CAPABILITY_NAMES.values(request),
        hw_sku_device_types=DEVICE_TYPES.values(request),
        is_missing_on_site=MISSING.maybe_boolean(request),
        instance_type_ids=type_ids,
        has_instance_type=has_type,
        has_instance=has_instance,
        statuses=statuses,
        ids=IDS.values(request),
        query=QUERY.value(request),
    )
    return await render_page(
        page, machines.list_machines(session, viewer, filters, page, included), Machine.of
    )


@router.get(
    "/machine/{machineId}", operation_id="get-machine", response_model=Machine, summary="Get a machine"
)
async def get_machine(
    viewer: MachineViewer, machine_id: MachineId, included: Relations, session: SessionDep
) -> Response:
    return json_response(Machine.of(await machines.get_machine(session, viewer, machine_id, included)))


@router.get(
    "/machine/{machineId}/status-history",
    operation_id="get-machine-status-history",
    response_model=list[StatusDetail],
    responses=PAGED,
    summary="Status history of a machine, newest first",
    openapi_extra=query.declared(query.page_params(status.ORDER_FIELDS)),
)
async def get_machine_status_history(
    viewer: MachineViewer, machine_id: MachineId, request: Request, session: SessionDep
) -> Response:
    row, _ = await machines.visible_machine(session, viewer, machine_id)
    page = parse_page(request, status.ORDER_FIELDS)  # after the machine: its 404/403 come first
    return await render_page(
        page, status.page(session, "machine_id", row.id, newest_first(page)), StatusDetail.of
    )


@router.patch(
    "/machine/{machineId}",
    operation_id="update-machine",
    response_model=Machine,
    summary="Set or clear a machine's instance type, maintenance mode or labels (one at a time)",
    openapi_extra=json_body(MachineUpdateRequest, required=True),  # {} answers "no updates specified"
)
async def update_machine(
    viewer: MachineEditor, machine_id: MachineId, body: UpdateBody, session: SessionDep
) -> Response:
    change = machines.MachineChange(
        instance_type_id=parse_uuid(body.instance_type_id),
        clear_instance_type=bool(body.clear_instance_type),
        maintenance=body.set_maintenance_mode,
        maintenance_message=body.maintenance_message,
        labels=body.labels,
    )
    return json_response(Machine.of(await machines.update_machine(session, viewer, machine_id, change)))


@router.delete(
    "/machine/{machineId}",
    operation_id="delete-machine",
    status_code=202,
    response_model=None,
    summary="Forget a machine that the inventory reports missing on its site",
)
async def delete_machine(viewer: MachineOwner, machine_id: MachineId, session: SessionDep) -> Response:
    await machines.delete_machine(session, viewer, machine_id)
    return Response("null", status_code=202, media_type="application/json")
