"""The NVLink bindings of an instance: those a create gives new instances, and replacing an
instance's bindings on update (spec §5.3, §5.6, §6.4)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, NvLinkInterfaceStatus
from nico.db.models import Instance, LogicalPartition, MachineCapability, NvlinkInterface, Tenant, Vpc
from nico.instance import queries
from nico.instance.checks import CreateTexts
from nico.instance.confinement import refuse_outside_home
from nico.services.errors import bad_request
from nico.services.nvlink_events import desired_state_changed
from nico.services.nvlink_interface import (
    SINGLE,
    Binding,
    check_partitions,
    default_bindings,
    gpu_range_problem,
    nvlink_capabilities,
)


async def creation_bindings(
    session: AsyncSession,
    tenant: Tenant,
    vpc: Vpc,
    explicit: list[Binding],
    capabilities: Sequence[MachineCapability],
    texts: CreateTexts,
    partitions: dict[uuid.UUID, LogicalPartition],
) -> list[Binding]:
    """The bindings of new instances: the explicit ones, checked (spec §5.3, §6.4) against
    ``partitions`` (those of them that exist, read and locked with the creation context), or one per
    GPU on the VPC's default partition, or none."""
    if explicit:
        if not capabilities:
            raise bad_request(texts.no_capability)
        problem = gpu_range_problem(explicit, capabilities)
        if problem:
            raise bad_request(texts.invalid.format(problem=problem), {"nvLinkInterfaces": problem})
        await check_partitions(
            session,
            explicit,
            tenant_id=tenant.id,
            site_id=vpc.site_id,
            texts=texts.partitions,
            vpc_default=vpc.nvlink_logical_partition_id,
            lookup_first=texts.lookup_first,
            found=partitions,
        )
        return explicit
    if vpc.nvlink_logical_partition_id is not None:
        return default_bindings(vpc.nvlink_logical_partition_id, capabilities)
    return []


async def replace_bindings(session: AsyncSession, row: Instance, items: list[Binding]) -> set[str]:
    """Replace the instance's bindings with ``items``; returns the new binding ids (as text)."""
    existing = await queries.bindings_of_instance(session, row.id)
    vpc = await session.get(Vpc, row.vpc_id)
    assert vpc is not None
    if items and existing and vpc.nvlink_logical_partition_id is not None:
        raise bad_request(
            "Cannot update NVLink Interfaces if VPC has default NVLink Logical Partition and "
            "NVLink Interfaces already exist for the Instance"
        )
    joined = list(dict.fromkeys(i.partition_id for i in items))
    await check_partitions(session, items, tenant_id=row.tenant_id, site_id=row.site_id, texts=SINGLE)
    machine = await queries.machine_of_instance(session, row.id)
    capabilities: list[MachineCapability] = []
    if row.instance_type_id is not None:
        capabilities = await nvlink_capabilities(session, instance_type_id=row.instance_type_id)
    if not capabilities and machine is not None:
        capabilities = await nvlink_capabilities(session, machine_id=machine.id)
    if items and (not capabilities or machine is None or machine.domain_uuid is None):
        raise bad_request(
            "NVLink interfaces cannot be specified if Instance Type or Machine doesn't have "
            "NVLink GPU Capability"
        )
    problem = gpu_range_problem(items, capabilities)
    if problem:
        raise bad_request(
            "Failed to validate NVLink interfaces specified in request", {"nvLinkInterfaces": problem}
        )
    if machine is not None:
        await refuse_outside_home(session, joined, machine)
    live = [b for b in existing if b.status != NvLinkInterfaceStatus.DELETING]
    unchanged = (
        bool(items)
        and len(live) == len(existing)
        and all(b.status in (NvLinkInterfaceStatus.READY, NvLinkInterfaceStatus.PENDING) for b in live)
        and Counter((b.logical_partition_id, b.device_instance) for b in live)
        == Counter((i.partition_id, i.device_instance) for i in items)
    )
    if unchanged or (not items and not live):
        return set()
    for binding in live:
        binding.status = NvLinkInterfaceStatus.DELETING
    await session.flush()  # the live-GPU unique index must see the old bindings go first
    placed = machine.domain_uuid if machine is not None else None
    new = [
        NvlinkInterface(
            id=uuid.uuid4(),
            instance_id=row.id,
            logical_partition_id=item.partition_id,
            site_id=row.site_id,
            device_instance=item.device_instance,
            status=NvLinkInterfaceStatus.PENDING,
            placed_domain_uuid=placed,
        )
        for item in items
    ]
    session.add_all(new)
    row.status = InstanceStatus.CONFIGURING
    await session.flush()
    await desired_state_changed(session, instance_ids=[row.id])
    return {str(b.id) for b in new}
