"""NVLink interface bodies (one instance GPU bound to one logical partition) and the summaries they
embed: the partition summary and the instance summary."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Protocol

from pydantic import ConfigDict, Field

from nico.api.parsing import FieldErrors, uuid_problem
from nico.api.schemas.common import (
    UUID_SCHEMA,
    MaxItems,
    RequestModel,
    ResponseModel,
    Summarised,
    declared,
    omit_if_none,
)
from nico.services.nvlink_interface import Binding, InterfaceView

DEVICE_INSTANCE_MAX = 3  # the reference caps deviceInstance before any capability check
NVLINK_INTERFACES_MAX = DEVICE_INSTANCE_MAX + 1  # a machine (a compute tray) has 4 GPUs
DEPRECATED_PARTITION_KEY = "nvLinklogicalPartitionId"


class WireKeys:
    """Whether responses also carry the deprecated ``nvLinklogicalPartitionId`` (setting
    ``api.emit_deprecated_partition_key``, applied by the app factory)."""

    emit_deprecated_partition_key = True


class NVLinkInterfaceRequest(RequestModel):
    """One item of ``nvLinkInterfaces`` in instance create, batch and update (any key casing)."""

    model_config = ConfigDict(json_schema_extra={"required": ["nvLinkLogicalPartitionId"]})

    nv_link_logical_partition_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    device_instance: Annotated[
        int | None, declared({"type": "integer", "minimum": 0, "maximum": DEVICE_INSTANCE_MAX})
    ] = None

    def check(self, errors: FieldErrors) -> None:
        """Layer A of the reference: flat field messages, not indexed by item."""
        errors.add("nvLinkLogicalPartitionId", uuid_problem(self.nv_link_logical_partition_id))
        if self.device_instance is not None and not 0 <= self.device_instance <= DEVICE_INSTANCE_MAX:
            errors.add("deviceInstance", f"deviceInstance must be between 0 and {DEVICE_INSTANCE_MAX}")

    def binding(self) -> Binding:
        assert self.nv_link_logical_partition_id is not None  # checked by :meth:`check`
        return Binding(uuid.UUID(self.nv_link_logical_partition_id), self.device_instance or 0)


# ``nvLinkInterfaces`` of instance create, batch and update: one per GPU of the machine at most.
NVLinkInterfaceRequests = Annotated[
    list[NVLinkInterfaceRequest] | None,
    MaxItems(NVLINK_INTERFACES_MAX, "a maximum of {limit} NVLink Interfaces can be specified (one per GPU)"),
]


class PartitionRow(Summarised, Protocol):
    """What a partition summary reads of a partition (a row or a view)."""

    @property
    def site_id(self) -> uuid.UUID: ...


class InterfaceRow(Protocol):
    """What an interface summary reads of an NVLink interface."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def instance_id(self) -> uuid.UUID: ...

    @property
    def logical_partition_id(self) -> uuid.UUID: ...

    @property
    def device_instance(self) -> int: ...

    @property
    def status(self) -> str: ...


class NVLinkLogicalPartitionSummary(ResponseModel):
    id: uuid.UUID
    name: str
    site_id: uuid.UUID
    status: str

    @classmethod
    def of(cls, row: PartitionRow) -> NVLinkLogicalPartitionSummary:
        return cls(id=row.id, name=row.name, site_id=row.site_id, status=row.status)


class InstanceSummary(ResponseModel):
    id: uuid.UUID
    name: str
    infrastructure_provider_id: uuid.UUID | None
    site_id: uuid.UUID
    instance_type_id: str
    controller_instance_id: uuid.UUID
    status: str


class NVLinkInterfaceSummary(ResponseModel):
    """What a partition lists with ``includeInterfaces`` (capital L in the partition id key)."""

    id: uuid.UUID
    instance_id: uuid.UUID
    nv_link_logical_partition_id: uuid.UUID
    device_instance: int
    status: str

    @classmethod
    def of(cls, row: InterfaceRow) -> NVLinkInterfaceSummary:
        return cls(
            id=row.id,
            instance_id=row.instance_id,
            nv_link_logical_partition_id=row.logical_partition_id,
            device_instance=row.device_instance,
            status=row.status,
        )


class NVLinkInterface(ResponseModel):
    """The full object. NICo's current docs name the partition key ``nvLinkLogicalPartitionId``; the
    reference's Go tag ``nvLinklogicalPartitionId`` (lower-case l, removed after 2026-07-09) is emitted
    too while the setting says so."""

    id: uuid.UUID
    instance_id: uuid.UUID
    instance: InstanceSummary | None = Field(default=None, exclude_if=omit_if_none)
    nv_link_logical_partition_id: uuid.UUID
    nv_link_logical_partition_id_deprecated: uuid.UUID | None = Field(
        default=None,
        serialization_alias=DEPRECATED_PARTITION_KEY,
        exclude_if=omit_if_none,
        deprecated="Use nvLinkLogicalPartitionId; removed after 2026-07-09.",
    )
    nv_link_logical_partition: NVLinkLogicalPartitionSummary | None = Field(
        default=None, exclude_if=omit_if_none
    )
    nv_link_domain_id: uuid.UUID | None
    device_instance: int
    gpu_guid: str | None
    status: str
    # nico extension: <ClusterUUID>.<CliqueId> as the GPU driver will report it, null until Ready.
    nv_link_clique_id: str | None = None
    # nico extension: the GPU's NVLink health as the fabric last reported it (HEALTHY, DEGRADED,
    # NO_NVLINK, DEGRADED_BW, ...); absent until observed.
    nv_link_health: str | None = Field(default=None, exclude_if=omit_if_none)
    # nico extension: why the interface's GPU is not all it should be (its NVLink health, when the fabric
    # reports anything but healthy; the partition is kept); absent otherwise.
    status_message: str | None = Field(default=None, exclude_if=omit_if_none)
    created: datetime
    updated: datetime

    def model_post_init(self, context: object, /) -> None:
        if WireKeys.emit_deprecated_partition_key:
            self.__dict__["nv_link_logical_partition_id_deprecated"] = self.nv_link_logical_partition_id

    @classmethod
    def of(cls, view: InterfaceView) -> NVLinkInterface:
        row, inst = view.interface, view.instance
        return cls(
            id=row.id,
            instance_id=row.instance_id,
            instance=(
                InstanceSummary(
                    id=inst.id,
                    name=inst.name,
                    infrastructure_provider_id=view.provider_id,
                    site_id=inst.site_id,
                    instance_type_id=str(inst.instance_type_id or ""),
                    controller_instance_id=inst.id,
                    status=inst.status,
                )
                if inst is not None
                else None
            ),
            nv_link_logical_partition_id=row.logical_partition_id,
            nv_link_logical_partition=(
                NVLinkLogicalPartitionSummary.of(view.partition) if view.partition is not None else None
            ),
            nv_link_domain_id=row.domain_uuid,
            device_instance=row.device_instance,
            gpu_guid=str(row.gpu_uid) if row.gpu_uid is not None else None,
            status=row.status,
            nv_link_clique_id=view.clique_id,
            nv_link_health=view.health,
            status_message=view.status_message,
            created=row.created,
            updated=row.updated,
        )
