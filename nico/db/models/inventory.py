"""Hardware inventory: NVLink domains, instance types with capabilities, machines and their GPUs."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from nico.db.base import Base, check_in, created_at, updated_at, uuid_pk
from nico.db.enums import CapabilityType, InstanceTypeStatus, MachineStatus
from nico.db.types import GpuUid, u64_check


class NvlinkDomain(Base):
    """GPUs joined by one NVLink switch fabric (one NVL72 rack, or two NVL36 racks cabled together).

    Rows appear when machines are registered with NVLink info. The reconciler keeps its per-domain
    bookkeeping here so that every replica sees the same truth about a domain's health.
    """

    __tablename__ = "nvlink_domain"
    __table_args__ = (
        # A site's domains in rack order, read in the index's order by the topology pages (migration 0022).
        Index("ix_nvlink_domain_rack_order", "site_id", text("rack_serial NULLS FIRST"), "uuid"),
    )

    uuid: Mapped[UUID] = mapped_column(primary_key=True)
    site_id: Mapped[UUID] = mapped_column(ForeignKey("site.id", ondelete="RESTRICT"), index=True)
    last_pass_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # What the fabric held when a pass last left the domain with nothing to do: a full pass whose
    # fresh listing has this digest, with no unsettled instance or open intent, can skip the domain.
    fabric_digest: Mapped[str | None] = mapped_column(String(64))
    settled: Mapped[bool] = mapped_column(default=False, server_default="false")
    last_error: Mapped[str | None] = mapped_column(Text)
    last_error_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    consecutive_failures: Mapped[int] = mapped_column(default=0, server_default="0")
    # GPUs in neither their tenant partition nor their home after the last pass (#6644).
    gpus_without_home: Mapped[int] = mapped_column(default=0, server_default="0")
    # GPUs the fabric showed in partitions nico did not make, at the last pass (foreign partitions).
    foreign_gpus: Mapped[int] = mapped_column(server_default="0")  # server side: added by 0016
    # The domain's multicast budget (NMX-C GetDomainProperties max_multicast_groups), once read.
    max_multicast_groups: Mapped[int | None]
    # The least chassis serial of its machines (its place in rack order), kept by rule domain_rack_order.
    rack_serial: Mapped[str | None] = mapped_column(String(256))
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class InstanceType(Base):
    __tablename__ = "instance_type"
    __table_args__ = (
        UniqueConstraint("site_id", "name"),
        CheckConstraint(check_in("status", InstanceTypeStatus), name="status"),
    )

    id: Mapped[UUID] = uuid_pk()
    infrastructure_provider_id: Mapped[UUID] = mapped_column(
        ForeignKey("infrastructure_provider.id", ondelete="RESTRICT"), index=True
    )
    site_id: Mapped[UUID] = mapped_column(ForeignKey("site.id", ondelete="RESTRICT"))
    name: Mapped[str] = mapped_column(String(256))
    description: Mapped[str | None] = mapped_column(Text)
    controller_machine_type: Mapped[str | None] = mapped_column(String(256))
    labels: Mapped[dict[str, str]] = mapped_column(JSONB, default=dict, server_default=text("'{}'::jsonb"))
    status: Mapped[str] = mapped_column(String(32), default=InstanceTypeStatus.READY)
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class MachineCapability(Base):
    """One capability row of an instance type or of a machine (exactly one of the two owners)."""

    __tablename__ = "machine_capability"
    __table_args__ = (
        CheckConstraint("num_nonnulls(instance_type_id, machine_id) = 1", name="one_owner"),
        CheckConstraint(check_in("type", CapabilityType), name="type"),
        CheckConstraint("count IS NULL OR count >= 0", name="count"),
    )

    id: Mapped[UUID] = uuid_pk()
    instance_type_id: Mapped[UUID | None] = mapped_column(
        ForeignKey("instance_type.id", ondelete="CASCADE"), index=True
    )
    machine_id: Mapped[str | None] = mapped_column(ForeignKey("machine.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(default=0, server_default="0")
    type: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(256))
    frequency: Mapped[str | None] = mapped_column(String(64))
    capacity: Mapped[str | None] = mapped_column(String(64))
    vendor: Mapped[str | None] = mapped_column(String(256))
    cores: Mapped[int | None]
    threads: Mapped[int | None]
    inactive_devices: Mapped[list[int] | None] = mapped_column(ARRAY(Integer))
    hardware_revision: Mapped[str | None] = mapped_column(String(64))
    count: Mapped[int | None]
    device_type: Mapped[str | None] = mapped_column(String(32))
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class Machine(Base):
    """One compute tray. ``instance_id`` is the single record of assignment: a machine holds at most one
    instance and an instance at most one machine (UNIQUE); deleting the instance frees the machine."""

    __tablename__ = "machine"
    __table_args__ = (
        CheckConstraint(check_in("status", MachineStatus), name="status"),
        CheckConstraint("(domain_uuid IS NULL) = (chassis_serial IS NULL)", name="nvlink_info_whole"),
        CheckConstraint("tray_index IS NULL OR tray_index >= 0", name="tray_index"),
        CheckConstraint("foreign_gpus >= 0", name="foreign_gpus"),
        CheckConstraint("length(id) BETWEEN 1 AND 256", name="id_length"),
        UniqueConstraint("chassis_serial", "tray_index"),
        Index("ix_machine_placement", "site_id", "instance_type_id", "domain_uuid"),
        # The machine list's default order, and the instances whose machine is in an NVLink domain
        # (the scheduler export's nodes), read from indexes (migration 0022).
        Index("ix_machine_created", "created", "id", postgresql_include=["site_id"]),
        Index(
            "ix_machine_placed_instance",
            "instance_id",
            postgresql_where=text("instance_id IS NOT NULL AND domain_uuid IS NOT NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(256), primary_key=True)
    site_id: Mapped[UUID] = mapped_column(ForeignKey("site.id", ondelete="RESTRICT"))
    instance_type_id: Mapped[UUID | None] = mapped_column(
        ForeignKey("instance_type.id", ondelete="SET NULL"), index=True
    )
    instance_id: Mapped[UUID | None] = mapped_column(
        ForeignKey("instance.id", ondelete="SET NULL"), unique=True
    )
    status: Mapped[str] = mapped_column(String(32), default=MachineStatus.READY)
    controller_machine_type: Mapped[str | None] = mapped_column(String(256))
    hw_sku_device_type: Mapped[str | None] = mapped_column(String(64))
    vendor: Mapped[str | None] = mapped_column(String(256))
    product_name: Mapped[str | None] = mapped_column(String(256))
    hostname: Mapped[str | None] = mapped_column(String(256))
    serial_number: Mapped[str | None] = mapped_column(String(256))
    maintenance_message: Mapped[str | None] = mapped_column(String(256))
    labels: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    is_missing_on_site: Mapped[bool] = mapped_column(default=False, server_default="false")
    domain_uuid: Mapped[UUID | None] = mapped_column(
        ForeignKey("nvlink_domain.uuid", ondelete="RESTRICT"), index=True
    )
    chassis_serial: Mapped[str | None] = mapped_column(String(256))
    tray_index: Mapped[int | None]
    # Its GPUs the fabric showed in a partition nico did not make, at the domain's last pass: such a
    # machine is held (never free for placement, never counted free) while any remains.
    foreign_gpus: Mapped[int] = mapped_column(SmallInteger, server_default="0")  # added by 0016
    # The logical partition whose reservation holds it: only that partition's instances take it.
    reserved_lp_id: Mapped[UUID | None] = mapped_column(
        ForeignKey("logical_partition.id", ondelete="SET NULL"), index=True
    )
    # A GPU of the machine reports anything but HEALTHY (and [nvlink_config] place_on_unhealthy is off):
    # not free for placement (rules machine_pick and capacity); kept by the reconciler's health read.
    # (The server's default only: inserts never name it, so they run against revisions before it too.)
    held_unhealthy: Mapped[bool] = mapped_column(server_default="false")
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()


class Gpu(Base):
    """A GPU of a machine, with what the reconciler last observed of it on the fabric.

    ``physical_partition_id`` is a single column, so a GPU is in at most one physical partition by
    construction; ``nmx_partition_id`` is the NMX partition id seen (32766 = default partition).
    """

    __tablename__ = "gpu"
    __table_args__ = (
        CheckConstraint(u64_check("gpu_uid"), name="gpu_uid_u64"),
        CheckConstraint("device_id >= 1", name="device_id"),
        CheckConstraint(
            "nmx_partition_id IS NULL OR nmx_partition_id BETWEEN 0 AND 4294967295",
            name="nmx_partition_id_u32",
        ),
        # Room on each page for the reconciler's updates of health (HOT: no index entry): migration 0021.
        {"postgresql_with": {"fillfactor": 70}},
    )

    machine_id: Mapped[str] = mapped_column(ForeignKey("machine.id", ondelete="CASCADE"), primary_key=True)
    device_id: Mapped[int] = mapped_column(primary_key=True)
    gpu_uid: Mapped[int] = mapped_column(GpuUid, unique=True)
    slot_id: Mapped[int | None]
    physical_partition_id: Mapped[UUID | None] = mapped_column(
        ForeignKey("physical_partition.id", ondelete="SET NULL"), index=True
    )
    nmx_partition_id: Mapped[int | None] = mapped_column(BigInteger)
    health: Mapped[str | None] = mapped_column(String(32))  # as the fabric last reported it
    observed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created: Mapped[datetime] = created_at()
    updated: Mapped[datetime] = updated_at()
