"""What the machine service returns: plain frozen dataclasses, no ORM rows."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nico.services.instance_type import CapabilitySpec
from nico.services.orgs import ProviderRecord
from nico.services.site import SiteRecord
from nico.services.status import StatusRecord


@dataclass(frozen=True)
class GpuView:
    device_id: int
    gpu_uid: int
    slot_id: int | None


@dataclass(frozen=True)
class LocationView:
    """Where the machine sits on the NVLink fabric, as recorded (its provider's view only)."""

    domain_uuid: uuid.UUID
    chassis_serial: str
    tray_index: int | None
    gpus: tuple[GpuView, ...]


@dataclass(frozen=True)
class InstanceTypeSummaryView:
    """The machine's instance type as its response embeds it (``includeRelation=InstanceType``)."""

    id: uuid.UUID
    name: str
    infrastructure_provider_id: uuid.UUID
    site_id: uuid.UUID
    status: str


@dataclass(frozen=True)
class MachineView:
    """A machine as one caller may see it: ``status`` as shown (a Ready machine holding an instance is
    InUse), ``serial_number`` only in a full view, ``location`` only for its provider, with its newest
    history and the requested relations."""

    id: str
    site_id: uuid.UUID
    provider_id: uuid.UUID
    tenant_id: uuid.UUID | None
    instance_type_id: uuid.UUID | None
    instance_id: uuid.UUID | None
    controller_machine_type: str | None
    hw_sku_device_type: str | None
    vendor: str | None
    product_name: str | None
    hostname: str | None
    serial_number: str | None
    maintenance_message: str | None
    labels: dict[str, Any] | None
    status: str
    usable_by_tenant: bool
    created: datetime
    updated: datetime
    capabilities: tuple[CapabilitySpec, ...]
    history: tuple[StatusRecord, ...]
    location: LocationView | None = None
    provider: ProviderRecord | None = None
    site: SiteRecord | None = None
    instance_type: InstanceTypeSummaryView | None = None


@dataclass(frozen=True)
class Decommission:
    """What a force-delete did: ``found`` (false: no such machine, nothing done), ``removed`` (the
    machine row is gone already), the instance released (if any) and whether the fabric still has
    work to do before the machine disappears."""

    machine_id: str
    found: bool
    removed: bool
    instance_id: uuid.UUID | None
    waits_for_fabric: bool
