"""``/machine``: the provider's machines (and what privileged tenants may see of them), plus nico's bulk
registration, which stands in for the reference's site-agent inventory."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api.auth import PROVIDER_ADMIN, PROVIDER_VIEWER, TENANT_ADMIN
from nico.api.binding import (
    FieldErrors,
    include_relations,
    labels_problem,
    list_param,
    parse_go_bool,
    parse_uuid,
    read_body,
    single_param,
    uuid_params,
    uuid_problem,
)
from nico.api.deps import PrincipalDep, SessionDep
from nico.api.openapi import json_body
from nico.api.pagination import newest_first, parse_page
from nico.api.rendering import json_response, paged_response
from nico.api.schemas.common import StatusDetail
from nico.api.schemas.instance_type import InstanceTypeSummary
from nico.api.schemas.machine import (
    Machine,
    MachineRegistration,
    MachineRegistrationRequest,
    MachineUpdateRequest,
    NvLinkInfo,
)
from nico.api.schemas.org import InfrastructureProviderSummary
from nico.api.schemas.site import SiteSummary
from nico.db.enums import CapabilityType, MachineStatus
from nico.db.models import Machine as MachineRow
from nico.db.models import StatusDetail as StatusDetailRow
from nico.services import instance_type as types
from nico.services import inventory, orgs, status
from nico.services import machine as machines
from nico.services import site as sites
from nico.services.errors import bad_request, forbidden, not_found

router = APIRouter(tags=["machine"])

RELATIONS = ("InfrastructureProvider", "Site", "InstanceType")
UPDATE_FIELDS = "setMaintenanceMode, instanceTypeId, clearInstanceType or labels"


async def machine_viewer(org: str, principal: PrincipalDep, session: SessionDep) -> orgs.Viewer:
    """The reference's machine-side resolution: the provider role wins; each side needs its org row."""
    roles = principal.require_member(org)
    if roles & {PROVIDER_ADMIN, PROVIDER_VIEWER}:
        provider = await orgs.provider_of(session, org)
        if provider is None:
            raise not_found("Infrastructure Provider not found in org")
        return orgs.Viewer(provider, None)
    if TENANT_ADMIN in roles:
        tenant = await orgs.tenant_of(session, org)
        if tenant is None:
            raise forbidden("Organization doesn't have a Provider or Tenant associated")
        return orgs.Viewer(None, tenant)
    raise forbidden("User doesn't have Provider Admin or Tenant Admin role")


async def render(
    session: SessionDep,
    rows: Sequence[MachineRow],
    views: Sequence[machines.View],
    *,
    relations: AbstractSet[str] = frozenset(),
    history: dict[uuid.UUID | str, list[StatusDetailRow]] | None = None,
) -> list[Machine]:
    ids = [row.id for row in rows]
    owners = await machines.site_providers(session, rows)
    tenants = await machines.instance_tenants(session, rows)
    capabilities = await types.capabilities_of_machines(session, ids)
    gpus = await machines.gpus_of(
        session, [row.id for row, view in zip(rows, views, strict=True) if view.provider]
    )
    if history is None:
        history = await status.history(session, "machine_id", ids)
    providers = (
        await orgs.providers_by_id(session, owners.values()) if "InfrastructureProvider" in relations else {}
    )
    at = await sites.sites_by_id(session, (row.site_id for row in rows)) if "Site" in relations else {}
    itypes = (
        await types.instance_types_by_id(session, (row.instance_type_id for row in rows))
        if "InstanceType" in relations
        else {}
    )
    out = []
    for row, view in zip(rows, views, strict=True):
        provider = providers.get(owners[row.site_id])
        site = at.get(row.site_id)
        itype = itypes.get(row.instance_type_id) if row.instance_type_id else None
        out.append(
            Machine.of(
                row,
                provider_id=owners[row.site_id],
                tenant_id=tenants.get(row.instance_id) if row.instance_id else None,
                capabilities=capabilities.get(row.id, []),
                history=history.get(row.id, []),
                full_view=view.full,
                nvlink=NvLinkInfo.of(row, gpus.get(row.id, [])) if view.provider else None,
                provider=InfrastructureProviderSummary.of(provider) if provider else None,
                site=SiteSummary.of(site) if site else None,
                instance_type=InstanceTypeSummary.of(itype) if itype else None,
            )
        )
    return out


def bool_query(request: Request, name: str) -> bool | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    parsed = parse_go_bool(raw)
    if parsed is None:
        raise bad_request(f"Invalid value specified for `{name}` query param")
    return parsed


@router.post(
    "/machine/registration",
    operation_id="register-machines",
    response_model=MachineRegistration,
    status_code=201,
    summary="nico extension: create or update machines at a site (all or nothing, idempotent)",
    openapi_extra=json_body(MachineRegistrationRequest),
)
async def register_machines(
    org: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    principal.require_provider_admin(org)
    body = await read_body(request, MachineRegistrationRequest)
    errors = FieldErrors()
    errors.add("siteId", uuid_problem(body.site_id))
    errors.add("instanceTypeId", uuid_problem(body.instance_type_id, required=False))
    errors.raise_if_any(inventory.VALIDATION_MESSAGE)
    records = body.records()
    provider = await orgs.provider_of(session, org)
    if provider is None:
        raise not_found(f"Org '{org}' does not have an Infrastructure Provider")
    site_id = parse_uuid(body.site_id)
    assert site_id is not None
    result = await inventory.register_machines(
        session,
        site_id=site_id,
        machines=records,
        provider_id=provider.id,
        instance_type_id=parse_uuid(body.instance_type_id),
    )
    return json_response(
        MachineRegistration(created=result.created, updated=result.updated, unchanged=result.unchanged), 201
    )


@router.get(
    "/machine",
    operation_id="get-all-machine",
    response_model=list[Machine],
    summary="List the provider's machines (or, for a privileged tenant, those at one of its sites)",
)
async def list_machines(org: str, request: Request, principal: PrincipalDep, session: SessionDep) -> Response:
    viewer = await machine_viewer(org, principal, session)
    page = parse_page(request, frozenset(machines.ORDER_COLUMNS))
    relations = include_relations(request, RELATIONS)
    raw_site = single_param(request, "siteId")
    site_id = None
    if raw_site is not None:
        site_id = parse_uuid(raw_site)
        if site_id is None:
            raise not_found("Could not find Site specified in query")
    type_ids = []
    for value in list_param(request, "instanceTypeId"):
        parsed = parse_uuid(value)
        if parsed is None:
            raise not_found("Could not find Instance Type specified in query")
        type_ids.append(parsed)
    has_type = bool_query(request, "hasInstanceType")
    if has_type is False and type_ids:
        raise bad_request("`hasInstanceType` cannot be false when `instanceTypeId` is specified")
    has_instance = bool_query(request, "hasInstance")
    if has_instance is not None and site_id is None:
        raise bad_request("Site ID must be specified in query when filtering by `hasInstance`")
    statuses = list_param(request, "status")
    for value in statuses:
        if value not in set(MachineStatus):
            raise bad_request("Invalid Status value in query", {"status": value})
    capability_types = list_param(request, "capabilityType")
    for value in capability_types:
        if value not in set(CapabilityType):
            raise bad_request(f"Invalid capabilityType value in query: {value}")
    tenant_ids = uuid_params(request, "tenantId", "Invalid Tenant ID: {value} in query")
    filters = machines.MachineFilters(
        site_id=site_id,
        tenant_ids=tenant_ids,
        capability_types=capability_types,
        capability_names=list_param(request, "capabilityName"),
        hw_sku_device_types=list_param(request, "hwSkuDeviceType"),
        is_missing_on_site=bool_query(request, "isMissingOnSite"),
        instance_type_ids=type_ids,
        has_instance_type=has_type,
        has_instance=has_instance,
        statuses=statuses,
        ids=list_param(request, "id"),
        query=request.query_params.get("query"),
    )
    rows, total = await machines.list_machines(session, viewer, filters, page)
    view = machines.View(provider=viewer.provider is not None, full=True)
    items = await render(session, rows, [view] * len(rows), relations=relations)
    return paged_response(items, page, total)


@router.get(
    "/machine/{machineId}", operation_id="get-machine", response_model=Machine, summary="Get a machine"
)
async def get_machine(
    org: str, machineId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    viewer = await machine_viewer(org, principal, session)
    relations = include_relations(request, RELATIONS)
    row, view = await machines.visible_machine(session, viewer, machineId)
    return json_response((await render(session, [row], [view], relations=relations))[0])


@router.get(
    "/machine/{machineId}/status-history",
    operation_id="get-machine-status-history",
    response_model=list[StatusDetail],
    summary="Status history of a machine, newest first",
)
async def get_machine_status_history(
    org: str, machineId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    viewer = await machine_viewer(org, principal, session)
    row, _ = await machines.visible_machine(session, viewer, machineId)
    page = parse_page(request, status.ORDER_FIELDS)
    entries, total = await status.page(session, "machine_id", row.id, newest_first(page))
    return paged_response(StatusDetail.many(entries), page, total)


def update_problems(body: MachineUpdateRequest) -> FieldErrors:
    errors = FieldErrors()
    chosen = [
        name
        for name, given in (
            ("setMaintenanceMode", body.set_maintenance_mode is not None),
            ("instanceTypeId", body.instance_type_id is not None),
            ("clearInstanceType", body.clear_instance_type is not None),
            ("labels", body.labels is not None),
        )
        if given
    ]
    if len(chosen) > 1:
        errors.add("__all__", f"only one of {UPDATE_FIELDS} can be set at a time")
    elif not chosen:
        errors.add("__all__", f"no updates specified. One of {UPDATE_FIELDS} must be set")
    errors.add("instanceTypeId", uuid_problem(body.instance_type_id, required=False))
    if body.clear_instance_type is False:
        errors.add("clearInstanceType", "must be true when specified")
    if body.set_maintenance_mode and not 5 <= len(body.maintenance_message or "") <= 256:
        errors.add("maintenanceMessage", "the length must be between 5 and 256")
    if body.maintenance_message is not None and not body.set_maintenance_mode:
        errors.add("maintenanceMessage", "can only be specified when setMaintenanceMode is true")
    errors.add("labels", labels_problem(body.labels))
    return errors


@router.patch(
    "/machine/{machineId}",
    operation_id="update-machine",
    response_model=Machine,
    summary="Set or clear a machine's instance type, maintenance mode or labels (one at a time)",
    openapi_extra=json_body(MachineUpdateRequest),
)
async def update_machine(
    org: str, machineId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    roles = principal.require_member(org)
    if PROVIDER_ADMIN in roles:
        provider = await orgs.provider_of(session, org)
        if provider is None:
            raise not_found("Infrastructure Provider not found in org")
        tenant = await orgs.tenant_of(session, org) if TENANT_ADMIN in roles else None
        viewer = orgs.Viewer(provider, tenant)
    elif TENANT_ADMIN in roles:
        viewer = await machine_viewer(org, principal, session)
    else:
        # PROVIDER_VIEWER alone may write here in the reference; nico keeps viewers read-only.
        raise forbidden("User doesn't have Provider Admin or Tenant Admin role")
    body = await read_body(request, MachineUpdateRequest)
    update_problems(body).raise_if_any("Error validating Machine update request data")
    change = machines.MachineChange(
        instance_type_id=parse_uuid(body.instance_type_id),
        clear_instance_type=bool(body.clear_instance_type),
        maintenance=body.set_maintenance_mode,
        maintenance_message=body.maintenance_message,
        labels=body.labels,
    )
    row, view = await machines.update_machine(session, viewer, machineId, change)
    return json_response((await render(session, [row], [view]))[0])


@router.delete(
    "/machine/{machineId}",
    operation_id="delete-machine",
    status_code=202,
    response_model=None,
    summary="Forget a machine that the inventory reports missing on its site",
)
async def delete_machine(org: str, machineId: str, principal: PrincipalDep, session: SessionDep) -> Response:
    principal.require_provider_admin(org)
    provider = await orgs.provider_of(session, org)
    if provider is None:
        raise not_found("Infrastructure Provider not found in org")
    await machines.delete_machine(session, orgs.Viewer(provider, None), machineId)
    return Response("null", status_code=202, media_type="application/json")
