"""``/instance/type``: instance types with their capabilities, and their machine associations.

Mounted before the tenant-side ``instance`` router so that ``/instance/type`` is never read as an
instance id.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from nico.api.binding import (
    FieldErrors,
    bool_param,
    description_problem,
    include_relations,
    labels_problem,
    name_problem,
    parse_uuid,
    read_body,
    single_param,
    uuid_problem,
)
from nico.api.deps import PrincipalDep, SessionDep
from nico.api.openapi import json_body
from nico.api.pagination import parse_page
from nico.api.rendering import deletion_accepted, json_response, list_response, paged_response
from nico.api.schemas.common import StatusDetail
from nico.api.schemas.instance_type import (
    AllocationStats,
    InstanceType,
    InstanceTypeCreateRequest,
    InstanceTypeUpdateRequest,
    MachineAssociationRequest,
    MachineInstanceType,
    capability_problems,
)
from nico.api.schemas.org import InfrastructureProviderSummary
from nico.api.schemas.site import SiteSummary
from nico.db.enums import InstanceTypeStatus
from nico.db.models import InstanceType as InstanceTypeRow
from nico.db.models import StatusDetail as StatusDetailRow
from nico.services import instance_type as types
from nico.services import orgs, status
from nico.services import site as sites
from nico.services.errors import ServiceError, bad_request, forbidden

router = APIRouter(tags=["instance-type"])

RELATIONS = ("InfrastructureProvider", "Site")
PATCH_HISTORY_LIMIT = 100
MACHINE_ID_LIMIT = 256
MAX_MACHINES_PER_REQUEST = 10_000


def type_id_of(raw: str) -> uuid.UUID:
    parsed = parse_uuid(raw)
    if parsed is None:
        raise bad_request("Invalid Instance Type ID in URL")
    return parsed


def association(item: types.Association) -> MachineInstanceType:
    return MachineInstanceType.of(item.id, item.machine.id, item.instance_type_id, item.machine.updated)


async def render(
    session: SessionDep,
    viewer: orgs.Viewer,
    rows: Sequence[InstanceTypeRow],
    *,
    relations: AbstractSet[str] = frozenset(),
    with_associations: bool = False,
    with_stats: bool = False,
    history: dict[uuid.UUID | str, list[StatusDetailRow]] | None = None,
) -> list[InstanceType]:
    ids = [row.id for row in rows]
    capabilities = await types.capabilities_of_types(session, ids)
    if history is None:
        history = await status.history(session, "instance_type_id", ids)
    at = await sites.sites_by_id(session, (row.site_id for row in rows)) if "Site" in relations else {}
    owners = (
        await orgs.providers_by_id(session, (row.infrastructure_provider_id for row in rows))
        if "InfrastructureProvider" in relations
        else {}
    )
    associations = await types.associations_of(session, ids) if with_associations else {}
    stats = await types.allocation_stats(session, rows, viewer) if with_stats else {}
    out = []
    for row in rows:
        owner = owners.get(row.infrastructure_provider_id)
        site = at.get(row.site_id)
        out.append(
            InstanceType.of(
                row,
                capabilities.get(row.id, []),
                history.get(row.id, []),
                provider=InfrastructureProviderSummary.of(owner) if owner else None,
                site=SiteSummary.of(site) if site else None,
                associations=[association(a) for a in associations.get(row.id, [])] or None,
                allocation_stats=AllocationStats.model_validate(asdict(stats[row.id]))
                if row.id in stats
                else None,
            )
        )
    return out


def machine_ids_problem(ids: list[str] | None) -> dict[str, str]:
    if not ids:
        return {"machineIds": "at least one machine ID is required"}
    if len(ids) > MAX_MACHINES_PER_REQUEST:
        return {"machineIds": f"at most {MAX_MACHINES_PER_REQUEST} machine IDs can be specified"}
    if any(not 1 <= len(value) <= MACHINE_ID_LIMIT for value in ids):
        return {"machineIds": f"each machine ID must be 1 to {MACHINE_ID_LIMIT} characters"}
    return {}


def raise_if_any(message: str, *maps: dict[str, Any]) -> None:
    data: dict[str, Any] = {}
    for problems in maps:
        for key, value in problems.items():
            data.setdefault(key, value)
    if data:
        raise ServiceError(400, message, data)


@router.post(
    "/instance/type",
    operation_id="create-instance-type",
    response_model=InstanceType,
    status_code=201,
    summary="Create an instance type at a site",
    openapi_extra=json_body(InstanceTypeCreateRequest),
)
async def create_instance_type(
    org: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    principal.require_provider_admin(org)
    body = await read_body(request, InstanceTypeCreateRequest)
    errors = FieldErrors()
    errors.add("name", name_problem(body.name))
    errors.add("description", description_problem(body.description))
    errors.add("siteId", uuid_problem(body.site_id))
    errors.add("labels", labels_problem(body.labels))
    if body.controller_machine_type is not None and not 2 <= len(body.controller_machine_type) <= 256:
        errors.add("controllerMachineType", "not a valid value")
    raise_if_any(
        "Error validating Instance Type creation request data",
        errors.errors,
        capability_problems(body.machine_capabilities),
    )
    provider = await orgs.provider_of(session, org)
    site_id = parse_uuid(body.site_id)
    assert body.name is not None and site_id is not None
    row, entries = await types.create_instance_type(
        session,
        provider,
        name=body.name,
        description=body.description,
        site_id=site_id,
        labels=body.labels,
        controller_machine_type=body.controller_machine_type,
        capabilities=[item.spec() for item in body.machine_capabilities or []],
    )
    assert provider is not None
    rendered = (await render(session, orgs.Viewer(provider, None), [row], history={row.id: entries}))[0]
    rendered.status_history = StatusDetail.many(entries)
    return json_response(rendered, 201)


@router.get(
    "/instance/type",
    operation_id="get-all-instance-type",
    response_model=list[InstanceType],
    summary="List the instance types of the org's provider and those at its tenant's sites",
)
async def list_instance_types(
    org: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    provider_role, tenant_role = principal.require_provider_or_tenant(org)
    page = parse_page(request, frozenset(types.ORDER_COLUMNS))
    relations = include_relations(request, RELATIONS)
    viewer = await orgs.viewer(session, org, provider_role=provider_role, tenant_role=tenant_role)
    raw_site = single_param(request, "siteId")
    site_id = None
    if raw_site is not None:
        site_id = parse_uuid(raw_site)
        if site_id is None:
            raise bad_request("Invalid Site ID in query")
    wanted_status = single_param(request, "status")
    if wanted_status is not None and wanted_status not in set(InstanceTypeStatus):
        raise bad_request("Invalid Status value in query")
    with_associations = bool_param(request, "includeMachineAssignment")
    if with_associations and viewer.provider is None:
        raise forbidden("Only Provider can specify query param `includeMachineAssignment`")
    with_stats = bool_param(request, "includeAllocationStats")
    exclude_unallocated = bool_param(request, "excludeUnallocated")
    if exclude_unallocated and viewer.tenant is None:
        raise forbidden("Only Tenant can specify query param `excludeUnallocated`")
    filters = types.InstanceTypeFilters(
        site_id=site_id,
        status=wanted_status,
        query=request.query_params.get("query"),
        exclude_unallocated=exclude_unallocated,
    )
    rows, total = await types.list_instance_types(session, viewer, filters, page)
    items = await render(
        session, viewer, rows, relations=relations, with_associations=with_associations, with_stats=with_stats
    )
    return paged_response(items, page, total)


@router.get(
    "/instance/type/{instanceTypeId}",
    operation_id="get-instance-type",
    response_model=InstanceType,
    summary="Get an instance type",
)
async def get_instance_type(
    org: str, instanceTypeId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    provider_role, tenant_role = principal.require_provider_or_tenant(org)
    viewer = await orgs.viewer(session, org, provider_role=provider_role, tenant_role=tenant_role)
    type_id = type_id_of(instanceTypeId)
    relations = include_relations(request, RELATIONS)
    with_associations = bool_param(request, "includeMachineAssignment")
    if with_associations and viewer.provider is None:
        raise forbidden("Only Provider can specify query param `includeMachineAssignment`")
    with_stats = bool_param(request, "includeAllocationStats")
    row = await types.visible_instance_type(session, viewer, type_id)
    if with_associations and (
        viewer.provider is None or viewer.provider.id != row.infrastructure_provider_id
    ):
        with_associations = False  # machines are shown to their provider only
    rendered = await render(
        session,
        viewer,
        [row],
        relations=relations,
        with_associations=with_associations,
        with_stats=with_stats,
    )
    return json_response(rendered[0])


@router.patch(
    "/instance/type/{instanceTypeId}",
    operation_id="update-instance-type",
    response_model=InstanceType,
    summary="Update an instance type (capabilities only while no machine is associated)",
    openapi_extra=json_body(InstanceTypeUpdateRequest),
)
async def update_instance_type(
    org: str, instanceTypeId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    principal.require_provider_admin(org)
    type_id = type_id_of(instanceTypeId)
    provider = await orgs.provider_of(session, org)
    row = await types.owned_instance_type(session, provider, type_id, lock=True)
    body = await read_body(request, InstanceTypeUpdateRequest)
    errors = FieldErrors()
    errors.add("name", name_problem(body.name, required=False))
    errors.add("description", description_problem(body.description))
    errors.add("labels", labels_problem(body.labels))
    raise_if_any(
        "Error validating Instance Type update request data",
        errors.errors,
        capability_problems(body.machine_capabilities),
    )
    changes = types.InstanceTypeChanges(
        name=body.name,
        description=body.description,
        labels=body.labels,
        capabilities=[item.spec() for item in body.machine_capabilities]
        if body.machine_capabilities is not None
        else None,
    )
    row = await types.update_instance_type(session, row, changes)
    assert provider is not None
    history = await status.history(session, "instance_type_id", [row.id], limit=PATCH_HISTORY_LIMIT)
    return json_response((await render(session, orgs.Viewer(provider, None), [row], history=history))[0])


@router.delete(
    "/instance/type/{instanceTypeId}",
    operation_id="delete-instance-type",
    status_code=202,
    response_model=str,
    summary="Delete an instance type (no instances or allocations may use it)",
)
async def delete_instance_type(
    org: str, instanceTypeId: str, principal: PrincipalDep, session: SessionDep
) -> Response:
    principal.require_provider_admin(org)
    type_id = type_id_of(instanceTypeId)
    row = await types.owned_instance_type(session, await orgs.provider_of(session, org), type_id, lock=True)
    await types.delete_instance_type(session, row)
    return deletion_accepted()


@router.post(
    "/instance/type/{instanceTypeId}/machine",
    operation_id="create-instance-type-machine-association",
    response_model=list[MachineInstanceType],
    status_code=201,
    summary="Associate machines with an instance type",
    openapi_extra=json_body(MachineAssociationRequest),
)
async def create_association(
    org: str, instanceTypeId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    principal.require_provider_admin(org)
    type_id = type_id_of(instanceTypeId)
    row = await types.owned_instance_type(
        session, await orgs.provider_of(session, org), type_id, missing="Instance Type not found"
    )
    body = await read_body(request, MachineAssociationRequest)
    raise_if_any(
        "Error validating Machine/Instance Type Association creation request data",
        machine_ids_problem(body.machine_ids),
    )
    assert body.machine_ids is not None
    created = await types.associate(session, row, body.machine_ids)
    return list_response([association(item) for item in created], 201)


@router.get(
    "/instance/type/{instanceTypeId}/machine",
    operation_id="get-instance-type-machine-association",
    response_model=list[MachineInstanceType],
    summary="List the machines associated with an instance type",
)
async def list_associations(
    org: str, instanceTypeId: str, request: Request, principal: PrincipalDep, session: SessionDep
) -> Response:
    principal.require_provider_admin(org)
    type_id = type_id_of(instanceTypeId)
    row = await types.owned_instance_type(
        session, await orgs.provider_of(session, org), type_id, missing="Instance Type not found"
    )
    page = parse_page(request, frozenset(types.ASSOCIATION_ORDER_COLUMNS))
    items, total = await types.list_associations(session, row, page)
    return paged_response([association(item) for item in items], page, total)


@router.delete(
    "/instance/type/{instanceTypeId}/machine/{machineAssociationId}",
    operation_id="delete-instance-type-machine-association",
    status_code=202,
    response_model=str,
    summary="Dissociate a machine (by machine id, or the deprecated association id) from an instance type",
)
async def delete_association(
    org: str, instanceTypeId: str, machineAssociationId: str, principal: PrincipalDep, session: SessionDep
) -> Response:
    principal.require_provider_admin(org)
    type_id = type_id_of(instanceTypeId)
    row = await types.owned_instance_type(
        session, await orgs.provider_of(session, org), type_id, missing="Instance Type not found", lock=True
    )
    await types.dissociate(session, row, machineAssociationId)
    return deletion_accepted()
