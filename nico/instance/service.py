"""Instances (spec §5, §6): list, get, update (the NVLink bindings above all) and delete, and the
reads behind every instance response; creation is :mod:`nico.instance.creation`.

An instance and its NVLink interfaces stay Pending until the reconciler reports the fabric matches
(:mod:`nico.reconciler.lifecycle`); one on a machine without an NVLink domain has nothing to wait for
and is Ready at once. Every change of desired NVLink state is handed to the reconciler with
:func:`nico.services.nvlink_events.desired_state_changed` in the same transaction.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, InterfaceStatus, SiteStatus
from nico.db.models import (
    InfrastructureProvider,
    Instance,
    InstanceInterface,
    InstanceType,
    Machine,
    MachineCapability,
    Site,
    Tenant,
    Vpc,
)
from nico.db.queries import common
from nico.db.queries import stats as stats_queries
from nico.instance import queries
from nico.instance.bindings import replace_bindings
from nico.instance.checks import ORG_MISMATCH
from nico.instance.document import instance_document
from nico.instance.views import InstanceFilter, InstanceView, InterfaceRecord, Relations
from nico.inventory.service import Visibility, machine_view
from nico.inventory.views import MachineView
from nico.services import status
from nico.services.access import tenant_uses_site
from nico.services.errors import ServiceError, bad_request, conflict, forbidden, not_found
from nico.services.instance_type import InstanceTypeRecord
from nico.services.listing import PageRequest, fetch_page
from nico.services.nvlink_events import desired_state_changed
from nico.services.nvlink_interface import Binding
from nico.services.orgs import ProviderRecord, TenantRecord, require_tenant
from nico.services.quotas import check_changes_in_flight
from nico.services.records import copies_of, copy_of
from nico.services.site import SiteRecord
from nico.services.status import StatusRecord
from nico.services.vpc import VpcRecord

RELATIONS = frozenset(
    {
        "InfrastructureProvider",
        "Site",
        "Tenant",
        "InstanceType",
        "Vpc",
        "Machine",
        "OperatingSystem",
        "NetworkSecurityGroup",
    }
)
INTERFACE_ORDER_FIELDS = frozenset(stats_queries.INTERFACE_ORDER)
STATUSES = frozenset(InstanceStatus)
INTERFACE_STATUSES = frozenset(InterfaceStatus)

Source = queries.Source

ORDER_FIELDS = frozenset(
    {
        "name",
        "status",
        "created",
        "updated",
        "machine_id",
        "tenant_org_display_name",
        "instance_type_name",
        "has_infiniband",
        "network_security_group.name",
    }
)


async def get(source: Source, org: str, instance_id: uuid.UUID) -> InstanceView:
    """The instance as its GET shows it (relations are attached separately, when asked for)."""
    caller, view = await load_for_caller(source, org, instance_id)
    _check_caller(caller, view.tenant_id if view is not None else None)
    assert view is not None
    return view


async def get_document(
    conn: psycopg.AsyncConnection[Any], org: str, instance_id: uuid.UUID, *, deprecated_partition_key: bool
) -> str | None:
    """The GET body of the instance without relations, as PostgreSQL writes it (None: only the schema
    can write this one, see :mod:`nico.instance.document`); checked as :func:`get` checks."""
    found = await instance_document(
        conn, org, instance_id, status.DEFAULT_LIMIT, deprecated_partition_key=deprecated_partition_key
    )
    _check_caller(found.caller_tenant_id, found.tenant_id)
    return found.document


def _check_caller(caller: uuid.UUID | None, owner: uuid.UUID | None) -> None:
    """The org's tenant ``caller`` may read an instance of tenant ``owner`` (None: no such instance)."""
    if caller is None:
        raise forbidden("Org does not have a Tenant associated")
    if owner is None:
        raise not_found("Could not find Instance with specified ID")
    if owner != caller:
        raise forbidden("Instance does not belong to current Tenant")


async def list_instances(
    session: AsyncSession, org: str, where: InstanceFilter, relations: frozenset[str], page: PageRequest
) -> tuple[list[InstanceView], int]:
    tenant = await require_tenant(session, org, status=403)
    for site_id in where.site_ids:
        if not await tenant_uses_site(session, tenant.id, site_id):
            raise forbidden("Tenant is not associated with one or more of the Sites specified in query")
    if where.vpc_ids:
        known = await queries.existing_vpc_ids(session, where.vpc_ids)
        for vpc_id in where.vpc_ids:
            if vpc_id not in known:
                raise not_found(f"Could not find VPC with ID {vpc_id} specified in query")
    for value in where.statuses:
        if value not in STATUSES:
            raise bad_request("Invalid Status value in query")
    stmt = queries.instance_ids_where(
        tenant.id,
        site_ids=where.site_ids,
        vpc_ids=where.vpc_ids,
        statuses=where.statuses,
        instance_type_ids=where.instance_type_ids,
        machine_ids=where.machine_ids,
        provider_id=where.provider_id,
        name=where.name,
        query=where.query,
        nothing=where.nothing,
    )
    ids, total = await fetch_page(session, stmt, page, queries.INSTANCE_ORDER, Instance.id)
    return await load(session, ids, relations=relations), total


async def _locked_for_change(
    session: AsyncSession,
    org: str,
    instance_id: uuid.UUID,
    *,
    missing: ServiceError,
    site_not_registered: ServiceError,
) -> tuple[Instance, Tenant]:
    """The instance FOR UPDATE and its tenant, when the org owns it and its site is Registered."""
    row = await queries.locked_instance(session, instance_id)
    if row is None:
        raise missing
    owner = await session.get(Tenant, row.tenant_id)
    if owner is None or owner.org != org:
        raise forbidden(ORG_MISMATCH)
    site = await session.get(Site, row.site_id)
    if site is None or site.status != SiteStatus.REGISTERED:
        raise site_not_registered
    return row, owner


async def update_instance(
    session: AsyncSession,
    org: str,
    instance_id: uuid.UUID,
    changes: dict[str, Any],
    nvlink: list[Binding] | None,
    in_flight_limit: int | None,
) -> InstanceView:
    """Apply ``changes`` (column -> value; ``name`` checked for clashes) and, when ``nvlink`` is given,
    replace the NVLink bindings (spec §5.6). ``in_flight_limit``: the tenant's quota of instances with
    NVLink changes in flight at the site, checked with the commit when the bindings change (None: an
    operator's change, not held to the tenant's quota)."""
    row, _ = await _locked_for_change(
        session,
        org,
        instance_id,
        missing=not_found("Could not retrieve Instance to update"),
        site_not_registered=bad_request("Site is not in Registered state - cannot update Instance"),
    )
    if row.status == InstanceStatus.TERMINATING:
        raise conflict("Instance is terminating and cannot be updated")
    name = changes.get("name")
    if name is not None and name != row.name:
        clash = await queries.instance_named(session, row.tenant_id, row.site_id, name)
        if clash is not None:
            raise conflict(
                "Another Instance with specified name already exists for Tenant", {"id": str(clash)}
            )
    reissued = await replace_bindings(session, row, nvlink) if nvlink is not None else None
    if nvlink is not None and in_flight_limit is not None:
        check_changes_in_flight(session, row.tenant_id, row.site_id, in_flight_limit)
    for column, value in changes.items():
        setattr(row, column, value)
    await status.record(
        session,
        "instance_id",
        row.id,
        InstanceStatus.CONFIGURING,
        "received Instance config update request, processing",
    )
    (view,) = await load(session, [row.id])
    if reissued:
        # Like the reference, the answer to a re-issue lists the new bindings (once each).
        listed = [b for b in view.nvlink_interfaces if b["id"] in reissued]
        view = dataclasses.replace(view, nvlink_interfaces=listed)
    return view


async def delete_instance(
    session: AsyncSession,
    org: str,
    instance_id: uuid.UUID,
    *,
    repair_tenant: bool = False,
    health_issue: str | None = None,
) -> None:
    """Terminate: the instance stays Terminating, its NVLink interfaces Deleting, until its GPUs are
    out of their partitions; one that never had NVLink bindings (or has none left) is removed at
    once."""
    row, owner = await _locked_for_change(
        session,
        org,
        instance_id,
        missing=not_found("Could not find Instance with specified ID"),
        site_not_registered=ServiceError(500, "Site is not in Registered state - cannot delete Instance"),
    )
    if repair_tenant and not owner.targeted_instance_creation:
        raise forbidden("Tenant must have Targeted Instance Creation capability to specify `isRepairTenant`")
    machine = await queries.machine_of_instance(session, row.id)
    if health_issue and machine is not None:
        await status.record(session, "machine_id", machine.id, machine.status, health_issue)
    bound = await queries.has_bindings(session, row.id)
    await desired_state_changed(session, instance_ids=[row.id])
    if not bound:
        await queries.delete_instance(session, row.id)
        return
    await start_termination(session, row, "Instance deletion successfully initiated on Site")


async def start_termination(session: AsyncSession, row: Instance, message: str) -> None:
    """The (locked) instance becomes Terminating, with ``message`` in its history; it is removed once
    the reconciler has its GPUs out of their partitions."""
    row.status = InstanceStatus.TERMINATING
    # From acceptance on, the GPUs are on their way out of their partitions: the interfaces say so
    # (the reference's status for replaced rows) instead of Ready until the instance is gone.
    await queries.mark_bindings_deleting(session, row.id)
    await status.record(session, "instance_id", row.id, InstanceStatus.TERMINATING, message)


# ---- reading instances as their responses show them ----------------------------------------------
# Each instance comes with its machine, Ethernet interfaces, NVLink interfaces and newest status
# history as JSON built by PostgreSQL, so a GET is one round trip and a page of any size is two.


async def load(
    session: AsyncSession,
    ids: Sequence[uuid.UUID],
    *,
    relations: frozenset[str] = frozenset(),
    chronological: bool = False,
    history_limit: int = status.DEFAULT_LIMIT,
) -> list[InstanceView]:
    """The instances ``ids`` in that order. ``chronological`` lists all history oldest first (what a
    create response shows); otherwise the newest ``history_limit`` entries, newest first."""
    if not ids:
        return []
    limit = None if chronological else history_limit
    rows = await queries.instance_documents(session, ids, chronological=chronological, history_limit=limit)
    by_id = {row["id"]: InstanceView.of(row) for row in rows}
    return await with_relations(session, [by_id[i] for i in ids if i in by_id], relations)


async def load_for_caller(
    source: Source, org: str, instance_id: uuid.UUID
) -> tuple[uuid.UUID | None, InstanceView | None]:
    """The org's tenant id and the instance (either may be missing), in one query."""
    row = await queries.instance_document_for_caller(source, org, instance_id, status.DEFAULT_LIMIT)
    return row["caller_tenant_id"], (InstanceView.of(row) if row["id"] is not None else None)


async def with_relations(
    session: AsyncSession, views: Sequence[InstanceView], relations: frozenset[str]
) -> list[InstanceView]:
    """``views`` with their ``includeRelation`` objects, one query per relation kind."""
    if not views or not relations:
        return list(views)

    async def rows_by_id(model: Any, ids: set[Any]) -> dict[Any, Any]:
        # The relation's name is its model's (``includeRelation=Vpc``: the Vpc rows).
        return await common.rows_by_id(session, model, ids) if model.__name__ in relations else {}

    tenants = copies_of(TenantRecord, await rows_by_id(Tenant, {v.tenant_id for v in views}))
    sites = copies_of(SiteRecord, await rows_by_id(Site, {v.site_id for v in views}))
    providers = copies_of(
        ProviderRecord,
        await rows_by_id(InfrastructureProvider, {v.infrastructure_provider_id for v in views}),
    )
    types = copies_of(InstanceTypeRecord, await rows_by_id(InstanceType, {v.instance_type_id for v in views}))
    vpcs = copies_of(VpcRecord, await rows_by_id(Vpc, {v.vpc_id for v in views}))
    machines = await _machines_as_tenants_see_them(
        session, views, await rows_by_id(Machine, {v.machine_id for v in views})
    )
    return [
        dataclasses.replace(
            view,
            relations=Relations(
                tenant=tenants.get(view.tenant_id),
                site=sites.get(view.site_id),
                provider=providers.get(view.infrastructure_provider_id),
                instance_type=types.get(view.instance_type_id),
                vpc=vpcs.get(view.vpc_id),
                machine=machines.get(view.id),
            ),
        )
        for view in views
    ]


async def _machines_as_tenants_see_them(
    session: AsyncSession, views: Sequence[InstanceView], machines: dict[Any, Machine]
) -> dict[uuid.UUID, MachineView]:
    """Each instance's machine (by instance id) as its tenant sees it, with capabilities and history."""
    if not machines:
        return {}
    capabilities: dict[str, list[MachineCapability]] = {}
    for capability in await queries.capabilities_of_machines(session, list(machines)):
        capabilities.setdefault(str(capability.machine_id), []).append(capability)
    history = await status.history(session, "machine_id", list(machines))
    tenant_view = Visibility(provider=False, full=False)
    return {
        view.id: machine_view(
            machine,
            tenant_view,
            provider_id=view.infrastructure_provider_id,
            tenant_id=view.tenant_id,
            capabilities=capabilities.get(str(machine.id), []),
            history=history.get(machine.id, []),
        )
        for view in views
        if (machine := machines.get(view.machine_id)) is not None
    }


# ---- an instance's history and Ethernet interfaces (``/instance/{id}/status-history`` and
# ``/instance/{id}/interface``): TENANT_ADMIN of the instance's tenant.


async def _owned(session: AsyncSession, org: str, instance_id: uuid.UUID) -> None:
    tenant = await require_tenant(session, org, status=403)
    owner = await stats_queries.instance_tenant(session, instance_id)
    if owner is None:
        raise not_found("Could not find Instance with specified ID")
    if owner != tenant.id:
        raise forbidden("Instance does not belong to current Tenant")


async def status_history(
    session: AsyncSession, org: str, instance_id: uuid.UUID, page: PageRequest
) -> tuple[list[StatusRecord], int]:
    await _owned(session, org, instance_id)
    return await status.page(session, "instance_id", instance_id, page)


async def interfaces(
    session: AsyncSession, org: str, instance_id: uuid.UUID, statuses: Sequence[str], page: PageRequest
) -> tuple[list[InterfaceRecord], int]:
    await _owned(session, org, instance_id)
    for value in statuses:
        if value not in INTERFACE_STATUSES:
            raise bad_request(f"Invalid Status value: {value} in query")
    rows, total = await fetch_page(
        session,
        stats_queries.instance_interfaces(instance_id, statuses),
        page,
        stats_queries.INTERFACE_ORDER,
        InstanceInterface.id,
    )
    return [copy_of(InterfaceRecord, row) for row in rows], total
