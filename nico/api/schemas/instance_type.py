"""Instance type bodies. ``InstanceTypeSummary`` is what constraints, machines and instances embed."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any, Protocol

from pydantic import ConfigDict, Field, WithJsonSchema

from nico.api.parsing import (
    NAME_LENGTH,
    FieldErrors,
    description_problem,
    labels_problem,
    name_problem,
    uuid_problem,
)
from nico.api.schemas.common import (
    DESCRIPTION_SCHEMA,
    LABELS_BOUND,
    LABELS_SCHEMA,
    NAME_SCHEMA,
    UUID_SCHEMA,
    Deprecation,
    MaxItems,
    RequestModel,
    ResponseModel,
    StatusDetail,
    Summarised,
    declared,
    nullable,
    omit_if_empty,
    omit_if_none,
    required,
)
from nico.api.schemas.org import InfrastructureProviderSummary
from nico.api.schemas.site import SiteSummary
from nico.services.instance_type import Association, CapabilitySpec, CapabilityType, InstanceTypeView

MACHINE_ID_LIMIT = 256
MAX_MACHINES_PER_REQUEST = 10_000
# Limits the reference does not state, documented in docs/compatibility.md ("Input limits").
MAX_CAPABILITIES = 64
MAX_INACTIVE_DEVICES = 64
CAPABILITIES_LIMIT = MaxItems(MAX_CAPABILITIES, "a maximum of {limit} Machine Capabilities can be specified")

# Column widths of machine_capability: longer values are refused with a field message, not a 500.
CAPABILITY_TEXT_LIMITS = {"frequency": 64, "capacity": 64, "vendor": 256, "hardware_revision": 64}
DEVICE_TYPE_LIMIT = 32
INT32_MAX = 2**31 - 1


class InstanceTypeRow(Summarised, Protocol):
    """What an instance type summary reads (the services' record of it)."""

    @property
    def infrastructure_provider_id(self) -> uuid.UUID: ...

    @property
    def site_id(self) -> uuid.UUID: ...


class CapabilityRow(Protocol):
    """What a machine capability reads (the services' capability record)."""

    @property
    def type(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def frequency(self) -> str | None: ...

    @property
    def capacity(self) -> str | None: ...

    @property
    def vendor(self) -> str | None: ...

    @property
    def cores(self) -> int | None: ...

    @property
    def threads(self) -> int | None: ...

    @property
    def inactive_devices(self) -> list[int] | None: ...

    @property
    def count(self) -> int | None: ...

    @property
    def device_type(self) -> str | None: ...


class InstanceTypeSummary(ResponseModel):
    id: uuid.UUID
    name: str
    infrastructure_provider_id: uuid.UUID
    site_id: uuid.UUID
    status: str

    @classmethod
    def of(cls, row: InstanceTypeRow) -> InstanceTypeSummary:
        return cls(
            id=row.id,
            name=row.name,
            infrastructure_provider_id=row.infrastructure_provider_id,
            site_id=row.site_id,
            status=row.status,
        )


class MachineCapability(ResponseModel):
    """A capability of an instance type or a machine. ``hardwareRevision`` is never rendered, ``cores``
    and ``threads`` only for CPU, ``inactiveDevices`` only for InfiniBand (as the reference does)."""

    type: str
    name: str
    frequency: str | None = Field(default=None, exclude_if=omit_if_none)
    capacity: str | None = Field(default=None, exclude_if=omit_if_none)
    vendor: str | None = Field(default=None, exclude_if=omit_if_none)
    cores: int | None = Field(default=None, exclude_if=omit_if_none)
    threads: int | None = Field(default=None, exclude_if=omit_if_none)
    inactive_devices: list[int] | None = Field(default=None, exclude_if=omit_if_empty)
    count: int | None
    device_type: str | None = Field(default=None, exclude_if=omit_if_none)

    @classmethod
    def of(cls, row: CapabilityRow) -> MachineCapability:
        cpu = row.type == CapabilityType.CPU
        return cls(
            type=row.type,
            name=row.name,
            frequency=row.frequency,
            capacity=row.capacity,
            vendor=row.vendor,
            cores=row.cores if cpu else None,
            threads=row.threads if cpu else None,
            inactive_devices=row.inactive_devices if row.type == CapabilityType.INFINIBAND else None,
            count=row.count,
            device_type=row.device_type,
        )


ASSOCIATION_DEPRECATION = Deprecation(
    attribute="id",
    replacedby="machineId",
    effective="2026-07-09T00:00:00Z",
    notice="\"'id' has been deprecated in favor of 'machineId'. Please take action immediately\"",
)


class MachineInstanceType(ResponseModel):
    """A machine's association with an instance type. nico keeps it on the machine row; the
    deprecated ``id`` is derived from the pair (stable, accepted by the DELETE endpoint)."""

    id: uuid.UUID
    machine_id: str
    instance_type_id: uuid.UUID
    deprecations: list[Deprecation]
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, view: Association) -> MachineInstanceType:
        return cls(
            id=view.id,
            machine_id=view.machine_id,
            instance_type_id=view.instance_type_id,
            deprecations=[ASSOCIATION_DEPRECATION],
            created=view.updated,
            updated=view.updated,
        )


class AllocationStats(ResponseModel):
    assigned: int
    total: int
    used: int
    unused: int
    unused_usable: int
    max_allocatable: int | None = Field(default=None, exclude_if=omit_if_none)


class InstanceType(ResponseModel):
    id: uuid.UUID
    name: str
    description: str | None
    controller_machine_type: str | None
    infrastructure_provider_id: uuid.UUID
    infrastructure_provider: InfrastructureProviderSummary | None = Field(
        default=None, exclude_if=omit_if_none
    )
    site_id: uuid.UUID
    site: SiteSummary | None = Field(default=None, exclude_if=omit_if_none)
    labels: dict[str, Any]
    machine_capabilities: list[MachineCapability]
    machine_instance_types: list[MachineInstanceType] | None = Field(default=None, exclude_if=omit_if_empty)
    allocation_stats: AllocationStats | None = Field(default=None, exclude_if=omit_if_none)
    status: str
    status_history: list[StatusDetail]
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, view: InstanceTypeView) -> InstanceType:
        row = view.instance_type
        return cls(
            id=row.id,
            name=row.name,
            description=row.description,
            controller_machine_type=row.controller_machine_type,
            infrastructure_provider_id=row.infrastructure_provider_id,
            infrastructure_provider=InfrastructureProviderSummary.of(view.provider)
            if view.provider
            else None,
            site_id=row.site_id,
            site=SiteSummary.of(view.site) if view.site else None,
            labels=row.labels or {},
            machine_capabilities=[MachineCapability.of(c) for c in view.capabilities],
            machine_instance_types=[MachineInstanceType.of(a) for a in view.associations]
            if view.associations is not None
            else None,
            allocation_stats=AllocationStats.model_validate(asdict(view.stats))
            if view.stats is not None
            else None,
            status=row.status,
            status_history=StatusDetail.many(view.history),
            created=row.created,
            updated=row.updated,
        )


def _text(limit: int) -> WithJsonSchema:
    return declared({"type": ["string", "null"], "maxLength": limit})


_COUNT = declared({"type": ["integer", "null"], "minimum": 0, "maximum": INT32_MAX})


def capability_rules(*, reported: bool) -> dict[str, Any]:
    """The device-type and inactive-device rules of ``check_capabilities`` as JSON Schema: GPU NVLink,
    Network DPU, no other type a device type; inactive devices only on InfiniBand. ``reported``
    capabilities (machine registration) may also carry an empty device type."""

    def either(kinds: list[str], devices: dict[str, Any]) -> dict[str, Any]:
        return {"anyOf": [{"properties": {"type": {"not": {"enum": kinds}}}}, {"properties": devices}]}

    empty = [""] if reported else []
    return {
        "required": ["type", "name"],
        "allOf": [
            either(["GPU"], {"deviceType": {"enum": [None, *empty, "NVLink"]}}),
            either(["Network"], {"deviceType": {"enum": [None, *empty, "DPU"]}}),
            either(
                [t.value for t in CapabilityType if t.value not in ("GPU", "Network")],
                {"deviceType": {"enum": [None, *empty]}},
            ),
            either(
                [t.value for t in CapabilityType if t.value != "InfiniBand"],
                {"inactiveDevices": {"anyOf": [{"type": "null"}, {"type": "array", "maxItems": 0}]}},
            ),
        ],
    }


class MachineCapabilityRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra=capability_rules(reported=False))

    type: Annotated[str | None, declared({"type": "string", "enum": [t.value for t in CapabilityType]})] = (
        None
    )
    name: Annotated[str | None, declared(NAME_SCHEMA)] = None
    frequency: Annotated[str | None, _text(CAPABILITY_TEXT_LIMITS["frequency"])] = None
    capacity: Annotated[str | None, _text(CAPABILITY_TEXT_LIMITS["capacity"])] = None
    vendor: Annotated[str | None, _text(CAPABILITY_TEXT_LIMITS["vendor"])] = None
    cores: Annotated[int | None, _COUNT] = None
    threads: Annotated[int | None, _COUNT] = None
    inactive_devices: Annotated[
        list[int] | None,
        MaxItems(MAX_INACTIVE_DEVICES, "a maximum of {limit} inactive devices can be specified"),
        declared(
            {
                "type": ["array", "null"],
                "maxItems": MAX_INACTIVE_DEVICES,
                "items": {"type": "integer", "minimum": 0, "maximum": INT32_MAX},
            }
        ),
    ] = None
    hardware_revision: Annotated[str | None, _text(CAPABILITY_TEXT_LIMITS["hardware_revision"])] = None
    count: Annotated[int | None, _COUNT] = None
    device_type: Annotated[str | None, _text(DEVICE_TYPE_LIMIT)] = None

    def problems(self) -> dict[str, str]:
        """The first failing rule per field of this item."""
        errors = FieldErrors()
        if not self.type:
            errors.add("type", "type must be specified for each Machine Capability")
        elif self.type not in set(CapabilityType):
            errors.add("type", f"invalid value: {self.type[:64]} for Machine Capability type")
        if not self.name:
            errors.add("name", "name must be specified for each Machine Capability")
        else:
            errors.add("name", name_problem(self.name, length_message=NAME_LENGTH))
        for field, limit in CAPABILITY_TEXT_LIMITS.items():
            value = getattr(self, field)
            if value is not None and len(value) > limit:
                errors.add(to_alias(field), f"must be at most {limit} characters")
        if self.device_type is not None and len(self.device_type) > DEVICE_TYPE_LIMIT:
            errors.add("deviceType", f"must be at most {DEVICE_TYPE_LIMIT} characters")
        for field in ("count", "cores", "threads"):
            value = getattr(self, field)
            if value is not None and not 0 <= value <= 2**31 - 1:
                errors.add(field, "must be between 0 and 2147483647")
        if self.inactive_devices is not None and any(not 0 <= d <= 2**31 - 1 for d in self.inactive_devices):
            errors.add("inactiveDevices", "must be between 0 and 2147483647")
        return errors.errors

    def spec(self) -> CapabilitySpec:
        assert self.type is not None and self.name is not None
        return CapabilitySpec(
            type=self.type,
            name=self.name,
            frequency=self.frequency,
            capacity=self.capacity,
            vendor=self.vendor,
            cores=self.cores,
            threads=self.threads,
            inactive_devices=self.inactive_devices or None,
            hardware_revision=self.hardware_revision,
            count=self.count,
            device_type=self.device_type,
        )


def to_alias(field: str) -> str:
    head, *rest = field.split("_")
    return head + "".join(part.title() for part in rest)


def capability_problems(items: list[MachineCapabilityRequest] | None) -> dict[str, Any]:
    """Item problems keyed by list index (``{"0": {"type": ...}}``), or the list-wide problem under
    ``machineCapabilities`` (duplicate type+name, a Network device type other than DPU or NVLink)."""
    if not items:
        return {}
    by_index = {str(i): p for i, p in ((i, item.problems()) for i, item in enumerate(items)) if p}
    if by_index:
        return by_index
    seen: set[tuple[str, str]] = set()
    for item in items:
        key = (str(item.type), str(item.name))
        if key in seen:
            return {
                "machineCapabilities": (
                    f"requested Capability type `{item.type}` cannot contain duplicate Capability name: "
                    f"{item.name}"
                )
            }
        seen.add(key)
        if item.type == CapabilityType.NETWORK and item.device_type not in (None, "", "DPU", "NVLink"):
            return {
                "machineCapabilities": (
                    f"requested device type  `{item.device_type}`  for Capability type `Network` is not valid"
                )
            }
    return {}


class InstanceTypeCreateRequest(RequestModel):
    model_config = required("name", "siteId")

    name: Annotated[str | None, declared(NAME_SCHEMA)] = None
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None
    site_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    labels: Annotated[dict[str, Any] | None, LABELS_BOUND, declared(LABELS_SCHEMA)] = None
    controller_machine_type: Annotated[
        str | None, declared({"type": ["string", "null"], "minLength": 2, "maxLength": 256})
    ] = None
    machine_capabilities: Annotated[list[MachineCapabilityRequest] | None, CAPABILITIES_LIMIT] = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name))
        errors.add("description", description_problem(self.description))
        errors.add("siteId", uuid_problem(self.site_id))
        errors.add("labels", labels_problem(self.labels))
        if self.controller_machine_type is not None and not 2 <= len(self.controller_machine_type) <= 256:
            errors.add("controllerMachineType", "not a valid value")
        errors.merge(capability_problems(self.machine_capabilities))


class InstanceTypeUpdateRequest(RequestModel):
    name: Annotated[str | None, declared(nullable(NAME_SCHEMA))] = None
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None
    labels: Annotated[dict[str, Any] | None, LABELS_BOUND, declared(LABELS_SCHEMA)] = None
    machine_capabilities: Annotated[list[MachineCapabilityRequest] | None, CAPABILITIES_LIMIT] = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name, required=False))
        errors.add("description", description_problem(self.description))
        errors.add("labels", labels_problem(self.labels))
        errors.merge(capability_problems(self.machine_capabilities))


class MachineAssociationRequest(RequestModel):
    model_config = required("machineIds")

    machine_ids: Annotated[
        list[str] | None,
        MaxItems(MAX_MACHINES_PER_REQUEST, "at most {limit} machine IDs can be specified"),
        declared(
            {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_MACHINES_PER_REQUEST,
                "items": {"type": "string", "minLength": 1, "maxLength": MACHINE_ID_LIMIT},
            }
        ),
    ] = None

    def check(self, errors: FieldErrors) -> None:
        ids = self.machine_ids
        if not ids:
            errors.add("machineIds", "at least one machine ID is required")
        elif len(ids) > MAX_MACHINES_PER_REQUEST:
            errors.add("machineIds", f"at most {MAX_MACHINES_PER_REQUEST} machine IDs can be specified")
        elif any(not 1 <= len(value) <= MACHINE_ID_LIMIT for value in ids):
            errors.add("machineIds", f"each machine ID must be 1 to {MACHINE_ID_LIMIT} characters")
