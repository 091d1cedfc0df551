"""Machine bodies, including nico's ``nvLinkInfo`` extension and bulk registration."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import ConfigDict, Field, WithJsonSchema

from nico.api.parsing import FieldErrors, labels_problem, uuid_problem
from nico.api.schemas.common import (
    LABELS_BOUND,
    LABELS_SCHEMA,
    OPTIONAL_UUID_SCHEMA,
    UUID_SCHEMA,
    Deprecation,
    MaxItems,
    RequestModel,
    ResponseModel,
    StatusDetail,
    declared,
    nullable,
    omit_if_none,
    required,
)
from nico.api.schemas.instance_type import (
    CAPABILITIES_LIMIT,
    InstanceTypeSummary,
    MachineCapability,
    MachineCapabilityRequest,
    capability_rules,
)
from nico.api.schemas.org import InfrastructureProviderSummary
from nico.api.schemas.site import SiteSummary
from nico.inventory.records import (
    GPU_UID_MAX,
    INT32_MAX,
    MACHINE_ID,
    MAX_GPUS,
    MAX_MACHINES,
    TEXT_LIMITS,
    GpuRecord,
    MachineRecord,
    NvlinkInfo,
    RegistrationResult,
    invalid,
)
from nico.inventory.views import LocationView, MachineView

UPDATE_FIELDS = "setMaintenanceMode, instanceTypeId, clearInstanceType or labels"
_NULL = {"type": "null"}
_MESSAGE = {"type": "string", "minLength": 5, "maxLength": 256}


def _one_update(field: str, schema: dict[str, Any], **more: dict[str, Any]) -> dict[str, Any]:
    """The body that sets ``field`` alone (the other three null or absent; ``more`` required too)."""
    nulls = dict.fromkeys(("setMaintenanceMode", "instanceTypeId", "clearInstanceType", "labels"), _NULL)
    return {
        "required": [field, *more],
        "properties": {**nulls, "maintenanceMessage": _NULL, field: schema, **more},
    }


# MachineUpdateRequest.check: exactly one of the four (null reads as absent); maintenanceMessage (5..256)
# with setMaintenanceMode true and only then; clearInstanceType only true.
MACHINE_UPDATE_ONE_OF: list[Any] = [
    _one_update("setMaintenanceMode", {"const": True}, maintenanceMessage=_MESSAGE),
    _one_update("setMaintenanceMode", {"const": False}),
    _one_update("instanceTypeId", {**OPTIONAL_UUID_SCHEMA, "type": "string"}),
    _one_update("clearInstanceType", {"const": True}),
    _one_update("labels", {**LABELS_SCHEMA, "type": "object"}),
]


def _deprecation(old: str, new: str) -> Deprecation:
    return Deprecation(
        attribute=old,
        replacedby=new,
        effective="2025-11-21T00:00:00Z",
        notice=f"\"'{old}' has been deprecated in favor of '{new}'. Please take action immediately\"",
    )


MACHINE_DEPRECATIONS = [
    _deprecation("health.observed_at", "health.observedAt"),
    _deprecation("health.alerts.in_alert_since", "health.alerts.inAlertSince"),
    _deprecation("health.alerts.tenant_message", "health.alerts.tenantMessage"),
]


class NvLinkGpu(ResponseModel):
    device_id: int
    gpu_uid: str = Field(description="Fabric GUID, an unsigned 64-bit integer as a decimal string.")
    slot_id: int | None


class NvLinkInfo(ResponseModel):
    """nico extension (provider view only): where the machine sits on the NVLink fabric."""

    domain_uuid: uuid.UUID
    chassis_serial: str
    tray_index: int | None
    gpus: list[NvLinkGpu]

    @classmethod
    def of(cls, view: LocationView) -> NvLinkInfo:
        return cls(
            domain_uuid=view.domain_uuid,
            chassis_serial=view.chassis_serial,
            tray_index=view.tray_index,
            gpus=[
                NvLinkGpu(device_id=g.device_id, gpu_uid=str(g.gpu_uid), slot_id=g.slot_id) for g in view.gpus
            ],
        )


class Machine(ResponseModel):
    id: str
    controller_machine_id: str
    infrastructure_provider_id: uuid.UUID
    infrastructure_provider: InfrastructureProviderSummary | None = Field(
        default=None, exclude_if=omit_if_none
    )
    site_id: uuid.UUID
    site: SiteSummary | None = Field(default=None, exclude_if=omit_if_none)
    instance_type_id: uuid.UUID | None
    instance_type: InstanceTypeSummary | None = Field(default=None, exclude_if=omit_if_none)
    instance_id: uuid.UUID | None
    tenant_id: uuid.UUID | None
    controller_machine_type: str | None
    hw_sku_device_type: str | None
    vendor: str | None
    product_name: str | None
    hostname: str | None
    serial_number: str | None
    machine_capabilities: list[MachineCapability]
    machine_interfaces: list[dict[str, Any]]
    maintenance_message: str | None
    labels: dict[str, Any] | None
    health: dict[str, Any] | None
    status: str
    is_usable_by_tenant: bool
    status_history: list[StatusDetail]
    created: datetime
    updated: datetime
    deprecations: list[Deprecation]
    nv_link_info: NvLinkInfo | None = Field(
        default=None,
        serialization_alias="nvLinkInfo",
        exclude_if=omit_if_none,
        description="nico extension, provider view only.",
    )

    @classmethod
    def of(cls, view: MachineView) -> Machine:
        return cls(
            id=view.id,
            controller_machine_id=view.id,
            infrastructure_provider_id=view.provider_id,
            infrastructure_provider=InfrastructureProviderSummary.of(view.provider)
            if view.provider
            else None,
            site_id=view.site_id,
            site=SiteSummary.of(view.site) if view.site else None,
            instance_type_id=view.instance_type_id,
            instance_type=InstanceTypeSummary.of(view.instance_type) if view.instance_type else None,
            instance_id=view.instance_id,
            tenant_id=view.tenant_id,
            controller_machine_type=view.controller_machine_type,
            hw_sku_device_type=view.hw_sku_device_type,
            vendor=view.vendor,
            product_name=view.product_name,
            hostname=view.hostname,
            serial_number=view.serial_number,
            machine_capabilities=[MachineCapability.of(c) for c in view.capabilities],
            machine_interfaces=[],
            maintenance_message=view.maintenance_message,
            labels=view.labels,
            health=None,
            status=view.status,
            is_usable_by_tenant=view.usable_by_tenant,
            status_history=StatusDetail.many(view.history),
            created=view.created,
            updated=view.updated,
            deprecations=MACHINE_DEPRECATIONS,
            nv_link_info=NvLinkInfo.of(view.location) if view.location is not None else None,
        )


class MachineUpdateRequest(RequestModel):
    model_config = ConfigDict(json_schema_extra={"oneOf": MACHINE_UPDATE_ONE_OF})

    instance_type_id: Annotated[str | None, declared(OPTIONAL_UUID_SCHEMA)] = None
    clear_instance_type: Annotated[
        bool | None, declared({"type": ["boolean", "null"], "enum": [True, None]})
    ] = None
    set_maintenance_mode: bool | None = None
    maintenance_message: Annotated[str | None, declared(nullable(_MESSAGE))] = None
    labels: Annotated[dict[str, Any] | None, LABELS_BOUND, declared(LABELS_SCHEMA)] = None

    def check(self, errors: FieldErrors) -> None:
        chosen = [
            name
            for name, given in (
                ("setMaintenanceMode", self.set_maintenance_mode is not None),
                ("instanceTypeId", self.instance_type_id is not None),
                ("clearInstanceType", self.clear_instance_type is not None),
                ("labels", self.labels is not None),
            )
            if given
        ]
        if len(chosen) > 1:
            errors.add("__all__", f"only one of {UPDATE_FIELDS} can be set at a time")
        elif not chosen:
            errors.add("__all__", f"no updates specified. One of {UPDATE_FIELDS} must be set")
        errors.add("instanceTypeId", uuid_problem(self.instance_type_id, required=False))
        if self.clear_instance_type is False:
            errors.add("clearInstanceType", "must be true when specified")
        if self.set_maintenance_mode and not 5 <= len(self.maintenance_message or "") <= 256:
            errors.add("maintenanceMessage", "the length must be between 5 and 256")
        if self.maintenance_message is not None and not self.set_maintenance_mode:
            errors.add("maintenanceMessage", "can only be specified when setMaintenanceMode is true")
        errors.add("labels", labels_problem(self.labels))


# not only whitespace, no NUL
SOME_TEXT = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"


class GpuRequest(RequestModel):
    model_config = required("deviceId", "gpuUid")

    device_id: Annotated[int | None, declared({"type": "integer", "minimum": 1, "maximum": INT32_MAX})] = None
    gpu_uid: Annotated[
        str | int | None,
        declared(
            {
                "anyOf": [
                    {"type": "string", "pattern": "^[0-9]{1,19}$"},
                    {"type": "integer", "minimum": 0, "maximum": GPU_UID_MAX},
                ]
            }
        ),
    ] = Field(default=None, description="Unsigned 64-bit fabric GUID: a decimal string or a JSON integer.")
    slot_id: Annotated[
        int | None, declared({"type": ["integer", "null"], "minimum": 0, "maximum": INT32_MAX})
    ] = None
    name: Annotated[
        str | None, declared({"type": ["string", "null"], "pattern": SOME_TEXT, "maxLength": 256})
    ] = Field(
        default=None,
        description='nico extension: the GPU\'s name as the fabric reports it (e.g. "NVIDIA GB300"); '
        "names the derived GPU capability.",
    )


# records.check_location: 1..256 characters without surrounding whitespace (a hardware serial, not a
# name: the name rule of nico.api.names does not apply), no NUL
CHASSIS_SERIAL_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 256,
    "pattern": "^[^\\s\\u0000]([^\\u0000]*[^\\s\\u0000])?$",
}


class NvLinkInfoRequest(RequestModel):
    model_config = required("domainUuid", "chassisSerial", "trayIndex", "gpus")

    domain_uuid: Annotated[str | None, declared(UUID_SCHEMA)] = None
    # 1..256 characters without surrounding whitespace
    chassis_serial: Annotated[str | None, declared(CHASSIS_SERIAL_SCHEMA)] = None
    tray_index: Annotated[int | None, declared({"type": "integer", "minimum": 0, "maximum": INT32_MAX})] = (
        None
    )
    gpus: Annotated[list[GpuRequest] | None, MaxItems(MAX_GPUS, "1 to {limit} GPUs must be specified")] = (
        Field(default=None, json_schema_extra={"type": "array", "minItems": 1, "maxItems": MAX_GPUS})
    )

    def record(self) -> NvlinkInfo:
        return NvlinkInfo(
            domain_uuid=self.domain_uuid,
            chassis_serial=self.chassis_serial,
            tray_index=self.tray_index,
            gpus=tuple(
                GpuRecord(device_id=g.device_id, gpu_uid=g.gpu_uid, slot_id=g.slot_id, name=g.name)
                for g in self.gpus or []
            ),
        )


class ReportedCapabilityRequest(MachineCapabilityRequest):
    """A capability as a machine's inventory reports it (an empty device type allowed)."""

    model_config = ConfigDict(json_schema_extra=capability_rules(reported=True))


def _text(limit: int) -> WithJsonSchema:
    return declared({"type": ["string", "null"], "maxLength": limit})


class MachineRecordRequest(RequestModel):
    model_config = required("id")

    id: Annotated[str | None, declared({"type": "string", "pattern": MACHINE_ID.pattern})] = None
    hostname: Annotated[str | None, _text(TEXT_LIMITS["hostname"])] = None
    serial_number: Annotated[str | None, _text(TEXT_LIMITS["serialNumber"])] = None
    vendor: Annotated[str | None, _text(TEXT_LIMITS["vendor"])] = None
    product_name: Annotated[str | None, _text(TEXT_LIMITS["productName"])] = None
    hw_sku_device_type: Annotated[str | None, _text(TEXT_LIMITS["hwSkuDeviceType"])] = None
    machine_capabilities: Annotated[list[ReportedCapabilityRequest] | None, CAPABILITIES_LIMIT] = None
    nv_link_info: NvLinkInfoRequest | None = Field(default=None, alias="nvLinkInfo")


class MachineRegistrationRequest(RequestModel):
    """nico extension: ``POST /machine/registration`` (and ``nico admin machine register``)."""

    model_config = required("siteId", "machines")

    site_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    instance_type_id: Annotated[str | None, declared(OPTIONAL_UUID_SCHEMA)] = None
    machines: Annotated[
        list[MachineRecordRequest] | None, MaxItems(MAX_MACHINES, "1 to {limit} machines must be specified")
    ] = Field(default=None, json_schema_extra={"type": "array", "minItems": 1, "maxItems": MAX_MACHINES})

    def check(self, errors: FieldErrors) -> None:
        errors.add("siteId", uuid_problem(self.site_id))
        errors.add("instanceTypeId", uuid_problem(self.instance_type_id, required=False))

    def records(self) -> list[MachineRecord]:
        """The machines for :func:`nico.inventory.registration.register_machines`, which checks them; the
        capability items' own field rules are checked here (their messages live with the schema)."""
        problems: dict[str, Any] = {}
        for i, machine in enumerate(self.machines or []):
            for j, item in enumerate(machine.machine_capabilities or []):
                for field, message in item.problems().items():
                    problems.setdefault(f"machines.{i}.machineCapabilities.{j}.{field}", message)
        if problems:
            raise invalid(problems)
        return [
            MachineRecord(
                id=m.id,
                hostname=m.hostname,
                serial_number=m.serial_number,
                vendor=m.vendor,
                product_name=m.product_name,
                hw_sku_device_type=m.hw_sku_device_type,
                capabilities=tuple(c.spec() for c in m.machine_capabilities)
                if m.machine_capabilities is not None
                else None,
                nvlink=m.nv_link_info.record() if m.nv_link_info is not None else None,
            )
            for m in self.machines or []
        ]


class MachineRegistration(ResponseModel):
    """Which machines the registration created, changed, or found exactly as given."""

    created: list[str]
    updated: list[str]
    unchanged: list[str]

    @classmethod
    def of(cls, result: RegistrationResult) -> MachineRegistration:
        return cls(created=result.created, updated=result.updated, unchanged=result.unchanged)
