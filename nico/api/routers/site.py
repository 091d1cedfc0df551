"""``/site``: sites of the org's provider, and the sites where the org's tenant holds allocations."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api.auth import PROVIDER_ADMIN, TENANT_ADMIN
from nico.api.binding import (
    FieldErrors,
    bool_param,
    description_problem,
    hostname_problem,
    include_relations,
    list_param,
    name_problem,
    parse_go_bool,
    parse_uuid,
    read_body,
)
from nico.api.deps import PrincipalDep, SessionDep
from nico.api.openapi import json_body
from nico.api.pagination import newest_first, parse_page
from nico.api.rendering import deletion_accepted, json_response, paged_response
from nico.api.schemas.common import StatusDetail
from nico.api.schemas.site import (
    ContactRequest,
    LocationRequest,
    MachineStats,
    Site,
    SiteCreateRequest,
    SiteUpdateRequest,
)
from nico.db.enums import SiteStatus
from nico.db.models import Site as SiteRow
from nico.db.models import StatusDetail as StatusDetailRow
from nico.services import orgs, status
from nico.services import site as sites
from nico.services.errors import bad_request, forbidden, not_found

router = APIRouter(tags=["site"])

RELATIONS = ("InfrastructureProvider",)
LOCATION_LIMIT = 256
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
NOT_BY_TENANT = "value is not configurable by Tenant"


def site_id_of(raw: str) -> uuid.UUID:
    parsed = parse_uuid(raw)
    if parsed is None:
        raise bad_request("Invalid Site ID in URL")
    return parsed


def place_problems(
    errors: FieldErrors, location: LocationRequest | None, contact: ContactRequest | None
) -> None:
    if location is not None and any(
        len(part or "") > LOCATION_LIMIT for part in (location.city, location.state, location.country)
    ):
        errors.add("location", f"city, state and country must be at most {LOCATION_LIMIT} characters each")
    if contact is not None and contact.email and (len(contact.email) > 254 or not EMAIL.match(contact.email)):
        errors.add("contact", "must be a valid email address")


def place(model: LocationRequest | ContactRequest | None) -> dict[str, Any] | None:
    return model.model_dump(by_alias=True) if model is not None else None


async def render(
    session: SessionDep,
    viewer: orgs.Viewer,
    rows: Sequence[SiteRow],
    *,
    relations: set[str],
    history: dict[uuid.UUID | str, list[StatusDetailRow]] | None = None,
    with_stats: bool = False,
) -> list[Site]:
    owners = await orgs.providers_by_id(session, (row.infrastructure_provider_id for row in rows))
    if history is None:
        history = await status.history(session, "site_id", [row.id for row in rows])
    stats = await sites.machine_stats(session, [row.id for row in rows]) if with_stats else {}
    return [
        Site.of(
            row,
            owners[row.infrastructure_provider_id],
            history.get(row.id, []),
            include_provider="InfrastructureProvider" in relations,
            tenant_view=sites.tenant_view(viewer, row),
            machine_stats=MachineStats.model_validate(stats[row.id]) if row.id in stats else None,
        )
        for row in rows
    ]


async def viewer_of(org: str, principal: PrincipalDep, session: SessionDep) -> orgs.Viewer:
    provider_role, tenant_role = principal.require_provider_or_tenant(org)
    return await orgs.viewer(session, org, provider_role=provider_role, tenant_role=tenant_role)


@router.get(
    "/site",
    operation_id="get-all-site",
    response_model=list[Site],
    summary="List the sites of the org's provider and the sites its tenant is allocated at",
)
async def list_sites(org: str, request: Request, principal: PrincipalDep, session: SessionDep) -> Response:
    provider_role, tenant_role = principal.require_provider_or_tenant(org)
    page = parse_page(request, frozenset(sites.ORDER_COLUMNS))
    relations = include_relations(request, RELATIONS)
    viewer = await orgs.viewer(session, org, provider_role=provider_role, tenant_role=tenant_role)
    statuses = list_param(request, "status")
    for value in statuses:
        if value not in set(SiteStatus):
            raise bad_request("Invalid Status value in query", {"status": value})
    capabilities = {}
    for name in sites.CAPABILITY_FILTERS:
        raw = request.query_params.get(name)
        if raw is not None:
            parsed = parse_go_bool(raw)
            if parsed is None:
                raise bad_request(f"Invalid value specified for `{name}` query param")
            capabilities[name] = parsed
    with_stats = bool_param(request, "includeMachineStats")
    if with_stats and viewer.provider is None:
        raise forbidden("User must have Provider Admin role to request `includeMachineStats`")
    filters = sites.SiteFilters(
        statuses=statuses, query=request.query_params.get("query"), capabilities=capabilities
    )
    rows, total = await sites.list_sites(session, viewer, filters, page)
    items = await render(session, viewer, rows, relations=relations, with_stats=with_stats)
    return paged_response(items, page, total)


@router.post(
    "/site",
    operation_id="create-site",
    response_model=Site,
    status_code=201,
    summary="Create a site (Registered at once; optional capabilities are a nico extension)",
    openapi_extra=json_body(SiteCreateRequest),
)
async def create_site(org: str, request: Request, principal: PrincipalDep, session: SessionDep) -> Response:
    principal.require_provider_admin(org)
    body = await read_body(request, SiteCreateRequest)
    errors = FieldErrors()
    errors.add("name", name_problem(body.name))
    errors.add("description", description_problem(body.description))
    errors.add("serialConsoleHostname", hostname_problem(body.serial_console_hostname))
    place_problems(errors, body.location, body.contact)
    errors.raise_if_any("Error validating Site creation request data")
    provider = await orgs.provider_of(session, org)
    if provider is None:
        raise not_found(f"Org '{org}' does not have an Infrastructure Provider")
    assert body.name is not None
    row, entries = await sites.create_site(
        session,
        provider,
        name=body.name,
        description=body.description,
        serial_console_hostname=body.serial_console_hostname or None,
        location=place(body.location),
        contact=place(body.contact),
        capabilities=body.capabilities.changes() if body.capabilities else {},
    )
    site = Site.of(row, provider, [], tenant_view=False)
    site.status_history = StatusDetail.many(entries)
    return json_response(site, 201)


@router.get("/site/{siteId}", operation_id="get-site", response_model=Site, summary="Get a site")
async def get_site(
    org: str, siteId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    viewer = await viewer_of(org, principal, session)
    relations = include_relations(request, RELATIONS)
    row = await sites.visible_site(session, viewer, site_id_of(siteId))
    return json_response((await render(session, viewer, [row], relations=relations))[0])


@router.get(
    "/site/{siteId}/status-history",
    operation_id="get-site-status-history",
    response_model=list[StatusDetail],
    summary="Status history of a site, newest first",
)
async def get_site_status_history(
    org: str, siteId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    viewer = await viewer_of(org, principal, session)
    row = await sites.visible_site(session, viewer, site_id_of(siteId))
    page = parse_page(request, status.ORDER_FIELDS)
    entries, total = await status.page(session, "site_id", row.id, newest_first(page))
    return paged_response(StatusDetail.many(entries), page, total)


@router.patch(
    "/site/{siteId}",
    operation_id="update-site",
    response_model=Site,
    summary="Update a site (its provider only)",
    openapi_extra=json_body(SiteUpdateRequest),
)
async def update_site(
    org: str, siteId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    roles = principal.require_member(org)
    as_provider = PROVIDER_ADMIN in roles
    if not as_provider and TENANT_ADMIN not in roles:
        raise forbidden("User does not have Provider Admin role with org")
    site_id = site_id_of(siteId)
    body = await read_body(request, SiteUpdateRequest)
    errors = FieldErrors()
    if as_provider:
        errors.add("name", name_problem(body.name, required=False))
        errors.add("description", description_problem(body.description))
        errors.add("serialConsoleHostname", hostname_problem(body.serial_console_hostname))
        for field, value in (
            ("serialConsoleIdleTimeout", body.serial_console_idle_timeout),
            ("serialConsoleMaxSessionLength", body.serial_console_max_session_length),
        ):
            if value is not None and value <= 0:
                errors.add(field, "must be greater than 0")
        if body.is_serial_console_ssh_keys_enabled is not None:
            errors.add("isSerialConsoleSSHKeysEnabled", "value is not configurable by Provider")
        place_problems(errors, body.location, body.contact)
    else:
        for field in SiteUpdateRequest.model_fields:
            if field != "is_serial_console_ssh_keys_enabled" and getattr(body, field) is not None:
                errors.add(SiteUpdateRequest.model_fields[field].alias or field, NOT_BY_TENANT)
        if body.is_serial_console_ssh_keys_enabled is not None:
            errors.add(
                "isSerialConsoleSSHKeysEnabled",
                "configuring this value is no longer supported, update SSH Key Groups to remove Site instead",
            )
    errors.raise_if_any("Error validating Site update request data")
    # A tenant may not change a site: the reference crashes here (500); nico refuses plainly.
    provider = await orgs.provider_of(session, org) if as_provider else None
    changes = sites.SiteChanges(
        name=body.name,
        description=body.description,
        serial_console_hostname=body.serial_console_hostname,
        is_serial_console_enabled=body.is_serial_console_enabled,
        serial_console_idle_timeout=body.serial_console_idle_timeout,
        serial_console_max_session_length=body.serial_console_max_session_length,
        location=place(body.location),
        contact=place(body.contact),
        capabilities=body.capabilities.changes() if body.capabilities else {},
    )
    row = await sites.update_site(session, provider, site_id, changes)
    assert provider is not None
    viewer = orgs.Viewer(provider, None)
    history = await status.history(session, "site_id", [row.id], limit=sites.PATCH_HISTORY_LIMIT)
    return json_response((await render(session, viewer, [row], relations=set(), history=history))[0])


@router.delete(
    "/site/{siteId}",
    operation_id="delete-site",
    status_code=202,
    response_model=str,
    summary="Delete a site with its inventory (no allocations or tenant objects may remain)",
)
async def delete_site(
    org: str, siteId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    principal.require_provider_admin(org)
    site_id = site_id_of(siteId)
    raw = request.query_params.get("purgeMachines")
    if raw is not None and parse_go_bool(raw) is None:
        raise bad_request("Invalid purgeMachines query param")
    # Machines cannot outlive their site in nico's schema: they are always removed with it.
    await sites.delete_site(session, await orgs.provider_of(session, org), site_id)
    return deletion_accepted()
