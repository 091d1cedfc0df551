"""``/nvlink-topology`` (nico extension): the NVLink domains at the tenant's sites, GPU by GPU, without
anything of other tenants but that a GPU is in use. TENANT_ADMIN only; read by the topology page."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from nico.api.deps import PrincipalDep, ReadSessionDep
from nico.api.rendering import json_response
from nico.api.schemas.topology import NVLinkTopology
from nico.services import topology

router = APIRouter(tags=["nvlink-topology"])


@router.get(
    "/nvlink-topology",
    operation_id="get-nvlink-topology",
    response_model=NVLinkTopology,
    summary="The NVLink domains at the tenant's sites, tray by tray and GPU by GPU (nico extension)",
)
async def get_topology(org: str, principal: PrincipalDep, session: ReadSessionDep) -> Response:
    principal.require_tenant_admin(org)
    return json_response(NVLinkTopology.of(await topology.tenant_topology(session, org)))
