"""Machine bodies, including nico's ``nvLinkInfo`` extension and bulk registration."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pydantic import Field

from nico.api.binding import FieldErrors, labels_problem, uuid_problem
from nico.api.schemas.common import (
    Deprecation,
    RequestModel,
    ResponseModel,
    StatusDetail,
    omit_if_none,
)
from nico.api.schemas.instance_type import InstanceTypeSummary, MachineCapability, MachineCapabilityRequest
from nico.api.schemas.org import InfrastructureProviderSummary
from nico.api.schemas.site import SiteSummary
from nico.db.models import Gpu as GpuRow
from nico.db.models import Machine as MachineRow
from nico.services import inventory
from nico.services.instance_type import rendered_status
from nico.services.machine import MachineView

UPDATE_FIELDS = "setMaintenanceMode, instanceTypeId, clearInstanceType or labels"


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
    def of(cls, row: MachineRow, gpus: Iterable[GpuRow]) -> NvLinkInfo | None:
        if row.domain_uuid is None or row.chassis_serial is None:
            return None
        return cls(
            domain_uuid=row.domain_uuid,
            chassis_serial=row.chassis_serial,
            tray_index=row.tray_index,
            gpus=[NvLinkGpu(device_id=g.device_id, gpu_uid=str(g.gpu_uid), slot_id=g.slot_id) for g in gpus],
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
        """A full view (the provider's or a privileged tenant's) shows the serial number; NVLink info
        is shown to the provider only."""
        row = view.machine
        shown = rendered_status(row)
        return cls(
            id=row.id,
            controller_machine_id=row.id,
            infrastructure_provider_id=view.provider_id,
            infrastructure_provider=InfrastructureProviderSummary.of(view.provider)
            if view.provider
            else None,
            site_id=row.site_id,
            site=SiteSummary.of(view.site) if view.site else None,
            instance_type_id=row.instance_type_id,
            instance_type=InstanceTypeSummary.of(view.instance_type) if view.instance_type else None,
            instance_id=row.instance_id,
            tenant_id=view.tenant_id,
            controller_machine_type=row.controller_machine_type,
            hw_sku_device_type=row.hw_sku_device_type,
            vendor=row.vendor,
            product_name=row.product_name,
            hostname=row.hostname,
            serial_number=row.serial_number if view.full else None,
            machine_capabilities=[MachineCapability.of(c) for c in view.capabilities],
            machine_interfaces=[],
            maintenance_message=row.maintenance_message,
            labels=row.labels,
            health=None,
            status=shown,
            is_usable_by_tenant=shown == "Ready" and not row.is_missing_on_site,
            status_history=StatusDetail.many(view.history),
            created=row.created,
            updated=row.updated,
            deprecations=MACHINE_DEPRECATIONS,
            nv_link_info=NvLinkInfo.of(row, view.gpus) if view.gpus is not None else None,
        )


class MachineUpdateRequest(RequestModel):
    instance_type_id: str | None = None
    clear_instance_type: bool | None = None
    set_maintenance_mode: bool | None = None
    maintenance_message: str | None = None
    labels: dict[str, Any] | None = None

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


class GpuRequest(RequestModel):
    device_id: int | None = None
    gpu_uid: str | int | None = Field(
        default=None, description="Unsigned 64-bit fabric GUID: a decimal string or a JSON integer."
    )
    slot_id: int | None = None
    name: str | None = Field(
        default=None,
        description='nico extension: the GPU\'s name as the fabric reports it (e.g. "NVIDIA GB300"); '
        "names the derived GPU capability.",
    )


class NvLinkInfoRequest(RequestModel):
    domain_uuid: str | None = None
    chassis_serial: str | None = None
    tray_index: int | None = None
    gpus: list[GpuRequest] | None = None

    def record(self) -> inventory.NvlinkInfo:
        return inventory.NvlinkInfo(
            domain_uuid=self.domain_uuid,
            chassis_serial=self.chassis_serial,
            tray_index=self.tray_index,
            gpus=tuple(
                inventory.GpuRecord(device_id=g.device_id, gpu_uid=g.gpu_uid, slot_id=g.slot_id, name=g.name)
                for g in self.gpus or []
            ),
        )


class MachineRecordRequest(RequestModel):
    id: str | None = None
    hostname: str | None = None
    serial_number: str | None = None
    vendor: str | None = None
    product_name: str | None = None
    hw_sku_device_type: str | None = None
    machine_capabilities: list[MachineCapabilityRequest] | None = None
    nv_link_info: NvLinkInfoRequest | None = Field(default=None, alias="nvLinkInfo")


class MachineRegistrationRequest(RequestModel):
    """nico extension: ``POST /machine/registration`` (and ``nico admin machine register``)."""

    site_id: str | None = None
    instance_type_id: str | None = None
    machines: list[MachineRecordRequest] | None = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("siteId", uuid_problem(self.site_id))
        errors.add("instanceTypeId", uuid_problem(self.instance_type_id, required=False))

    def records(self) -> list[inventory.MachineRecord]:
        """The machines for :func:`nico.services.inventory.register_machines`, which checks them; the
        capability items' own field rules are checked here (their messages live with the schema)."""
        problems: dict[str, Any] = {}
        for i, machine in enumerate(self.machines or []):
            for j, item in enumerate(machine.machine_capabilities or []):
                for field, message in item.problems().items():
                    problems.setdefault(f"machines.{i}.machineCapabilities.{j}.{field}", message)
        if problems:
            raise inventory.invalid(problems)
        return [
            inventory.MachineRecord(
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
