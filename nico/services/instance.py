"""Instances (spec §5, §6): create one, create a batch on one NVLink domain, list, get, update (the
NVLink bindings above all), delete.

An instance and its NVLink interfaces stay Pending until the reconciler reports the fabric matches
(:mod:`nico.services.lifecycle`); one on a machine without an NVLink domain has nothing to wait for
and is Ready at once. Every change of desired NVLink state is handed to the reconciler with
:func:`nico.services.nvlink_events.desired_state_changed` in the same transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, exists, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, SiteStatus
from nico.db.models import Instance, InstanceType, Machine, NvlinkInterface, Site, Tenant, Vpc
from nico.services import status
from nico.services.access import tenant_uses_site
from nico.services.errors import ServiceError, bad_request, conflict, forbidden, not_found
from nico.services.instance_bindings import replace_bindings
from nico.services.instance_checks import ORG_MISMATCH, InstanceSpec, Port
from nico.services.instance_create import create, create_batch
from nico.services.instance_view import InstanceView, Source, load, load_for_caller
from nico.services.listing import PageRequest, fetch_page
from nico.services.nvlink_events import desired_state_changed
from nico.services.nvlink_interface import Binding
from nico.services.orgs import require_tenant

__all__ = [
    "ORDER_FIELDS",
    "InstanceFilter",
    "InstanceSpec",
    "Port",
    "create",
    "create_batch",
    "delete_instance",
    "get",
    "list_instances",
    "update_instance",
]

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
    if caller is None:
        raise forbidden("Org does not have a Tenant associated")
    if view is None:
        raise not_found("Could not find Instance with specified ID")
    if view.data["tenant_id"] != caller:
        raise forbidden("Instance does not belong to current Tenant")
    return view


@dataclass(frozen=True)
class InstanceFilter:
    site_ids: Sequence[uuid.UUID] = ()
    vpc_ids: Sequence[uuid.UUID] = ()
    instance_type_ids: Sequence[uuid.UUID] = ()
    machine_ids: Sequence[str] = ()
    statuses: Sequence[str] = ()
    nothing: bool = False  # a filter on something nico never records (OS, NSG, IP address)
    provider_id: uuid.UUID | None = None
    name: str | None = None
    query: str | None = None


async def list_instances(
    session: AsyncSession, org: str, where: InstanceFilter, relations: frozenset[str], page: PageRequest
) -> tuple[list[InstanceView], int]:
    tenant = await require_tenant(session, org, status=403)
    stmt = select(Instance.id).where(Instance.tenant_id == tenant.id)
    for site_id in where.site_ids:
        if not await tenant_uses_site(session, tenant.id, site_id):
            raise forbidden("Tenant is not associated with one or more of the Sites specified in query")
    if where.site_ids:
        stmt = stmt.where(Instance.site_id.in_(where.site_ids))
    if where.vpc_ids:
        known = set((await session.scalars(select(Vpc.id).where(Vpc.id.in_(where.vpc_ids)))).all())
        for vpc_id in where.vpc_ids:
            if vpc_id not in known:
                raise not_found(f"Could not find VPC with ID {vpc_id} specified in query")
        stmt = stmt.where(Instance.vpc_id.in_(where.vpc_ids))
    for value in where.statuses:
        if value not in set(InstanceStatus):
            raise bad_request("Invalid Status value in query")
    if where.statuses:
        stmt = stmt.where(Instance.status.in_(where.statuses))
    if where.instance_type_ids:
        stmt = stmt.where(Instance.instance_type_id.in_(where.instance_type_ids))
    if where.machine_ids:
        stmt = stmt.where(
            exists().where(Machine.instance_id == Instance.id, Machine.id.in_(where.machine_ids))
        )
    if where.provider_id is not None:
        stmt = stmt.where(
            Instance.site_id.in_(select(Site.id).where(Site.infrastructure_provider_id == where.provider_id))
        )
    if where.name is not None:
        stmt = stmt.where(Instance.name == where.name)
    if where.query:
        needle = where.query.lower()
        stmt = stmt.where(
            or_(
                func.strpos(func.lower(Instance.name), needle) > 0,
                func.strpos(func.lower(func.coalesce(Instance.description, "")), needle) > 0,
                func.strpos(func.lower(Instance.status), needle) > 0,
            )
        )
    if where.nothing:
        stmt = stmt.where(Instance.id.is_(None))
    machine_of = select(Machine.id).where(Machine.instance_id == Instance.id).scalar_subquery()
    type_name = (
        select(InstanceType.name).where(InstanceType.id == Instance.instance_type_id).scalar_subquery()
    )
    order: dict[str, Any] = {
        "name": Instance.name,
        "status": Instance.status,
        "created": Instance.created,
        "updated": Instance.updated,
        "machine_id": machine_of,
        "instance_type_name": type_name,
        # One tenant per list, no InfiniBand, no security groups: these orders are the creation order.
        "tenant_org_display_name": Instance.created,
        "has_infiniband": Instance.created,
        "network_security_group.name": Instance.created,
    }
    ids, total = await fetch_page(session, stmt, page, order, Instance.id)
    return await load(session, ids, relations=relations), total


async def update_instance(
    session: AsyncSession,
    org: str,
    instance_id: uuid.UUID,
    changes: dict[str, Any],
    nvlink: list[Binding] | None,
) -> InstanceView:
    """Apply ``changes`` (column -> value; ``name`` checked for clashes) and, when ``nvlink`` is given,
    replace the NVLink bindings (spec §5.6)."""
    row = await session.scalar(select(Instance).where(Instance.id == instance_id).with_for_update())
    if row is None:
        raise not_found("Could not retrieve Instance to update")
    owner = await session.get(Tenant, row.tenant_id)
    if owner is None or owner.org != org:
        raise forbidden(ORG_MISMATCH)
    site = await session.get(Site, row.site_id)
    if site is None or site.status != SiteStatus.REGISTERED:
        raise bad_request("Site is not in Registered state - cannot update Instance")
    if row.status == InstanceStatus.TERMINATING:
        raise conflict("Instance is terminating and cannot be updated")
    name = changes.get("name")
    if name is not None and name != row.name:
        clash = await session.scalar(
            select(Instance.id).where(
                Instance.tenant_id == row.tenant_id, Instance.site_id == row.site_id, Instance.name == name
            )
        )
        if clash is not None:
            raise conflict(
                "Another Instance with specified name already exists for Tenant", {"id": str(clash)}
            )
    reissued = await replace_bindings(session, row, nvlink) if nvlink is not None else None
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
        view.data["nvlink_interfaces"] = [b for b in view.data["nvlink_interfaces"] if b["id"] in reissued]
    return view


async def delete_instance(
    session: AsyncSession,
    org: str,
    instance_id: uuid.UUID,
    *,
    repair_tenant: bool = False,
    health_issue: str | None = None,
) -> None:
    """Terminate: the instance stays Terminating until its GPUs are out of their partitions; one that
    never had NVLink bindings (or has none left) is removed at once."""
    row = await session.scalar(select(Instance).where(Instance.id == instance_id).with_for_update())
    if row is None:
        raise not_found("Could not find Instance with specified ID")
    owner = await session.get(Tenant, row.tenant_id)
    if owner is None or owner.org != org:
        raise forbidden(ORG_MISMATCH)
    site = await session.get(Site, row.site_id)
    if site is None or site.status != SiteStatus.REGISTERED:
        raise ServiceError(500, "Site is not in Registered state - cannot delete Instance")
    if repair_tenant and not owner.targeted_instance_creation:
        raise forbidden("Tenant must have Targeted Instance Creation capability to specify `isRepairTenant`")
    machine = await session.scalar(select(Machine).where(Machine.instance_id == row.id))
    if health_issue and machine is not None:
        await status.record(session, "machine_id", machine.id, machine.status, health_issue)
    bound = await session.scalar(select(exists().where(NvlinkInterface.instance_id == row.id)))
    await desired_state_changed(session, instance_ids=[row.id])
    if not bound:
        await session.execute(delete(Instance).where(Instance.id == row.id))
        return
    row.status = InstanceStatus.TERMINATING
    await status.record(
        session,
        "instance_id",
        row.id,
        InstanceStatus.TERMINATING,
        "Instance deletion successfully initiated on Site",
    )
