"""``/nvlink-topology`` and ``/nvlink-topology/overview`` (nico extensions): the NVLink domains at the
tenant's sites, GPU by GPU (or one cell of counts per domain for the site overview), without anything
of other tenants but that a GPU is in use. Both are paged by domain in rack order (``X-Pagination``).
TENANT_ADMIN only; read by the topology page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from nico.api import query
from nico.api.deps import PrincipalDep, ReadSessionDep
from nico.api.listing import render_page
from nico.api.pagination import PAGED, Page, page_of, page_response
from nico.api.parsing import PageNumberQuery, PageSizeQuery
from nico.api.schemas.topology import NVLinkTopology, TopologyDomainCell, topology_body
from nico.services import topology, topology_overview

router = APIRouter(tags=["nvlink-topology"])

DOMAIN_IDS = query.uuids(
    "nvLinkDomainId", "Only these NVLink domains", "Invalid NVLink Domain ID: {value} in query"
)


async def domain_page(page_number: PageNumberQuery = None, page_size: PageSizeQuery = None) -> Page:
    """The page of domains (in rack order, so no orderBy) the query asks for, checked as every list's
    page is."""
    return page_of(page_number, page_size, None, {"created"})


DomainPage = Annotated[Page, Depends(domain_page)]


@router.get(
    "/nvlink-topology",
    operation_id="get-nvlink-topology",
    response_model=NVLinkTopology,
    responses=PAGED,
    summary="The NVLink domains at the tenant's sites, tray by tray and GPU by GPU (nico extension)",
    description="A page of domains in rack order; `nvLinkLogicalPartitions` are the caller's partitions "
    "with GPUs on the page, each with every NVLink domain its GPUs are in (on any page).",
    openapi_extra=query.declared(DOMAIN_IDS),
)
async def get_topology(
    org: str,
    request: Request,
    principal: PrincipalDep,
    session: ReadSessionDep,
    page: DomainPage,
) -> Response:
    principal.require_tenant_admin(org)
    only = DOMAIN_IDS.uuid_values(request)
    view, total = await topology.tenant_topology(session, org, page.offset, page.size, only)
    return page_response(topology_body(view), page, total)


@router.get(
    "/nvlink-topology/overview",
    operation_id="get-nvlink-topology-overview",
    response_model=list[TopologyDomainCell],
    responses=PAGED,
    summary="The site overview: one cell of counts per NVLink domain at the tenant's sites (nico extension)",
)
async def get_overview(
    org: str,
    principal: PrincipalDep,
    session: ReadSessionDep,
    page: DomainPage,
) -> Response:
    principal.require_tenant_admin(org)
    found = topology_overview.tenant_overview(session, org, page.offset, page.size)
    return await render_page(page, found, TopologyDomainCell.of)
