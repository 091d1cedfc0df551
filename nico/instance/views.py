"""The instance's plain data: what its service is asked (:class:`InstanceSpec`, :class:`InstanceFilter`)
and what it answers (:class:`InstanceView`, from which the wire schema is built)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nico.inventory.views import MachineView
from nico.services.instance_type import InstanceTypeRecord
from nico.services.nvlink_interface import Binding
from nico.services.orgs import ProviderRecord, TenantRecord
from nico.services.site import SiteRecord
from nico.services.vpc import VpcRecord

# An interface, NVLink interface or history entry as PostgreSQL wrote it (json_build_object): the
# schema's field names in snake case, timestamps as ISO text.
Document = Mapping[str, Any]


@dataclass(frozen=True)
class Port:
    """A requested Ethernet interface."""

    subnet_id: uuid.UUID
    is_physical: bool = False


@dataclass(frozen=True)
class InstanceSpec:
    """What single and batch creation share, parsed and checked field by field."""

    vpc_id: uuid.UUID
    ports: Sequence[Port]
    nvlink: Sequence[Binding] | None = None  # None: not given
    tenant_id: uuid.UUID | None = None
    description: str | None = None
    ipxe_script: str | None = None
    user_data: str | None = None
    phone_home_enabled: bool = False
    always_boot_with_custom_ipxe: bool = False
    labels: dict[str, str] | None = None
    created_by: str | None = None


@dataclass(frozen=True)
class InstanceFilter:
    site_ids: Sequence[uuid.UUID] = ()
    vpc_ids: Sequence[uuid.UUID] = ()
    instance_type_ids: Sequence[uuid.UUID] = ()
    machine_ids: Sequence[str] = ()
    statuses: Sequence[str] = ()
    nothing: bool = False  # a filter on something nico never records (OS, NSG, IP address)
    provider_id: uuid.UUID | None = None
    name: str | None = None
    query: str | None = None


@dataclass(frozen=True)
class Relations:
    """The ``includeRelation`` objects of an instance (None: not asked for, or gone), as the other
    resources' records and views (the machine as a tenant sees it)."""

    tenant: TenantRecord | None = None
    site: SiteRecord | None = None
    provider: ProviderRecord | None = None
    instance_type: InstanceTypeRecord | None = None
    vpc: VpcRecord | None = None
    machine: MachineView | None = None


@dataclass(frozen=True)
class InterfaceRecord:
    """One of an instance's Ethernet interfaces as ``/instance/{id}/interface`` lists it."""

    id: uuid.UUID
    instance_id: uuid.UUID
    subnet_id: uuid.UUID
    is_physical: bool
    status: str
    created: datetime
    updated: datetime


@dataclass(frozen=True)
class InstanceView:
    """An instance with everything its response shows: its columns, its site's provider and serial
    console host, its machine, and its interfaces, NVLink interfaces and history as PostgreSQL wrote
    them (in the order the response lists them)."""

    id: uuid.UUID
    name: str
    description: str | None
    tenant_id: uuid.UUID
    site_id: uuid.UUID
    instance_type_id: uuid.UUID | None
    vpc_id: uuid.UUID
    ipxe_script: str | None
    user_data: str | None
    always_boot_with_custom_ipxe: bool
    phone_home_enabled: bool
    labels: dict[str, Any] | None
    status: str
    created: datetime
    updated: datetime
    infrastructure_provider_id: uuid.UUID
    serial_console_hostname: str | None
    machine_id: str | None
    interfaces: Sequence[Document]
    nvlink_interfaces: Sequence[Document]
    status_history: Sequence[Document]
    relations: Relations = field(default_factory=Relations)

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> InstanceView:
        """From a row of the instance's reads (:mod:`nico.instance.queries`: the columns by name)."""
        return cls(
            id=row["id"],
            name=row["name"],
            description=row["description"],
            tenant_id=row["tenant_id"],
            site_id=row["site_id"],
            instance_type_id=row["instance_type_id"],
            vpc_id=row["vpc_id"],
            ipxe_script=row["ipxe_script"],
            user_data=row["user_data"],
            always_boot_with_custom_ipxe=row["always_boot_with_custom_ipxe"],
            phone_home_enabled=row["phone_home_enabled"],
            labels=row["labels"],
            status=row["status"],
            created=row["created"],
            updated=row["updated"],
            infrastructure_provider_id=row["infrastructure_provider_id"],
            serial_console_hostname=row["serial_console_hostname"],
            machine_id=row["machine_id"],
            interfaces=row["interfaces"],
            nvlink_interfaces=row["nvlink_interfaces"],
            status_history=row["status_history"],
        )
