"""Machines: who sees which, list filters, and the changes a provider (or a privileged tenant) makes.

A caller acts either as the machines' provider or as a tenant: the provider role wins (as in the
reference). Tenants see machines only when privileged (targeted instance creation) at a site where
they hold an allocation, or the machine holding one of their instances.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import CapabilityType, MachineStatus, SiteStatus
from nico.db.models import Gpu, InstanceType, Machine, MachineCapability
from nico.inventory import queries as q
from nico.inventory import registration
from nico.inventory.records import MachineRecord, RegistrationResult
from nico.inventory.views import GpuView, InstanceTypeSummaryView, LocationView, MachineView
from nico.services import nvlink_events, orgs, status
from nico.services import site as sites
from nico.services.errors import ServiceError, bad_request, forbidden, not_found
from nico.services.instance_type import (
    ASSIGNABLE,
    CapabilitySpec,
    capabilities_of_machines,
    capabilities_of_types,
    capability_mismatch,
    ensure_capacity_without,
    instance_types_by_id,
    rendered_status,
)
from nico.services.listing import PageRequest, fetch_page
from nico.services.orgs import ProviderRecord, Viewer, provider_record
from nico.services.search import search_pattern
from nico.services.site import SiteRecord
from nico.services.status import StatusRecord

ORDER_COLUMNS: dict[str, Any] = q.ORDER_COLUMNS
RELATIONS = ("InfrastructureProvider", "Site", "InstanceType")
STATUSES = frozenset(MachineStatus)
CAPABILITY_TYPES = frozenset(CapabilityType)
NO_PROVIDER = "Infrastructure Provider not found in org"
NOT_FOUND = "Could not find Machine with specified ID"
NOT_PROVIDERS = "Machine doesn't belong to org's Infrastructure provider"
MISSING_ON_SITE = "Machine is missing on Site"
DISSOCIATE_BREAKS_ALLOCATIONS = (
    "Machine cannot be dissociated from existing Instance Type as it will violate Allocation Constraints"
)


@dataclass(frozen=True)
class MachineFilters:
    site_id: uuid.UUID | None = None
    instance_type_ids: list[uuid.UUID] = field(default_factory=list)
    has_instance_type: bool | None = None
    has_instance: bool | None = None
    statuses: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    tenant_ids: list[uuid.UUID] = field(default_factory=list)
    capability_types: list[str] = field(default_factory=list)
    capability_names: list[str] = field(default_factory=list)
    hw_sku_device_types: list[str] = field(default_factory=list)
    is_missing_on_site: bool | None = None
    query: str | None = None


@dataclass(frozen=True)
class Visibility:
    """How a caller sees one machine: as its provider (NVLink info), with the full view of a
    privileged tenant (serial number), or as a tenant whose instance it holds."""

    provider: bool
    full: bool


async def views(
    session: AsyncSession,
    rows: Sequence[Machine],
    seen: Sequence[Visibility],
    *,
    relations: AbstractSet[str] = frozenset(),
    history: dict[uuid.UUID | str, list[StatusRecord]] | None = None,
) -> list[MachineView]:
    ids = [row.id for row in rows]
    owners = await site_providers(session, rows)
    tenants = await instance_tenants(session, rows)
    capabilities = await capabilities_of_machines(session, ids)
    gpus = await gpus_of(session, [row.id for row, how in zip(rows, seen, strict=True) if how.provider])
    if history is None:
        history = await status.history(session, "machine_id", ids)
    providers = (
        await orgs.providers_by_id(session, owners.values()) if "InfrastructureProvider" in relations else {}
    )
    at = await sites.sites_by_id(session, (row.site_id for row in rows)) if "Site" in relations else {}
    itypes = (
        await instance_types_by_id(session, (row.instance_type_id for row in rows))
        if "InstanceType" in relations
        else {}
    )
    out = []
    for row, how in zip(rows, seen, strict=True):
        provider = providers.get(owners[row.site_id])
        site = at.get(row.site_id)
        itype = itypes.get(row.instance_type_id) if row.instance_type_id else None
        out.append(
            machine_view(
                row,
                how,
                provider_id=owners[row.site_id],
                tenant_id=tenants.get(row.instance_id) if row.instance_id else None,
                capabilities=capabilities.get(row.id, []),
                history=history.get(row.id, []),
                gpus=gpus.get(row.id, []),
                provider=provider_record(provider) if provider else None,
                site=sites.site_record(site) if site else None,
                instance_type=_type_summary(itype) if itype else None,
            )
        )
    return out


def machine_view(
    row: Machine,
    how: Visibility,
    *,
    provider_id: uuid.UUID,
    tenant_id: uuid.UUID | None,
    capabilities: Sequence[MachineCapability],
    history: Sequence[StatusRecord],
    gpus: Sequence[Gpu] = (),
    provider: ProviderRecord | None = None,
    site: SiteRecord | None = None,
    instance_type: InstanceTypeSummaryView | None = None,
) -> MachineView:
    """The machine as ``how`` sees it, with the relations given: what its response and an instance's
    show."""
    shown = rendered_status(row)
    location = None
    if how.provider and row.domain_uuid is not None and row.chassis_serial is not None:
        location = LocationView(
            row.domain_uuid,
            row.chassis_serial,
            row.tray_index,
            tuple(GpuView(g.device_id, g.gpu_uid, g.slot_id) for g in gpus),
        )
    return MachineView(
        id=row.id,
        site_id=row.site_id,
        provider_id=provider_id,
        tenant_id=tenant_id,
        instance_type_id=row.instance_type_id,
        instance_id=row.instance_id,
        controller_machine_type=row.controller_machine_type,
        hw_sku_device_type=row.hw_sku_device_type,
        vendor=row.vendor,
        product_name=row.product_name,
        hostname=row.hostname,
        serial_number=row.serial_number if how.full else None,
        maintenance_message=row.maintenance_message,
        labels=row.labels,
        status=shown,
        usable_by_tenant=shown == MachineStatus.READY and not row.is_missing_on_site,
        created=row.created,
        updated=row.updated,
        capabilities=tuple(CapabilitySpec.of(c) for c in capabilities),
        history=tuple(history),
        location=location,
        provider=provider,
        site=site,
        instance_type=instance_type,
    )


def _type_summary(row: InstanceType) -> InstanceTypeSummaryView:
    return InstanceTypeSummaryView(row.id, row.name, row.infrastructure_provider_id, row.site_id, row.status)


async def provider_viewer(session: AsyncSession, org: str) -> Viewer:
    """The org's provider side (404 when the org has no provider)."""
    provider = await orgs.provider_of(session, org)
    if provider is None:
        raise not_found(NO_PROVIDER)
    return Viewer(orgs.provider_record(provider), None)


async def register_machines(
    session: AsyncSession,
    org: str,
    *,
    site_id: uuid.UUID,
    machines: list[MachineRecord],
    instance_type_id: uuid.UUID | None,
) -> RegistrationResult:
    """Bulk registration by the org's provider (see :func:`nico.inventory.registration.register_machines`)."""
    provider = await orgs.provider_of(session, org)
    if provider is None:
        raise not_found(f"Org '{org}' does not have an Infrastructure Provider")
    return await registration.register_machines(
        session,
        site_id=site_id,
        machines=machines,
        provider_id=provider.id,
        instance_type_id=instance_type_id,
    )


@dataclass
class MachineChange:
    """Exactly one of these is set (the router enforces it)."""

    instance_type_id: uuid.UUID | None = None
    clear_instance_type: bool = False
    maintenance: bool | None = None
    maintenance_message: str | None = None
    labels: dict[str, Any] | None = None


async def privileged_at(session: AsyncSession, viewer: Viewer, site_id: uuid.UUID) -> bool:
    """A tenant with targeted instance creation holding an allocation at the site (nico keeps no
    tenant accounts: the allocation is what ties a tenant to a provider's site)."""
    tenant = viewer.tenant
    if tenant is None or not tenant.targeted_instance_creation:
        return False
    return await q.tenant_holds_site(session, tenant.id, site_id)


async def list_machines(
    session: AsyncSession,
    viewer: Viewer,
    filters: MachineFilters,
    page: PageRequest,
    relations: AbstractSet[str] = frozenset(),
) -> tuple[list[MachineView], int]:
    rows, total = await _machine_page(session, viewer, filters, page)
    how = Visibility(provider=viewer.provider is not None, full=True)
    return await views(session, rows, [how] * len(rows), relations=relations), total


async def _machine_page(
    session: AsyncSession, viewer: Viewer, filters: MachineFilters, page: PageRequest
) -> tuple[Sequence[Machine], int]:
    site = None
    if filters.site_id is not None:
        site = await q.site_by_id(session, filters.site_id)
        if site is None:
            raise not_found("Could not find Site specified in query")
    if viewer.provider is not None:
        if site is not None and site.infrastructure_provider_id != viewer.provider.id:
            raise forbidden("Site specified in query doesn't belong to org's Infrastructure provider")
    else:
        assert viewer.tenant is not None
        if site is None:
            raise bad_request(
                "Site ID must be specified in query when retrieving Machines as a privileged Tenant"
            )
        if not viewer.tenant.targeted_instance_creation:
            raise forbidden(
                "Tenant must have targeted Instance creation capability in order to retrieve Machines"
            )
        if not await privileged_at(session, viewer, site.id):
            raise forbidden("Tenant does not have access to this Site")
    if filters.instance_type_ids:
        known = await q.existing_instance_type_ids(session, filters.instance_type_ids)
        if len(known) != len(set(filters.instance_type_ids)):
            raise not_found("Could not find Instance Type specified in query")
    stmt = q.machines_matching(
        provider_id=viewer.provider.id if viewer.provider is not None else None,
        site_id=site.id if site is not None else None,
        instance_type_ids=filters.instance_type_ids,
        has_instance_type=filters.has_instance_type,
        has_instance=filters.has_instance,
        statuses=filters.statuses,
        ids=filters.ids,
        instance_tenant_ids=filters.tenant_ids if viewer.provider is not None else [],
        capability_types=filters.capability_types,
        capability_names=filters.capability_names,
        hw_sku_device_types=filters.hw_sku_device_types,
        is_missing_on_site=filters.is_missing_on_site,
        pattern=search_pattern(filters.query),
    )
    return await fetch_page(session, stmt, page, ORDER_COLUMNS, Machine.id)


async def site_providers(session: AsyncSession, machines: Sequence[Machine]) -> dict[uuid.UUID, uuid.UUID]:
    """Site id -> its provider id, for the machines' sites."""
    return await q.site_providers(session, (m.site_id for m in machines))


async def instance_tenants(session: AsyncSession, machines: Sequence[Machine]) -> dict[uuid.UUID, uuid.UUID]:
    """Instance id -> tenant id, for the instances the machines hold."""
    return await q.instance_tenants(session, (m.instance_id for m in machines if m.instance_id is not None))


async def gpus_of(session: AsyncSession, machine_ids: Sequence[str]) -> dict[str, list[Gpu]]:
    return await q.gpus_of(session, machine_ids)


async def visible_machine(
    session: AsyncSession, viewer: Viewer, machine_id: str
) -> tuple[Machine, Visibility]:
    machine = await q.machine_by_id(session, machine_id)
    if machine is None:
        raise not_found(NOT_FOUND)
    owner = (await site_providers(session, [machine]))[machine.site_id]
    if viewer.provider is not None:
        if owner != viewer.provider.id:
            raise forbidden(NOT_PROVIDERS)
        return machine, Visibility(provider=True, full=True)
    if await privileged_at(session, viewer, machine.site_id):
        return machine, Visibility(provider=False, full=True)
    tenant_id = viewer.tenant.id if viewer.tenant else None
    if (
        machine.instance_id is not None
        and (await instance_tenants(session, [machine])).get(machine.instance_id) == tenant_id
    ):
        return machine, Visibility(provider=False, full=False)
    raise forbidden(
        "Machine details can only be retrieved by it's Provider, privileged Tenants or Tenants who have an "
        "associated Instance"
    )


async def get_machine(
    session: AsyncSession, viewer: Viewer, machine_id: str, relations: AbstractSet[str] = frozenset()
) -> MachineView:
    row, how = await visible_machine(session, viewer, machine_id)
    return (await views(session, [row], [how], relations=relations))[0]


async def lock_types(session: AsyncSession, ids: Sequence[uuid.UUID | None]) -> dict[uuid.UUID, InstanceType]:
    """Lock instance types in id order (every path locks types before machines, so they never deadlock)."""
    return await q.instance_types_locked(session, (i for i in ids if i is not None))


async def update_machine(
    session: AsyncSession, viewer: Viewer, machine_id: str, change: MachineChange
) -> MachineView:
    machine = await q.machine_by_id(session, machine_id)
    if machine is None:
        raise not_found(NOT_FOUND)
    owner = (await site_providers(session, [machine]))[machine.site_id]
    as_provider = viewer.provider is not None and owner == viewer.provider.id
    changes_type = change.instance_type_id is not None or change.clear_instance_type
    if not as_provider:
        if viewer.provider is not None and viewer.tenant is None:
            raise forbidden(NOT_PROVIDERS)
        if changes_type:
            raise forbidden("Only Provider Admins can update or clear Machine's Instance Type")
        if not await privileged_at(session, viewer, machine.site_id):
            raise forbidden("Machine can only be updated by its Provider or privileged Tenants")
    if changes_type:
        await change_instance_type(session, machine, change.instance_type_id, owner)
    elif change.maintenance is not None:
        await q.relock_machine(session, machine)
        if change.maintenance:
            machine.status = MachineStatus.MAINTENANCE
            machine.maintenance_message = change.maintenance_message
            await status.record(
                session, "machine_id", machine.id, MachineStatus.MAINTENANCE, change.maintenance_message
            )
        elif machine.status == MachineStatus.MAINTENANCE:  # leaving maintenance: back to Ready
            machine.status = MachineStatus.READY
            machine.maintenance_message = None
            await status.record(
                session,
                "machine_id",
                machine.id,
                MachineStatus.READY,
                "Machine maintenance mode has been disabled",
            )
    elif change.labels is not None:
        await q.relock_machine(session, machine)
        if machine.labels != change.labels:
            machine.labels = change.labels
    await session.flush()
    return (await views(session, [machine], [Visibility(provider=as_provider, full=True)]))[0]


async def change_instance_type(
    session: AsyncSession, machine: Machine, new_type_id: uuid.UUID | None, owner: uuid.UUID
) -> None:
    """Set (``new_type_id``) or clear the machine's instance type, keeping every allocation satisfiable."""
    types = await lock_types(session, [machine.instance_type_id, new_type_id])
    await q.relock_machine(session, machine)
    if machine.instance_id is not None:
        raise bad_request(
            "Machine is currently in use by an Instance, so its Instance Type cannot be modified"
        )
    if new_type_id is not None:
        new = types.get(new_type_id)
        if new is None:
            raise not_found("Could not find Instance Type with specified ID")
        if new.infrastructure_provider_id != owner:
            raise forbidden("Instance Type is not associated with org's Infrastructure Provider")
        if machine.instance_type_id == new.id:
            return
        shown = rendered_status(machine)
        if shown not in ASSIGNABLE:
            raise bad_request(
                f"Machine: {machine.id} is in {shown} state. Instance Type can only be assigned to a "
                "Machine in `Ready` or `Reset` status"
            )
        if new.site_id != machine.site_id:
            raise bad_request("Instance Type does not belong to the Site of the Machine")
        site = await q.site_by_id(session, machine.site_id)
        if site is None or site.status != SiteStatus.REGISTERED:
            raise bad_request(
                "Site of the Machine must be in Registered state in order to assign an Instance Type"
            )
        wanted = [
            CapabilitySpec.of(c) for c in (await capabilities_of_types(session, [new.id])).get(new.id, [])
        ]
        reported = (await capabilities_of_machines(session, [machine.id])).get(machine.id, [])
        problem = capability_mismatch(wanted, {machine.id: [CapabilitySpec.of(c) for c in reported]})
        if problem is not None:
            raise ServiceError(400, problem.message)
    elif machine.instance_type_id is None:
        return
    if machine.instance_type_id is not None:
        await ensure_capacity_without(session, machine.instance_type_id, 1, DISSOCIATE_BREAKS_ALLOCATIONS)
    machine.instance_type_id = new_type_id


async def delete_machine(session: AsyncSession, viewer: Viewer, machine_id: str) -> None:
    """Forget a machine the inventory reports missing (as the reference: only then)."""
    machine = await q.machine_by_id(session, machine_id)
    if machine is None:
        raise not_found(NOT_FOUND)
    owner = (await site_providers(session, [machine]))[machine.site_id]
    if viewer.provider is None or owner != viewer.provider.id:
        raise forbidden(NOT_PROVIDERS)
    await lock_types(session, [machine.instance_type_id])
    await q.relock_machine(session, machine)
    last = (await status.history(session, "machine_id", [machine.id], limit=1)).get(machine.id, [])
    if not machine.is_missing_on_site or not last or last[0].message != MISSING_ON_SITE:
        raise bad_request("Machine exists on Site and cannot be deleted")
    if machine.instance_id is not None:
        raise bad_request("Machine is in use by an Instance and cannot be deleted")
    if machine.instance_type_id is not None:
        await ensure_capacity_without(
            session,
            machine.instance_type_id,
            1,
            "Machine cannot be deleted as its Instance Type would no longer satisfy Allocation Constraints",
        )
    domain = machine.domain_uuid
    await session.delete(machine)
    await session.flush()
    # Its GPUs leave the fabric's bookkeeping: let the reconciler look at the domain now.
    await nvlink_events.desired_state_changed(session, domains=[domain] if domain else [])
