"""The rows adoption and import write: a Ready logical partition (with a given id), nico's record of
a partition found on the fabric, and an instance on a given machine with NVLink bindings. Nothing here
calls the fabric: what it records is what the fabric already holds, so the reconciler's next pass
finds nothing to change and settles the bindings Ready from its read-back."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from nico.adoption import queries
from nico.adoption.views import SeenPartition
from nico.db.enums import InstanceStatus, LogicalPartitionStatus, NvLinkInterfaceStatus
from nico.db.models import Instance, LogicalPartition, Machine, NvlinkInterface, PhysicalPartition, Tenant
from nico.services import status
from nico.services.errors import ServiceError, conflict, forbidden

CREATED_BY = "nico-takeover"
PENDING_MESSAGE = "received instance creation request, pending"  # the create's first entry


@dataclass(frozen=True)
class NewBinding:
    """One GPU of an instance bound to a logical partition (``id``: kept from the source, or new)."""

    logical_partition_id: uuid.UUID
    device_instance: int
    id: uuid.UUID | None = None


async def logical_partition(
    session: AsyncSession,
    tenant: Tenant,
    site_id: uuid.UUID,
    *,
    lp_id: uuid.UUID,
    name: str,
    description: str | None,
) -> LogicalPartition:
    """A new Ready logical partition of ``tenant`` with id ``lp_id``, with the history a create
    leaves; a name the tenant already uses is refused (409, naming the holder)."""
    clash = await queries.partition_named(session, tenant.id, name)
    if clash is not None:
        raise conflict(f"the org already has a logical partition named {name!r} ({clash.id})")
    lp = LogicalPartition(
        id=lp_id,
        tenant_id=tenant.id,
        site_id=site_id,
        name=name,
        description=description,
        status=LogicalPartitionStatus.READY,
        created_by=CREATED_BY,
    )
    session.add(lp)
    await session.flush()
    pending = "received NVLink Logical Partition creation request, pending"
    await status.record(session, "logical_partition_id", lp.id, "Pending", pending)
    await status.record(
        session, "logical_partition_id", lp.id, "Ready", "NVLink Logical Partition is ready for use"
    )
    return lp


async def physical_partition(
    session: AsyncSession, lp: uuid.UUID, domain: uuid.UUID, seen: SeenPartition
) -> PhysicalPartition:
    """nico's record of ``seen`` as ``lp``'s partition in ``domain``, under the fabric's own name and
    id: the planner then counts it as the LP's (``DomainState.adopted``) and grows or shrinks it in
    place. Refused when the LP already has a partition there or another record holds this one."""
    if (held := await queries.physical_partition_of(session, lp, domain)) is not None:
        raise conflict(
            f"logical partition {lp} already has partition {held.nmx_partition_id} in domain {domain}"
        )
    if (other := await queries.physical_partition_at(session, domain, seen.nmx_partition_id)) is not None:
        raise conflict(
            f"partition {seen.nmx_partition_id} of domain {domain} is already logical partition "
            f"{other.logical_partition_id}'s"
        )
    record = PhysicalPartition(
        logical_partition_id=lp,
        domain_uuid=domain,
        nmx_partition_id=seen.nmx_partition_id,
        fabric_ref=seen.ref,
        name=seen.name,
    )
    session.add(record)
    await session.flush()
    return record


async def instance_on(
    session: AsyncSession,
    tenant: Tenant,
    machine: Machine,
    *,
    vpc_id: uuid.UUID,
    instance_id: uuid.UUID,
    name: str,
    description: str | None = None,
    labels: dict[str, str] | None = None,
) -> Instance:
    """A new instance of ``tenant`` on ``machine`` (of the machine's instance type, which the tenant's
    allocations must cover), Pending until the reconciler sees its bindings on the fabric."""
    if await queries.instance_named(session, tenant.id, machine.site_id, name) is not None:
        raise conflict(f"the org already has an instance named {name!r} at site {machine.site_id}")
    instance = Instance(
        id=instance_id,
        tenant_id=tenant.id,
        site_id=machine.site_id,
        instance_type_id=machine.instance_type_id,
        vpc_id=vpc_id,
        name=name,
        description=description,
        labels=labels,
        status=InstanceStatus.PENDING,
        created_by=CREATED_BY,
    )
    session.add(instance)
    await session.flush()
    machine.instance_id = instance.id
    await status.record(session, "instance_id", instance.id, InstanceStatus.PENDING, PENDING_MESSAGE)
    return instance


async def bind(
    session: AsyncSession, instance_id: uuid.UUID, machine: Machine, bindings: Sequence[NewBinding]
) -> None:
    """The instance's GPUs bound to their logical partitions (Pending: Ready comes from the fabric)."""
    for b in bindings:
        session.add(
            NvlinkInterface(
                id=b.id or uuid.uuid4(),
                instance_id=instance_id,
                logical_partition_id=b.logical_partition_id,
                site_id=machine.site_id,
                device_instance=b.device_instance,
                status=NvLinkInterfaceStatus.PENDING,
                placed_domain_uuid=machine.domain_uuid,
                created_by=CREATED_BY,
            )
        )
    await session.flush()


def check_allocation(machine: Machine, allocated: set[uuid.UUID], org: str) -> None:
    """A machine may hold the org's instance only when the org's allocations cover its type."""
    if machine.instance_type_id is None or machine.instance_type_id not in allocated:
        raise forbidden(
            f"machine {machine.id} (instance type {machine.instance_type_id}) is outside org {org}'s "
            f"allocations at site {machine.site_id}"
        )


async def check_quota(session: AsyncSession, tenant: Tenant, types: set[uuid.UUID | None], org: str) -> None:
    """The tenant's instances of each type within what its allocations reserve (the reservations
    locked, as a create's commit does); a refusal leaves the transaction to be rolled back."""
    for itype in sorted(t for t in types if t is not None):
        why = await queries.quota_refusal(session, tenant.id, itype)
        if why is not None:
            raise ServiceError(403, f"org {org}'s allocations of instance type {itype} do not hold it: {why}")


@dataclass
class VpcBody:
    """A VPC create request (:class:`nico.services.vpc.VpcCreate`): the adopted instances' VPC, or a
    source VPC keeping its id."""

    name: str | None
    site_id: str | None
    description: str | None = None
    id: str | None = None
    network_virtualization_type: str | None = None
    labels: dict[str, str] | None = None
    vni: int | None = None
    routing_profile: str | None = None
    nv_link_logical_partition_id: str | None = None
