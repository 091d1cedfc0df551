"""``/site``: sites of the org's provider, and the sites where the org's tenant holds allocations."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from nico.api import messages, query
from nico.api.auth import PROVIDER_ADMIN, TENANT_ADMIN
from nico.api.deps import PrincipalDep, ProviderAdmin, ProviderOrTenant, SessionDep, Viewer
from nico.api.listing import render_page
from nico.api.openapi import json_body
from nico.api.pagination import PAGED, Page, newest_first, parse_page
from nico.api.parsing import (
    checked_body,
    paging,
    path_id,
    read_checked,
    relations,
)
from nico.api.rendering import deletion_accepted, json_response
from nico.api.schemas.common import StatusDetail
from nico.api.schemas.site import (
    ContactRequest,
    LocationRequest,
    Site,
    SiteCreateRequest,
    SiteUpdateByProvider,
    SiteUpdateByTenant,
    SiteUpdateRequest,
)
from nico.services import site as sites
from nico.services import status
from nico.services.errors import forbidden

router = APIRouter(tags=["site"])


async def editor_is_provider(org: str, principal: PrincipalDep) -> bool:
    """Who may send a site update: its provider's admin (True) or a tenant admin (False, refused later)."""
    roles = principal.require_member(org)
    as_provider = PROVIDER_ADMIN in roles
    if not as_provider and TENANT_ADMIN not in roles:
        raise forbidden("User does not have Provider Admin role with org")
    return as_provider


AsProvider = Annotated[bool, Depends(editor_is_provider)]


async def update_body(request: Request, as_provider: AsProvider) -> SiteUpdateRequest:
    if as_provider:
        return await read_checked(request, SiteUpdateByProvider, messages.SITE_UPDATE_INVALID)
    return await read_checked(request, SiteUpdateByTenant, messages.SITE_UPDATE_INVALID)


SiteId = Annotated[uuid.UUID, path_id("siteId", messages.SITE_ID)]
Relations = Annotated[frozenset[str], relations(sites.RELATIONS)]
Paging = Annotated[Page, paging(sites.ORDER_COLUMNS)]
CreateBody = Annotated[SiteCreateRequest, checked_body(SiteCreateRequest, messages.SITE_CREATE_INVALID)]
UpdateBody = Annotated[SiteUpdateRequest, Depends(update_body)]


def place(model: LocationRequest | ContactRequest | None) -> dict[str, Any] | None:
    return model.model_dump(by_alias=True) if model is not None else None


# The list's filters, in the order the handler checks them.
STATUSES = query.choice(
    "status", sites.STATUSES, "Only sites in these states", "Invalid Status value in query"
)
CAPABILITIES = tuple(
    query.flag(name, "Only sites with (true) or without (false) this capability")
    for name in sites.CAPABILITY_FILTERS
)
WITH_STATS = query.flag("includeMachineStats", "Attach the site's machine counts by status")
PURGE = query.flag(
    "purgeMachines",
    "Accepted for the reference's clients: a site's machines are always removed with it",
    "Invalid purgeMachines query param",
)


@router.get(
    "/site",
    operation_id="get-all-site",
    response_model=list[Site],
    responses=PAGED,
    summary="List the sites of the org's provider and the sites its tenant is allocated at",
    openapi_extra=query.declared(STATUSES, CAPABILITIES, query.SEARCH, WITH_STATS),
)
async def list_sites(
    _: ProviderOrTenant,
    page: Paging,
    included: Relations,
    viewer: Viewer,
    request: Request,
    session: SessionDep,
) -> Response:
    statuses = STATUSES.values(request)
    for value in statuses:
        if value not in sites.STATUSES:
            raise STATUSES.refused(value, {"status": value})
    capabilities = {}
    for capability in CAPABILITIES:
        given = capability.maybe_boolean(request)
        if given is not None:
            capabilities[capability.name] = given
    filters = sites.SiteFilters(
        statuses=statuses, query=query.SEARCH.value(request), capabilities=capabilities
    )
    with_stats = WITH_STATS.boolean(request)
    found = sites.list_sites(session, viewer, filters, page, relations=included, with_stats=with_stats)
    return await render_page(page, found, Site.of)


@router.post(
    "/site",
    operation_id="create-site",
    response_model=Site,
    status_code=201,
    summary="Create a site (Registered at once; optional capabilities are a nico extension)",
    openapi_extra=json_body(SiteCreateRequest),
)
async def create_site(org: str, _: ProviderAdmin, body: CreateBody, session: SessionDep) -> Response:
    assert body.name is not None
    view = await sites.create_site(
        session,
        org,
        name=body.name,
        description=body.description,
        serial_console_hostname=body.serial_console_hostname or None,
        location=place(body.location),
        contact=place(body.contact),
        capabilities=body.capabilities.changes() if body.capabilities else {},
    )
    return json_response(Site.of(view), 201)


@router.get("/site/{siteId}", operation_id="get-site", response_model=Site, summary="Get a site")
async def get_site(viewer: Viewer, included: Relations, site_id: SiteId, session: SessionDep) -> Response:
    return json_response(Site.of(await sites.get_site(session, viewer, site_id, included)))


@router.get(
    "/site/{siteId}/status-history",
    operation_id="get-site-status-history",
    response_model=list[StatusDetail],
    responses=PAGED,
    summary="Status history of a site, newest first",
    openapi_extra=query.declared(query.page_params(status.ORDER_FIELDS)),
)
async def get_site_status_history(
    viewer: Viewer, site_id: SiteId, request: Request, session: SessionDep
) -> Response:
    await sites.check_visible(session, viewer, site_id)
    page = parse_page(request, status.ORDER_FIELDS)  # after the site: its 404/403 come first
    return await render_page(
        page, sites.status_history(session, site_id, newest_first(page)), StatusDetail.of
    )


@router.patch(
    "/site/{siteId}",
    operation_id="update-site",
    response_model=Site,
    summary="Update a site (its provider only)",
    openapi_extra=json_body(SiteUpdateRequest),
)
async def update_site(
    org: str, as_provider: AsProvider, site_id: SiteId, body: UpdateBody, session: SessionDep
) -> Response:
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
    # A tenant may not change a site: the reference crashes here (500); nico refuses plainly.
    view = await sites.update_site(session, org, site_id, changes, as_provider=as_provider)
    return json_response(Site.of(view))


@router.delete(
    "/site/{siteId}",
    operation_id="delete-site",
    status_code=202,
    response_model=str,
    summary="Delete a site with its inventory (no allocations or tenant objects may remain)",
    openapi_extra=query.declared(PURGE),
)
async def delete_site(
    org: str, _: ProviderAdmin, site_id: SiteId, request: Request, session: SessionDep
) -> Response:
    PURGE.boolean(request)
    # Machines cannot outlive their site in nico's schema: they are always removed with it.
    await sites.delete_site(session, org, site_id)
    return deletion_accepted()
