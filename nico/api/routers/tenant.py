"""``/tenant/current`` (created on first call) and the reference's deprecated tenant endpoints."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from nico.api.deps import PrincipalDep, SessionDep
from nico.api.rendering import json_response
from nico.api.schemas.org import Tenant
from nico.services import orgs
from nico.services.errors import bad_request

router = APIRouter(tags=["tenant"])


@router.get(
    "/tenant/current", operation_id="get-current-tenant", response_model=Tenant, summary="Current tenant"
)
async def get_current_tenant(org: str, principal: PrincipalDep, session: SessionDep) -> Response:
    principal.require_tenant_admin(org)
    tenant = await orgs.current_tenant(session, org, principal.org_display_names.get(org))
    return json_response(Tenant.of(tenant))


@router.post(
    "/tenant",
    operation_id="create-tenant",
    deprecated=True,
    summary="Deprecated by the reference: always 400",
    responses={400: {"description": "The endpoint has been deprecated"}},
)
async def create_tenant(org: str, principal: PrincipalDep) -> Response:
    principal.require_tenant_admin(org)
    raise bad_request("POST '/org/:orgName/nico/tenant' endpoint has been deprecated")


@router.patch(
    "/tenant/current",
    operation_id="update-current-tenant",
    deprecated=True,
    summary="Deprecated by the reference: always 400",
    responses={400: {"description": "The endpoint has been deprecated"}},
)
async def update_tenant(org: str, principal: PrincipalDep) -> Response:
    principal.require_tenant_admin(org)
    raise bad_request("PATCH '/org/:orgName/nico/tenant/current' endpoint has been deprecated")
