"""Instance types: capabilities and their rules, visibility, and the machine association.

A machine's association with an instance type is ``machine.instance_type_id``. The instance type row
is the capacity holder: every change that could break ``Σ reserved <= associated machines`` locks it
first (``FOR NO KEY UPDATE``: rows referencing it can still be inserted), so racing allocations and
dissociations are serialised.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, or_
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.base import utcnow
from nico.db.enums import CapabilityType as CapabilityType  # the schemas' enum of capability types
from nico.db.enums import InstanceTypeStatus, MachineStatus
from nico.db.models import (
    InfrastructureProvider,
    InstanceType,
    Machine,
    MachineCapability,
)
from nico.db.queries import instance_type as q
from nico.services import orgs, status
from nico.services import site as sites
from nico.services.errors import ServiceError, bad_request, conflict, forbidden, not_found
from nico.services.listing import PageRequest, fetch_page
from nico.services.orgs import Viewer
from nico.services.records import copies_of, copy_of
from nico.services.search import search_pattern

ORDER_COLUMNS: dict[str, Any] = q.ORDER_COLUMNS
ASSOCIATION_ORDER_COLUMNS: dict[str, Any] = q.ASSOCIATION_ORDER_COLUMNS
READY_MESSAGE = "Instance type is ready for use"
NO_PROVIDER = "Org does not have an Infrastructure Provider"
ASSOCIATION_NAMESPACE = uuid.UUID("0b8f4f0e-5f5c-4bde-9d8e-6d1a4c1f3a70")
ASSIGNABLE = (MachineStatus.READY, MachineStatus.RESET)


@dataclass(frozen=True)
class CapabilitySpec:
    """One requested capability (of an instance type, or reported for a machine)."""

    type: str
    name: str
    frequency: str | None = None
    capacity: str | None = None
    vendor: str | None = None
    cores: int | None = None
    threads: int | None = None
    inactive_devices: list[int] | None = None
    hardware_revision: str | None = None
    count: int | None = None
    device_type: str | None = None

    def row(self, position: int, **owner: Any) -> MachineCapability:
        return MachineCapability(
            position=position, **{f.name: getattr(self, f.name) for f in fields(self)}, **owner
        )

    @classmethod
    def of(cls, row: MachineCapability) -> CapabilitySpec:
        return copy_of(cls, row)


@dataclass(frozen=True)
class InstanceTypeFilters:
    site_id: uuid.UUID | None = None
    status: str | None = None
    query: str | None = None
    exclude_unallocated: bool = False


@dataclass
class InstanceTypeChanges:
    name: str | None = None
    description: str | None = None
    labels: dict[str, Any] | None = None
    capabilities: list[CapabilitySpec] | None = None


@dataclass(frozen=True)
class Stats:
    assigned: int
    total: int
    used: int
    unused: int
    unused_usable: int
    max_allocatable: int | None


@dataclass(frozen=True)
class Association:
    """A machine's association with an instance type; ``id`` is the deprecated id derived from the pair,
    ``updated`` the machine's."""

    machine_id: str
    instance_type_id: uuid.UUID
    updated: datetime
    id: uuid.UUID

    @classmethod
    def of(cls, machine: Machine, instance_type_id: uuid.UUID) -> Association:
        return cls(
            machine.id, instance_type_id, machine.updated, association_id(machine.id, instance_type_id)
        )


RELATIONS = ("InfrastructureProvider", "Site")
STATUSES = frozenset(InstanceTypeStatus)
PATCH_HISTORY_LIMIT = 100


@dataclass(frozen=True)
class OwnedInstanceType:
    """An instance type of the caller's provider, checked (and locked where asked) before the handler
    reads its body, as the reference orders its checks; the change that follows finds the row in the
    session by ``id``."""

    id: uuid.UUID


@dataclass(frozen=True)
class InstanceTypeRecord:
    """An instance type's columns as views show them (what other resources embed with
    ``includeRelation=InstanceType``)."""

    id: uuid.UUID
    infrastructure_provider_id: uuid.UUID
    site_id: uuid.UUID
    name: str
    description: str | None
    controller_machine_type: str | None
    labels: dict[str, Any] | None
    status: str
    created: datetime
    updated: datetime


@dataclass(frozen=True)
class InstanceTypeView:
    """An instance type as responses show it: capabilities, newest history, requested relations,
    machine associations (its provider only) and allocation stats when asked for."""

    instance_type: InstanceTypeRecord
    capabilities: list[CapabilitySpec]
    history: list[status.StatusRecord]
    provider: orgs.ProviderRecord | None = None
    site: sites.SiteRecord | None = None
    associations: list[Association] | None = None
    stats: Stats | None = None


async def views(
    session: AsyncSession,
    rows: Sequence[InstanceType],
    *,
    viewer: Viewer | None = None,
    relations: AbstractSet[str] = frozenset(),
    with_associations: bool = False,
    with_stats: bool = False,
    history: dict[uuid.UUID | str, list[status.StatusRecord]] | None = None,
) -> list[InstanceTypeView]:
    """``viewer`` decides what the allocation stats count (required with ``with_stats``)."""
    ids = [row.id for row in rows]
    capabilities = await capabilities_of_types(session, ids)
    if history is None:
        history = await status.history(session, "instance_type_id", ids)
    at = await sites.site_records(session, (row.site_id for row in rows)) if "Site" in relations else {}
    owners = (
        copies_of(
            orgs.ProviderRecord,
            await orgs.providers_by_id(session, (row.infrastructure_provider_id for row in rows)),
        )
        if "InfrastructureProvider" in relations
        else {}
    )
    associations = await associations_of(session, ids) if with_associations else {}
    assert viewer is not None or not with_stats
    stats = await allocation_stats(session, rows, viewer) if with_stats and viewer is not None else {}
    return [
        InstanceTypeView(
            copy_of(InstanceTypeRecord, row),
            [CapabilitySpec.of(c) for c in capabilities.get(row.id, [])],
            history.get(row.id, []),
            owners.get(row.infrastructure_provider_id),
            at.get(row.site_id),
            associations.get(row.id) or None,
            stats.get(row.id),
        )
        for row in rows
    ]


def association_id(machine_id: str, instance_type_id: uuid.UUID) -> uuid.UUID:
    """The stable id nico shows for a machine/instance type pair (the reference's association row id)."""
    return uuid.uuid5(ASSOCIATION_NAMESPACE, f"{machine_id}/{instance_type_id}")


def check_capabilities(specs: Iterable[CapabilitySpec], *, reported: bool = False) -> None:
    """The device-type and inactive-device rules (400, no data). ``reported`` capabilities (machine
    inventory) may carry an empty device type on GPU and Network, as the reference's inventory writes."""
    for spec in specs:
        device = spec.device_type
        if device is not None and not (reported and device == ""):
            if spec.type == CapabilityType.GPU and device != "NVLink":
                raise bad_request(f"Unsupported Device Type specified for GPU Capability {device}")
            if spec.type == CapabilityType.NETWORK and device != "DPU":
                raise bad_request(f"Unsupported Device Type specified for Network Capability {device}")
            if spec.type not in (CapabilityType.GPU, CapabilityType.NETWORK):
                raise bad_request(
                    f"Unsupported Device Type: {device} specified for Capability type {spec.type}"
                )
        if spec.inactive_devices and spec.type != CapabilityType.INFINIBAND:
            raise bad_request("InactiveDevices specified for non-InfiniBand Capability Type")


MATCHED_ATTRIBUTES = ("frequency", "capacity", "vendor", "device_type", "inactive_devices", "count")


def capability_mismatch(
    wanted: Sequence[CapabilitySpec], machines: dict[str, list[CapabilitySpec]]
) -> ServiceError | None:
    """The reference's match rule: each capability of the type must be owned (same type and name, equal
    set attributes) by every machine that reports capabilities; machines reporting none are skipped
    unless none reports any."""
    if not wanted:
        return None
    reporting = {machine_id: caps for machine_id, caps in machines.items() if caps}
    if not reporting:
        return conflict(
            "Machines specified in request currently do not have any Capabilities to match against "
            "Instance Type"
        )
    for machine_id, caps in reporting.items():
        for want in wanted:
            if not any(
                have.type == want.type
                and have.name == want.name
                and all(
                    getattr(want, attr) is None or getattr(want, attr) == getattr(have, attr)
                    for attr in MATCHED_ATTRIBUTES
                )
                for have in caps
            ):
                return conflict(
                    f"Capabilities for Machine: {machine_id} do not match Instance Type's Capabilities"
                )
    return None


def visible(viewer: Viewer, *, exclude_unallocated: bool = False) -> ColumnElement[bool]:
    """Instance types a caller may read: its provider's, and all types at sites where its tenant holds
    an allocation (only those it holds a constraint on, with ``exclude_unallocated``)."""
    return q.visible_to(
        viewer.provider.id if viewer.provider is not None else None,
        viewer.tenant.id if viewer.tenant is not None else None,
        exclude_unallocated=exclude_unallocated,
    )


async def list_instance_types(
    session: AsyncSession,
    viewer: Viewer,
    filters: InstanceTypeFilters,
    page: PageRequest,
    *,
    relations: AbstractSet[str] = frozenset(),
    with_associations: bool = False,
    with_stats: bool = False,
) -> tuple[list[InstanceTypeView], int]:
    rows, total = await _instance_type_page(session, viewer, filters, page)
    found = await views(
        session,
        rows,
        viewer=viewer,
        relations=relations,
        with_associations=with_associations,
        with_stats=with_stats,
    )
    return found, total


async def _instance_type_page(
    session: AsyncSession, viewer: Viewer, filters: InstanceTypeFilters, page: PageRequest
) -> tuple[Sequence[InstanceType], int]:
    if filters.site_id is not None and await q.site_by_id(session, filters.site_id) is None:
        raise bad_request("Failed to retrieve Site specified in query")
    if filters.exclude_unallocated and viewer.provider is not None:
        # A caller holding both roles keeps its provider view and narrows its tenant view.
        where = or_(
            visible(Viewer(viewer.provider, None)),
            visible(Viewer(None, viewer.tenant), exclude_unallocated=True),
        )
    else:
        where = visible(viewer, exclude_unallocated=filters.exclude_unallocated)
    stmt = q.instance_types_where(
        where, site_id=filters.site_id, status=filters.status, pattern=search_pattern(filters.query)
    )
    return await fetch_page(session, stmt, page, ORDER_COLUMNS, InstanceType.id)


async def visible_instance_type(session: AsyncSession, viewer: Viewer, type_id: uuid.UUID) -> InstanceType:
    row = await q.instance_type_by_id(session, type_id)
    if row is None:
        raise not_found("Could not find InstanceType with specified ID")
    if not await q.instance_type_visible(session, type_id, visible(viewer)):
        raise forbidden("Instance Type is not associated with org")
    return row


async def get_instance_type(
    session: AsyncSession,
    viewer: Viewer,
    type_id: uuid.UUID,
    *,
    relations: AbstractSet[str] = frozenset(),
    with_associations: bool = False,
    with_stats: bool = False,
) -> InstanceTypeView:
    row = await visible_instance_type(session, viewer, type_id)
    if with_associations and (
        viewer.provider is None or viewer.provider.id != row.infrastructure_provider_id
    ):
        with_associations = False  # machines are shown to their provider only
    found = await views(
        session,
        [row],
        viewer=viewer,
        relations=relations,
        with_associations=with_associations,
        with_stats=with_stats,
    )
    return found[0]


async def org_instance_type(
    session: AsyncSession,
    org: str,
    type_id: uuid.UUID,
    *,
    missing: str = "Could not find Instance Type with specified ID",
    lock: bool = False,
) -> OwnedInstanceType:
    """An instance type of the org's provider (see :func:`owned_instance_type`)."""
    provider = await orgs.provider_of(session, org)
    row = await owned_instance_type(session, provider, type_id, missing=missing, lock=lock)
    return OwnedInstanceType(row.id)


async def _owned_row(session: AsyncSession, owned: OwnedInstanceType) -> InstanceType:
    row = await session.get(InstanceType, owned.id)  # in the session (and locked) since the check
    assert row is not None
    return row


async def owned_instance_type(
    session: AsyncSession,
    provider: InfrastructureProvider | None,
    type_id: uuid.UUID,
    *,
    missing: str = "Could not find Instance Type with specified ID",
    lock: bool = False,
) -> InstanceType:
    """An instance type of the caller's provider (403 without a provider, 404, then 403)."""
    if provider is None:
        raise forbidden(NO_PROVIDER)
    row = await q.instance_type_by_id(session, type_id, lock=lock)
    if row is None:
        raise not_found(missing)
    if row.infrastructure_provider_id != provider.id:
        raise forbidden("Instance Type is not associated with org's Infrastructure Provider")
    return row


async def capabilities_of_types(
    session: AsyncSession, type_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[MachineCapability]]:
    return await q.capabilities_of_types(session, type_ids)


async def capabilities_of_machines(
    session: AsyncSession, machine_ids: Sequence[str]
) -> dict[str, list[MachineCapability]]:
    return await q.capabilities_of_machines(session, machine_ids)


async def create_instance_type(
    session: AsyncSession,
    org: str,
    *,
    name: str,
    description: str | None,
    site_id: uuid.UUID,
    labels: dict[str, Any] | None,
    controller_machine_type: str | None,
    capabilities: list[CapabilitySpec],
) -> InstanceTypeView:
    provider = await orgs.provider_of(session, org)
    if provider is None:
        raise forbidden(NO_PROVIDER)
    site = await q.site_by_id(session, site_id)
    if site is None:
        raise bad_request("Could not find Site specified in request")
    if site.infrastructure_provider_id != provider.id:
        raise bad_request(
            "Site specified in request is not associated with the Infrastructure Provider for the Org"
        )
    clash = await q.instance_type_named(session, site.id, name)
    if clash is not None:
        raise conflict(
            f"Instance Type with name: {name} for Site: {site.id} already exists", {"id": str(clash)}
        )
    check_capabilities(capabilities)
    row = InstanceType(
        infrastructure_provider_id=provider.id,
        site_id=site.id,
        name=name,
        description=description,
        labels=labels or {},
        controller_machine_type=controller_machine_type,
        status=InstanceTypeStatus.READY,
    )
    session.add(row)
    await session.flush()
    session.add_all(spec.row(i, instance_type_id=row.id) for i, spec in enumerate(capabilities))
    entry = await status.record(session, "instance_type_id", row.id, InstanceTypeStatus.READY, READY_MESSAGE)
    return (await views(session, [row], history={row.id: [entry]}))[0]


async def update_instance_type(
    session: AsyncSession, owned: OwnedInstanceType, changes: InstanceTypeChanges
) -> InstanceTypeView:
    """Apply a PATCH to an owned instance type (see :func:`owned_instance_type`, taken with a lock)."""
    row = await _owned_row(session, owned)
    if changes.name is not None and changes.name != row.name:
        clash = await q.instance_type_named(session, row.site_id, changes.name, other_than=row.id)
        if clash is not None:
            raise conflict(
                "Another Instance Type with specified name already exists for Site and Provider",
                {"id": str(clash)},
            )
    changed = False
    if changes.capabilities is not None:
        if await q.type_has_machines(session, row.id):
            raise ServiceError(
                412, "MachineCapabilities cannot be updated when there are associated Machines"
            )
        check_capabilities(changes.capabilities)
        current = (await capabilities_of_types(session, [row.id])).get(row.id, [])
        if [CapabilitySpec.of(c) for c in current] != changes.capabilities:
            await q.delete_type_capabilities(session, row.id)
            session.add_all(
                spec.row(i, instance_type_id=row.id) for i, spec in enumerate(changes.capabilities)
            )
            changed = True
    for column in ("name", "description", "labels"):
        value = getattr(changes, column)
        if value is not None and getattr(row, column) != value:
            setattr(row, column, value)
            changed = True
    if changed:
        row.updated = utcnow()
        await session.flush()
    history = await status.history(session, "instance_type_id", [row.id], limit=PATCH_HISTORY_LIMIT)
    return (await views(session, [row], history=history))[0]


async def delete_instance_type(session: AsyncSession, owned: OwnedInstanceType) -> None:
    """Delete an owned instance type; its machines lose the association (ON DELETE SET NULL)."""
    row = await _owned_row(session, owned)
    if await q.type_has_instances(session, row.id):
        raise bad_request("Instance Type is being used by one or more Instances and cannot be deleted")
    if await q.type_has_allocations(session, row.id):
        raise bad_request("Instance Type is being used by one or more Allocations and cannot be deleted")
    await session.delete(row)
    await session.flush()


async def reserved_total(
    session: AsyncSession, type_id: uuid.UUID, *, tenant_id: uuid.UUID | None = None
) -> int:
    """Σ constraint values reserving this instance type (of one tenant when given)."""
    return await q.reserved_total(session, type_id, tenant_id=tenant_id)


async def machine_count(session: AsyncSession, type_id: uuid.UUID) -> int:
    return await q.machine_count(session, type_id)


async def allocation_stats(
    session: AsyncSession, rows: Sequence[InstanceType], viewer: Viewer
) -> dict[uuid.UUID, Stats]:
    """The reference's ``allocationStats``: a provider sees every tenant's totals and what is left to
    allocate; a tenant (not the type's provider) sees its own reservations and instances."""
    out: dict[uuid.UUID, Stats] = {}
    for row in rows:
        as_provider = viewer.provider is not None and viewer.provider.id == row.infrastructure_provider_id
        tenant_id = None if as_provider or viewer.tenant is None else viewer.tenant.id
        assigned = await machine_count(session, row.id)
        total = await reserved_total(session, row.id, tenant_id=tenant_id)
        used = await q.instance_count(session, row.id, tenant_id=tenant_id)
        free = await q.free_machine_count(session, row.id)
        unused = total - used
        left = assigned - total
        out[row.id] = Stats(
            assigned=assigned,
            total=total,
            used=used,
            unused=unused,
            unused_usable=min(unused, free),
            max_allocatable=left if as_provider and left >= 0 else None,
        )
    return out


async def associations_of(
    session: AsyncSession, type_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[Association]]:
    out: dict[uuid.UUID, list[Association]] = defaultdict(list)
    for machine in await q.machines_of_types(session, type_ids):
        assert machine.instance_type_id is not None
        out[machine.instance_type_id].append(Association.of(machine, machine.instance_type_id))
    return out


async def list_associations(
    session: AsyncSession, owned: OwnedInstanceType, page: PageRequest
) -> tuple[list[Association], int]:
    machines, total = await fetch_page(
        session,
        q.machines_of_type(owned.id),
        page,
        ASSOCIATION_ORDER_COLUMNS,
        Machine.id,
    )
    return [Association.of(machine, owned.id) for machine in machines], total


def rendered_status(machine: Machine) -> str:
    """A Ready machine holding an instance is shown as InUse."""
    if machine.status == MachineStatus.READY and machine.instance_id is not None:
        return MachineStatus.IN_USE
    return machine.status


async def associate(
    session: AsyncSession, owned: OwnedInstanceType, machine_ids: Sequence[str]
) -> list[Association]:
    """Associate machines with an owned instance type, all or nothing, in the reference's check order
    (capabilities first, then per machine). nico also requires the machine to be at the type's site."""
    row = await _owned_row(session, owned)
    ids = list(dict.fromkeys(machine_ids))
    machines = await q.machines_locked(session, ids)
    owned_sites = await q.provider_site_ids(session, row.infrastructure_provider_id)
    of_provider = {m.id for m in machines.values() if m.site_id in owned_sites}
    wanted = [CapabilitySpec.of(c) for c in (await capabilities_of_types(session, [row.id])).get(row.id, [])]
    reported = await capabilities_of_machines(session, list(machines))
    problem = capability_mismatch(
        wanted, {mid: [CapabilitySpec.of(c) for c in reported.get(mid, [])] for mid in machines}
    )
    if problem is not None:
        raise problem
    for machine_id in ids:
        machine = machines.get(machine_id)
        if machine is None:
            raise not_found(f"Machine with ID: {machine_id} does not exist")
        shown = rendered_status(machine)
        if shown not in ASSIGNABLE:
            raise bad_request(
                f"Machine: {machine_id} is in {shown} state. Instance Type can only be assigned to a Machine "
                "in `Ready` or `Reset` status"
            )
        if machine_id not in of_provider:
            raise forbidden(f"Machine: {machine_id} is not associated with org's Infrastructure Provider")
        if machine.instance_type_id is not None:
            raise conflict(
                f"Machine: {machine_id} is already associated with Instance Type {machine.instance_type_id}"
            )
        if machine.site_id != row.site_id:
            raise bad_request(f"Machine: {machine_id} is not at the Site of the Instance Type")
    for machine_id in ids:
        machines[machine_id].instance_type_id = row.id
    await session.flush()
    return [Association.of(machines[machine_id], row.id) for machine_id in ids]


async def ensure_capacity_without(
    session: AsyncSession, type_id: uuid.UUID, removed: int, message: str
) -> None:
    """Refuse when removing ``removed`` machines from the type would leave fewer than it has reserved.
    The caller holds the instance type's row lock."""
    if await machine_count(session, type_id) - removed < await reserved_total(session, type_id):
        raise bad_request(message)


async def dissociate(session: AsyncSession, owned: OwnedInstanceType, ref: str) -> None:
    """Remove one machine from an owned (locked) instance type; ``ref`` is the machine id or the
    deprecated association id."""
    row = await _owned_row(session, owned)
    machine: Machine | None
    ref_uuid = None
    try:
        ref_uuid = uuid.UUID(ref) if len(ref) == 36 else None
    except ValueError:
        ref_uuid = None
    if ref_uuid is not None:
        candidates = await q.machines_of_types(session, [row.id])
        machine = next((m for m in candidates if association_id(m.id, row.id) == ref_uuid), None)
        if machine is None:
            machine = await q.machine_by_id(session, ref)
    else:
        machine = await q.machine_by_id(session, ref)
    if machine is None or machine.instance_type_id is None:
        raise not_found("Could not find Machine/Instance Type association with ID specified in URL")
    if machine.instance_type_id != row.id:
        raise forbidden("Machine/Instance Type association does not belong to Instance Type")
    await session.refresh(machine, with_for_update=True)
    if machine.instance_id is not None:
        raise bad_request(
            "Machine is currently in use by an Instance and cannot be dissociated from Instance Type"
        )
    await ensure_capacity_without(
        session,
        row.id,
        1,
        "Deletion of Machine/Instance type association is not allowed because of existing "
        "Allocation Constraints",
    )
    machine.instance_type_id = None
    await session.flush()


async def instance_types_by_id(
    session: AsyncSession, ids: Iterable[uuid.UUID | None]
) -> dict[uuid.UUID, InstanceType]:
    return await q.instance_types_by_id(session, (i for i in ids if i is not None))
