"""Machine registration requests: the records, their field rules and within-request rules (pure:
no database), and the capabilities a machine reports."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nico.db.enums import CapabilityType
from nico.db.types import U64_MAX
from nico.services.errors import ServiceError
from nico.services.instance_type import CapabilitySpec

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
GPU_UID_MAX = U64_MAX
# Column widths of the machine row, by request key.
TEXT_LIMITS = {"hostname": 256, "serialNumber": 256, "vendor": 256, "productName": 256, "hwSkuDeviceType": 64}
# The derived GPU capability is named after the GPUs as the fabric reports them (GpuRecord.name, from
# NMX-C GpuTopoInfo.description or NMX-M's GPU Description); this name is only for a registration
# that gives no GPU names (the reference's request shape, which has none).
DERIVED_GPU_NAME = "NVIDIA GB200"
MAX_GPU_NAME = 256  # machine_capability.name


@dataclass(frozen=True)
class GpuRecord:
    device_id: int | None
    gpu_uid: int | str | None
    slot_id: int | None = None
    name: str | None = None  # as the fabric reports the GPU, e.g. "NVIDIA GB300"


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
class Location:
    """Checked NVLink info: ``gpus`` are (device_id, gpu_uid, slot_id), sorted by device id."""

    domain_uuid: uuid.UUID
    chassis_serial: str
    tray_index: int
    gpus: tuple[tuple[int, int, int | None], ...]
    # The name the machine's GPUs report (one for all), if given: names its derived capability, not
    # part of where the machine is (not compared).
    gpu_name: str | None = field(default=None, compare=False)


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
    return number if 0 <= number <= GPU_UID_MAX else None


def _int_problem(value: int | None, low: int, *, required: bool = True) -> str | None:
    if value is None:
        return "a value is required" if required else None
    if not low <= value <= INT32_MAX:
        return f"must be between {low} and {INT32_MAX}"
    return None


def check_location(info: NvlinkInfo, path: str, errors: dict[str, Any]) -> Location | None:
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
    names: set[str] = set()
    for k, gpu in enumerate(info.gpus):
        where = f"{path}.gpus.{k}"
        if gpu.name is not None:
            name = gpu.name.strip()
            if not name or len(name) > MAX_GPU_NAME:
                errors.setdefault(f"{where}.name", f"must be 1 to {MAX_GPU_NAME} characters")
            elif names and name not in names:
                errors.setdefault(f"{where}.name", "the GPUs of one machine must report one name")
            names.add(name)
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
    return Location(
        domain, info.chassis_serial, info.tray_index, tuple(sorted(gpus)), next(iter(names), None)
    )


def check_unique(locations: Iterable[tuple[str, str, Location]], errors: dict[str, Any]) -> None:
    """Within one request: a tray is given once, a GPU is given once. Items are (machine id, path,
    location). A chassis may hold several NVLink domains (a minipod rack: one per group of trays)."""
    trays: dict[tuple[str, int], str] = {}
    uids: dict[int, str] = {}
    for machine_id, path, location in locations:
        tray = (location.chassis_serial, location.tray_index)
        if trays.setdefault(tray, machine_id) != machine_id:
            errors.setdefault(
                f"{path}.trayIndex",
                f"chassis {tray[0]} tray {tray[1]} is also given for machine {trays[tray]} in the request",
            )
        for k, (_, uid, _) in enumerate(location.gpus):
            if uids.setdefault(uid, machine_id) != machine_id or [g[1] for g in location.gpus].count(uid) > 1:
                errors.setdefault(
                    f"{path}.gpus.{k}.gpuUid", f"gpuUid {uid} is given more than once in the request"
                )


def check_records(records: Sequence[MachineRecord]) -> list[Location | None]:
    """Field and within-request rules of a registration (400 with every problem by path)."""
    errors: dict[str, Any] = {}
    if not 1 <= len(records) <= MAX_MACHINES:
        raise invalid({"machines": f"1 to {MAX_MACHINES} machines must be specified"})
    seen: set[str] = set()
    locations: list[Location | None] = []
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
        locations.append(
            check_location(record.nvlink, f"{path}.nvLinkInfo", errors) if record.nvlink else None
        )
    if not errors:
        check_unique(
            (
                (str(record.id), f"machines.{i}.nvLinkInfo", location)
                for i, (record, location) in enumerate(zip(records, locations, strict=True))
                if location is not None
            ),
            errors,
        )
    if errors:
        raise invalid(errors)
    return locations


def _snake(key: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def capabilities_for(record: MachineRecord, location: Location | None) -> list[CapabilitySpec]:
    """The machine's capabilities as given; without any, a GPU capability derived from its GPUs,
    named as the fabric reports them (no product name is assumed when it reports one)."""
    if record.capabilities is not None:
        return list(record.capabilities)
    if location is not None and location.gpus:
        return [
            CapabilitySpec(
                type=CapabilityType.GPU,
                name=location.gpu_name or DERIVED_GPU_NAME,
                count=len(location.gpus),
                device_type="NVLink",
            )
        ]
    return []
