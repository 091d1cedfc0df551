"""Machine inventory: bulk registration (nico's stand-in for the reference's site agent) and the NVLink
info of a machine (domain, chassis, tray, GPUs).

A registration describes each machine completely: existing machines get every field, their
capabilities and their NVLink info replaced, so registering the same payload twice changes nothing.
Registrations (and NVLink info replacements) run one at a time under a transaction-scoped advisory
lock, so each sees the rows the previous one committed; the unique constraints on
``(chassis_serial, tray_index)`` and ``gpu_uid`` remain the last line of defence.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select, text, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.base import utcnow
from nico.db.enums import CapabilityType, MachineStatus, SiteStatus
from nico.db.models import Gpu, InstanceType, Machine, MachineCapability, NvlinkDomain, Site
from nico.db.types import U64_MAX
from nico.services import nvlink_events, status
from nico.services.errors import ServiceError, bad_request, conflict, forbidden, not_found
from nico.services.instance_type import (
    ASSIGNABLE,
    CapabilitySpec,
    capabilities_of_machines,
    capability_mismatch,
    check_capabilities,
    rendered_status,
)
from nico.services.site import PAIRED

# Any constant works: it only has to be the same for every registration ("nico" + 1).
REGISTRATION_LOCK = 0x6E69_636F_0001
VALIDATION_MESSAGE = "Error validating Machine registration request data"
REGISTERED_MESSAGE = "Machine has been registered"
MAX_MACHINES = 10_000
MAX_GPUS = 16
INT32_MAX = 2**31 - 1
MACHINE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$")
MACHINE_ID_RULE = (
    "must be 1 to 256 characters: letters, digits, '.', '_', ':' or '-', starting with a letter or digit"
)
GPU_UID = re.compile(r"^[0-9]{1,20}$")
GPU_UID_RULE = "must be an unsigned 64-bit integer: a decimal string or a JSON integer"
# Column widths of the machine row, by request key.
TEXT_LIMITS = {"hostname": 256, "serialNumber": 256, "vendor": 256, "productName": 256, "hwSkuDeviceType": 64}
DERIVED_GPU_NAME = "NVIDIA GB200"


@dataclass(frozen=True)
class GpuRecord:
    device_id: int | None
    gpu_uid: int | str | None
    slot_id: int | None = None


@dataclass(frozen=True)
class NvlinkInfo:
    """A machine's place on the NVLink fabric, as given (checked by the functions of this module)."""

    domain_uuid: str | uuid.UUID | None
    chassis_serial: str | None
    tray_index: int | None
    gpus: tuple[GpuRecord, ...] = ()


@dataclass(frozen=True)
class MachineRecord:
    id: str | None
    hostname: str | None = None
    serial_number: str | None = None
    vendor: str | None = None
    product_name: str | None = None
    hw_sku_device_type: str | None = None
    capabilities: tuple[CapabilitySpec, ...] | None = None
    nvlink: NvlinkInfo | None = None


@dataclass(frozen=True)
class Placement:
    """Checked NVLink info: ``gpus`` are (device_id, gpu_uid, slot_id), sorted by device id."""

    domain_uuid: uuid.UUID
    chassis_serial: str
    tray_index: int
    gpus: tuple[tuple[int, int, int | None], ...]


@dataclass
class RegistrationResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def invalid(problems: dict[str, Any]) -> ServiceError:
    return ServiceError(400, VALIDATION_MESSAGE, problems)


def parse_gpu_uid(value: int | str | None) -> int | None:
    """A fabric GUID from a JSON integer or a decimal string, or None when it is not an unsigned
    64-bit integer."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and GPU_UID.match(value):
        number = int(value)
    else:
        return None
    return number if 0 <= number <= U64_MAX else None


def _int_problem(value: int | None, low: int, *, required: bool = True) -> str | None:
    if value is None:
        return "a value is required" if required else None
    if not low <= value <= INT32_MAX:
        return f"must be between {low} and {INT32_MAX}"
    return None


def check_placement(info: NvlinkInfo, path: str, errors: dict[str, Any]) -> Placement | None:
    """Field rules of one NVLink info; problems go to ``errors`` under ``path``."""
    before = len(errors)
    domain = info.domain_uuid
    if not isinstance(domain, uuid.UUID):
        try:
            domain = uuid.UUID(domain) if isinstance(domain, str) and len(domain) == 36 else None
        except ValueError:
            domain = None
    if domain is None:
        errors.setdefault(f"{path}.domainUuid", "must be a valid UUID")
    if (
        not info.chassis_serial
        or len(info.chassis_serial) > 256
        or info.chassis_serial != info.chassis_serial.strip()
    ):
        errors.setdefault(
            f"{path}.chassisSerial", "must be 1 to 256 characters without surrounding whitespace"
        )
    problem = _int_problem(info.tray_index, 0)
    if problem:
        errors.setdefault(f"{path}.trayIndex", problem)
    if not 1 <= len(info.gpus) <= MAX_GPUS:
        errors.setdefault(f"{path}.gpus", f"1 to {MAX_GPUS} GPUs must be specified")
    gpus: list[tuple[int, int, int | None]] = []
    seen_devices: set[int] = set()
    for k, gpu in enumerate(info.gpus):
        where = f"{path}.gpus.{k}"
        problem = _int_problem(gpu.device_id, 1)
        if problem:
            errors.setdefault(f"{where}.deviceId", problem)
        elif gpu.device_id in seen_devices:
            errors.setdefault(f"{where}.deviceId", "deviceId must be unique within a machine")
        uid = parse_gpu_uid(gpu.gpu_uid)
        if uid is None:
            errors.setdefault(f"{where}.gpuUid", GPU_UID_RULE)
        problem = _int_problem(gpu.slot_id, 0, required=False)
        if problem:
            errors.setdefault(f"{where}.slotId", problem)
        if gpu.device_id is not None:
            seen_devices.add(gpu.device_id)
        if gpu.device_id is not None and uid is not None:
            gpus.append((gpu.device_id, uid, gpu.slot_id))
    if len(errors) > before:
        return None
    assert isinstance(domain, uuid.UUID) and info.chassis_serial is not None and info.tray_index is not None
    return Placement(domain, info.chassis_serial, info.tray_index, tuple(sorted(gpus)))


def check_unique(placements: Iterable[tuple[str, str, Placement]], errors: dict[str, Any]) -> None:
    """Within one request: a chassis is in one domain, a tray is given once, a GPU is given once.
    Items are (machine id, path, placement)."""
    domains: dict[str, uuid.UUID] = {}
    trays: dict[tuple[str, int], str] = {}
    uids: dict[int, str] = {}
    for machine_id, path, placement in placements:
        known = domains.setdefault(placement.chassis_serial, placement.domain_uuid)
        if known != placement.domain_uuid:
            errors.setdefault(
                f"{path}.domainUuid",
                f"chassis {placement.chassis_serial} is given more than one NVLink domain in the request",
            )
        tray = (placement.chassis_serial, placement.tray_index)
        if trays.setdefault(tray, machine_id) != machine_id:
            errors.setdefault(
                f"{path}.trayIndex",
                f"chassis {tray[0]} tray {tray[1]} is also given for machine {trays[tray]} in the request",
            )
        for k, (_, uid, _) in enumerate(placement.gpus):
            if (
                uids.setdefault(uid, machine_id) != machine_id
                or [g[1] for g in placement.gpus].count(uid) > 1
            ):
                errors.setdefault(
                    f"{path}.gpus.{k}.gpuUid", f"gpuUid {uid} is given more than once in the request"
                )


def check_records(records: Sequence[MachineRecord]) -> list[Placement | None]:
    """Field and within-request rules of a registration (400 with every problem by path)."""
    errors: dict[str, Any] = {}
    if not 1 <= len(records) <= MAX_MACHINES:
        raise invalid({"machines": f"1 to {MAX_MACHINES} machines must be specified"})
    seen: set[str] = set()
    placements: list[Placement | None] = []
    for i, record in enumerate(records):
        path = f"machines.{i}"
        if not record.id or not MACHINE_ID.match(record.id):
            errors.setdefault(f"{path}.id", MACHINE_ID_RULE)
        elif record.id in seen:
            errors.setdefault(f"{path}.id", "machine ID is given more than once in the request")
        seen.add(record.id or "")
        for key, limit in TEXT_LIMITS.items():
            value = getattr(record, _snake(key))
            if value is not None and len(value) > limit:
                errors.setdefault(f"{path}.{key}", f"must be at most {limit} characters")
        placements.append(
            check_placement(record.nvlink, f"{path}.nvLinkInfo", errors) if record.nvlink else None
        )
    if not errors:
        check_unique(
            (
                (str(record.id), f"machines.{i}.nvLinkInfo", placement)
                for i, (record, placement) in enumerate(zip(records, placements, strict=True))
                if placement is not None
            ),
            errors,
        )
    if errors:
        raise invalid(errors)
    return placements


def _snake(key: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def capabilities_for(record: MachineRecord, placement: Placement | None) -> list[CapabilitySpec]:
    """The machine's capabilities as given; without any, a GPU capability derived from its GPUs."""
    if record.capabilities is not None:
        return list(record.capabilities)
    if placement is not None and placement.gpus:
        return [
            CapabilitySpec(
                type=CapabilityType.GPU,
                name=DERIVED_GPU_NAME,
                count=len(placement.gpus),
                device_type="NVLink",
            )
        ]
    return []


async def lock_inventory(session: AsyncSession) -> None:
    await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": REGISTRATION_LOCK})


async def check_conflicts(
    session: AsyncSession,
    site_id: uuid.UUID,
    planned: dict[str, Placement | None],
    existing: dict[str, Machine],
) -> None:
    """Rules against machines outside ``planned`` (409): a domain belongs to one site, a chassis to one
    domain, a tray and a GPU to one machine; a machine holding an instance keeps its NVLink info."""
    ids = list(planned)
    placements = [p for p in planned.values() if p is not None]
    for machine_id, placement in planned.items():
        machine = existing.get(machine_id)
        if (
            machine is not None
            and machine.instance_id is not None
            and await current_placement(session, machine) != placement
        ):
            raise conflict(
                f"Machine: {machine_id} is in use by an Instance, its NVLink info cannot be changed"
            )
    if not placements:
        return
    domains = {p.domain_uuid for p in placements}
    for domain in await session.scalars(select(NvlinkDomain).where(NvlinkDomain.uuid.in_(domains))):
        if domain.site_id != site_id:
            raise conflict(f"NVLink domain {domain.uuid} belongs to another Site")
    wanted_domain = {p.chassis_serial: p.domain_uuid for p in placements}
    others = await session.execute(
        select(Machine.id, Machine.chassis_serial, Machine.nvlink_domain_uuid).where(
            Machine.chassis_serial.in_(list(wanted_domain)), Machine.id.not_in(ids)
        )
    )
    for other_id, serial, domain_uuid in others.all():
        if domain_uuid != wanted_domain[str(serial)]:
            raise conflict(
                f"Chassis {serial} is in NVLink domain {domain_uuid} (Machine: {other_id}), "
                f"not {wanted_domain[str(serial)]}"
            )
    trays = [(p.chassis_serial, p.tray_index) for p in placements]
    taken = await session.execute(
        select(Machine.id, Machine.chassis_serial, Machine.tray_index).where(
            tuple_(Machine.chassis_serial, Machine.tray_index).in_(trays), Machine.id.not_in(ids)
        )
    )
    for other_id, serial, tray in taken.all():
        raise conflict(f"Chassis {serial} tray {tray} is already registered to Machine: {other_id}")
    uids = [uid for p in placements for _, uid, _ in p.gpus]
    owners = await session.execute(
        select(Gpu.gpu_uid, Gpu.machine_id).where(Gpu.gpu_uid.in_(uids), Gpu.machine_id.not_in(ids))
    )
    for uid, other_id in owners.all():
        raise conflict(f"GPU {uid} is already registered to Machine: {other_id}")


async def current_placement(session: AsyncSession, machine: Machine) -> Placement | None:
    if machine.nvlink_domain_uuid is None or machine.chassis_serial is None or machine.tray_index is None:
        return None
    gpus = await session.scalars(select(Gpu).where(Gpu.machine_id == machine.id).order_by(Gpu.device_id))
    return Placement(
        machine.nvlink_domain_uuid,
        machine.chassis_serial,
        machine.tray_index,
        tuple((g.device_id, g.gpu_uid, g.slot_id) for g in gpus),
    )


async def apply_placements(
    session: AsyncSession, machines: dict[str, Machine], planned: dict[str, Placement | None]
) -> tuple[set[str], set[uuid.UUID]]:
    """Give each machine its planned NVLink info; returns the ids that changed and the NVLink domains
    they left or joined. Trays and GPUs may move
    between the machines of one call, so stale values are cleared (and flushed) before new ones are set.
    GPUs whose device id, fabric GUID and slot are unchanged keep their rows (and the reconciler's
    observations on them)."""
    current = {machine_id: await current_placement(session, machines[machine_id]) for machine_id in planned}
    changed = {machine_id for machine_id, placement in planned.items() if current[machine_id] != placement}
    touched = {p.domain_uuid for m in changed for p in (current[m], planned[m]) if p is not None}
    if not changed:
        return changed, touched
    for machine_id in changed:
        machine, old, new = machines[machine_id], current[machine_id], planned[machine_id]
        keep = set(old.gpus) & set(new.gpus) if old and new else set()
        stale = [g[0] for g in (old.gpus if old else ()) if g not in keep]
        if stale:
            await session.execute(delete(Gpu).where(Gpu.machine_id == machine_id, Gpu.device_id.in_(stale)))
        if old and (
            new is None or (old.chassis_serial, old.tray_index) != (new.chassis_serial, new.tray_index)
        ):
            machine.nvlink_domain_uuid = machine.chassis_serial = machine.tray_index = None
    await session.flush()
    domains = {
        p.domain_uuid: machines[m].site_id for m, p in planned.items() if p is not None and m in changed
    }
    if domains:
        await session.execute(
            insert(NvlinkDomain)
            .values([{"uuid": domain, "site_id": site_id} for domain, site_id in domains.items()])
            .on_conflict_do_nothing(index_elements=["uuid"])
        )
    for machine_id in changed:
        machine, old, new = machines[machine_id], current[machine_id], planned[machine_id]
        if new is None:
            continue
        machine.nvlink_domain_uuid, machine.chassis_serial, machine.tray_index = (
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


async def replace_capabilities(session: AsyncSession, machine: Machine, specs: list[CapabilitySpec]) -> bool:
    current = (await capabilities_of_machines(session, [machine.id])).get(machine.id, [])
    if [CapabilitySpec.of(row) for row in current] == specs:
        return False
    await session.execute(delete(MachineCapability).where(MachineCapability.machine_id == machine.id))
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
    placements = check_records(machines)
    capabilities = [capabilities_for(r, p) for r, p in zip(machines, placements, strict=True)]
    for specs in capabilities:
        check_capabilities(specs, reported=True)
    site = await session.scalar(select(Site).where(Site.id == site_id).with_for_update(key_share=True))
    if site is None:
        raise not_found("Could not find Site with specified ID")
    if provider_id is not None and site.infrastructure_provider_id != provider_id:
        raise forbidden("Site does not belong to org's Infrastructure Provider")
    itype = None
    if instance_type_id is not None:
        itype = await session.get(InstanceType, instance_type_id)
        if itype is None:
            raise not_found("Could not find Instance Type with specified ID")
        if itype.infrastructure_provider_id != site.infrastructure_provider_id:
            raise forbidden("Instance Type is not associated with org's Infrastructure Provider")
        if itype.site_id != site.id:
            raise bad_request("Instance Type does not belong to the Site specified in request")
    await lock_inventory(session)
    ids = [str(r.id) for r in machines]
    existing = {
        m.id: m
        for m in await session.scalars(
            select(Machine).where(Machine.id.in_(ids)).order_by(Machine.id).with_for_update(key_share=True)
        )
    }
    for machine in existing.values():
        if machine.site_id != site.id:
            raise conflict(f"Machine: {machine.id} is registered at another Site")
    planned = dict(zip(ids, placements, strict=True))
    await check_conflicts(session, site.id, planned, existing)
    if itype is not None:
        await check_association(session, itype, ids, existing, capabilities)
    result = RegistrationResult()
    rows: dict[str, Machine] = {}
    for record in machines:
        machine_id = str(record.id)
        values = {
            "hostname": record.hostname,
            "serial_number": record.serial_number,
            "vendor": record.vendor,
            "product_name": record.product_name,
            "hw_sku_device_type": record.hw_sku_device_type,
        }
        found = existing.get(machine_id)
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
        else:
            machine = found
            changed = False
            for column, value in values.items():
                if getattr(machine, column) != value:
                    setattr(machine, column, value)
                    changed = True
            if itype is not None and machine.instance_type_id != itype.id:
                machine.instance_type_id = itype.id
                changed = True
            if changed:
                result.updated.append(machine_id)
        rows[machine_id] = machine
    await session.flush()
    for record, specs in zip(machines, capabilities, strict=True):
        machine = rows[str(record.id)]
        if await replace_capabilities(session, machine, specs) and machine.id not in result.created:
            result.updated.append(machine.id)
    moved, touched = await apply_placements(session, rows, planned)
    for machine_id in moved:
        if machine_id not in result.created and machine_id not in result.updated:
            result.updated.append(machine_id)
    updated = set(result.updated)
    result.updated = [i for i in ids if i in updated]
    result.unchanged = [i for i in ids if i not in updated and i not in set(result.created)]
    for machine_id in result.updated:
        rows[machine_id].updated = utcnow()
    for machine_id in result.created:
        await status.record(session, "machine_id", machine_id, MachineStatus.READY, REGISTERED_MESSAGE)
    if site.status == SiteStatus.PENDING:
        site.status = SiteStatus.REGISTERED
        await status.record(session, "site_id", site.id, SiteStatus.REGISTERED, PAIRED)
    await session.flush()
    await nvlink_events.desired_state_changed(session, domains=touched)
    return result


async def check_association(
    session: AsyncSession,
    itype: InstanceType,
    ids: list[str],
    existing: dict[str, Machine],
    capabilities: list[list[CapabilitySpec]],
) -> None:
    """The association endpoint's rules, for the machines of a registration (capabilities as given)."""
    wanted = [
        CapabilitySpec.of(row)
        for row in await session.scalars(
            select(MachineCapability)
            .where(MachineCapability.instance_type_id == itype.id)
            .order_by(MachineCapability.position, MachineCapability.id)
        )
    ]
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


async def replace_nvlink_info(session: AsyncSession, machine_id: str, info: NvlinkInfo | None) -> bool:
    """Set (or, with None, clear) one machine's NVLink info: domain, chassis, tray and GPUs, under the
    registration rules. Returns whether anything changed."""
    errors: dict[str, Any] = {}
    placement = check_placement(info, "nvLinkInfo", errors) if info is not None else None
    if placement is not None:
        check_unique([(machine_id, "nvLinkInfo", placement)], errors)
    if errors:
        raise invalid(errors)
    await lock_inventory(session)
    machine = await session.scalar(
        select(Machine).where(Machine.id == machine_id).with_for_update(key_share=True)
    )
    if machine is None:
        raise not_found("Could not find Machine with specified ID")
    planned = {machine_id: placement}
    await check_conflicts(session, machine.site_id, planned, {machine_id: machine})
    changed, touched = await apply_placements(session, {machine_id: machine}, planned)
    await nvlink_events.desired_state_changed(session, domains=touched)
    return bool(changed)
