"""The reference's stats reads (NICo REST 2026-05): ``/machine/gpu/stats``,
``/machine/instance-type/stats``, ``/machine/instance-type/stats/summary``,
``/tenant/instance-type/stats`` and ``/machine-capability``. PROVIDER_ADMIN only; the site must be
the provider's. Mounted before ``machine`` so ``/machine/gpu/...`` is not taken for a machine id."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api import query
from nico.api.deps import ProviderAdmin, ReadSessionDep
from nico.api.listing import render_page
from nico.api.pagination import PAGED, parse_page
from nico.api.query import QueryParam
from nico.api.rendering import json_response, list_response
from nico.api.schemas.instance_type import MachineCapability
from nico.api.schemas.stats import (
    MachineGpuStats,
    MachineInstanceTypeStats,
    MachineInstanceTypeSummary,
    MachineStatusStats,
    TenantInstanceTypeStats,
)
from nico.inventory import service as machines
from nico.services import stats

router = APIRouter(tags=["stats"])

# The stats reads answer 400 "Site ID must be specified in query" without one.
SITE_ID = QueryParam(
    "siteId",
    query.UUID,
    "The provider's site",
    "Invalid Site ID specified in query",
    required=True,
    allow_empty=True,  # an empty one is answered as a missing one
)
SITE_REQUIRED = query.declared(SITE_ID)


def site_param(request: Request) -> uuid.UUID | None:
    return SITE_ID.uuid_value(request)


@router.get(
    "/machine/gpu/stats",
    operation_id="get-machine-gpu-stats",
    openapi_extra=SITE_REQUIRED,
    response_model=list[MachineGpuStats],
    summary="Retrieve GPU stats for machines at a site",
)
async def gpu_stats(org: str, _: ProviderAdmin, request: Request, session: ReadSessionDep) -> Response:
    found = await stats.gpu_stats(session, org, site_param(request))
    return list_response([MachineGpuStats.of(s) for s in found])


@router.get(
    "/machine/instance-type/stats",
    operation_id="get-machine-instance-type-stats",
    openapi_extra=SITE_REQUIRED,
    response_model=list[MachineInstanceTypeStats],
    summary="Retrieve detailed per-instance-type machine stats for a site",
)
async def instance_type_stats(
    org: str, _: ProviderAdmin, request: Request, session: ReadSessionDep
) -> Response:
    found = await stats.instance_type_stats(session, org, site_param(request))
    return list_response([MachineInstanceTypeStats.of(s) for s in found])


@router.get(
    "/machine/instance-type/stats/summary",
    operation_id="get-machine-instance-type-stats-summary",
    openapi_extra=SITE_REQUIRED,
    response_model=MachineInstanceTypeSummary,
    summary="Retrieve machine instance type assignment summary for a site",
)
async def instance_type_summary(
    org: str, _: ProviderAdmin, request: Request, session: ReadSessionDep
) -> Response:
    assigned, unassigned = await stats.instance_type_summary(session, org, site_param(request))
    body = MachineInstanceTypeSummary(
        assigned=MachineStatusStats.of(assigned), unassigned=MachineStatusStats.of(unassigned)
    )
    return json_response(body)


@router.get(
    "/tenant/instance-type/stats",
    operation_id="get-tenant-instance-type-stats",
    openapi_extra=SITE_REQUIRED,
    response_model=list[TenantInstanceTypeStats],
    summary="Retrieve per-tenant instance type allocation stats for a site",
)
async def tenant_instance_type_stats(
    org: str, _: ProviderAdmin, request: Request, session: ReadSessionDep
) -> Response:
    found = await stats.tenant_instance_type_stats(session, org, site_param(request))
    return list_response([TenantInstanceTypeStats.of(s) for s in found])


# The capability list's filters, in the order the handler checks them.
HAS_TYPE = QueryParam(
    "hasInstanceType",
    query.BOOLEAN,
    "Only capabilities of machines with (true) or without (false) an instance type",
    "Invalid value specified for hasInstanceType in query",
    allow_empty=True,
)
COUNT = QueryParam(
    "count",
    query.INT32,
    "Only capabilities of this count",
    "Invalid value specified for count in query",
    allow_empty=True,
)
INACTIVE = query.integer(
    "inactiveDevices",
    "Only capabilities with these inactive devices",
    "Invalid value specified for inactiveDevices in query",
    repeat=True,
)
OPTIONAL_SITE = QueryParam(
    "siteId", query.UUID, "Only capabilities at this site", SITE_ID.error, allow_empty=True
)
TYPE = query.choice(
    "type",
    machines.CAPABILITY_TYPES,
    "Only capabilities of this type (checked after the site)",
    stats.BAD_CAPABILITY_TYPE,
    repeat=False,
)
TEXTS = {
    name: query.text(name, f"Only capabilities of this {name}")
    for name in ("name", "frequency", "capacity", "vendor", "devicetype")  # lower-case t, as the reference
}
CAPABILITY_FILTERS = (HAS_TYPE, COUNT, INACTIVE, OPTIONAL_SITE, TYPE, *TEXTS.values())


def capability_filter(request: Request) -> stats.CapabilityFilter:
    has = HAS_TYPE.maybe_boolean(request)
    count = COUNT.int_value(request)
    inactive_raw = INACTIVE.values(request)
    try:
        inactive = [int(v) for v in inactive_raw] if inactive_raw else None
    except ValueError:
        raise INACTIVE.refused("") from None
    texts = {name: param.value(request) for name, param in TEXTS.items()}
    return stats.CapabilityFilter(
        site_id=OPTIONAL_SITE.uuid_value(request),
        has_instance_type=has,
        type=TYPE.value(request),
        name=texts["name"],
        frequency=texts["frequency"],
        capacity=texts["capacity"],
        vendor=texts["vendor"],
        count=count,
        device_type=texts["devicetype"],
        inactive_devices=inactive,
    )


@router.get(
    "/machine-capability",
    operation_id="get-all-machine-capabilities",
    response_model=list[MachineCapability],
    responses=PAGED,
    summary="Retrieve all Machine Capabilities",
    openapi_extra=query.declared(query.page_params(stats.CAPABILITY_ORDER_FIELDS), CAPABILITY_FILTERS),
)
async def machine_capabilities(
    org: str, _: ProviderAdmin, request: Request, session: ReadSessionDep
) -> Response:
    page = parse_page(request, stats.CAPABILITY_ORDER_FIELDS)
    found = stats.machine_capabilities(
        session, org, capability_filter(request), page, page.order_field, page.descending
    )
    return await render_page(page, found, MachineCapability.of)
