"""The reference's stats reads (NICo REST 2026-05): ``/machine/gpu/stats``,
``/machine/instance-type/stats``, ``/machine/instance-type/stats/summary``,
``/tenant/instance-type/stats`` and ``/machine-capability``. PROVIDER_ADMIN only; the site must be
the provider's. Mounted before ``machine`` so ``/machine/gpu/...`` is not taken for a machine id."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api.deps import ProviderAdmin, ReadSessionDep
from nico.api.listing import render_page
from nico.api.pagination import PAGED, parse_page
from nico.api.parsing import list_param, parse_go_bool, parse_uuid, single_param
from nico.api.rendering import json_response, list_response
from nico.api.schemas.instance_type import MachineCapability
from nico.api.schemas.stats import (
    MachineGpuStats,
    MachineInstanceTypeStats,
    MachineInstanceTypeSummary,
    MachineStatusStats,
    TenantInstanceTypeStats,
)
from nico.services import stats
from nico.services.errors import bad_request

router = APIRouter(tags=["stats"])

# The stats reads answer 400 "Site ID must be specified in query" without one (site_param reads it).
SITE_REQUIRED = {
    "parameters": [
        {
            "name": "siteId",
            "in": "query",
            "required": True,
            "description": "The provider's site",
            "schema": {"type": "string", "format": "uuid"},
        }
    ]
}


def site_param(request: Request) -> uuid.UUID | None:
    raw = single_param(request, "siteId")
    if raw is None or raw == "":
        return None
    parsed = parse_uuid(raw)
    if parsed is None:
        raise bad_request("Invalid Site ID specified in query")
    return parsed


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


def capability_filter(request: Request) -> stats.CapabilityFilter:
    raw_has = single_param(request, "hasInstanceType")
    has = parse_go_bool(raw_has) if raw_has not in (None, "") else None
    if raw_has not in (None, "") and has is None:
        raise bad_request("Invalid value specified for hasInstanceType in query")
    raw_count = single_param(request, "count")
    try:
        count = int(raw_count) if raw_count not in (None, "") else None
    except ValueError:
        raise bad_request("Invalid value specified for count in query") from None
    inactive_raw = list_param(request, "inactiveDevices")
    try:
        inactive = [int(v) for v in inactive_raw] if inactive_raw else None
    except ValueError:
        raise bad_request("Invalid value specified for inactiveDevices in query") from None
    return stats.CapabilityFilter(
        site_id=site_param(request),
        has_instance_type=has,
        type=single_param(request, "type"),
        name=single_param(request, "name"),
        frequency=single_param(request, "frequency"),
        capacity=single_param(request, "capacity"),
        vendor=single_param(request, "vendor"),
        count=count,
        device_type=single_param(request, "devicetype"),  # lower-case t, as the reference
        inactive_devices=inactive,
    )


@router.get(
    "/machine-capability",
    operation_id="get-all-machine-capabilities",
    response_model=list[MachineCapability],
    responses=PAGED,
    summary="Retrieve all Machine Capabilities",
)
async def machine_capabilities(
    org: str, _: ProviderAdmin, request: Request, session: ReadSessionDep
) -> Response:
    page = parse_page(request, stats.CAPABILITY_ORDER_FIELDS)
    found = stats.machine_capabilities(
        session, org, capability_filter(request), page, page.order_field, page.descending
    )
    return await render_page(page, found, MachineCapability.of)
