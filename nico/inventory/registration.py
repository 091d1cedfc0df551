"""Machine inventory: bulk registration (nico's stand-in for the reference's site agent) and the NVLink
info of a machine (domain, chassis, tray, GPUs).

A registration describes each machine completely: existing machines get every field, their
capabilities and their NVLink info replaced, so registering the same payload twice changes nothing.
Registrations (and NVLink info replacements) run one at a time under a transaction-scoped advisory
lock, so each sees the rows the previous one committed; the unique constraints on
``(chassis_serial, tray_index)`` and ``gpu_uid`` remain the last line of defence.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.base import utcnow
from nico.db.enums import MachineStatus, SiteStatus
from nico.db.models import InstanceType, Machine, Site
from nico.inventory import queries
from nico.inventory.location import apply_locations, check_conflicts
from nico.inventory.records import (
    REGISTERED_MESSAGE,
    MachineRecord,
    RegistrationResult,
    capabilities_for,
    check_records,
)
from nico.services import nvlink_events, status
from nico.services.errors import bad_request, conflict, forbidden, not_found
from nico.services.instance_type import (
    ASSIGNABLE,
    CapabilitySpec,
    capabilities_of_machines,
    capability_mismatch,
    check_capabilities,
    rendered_status,
)
from nico.services.site import PAIRED


async def replace_capabilities(session: AsyncSession, machine: Machine, specs: list[CapabilitySpec]) -> bool:
    current = (await capabilities_of_machines(session, [machine.id])).get(machine.id, [])
    if [CapabilitySpec.of(row) for row in current] == specs:
        return False
    await queries.delete_machine_capabilities(session, machine.id)
    session.add_all(spec.row(i, machine_id=machine.id) for i, spec in enumerate(specs))
    return True


async def register_machines(
    session: AsyncSession,
    *,
    site_id: uuid.UUID,
    machines: Sequence[MachineRecord],
    provider_id: uuid.UUID | None = None,
    instance_type_id: uuid.UUID | None = None,
) -> RegistrationResult:
    """Create or update machines at a site, all or nothing. ``provider_id`` is the caller's provider
    (None: an operator acting for whoever owns the site). With ``instance_type_id`` the machines are
    associated with that instance type under the association endpoint's rules."""
    locations = check_records(machines)
    capabilities = [capabilities_for(r, p) for r, p in zip(machines, locations, strict=True)]
    for specs in capabilities:
        check_capabilities(specs, reported=True)
    site, itype = await _site_and_type(session, site_id, provider_id, instance_type_id)
    await queries.lock_inventory(session)
    ids = [str(r.id) for r in machines]
    existing = await queries.machines_key_shared(session, ids)
    for machine in existing.values():
        if machine.site_id != site.id:
            raise conflict(f"Machine: {machine.id} is registered at another Site")
    planned = dict(zip(ids, locations, strict=True))
    await check_conflicts(session, site.id, planned, existing)
    if itype is not None:
        await check_association(session, itype, ids, existing, capabilities)
    result = RegistrationResult()
    rows = {
        str(record.id): _upsert_machine(session, record, site, itype, existing.get(str(record.id)), result)
        for record in machines
    }
    await session.flush()
    for record, specs in zip(machines, capabilities, strict=True):
        machine = rows[str(record.id)]
        if await replace_capabilities(session, machine, specs) and machine.id not in result.created:
            result.updated.append(machine.id)
    moved, touched = await apply_locations(session, rows, planned)
    _settle_result(result, ids, moved, rows)
    await _record_registration(session, site, result)
    await nvlink_events.desired_state_changed(session, domains=touched)
    return result


async def _site_and_type(
    session: AsyncSession,
    site_id: uuid.UUID,
    provider_id: uuid.UUID | None,
    instance_type_id: uuid.UUID | None,
) -> tuple[Site, InstanceType | None]:
    """The site (locked against deletion) and the instance type to associate, checked."""
    site = await queries.site_key_shared(session, site_id)
    if site is None:
        raise not_found("Could not find Site with specified ID")
    if provider_id is not None and site.infrastructure_provider_id != provider_id:
        raise forbidden("Site does not belong to org's Infrastructure Provider")
    if instance_type_id is None:
        return site, None
    itype = await session.get(InstanceType, instance_type_id)
    if itype is None:
        raise not_found("Could not find Instance Type with specified ID")
    if itype.infrastructure_provider_id != site.infrastructure_provider_id:
        raise forbidden("Instance Type is not associated with org's Infrastructure Provider")
    if itype.site_id != site.id:
        raise bad_request("Instance Type does not belong to the Site specified in request")
    return site, itype


def _upsert_machine(
    session: AsyncSession,
    record: MachineRecord,
    site: Site,
    itype: InstanceType | None,
    found: Machine | None,
    result: RegistrationResult,
) -> Machine:
    """The machine row of ``record``: a new one (added to the session) or ``found`` with the
    record's fields; ``result`` learns which."""
    machine_id = str(record.id)
    values = {
        "hostname": record.hostname,
        "serial_number": record.serial_number,
        "vendor": record.vendor,
        "product_name": record.product_name,
        "hw_sku_device_type": record.hw_sku_device_type,
    }
    if found is None:
        machine = Machine(
            id=machine_id,
            site_id=site.id,
            status=MachineStatus.READY,
            instance_type_id=itype.id if itype else None,
            **values,
        )
        session.add(machine)
        result.created.append(machine_id)
        return machine
    changed = False
    for column, value in values.items():
        if getattr(found, column) != value:
            setattr(found, column, value)
            changed = True
    if itype is not None and found.instance_type_id != itype.id:
        found.instance_type_id = itype.id
        changed = True
    if changed:
        result.updated.append(machine_id)
    return found


def _settle_result(
    result: RegistrationResult, ids: list[str], moved: set[str], rows: dict[str, Machine]
) -> None:
    """Put ``result``'s lists in request order (a moved machine counts as updated) and stamp the
    updated machines."""
    for machine_id in moved:
        if machine_id not in result.created and machine_id not in result.updated:
            result.updated.append(machine_id)
    updated = set(result.updated)
    result.updated = [i for i in ids if i in updated]
    result.unchanged = [i for i in ids if i not in updated and i not in set(result.created)]
    for machine_id in result.updated:
        rows[machine_id].updated = utcnow()


async def _record_registration(session: AsyncSession, site: Site, result: RegistrationResult) -> None:
    """History of the new machines; a Pending site becomes Registered with its first registration."""
    for machine_id in result.created:
        await status.record(session, "machine_id", machine_id, MachineStatus.READY, REGISTERED_MESSAGE)
    if site.status == SiteStatus.PENDING:
        site.status = SiteStatus.REGISTERED
        await status.record(session, "site_id", site.id, SiteStatus.REGISTERED, PAIRED)
    await session.flush()


async def check_association(
    session: AsyncSession,
    itype: InstanceType,
    ids: list[str],
    existing: dict[str, Machine],
    capabilities: list[list[CapabilitySpec]],
) -> None:
    """The association endpoint's rules, for the machines of a registration (capabilities as given)."""
    wanted = [CapabilitySpec.of(row) for row in await queries.instance_type_capabilities(session, itype.id)]
    problem = capability_mismatch(wanted, dict(zip(ids, capabilities, strict=True)))
    if problem is not None:
        raise problem
    for machine_id in ids:
        machine = existing.get(machine_id)
        if machine is None or machine.instance_type_id == itype.id:
            continue
        if machine.instance_type_id is not None:
            raise conflict(
                f"Machine: {machine_id} is already associated with Instance Type {machine.instance_type_id}"
            )
        shown = rendered_status(machine)
        if shown not in ASSIGNABLE:
            raise bad_request(
                f"Machine: {machine_id} is in {shown} state. Instance Type can only be assigned to a Machine "
                "in `Ready` or `Reset` status"
            )
