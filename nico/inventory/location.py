"""The NVLink location of machines (domain, chassis, tray, GPUs): the rules against machines
outside a request, the diff between recorded and planned locations and applying it, and replacing
one machine's NVLink info."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.base import utcnow
from nico.db.enums import InstanceStatus
from nico.db.models import Gpu, Machine
from nico.inventory import queries
from nico.inventory.records import Location, NvlinkInfo, check_location, check_unique, invalid
from nico.services import nvlink_events, status
from nico.services.errors import conflict, not_found


async def check_conflicts(
    session: AsyncSession,
    site_id: uuid.UUID,
    planned: dict[str, Location | None],
    existing: dict[str, Machine],
) -> None:
    """Rules against machines outside ``planned`` (409): a domain belongs to one site, a chassis to one
    domain, a tray and a GPU to one machine; a machine holding an instance keeps its NVLink info."""
    ids = list(planned)
    locations = [p for p in planned.values() if p is not None]
    for machine_id, location in planned.items():
        machine = existing.get(machine_id)
        if (
            machine is not None
            and machine.instance_id is not None
            and await current_location(session, machine) != location
        ):
            raise conflict(
                f"Machine: {machine_id} is in use by an Instance, its NVLink info cannot be changed"
            )
    if not locations:
        return
    domains = {p.domain_uuid for p in locations}
    for domain in await queries.domains_by_uuid(session, domains):
        if domain.site_id != site_id:
            raise conflict(f"NVLink domain {domain.uuid} belongs to another Site")
    # A chassis may hold trays of several NVLink domains (a minipod rack), so a chassis is not tied to
    # one domain; a tray and a GPU belong to one machine.
    trays = [(p.chassis_serial, p.tray_index) for p in locations]
    for other_id, serial, tray in await queries.trays_of_other_machines(session, trays, ids):
        raise conflict(f"Chassis {serial} tray {tray} is already registered to Machine: {other_id}")
    uids = [uid for p in locations for _, uid, _ in p.gpus]
    for uid, other_id in await queries.gpu_owners_outside(session, uids, ids):
        raise conflict(f"GPU {uid} is already registered to Machine: {other_id}")


async def current_location(session: AsyncSession, machine: Machine) -> Location | None:
    if machine.domain_uuid is None or machine.chassis_serial is None or machine.tray_index is None:
        return None
    gpus = await queries.gpus_of_machine(session, machine.id)
    return Location(
        machine.domain_uuid,
        machine.chassis_serial,
        machine.tray_index,
        tuple((g.device_id, g.gpu_uid, g.slot_id) for g in gpus),
    )


async def apply_locations(
    session: AsyncSession, machines: dict[str, Machine], planned: dict[str, Location | None]
) -> tuple[set[str], set[uuid.UUID]]:
    """Give each machine its planned NVLink info; returns the ids that changed and the NVLink domains
    they left or joined. Trays and GPUs may move
    between the machines of one call, so stale values are cleared (and flushed) before new ones are set.
    GPUs whose device id, fabric GUID and slot are unchanged keep their rows (and the reconciler's
    observations on them)."""
    current = {machine_id: await current_location(session, machines[machine_id]) for machine_id in planned}
    changed = {machine_id for machine_id, location in planned.items() if current[machine_id] != location}
    touched = {p.domain_uuid for m in changed for p in (current[m], planned[m]) if p is not None}
    if not changed:
        return changed, touched
    for machine_id in changed:
        machine, old, new = machines[machine_id], current[machine_id], planned[machine_id]
        keep = set(old.gpus) & set(new.gpus) if old and new else set()
        stale = [g[0] for g in (old.gpus if old else ()) if g not in keep]
        if stale:
            await queries.delete_gpus(session, machine_id, stale)
        if old and (
            new is None or (old.chassis_serial, old.tray_index) != (new.chassis_serial, new.tray_index)
        ):
            machine.domain_uuid = machine.chassis_serial = machine.tray_index = None
    await session.flush()
    domains = {
        p.domain_uuid: machines[m].site_id for m, p in planned.items() if p is not None and m in changed
    }
    if domains:
        await queries.ensure_domains(session, domains)
    for machine_id in changed:
        machine, old, new = machines[machine_id], current[machine_id], planned[machine_id]
        if new is None:
            continue
        machine.domain_uuid, machine.chassis_serial, machine.tray_index = (
            new.domain_uuid,
            new.chassis_serial,
            new.tray_index,
        )
        keep = set(old.gpus) if old else set()
        session.add_all(
            Gpu(machine_id=machine_id, device_id=device_id, gpu_uid=uid, slot_id=slot)
            for device_id, uid, slot in new.gpus
            if (device_id, uid, slot) not in keep
        )
        machine.updated = utcnow()
    for machine_id in changed:
        if planned[machine_id] is None:
            machines[machine_id].updated = utcnow()
    await session.flush()
    return changed, touched


async def replace_nvlink_info(session: AsyncSession, machine_id: str, info: NvlinkInfo | None) -> bool:
    """Set (or, with None, clear) one machine's NVLink info: domain, chassis, tray and GPUs, under the
    registration rules. Returns whether anything changed."""
    errors: dict[str, Any] = {}
    location = check_location(info, "nvLinkInfo", errors) if info is not None else None
    if location is not None:
        check_unique([(machine_id, "nvLinkInfo", location)], errors)
    if errors:
        raise invalid(errors)
    await queries.lock_inventory(session)
    machine = await queries.machine_key_shared(session, machine_id)
    if machine is None:
        raise not_found("Could not find Machine with specified ID")
    planned = {machine_id: location}
    await check_conflicts(session, machine.site_id, planned, {machine_id: machine})
    changed, touched = await apply_locations(session, {machine_id: machine}, planned)
    await nvlink_events.desired_state_changed(session, domains=touched)
    return bool(changed)


TRAY_SWAPPED = "NVLink GPUs replaced (compute tray swapped): configuring the new GPUs"


async def tray_replaced(
    session: AsyncSession, machine_id: str, info: NvlinkInfo
) -> tuple[bool, uuid.UUID | None]:
    """The fabric reports new GPUs at a machine's tray (a swap): record them in place of the old ones
    (held instance or not; the GPUs must still be nobody else's), and when the machine holds an
    instance, set its live NVLink interfaces Pending and the instance Configuring, with a history
    entry, so the reconciler puts the new GPUs where the instance wants them and reports Ready again.
    Returns whether anything changed (another reconciler may have recorded the swap first) and the
    instance reconfigured, if any."""
    errors: dict[str, Any] = {}
    location = check_location(info, "nvLinkInfo", errors)
    if errors or location is None:
        raise invalid(errors)
    await queries.lock_inventory(session)
    machine = await queries.machine_key_shared(session, machine_id)
    if machine is None:
        raise not_found("Could not find Machine with specified ID")
    for uid, other_id in await queries.gpu_owners_outside(
        session, [g[1] for g in location.gpus], [machine_id]
    ):
        raise conflict(f"GPU {uid} is already registered to Machine: {other_id}")
    changed, touched = await apply_locations(session, {machine_id: machine}, {machine_id: location})
    instance_id = machine.instance_id
    if not changed:
        return False, None
    if instance_id is None:
        await nvlink_events.desired_state_changed(session, domains=touched)
        return True, None
    if await queries.reconfigure_instance(session, instance_id):
        await status.record(session, "instance_id", instance_id, InstanceStatus.CONFIGURING, TRAY_SWAPPED)
    await nvlink_events.desired_state_changed(session, instance_ids=[instance_id], domains=touched)
    return True, instance_id
