"""``/infrastructure-provider/current`` (created on first call by a provider admin or viewer)."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from nico.api.deps import PrincipalDep, SessionDep
from nico.api.rendering import json_response
from nico.api.schemas.org import InfrastructureProvider
from nico.services import orgs
from nico.services.errors import ServiceError

router = APIRouter(tags=["infrastructure-provider"])


@router.get(
    "/infrastructure-provider/current",
    operation_id="get-current-infrastructure-provider",
    response_model=InfrastructureProvider,
    summary="Current infrastructure provider",
)
async def get_current_provider(org: str, principal: PrincipalDep, session: SessionDep) -> Response:
    principal.require_member(org)
    if not principal.is_provider(org):
        raise ServiceError(403, "User does not have Provider Admin role with org")
    provider = await orgs.current_provider(session, org, principal.org_display_names.get(org))
    return json_response(InfrastructureProvider.of(provider))
