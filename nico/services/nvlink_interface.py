"""NVLink interfaces (spec §4): the rules a requested binding must pass, the bindings a VPC default
generates, and the tenant-scoped interface list."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import LogicalPartitionStatus, NvLinkInterfaceStatus
from nico.db.models import LogicalPartition, MachineCapability, NvlinkInterface, Site
from nico.db.queries import nvlink_interface as queries
from nico.services.access import tenant_uses_site
from nico.services.errors import bad_request, forbidden, not_found
from nico.services.listing import PageRequest, fetch_page
from nico.services.orgs import require_tenant
from nico.services.records import copies_of, copy_of

STATUSES = frozenset(NvLinkInterfaceStatus)
ORDER_FIELDS = frozenset({"status", "created", "updated"})
RELATIONS = frozenset({"Instance", "NVLinkLogicalPartition", "Site"})
NVLINK_DEVICE_TYPE = "NVLink"
VPC_DEFAULT_MISMATCH = (
    "NVLink Logical Partition specified for NVLink Interface does not match NVLink Logical Partition of VPC"
)


@dataclass(frozen=True)
class PartitionRecord:
    """A logical partition as interfaces and VPCs embed it (its summary)."""

    id: uuid.UUID
    name: str
    site_id: uuid.UUID
    status: str


@dataclass(frozen=True)
class Binding:
    """A GPU (``device_instance``) of an instance bound to a logical partition."""

    partition_id: uuid.UUID
    device_instance: int
    device: str | None = None


@dataclass(frozen=True)
class PartitionTexts:
    """The messages of the partition checks; single create/update and batch word them differently."""

    not_found: str
    site: str
    tenant: str
    ready: str


SINGLE = PartitionTexts(
    not_found="Could not find NVLink Logical Partition with ID: {id} specified in request data",
    site="NVLink Logical Partition: {id} specified in request does not match with Instance Site",
    tenant="NVLink Logical Partition: {id} specified in request data is not owned by Tenant",
    ready="NVLink Logical Partition: {id} specified in request data is not in Ready state",
)
BATCH = PartitionTexts(
    not_found="Could not find NVLink Logical Partition with ID {id}",
    site="NVLink Logical Partition {id} does not match with Instance Site",
    tenant="NVLink Logical Partition {id} is not owned by Tenant",
    ready="NVLink Logical Partition {id} is not in Ready state",
)


async def nvlink_capabilities(
    session: AsyncSession, *, instance_type_id: uuid.UUID | None = None, machine_id: str | None = None
) -> list[MachineCapability]:
    """GPU capabilities with device type NVLink of an instance type or of a machine."""
    return await queries.nvlink_capabilities(
        session, NVLINK_DEVICE_TYPE, instance_type_id=instance_type_id, machine_id=machine_id
    )


def gpu_range_problem(bindings: Sequence[Binding], capabilities: Sequence[MachineCapability]) -> str | None:
    """Layer B: the requested GPU indexes against each capability's GPU count."""
    for capability in capabilities:
        count = capability.count
        if count is None:
            continue
        if len(bindings) > count:
            return (
                f"number of NVLink Interfaces ({len(bindings)}) exceeds the number of available "
                f"GPU indexes ({count})"
            )
        seen: set[int] = set()
        for binding in bindings:
            index = binding.device_instance
            if index >= count:
                return f"deviceInstance: {index} is out of available range [0, {count}]"
            if index in seen:
                return f"duplicate deviceInstance: {index} specified in NVLink Interfaces"
            seen.add(index)
    return None


def default_bindings(partition_id: uuid.UUID, capabilities: Sequence[MachineCapability]) -> list[Binding]:
    """One binding per GPU of each NVLink capability on the VPC's default partition."""
    return [
        Binding(partition_id, index, capability.name)
        for capability in capabilities
        for index in range(capability.count or 0)
    ]


async def check_partitions(
    session: AsyncSession,
    bindings: Sequence[Binding],
    *,
    tenant_id: uuid.UUID,
    site_id: uuid.UUID,
    texts: PartitionTexts,
    vpc_default: uuid.UUID | None = None,
    lookup_first: bool = True,
    found: dict[uuid.UUID, LogicalPartition] | None = None,
) -> None:
    """Each binding's partition, in request order: it exists, and equals the VPC default when there is
    one, or else is at the site, the tenant's and Ready. ``lookup_first=False`` (batch) compares with
    the default before looking the partition up. The partitions are locked FOR SHARE so that a
    concurrent delete waits for this transaction and then sees the new bindings (``found``: the
    caller has read and locked them already)."""
    ids = list(dict.fromkeys(b.partition_id for b in bindings))
    if not ids:
        return
    if found is None:
        found = await queries.partitions_for_share(session, ids)
    for binding in bindings:
        pid = binding.partition_id
        if vpc_default is not None and not lookup_first:
            if pid != vpc_default:
                raise bad_request(VPC_DEFAULT_MISMATCH)
            continue
        partition = found.get(pid)
        if partition is None:
            raise bad_request(texts.not_found.format(id=pid))
        if vpc_default is not None:
            if pid != vpc_default:
                raise bad_request(VPC_DEFAULT_MISMATCH)
            continue
        if partition.site_id != site_id:
            raise bad_request(texts.site.format(id=pid))
        if partition.tenant_id != tenant_id:
            raise bad_request(texts.tenant.format(id=pid))
        if partition.status != LogicalPartitionStatus.READY:
            raise bad_request(texts.ready.format(id=pid))


@dataclass(frozen=True)
class InterfaceFilter:
    site_ids: Sequence[uuid.UUID] = ()
    instance_ids: Sequence[uuid.UUID] = ()
    partition_ids: Sequence[uuid.UUID] = ()
    domain_ids: Sequence[uuid.UUID] = ()
    statuses: Sequence[str] = ()
    in_path: bool = False  # /instance/{instanceId}/nvlink-interface words its messages differently


@dataclass(frozen=True)
class InterfaceRecord:
    """An NVLink interface's columns as views show them."""

    id: uuid.UUID
    instance_id: uuid.UUID
    logical_partition_id: uuid.UUID
    domain_uuid: uuid.UUID | None
    device_instance: int
    gpu_uid: int | None
    status: str
    created: datetime
    updated: datetime


@dataclass(frozen=True)
class InstanceRecord:
    """What an interface shows of its instance (``includeRelation=Instance``)."""

    id: uuid.UUID
    name: str
    site_id: uuid.UUID
    instance_type_id: uuid.UUID | None
    status: str


HEALTHY = "HEALTHY"  # the fabric's word for a GPU with nothing to report


@dataclass(frozen=True)
class InterfaceView:
    interface: InterfaceRecord
    instance: InstanceRecord | None = None
    provider_id: uuid.UUID | None = None
    partition: PartitionRecord | None = None
    clique_id: str | None = None  # <ClusterUUID>.<CliqueId> once Ready (nico extension)
    health: str | None = None  # the GPU's health as the fabric last reported it (nico extension)

    @property
    def status_message(self) -> str | None:
        """Why the interface's GPU is not all it should be (nico extension): its health, when the fabric
        reports anything but healthy; None otherwise."""
        if self.health is None or self.health == HEALTHY:
            return None
        return (
            f"The fabric reports the GPU's NVLink health as {self.health}: the GPU stays in its partition, "
            "the fabric's resiliency mode decides what it can still do there"
        )


async def list_interfaces(
    session: AsyncSession,
    org: str,
    where: InterfaceFilter,
    relations: frozenset[str],
    page: PageRequest,
) -> tuple[list[InterfaceView], int]:
    """The caller's tenant's interfaces, every status included (the reference leaks other tenants'
    interfaces when no instance or partition filter is given; nico never does)."""
    tenant = await require_tenant(session, org, status=403)
    for site_id in where.site_ids:
        site = await session.get(Site, site_id)
        if site is None or not await tenant_uses_site(session, tenant.id, site_id):
            raise forbidden(
                f"Site: {site_id} specified in query doesn't exist or Tenant doesn't have access to it"
            )
    place = "request" if where.in_path else "query"
    for instance_id in where.instance_ids:
        owner = await queries.instance_owner(session, instance_id)
        if owner is None:
            raise not_found(f"Could not find Instance with ID: {instance_id} specified in {place}")
        if owner != tenant.id:
            raise forbidden(f"Instance: {instance_id} specified in {place} doesn't belong to current Tenant")
    for partition_id in where.partition_ids:
        owner = await queries.partition_owner(session, partition_id)
        if owner is None:
            raise not_found(
                f"Could not find NVLink Logical Partition with ID: {partition_id} specified in query"
            )
        if owner != tenant.id:
            raise forbidden(
                f"NVLink Logical Partition: {partition_id} specified in query doesn't belong to "
                "current Tenant"
            )
    for value in where.statuses:
        if value not in STATUSES:
            raise bad_request(f"Invalid Status value: {value} in query")
    stmt = queries.tenant_bindings_where(
        tenant.id,
        site_ids=where.site_ids,
        instance_ids=where.instance_ids,
        partition_ids=where.partition_ids,
        domain_ids=where.domain_ids,
        statuses=where.statuses,
    )
    rows, total = await fetch_page(session, stmt, page, queries.BINDING_ORDER, NvlinkInterface.id)
    return await views(session, rows, relations), total


async def views(
    session: AsyncSession, rows: Sequence[NvlinkInterface], relations: frozenset[str]
) -> list[InterfaceView]:
    """Everything the responses of ``rows`` show, in a fixed number of queries."""
    if not rows:
        return []
    ready = [row.id for row in rows if row.status == NvLinkInterfaceStatus.READY]
    cliques = await queries.cliques_by_interface(session, ready) if ready else {}
    healths = await queries.health_by_interface(session, [row.id for row in rows])
    instances: dict[uuid.UUID, tuple[InstanceRecord, uuid.UUID]] = {}
    if "Instance" in relations:
        found = await queries.instances_with_provider(session, {row.instance_id for row in rows})
        instances = {key: (copy_of(InstanceRecord, inst), owner) for key, (inst, owner) in found.items()}
    partitions: dict[uuid.UUID, PartitionRecord] = {}
    if "NVLinkLogicalPartition" in relations:
        wanted = {row.logical_partition_id for row in rows}
        partitions = copies_of(PartitionRecord, await queries.partitions_by_id(session, wanted))
    out = []
    for row in rows:
        instance, provider_id = instances.get(row.instance_id, (None, None))
        out.append(
            InterfaceView(
                copy_of(InterfaceRecord, row),
                instance,
                provider_id,
                partitions.get(row.logical_partition_id),
                cliques.get(row.id),
                healths.get(row.id),
            )
        )
    return out
