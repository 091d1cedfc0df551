"""What the reconciler reports back: an instance's NVLink config realised, an instance's GPUs out of
their partitions, a logical partition's physical partitions gone.

Each function locks the row it finishes, changes nothing when the report is stale, and is idempotent,
so a report may be repeated or arrive after the tenant changed their mind.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, LogicalPartitionStatus, NvLinkInterfaceStatus
from nico.db.queries import instance as instances
from nico.db.queries import partition as partitions
from nico.services import status

WAITING_FOR_FABRIC = (InstanceStatus.PENDING, InstanceStatus.CONFIGURING)


async def apply_nvlink_observation(
    session: AsyncSession, instance_id: UUID, version: int, gpus: Mapping[int, tuple[UUID, int]]
) -> bool:
    """The fabric holds exactly the desired membership of NVLink config ``version`` of the instance;
    ``gpus`` maps its device_instance -> (domain uuid, gpu_uid).

    Live bindings become Ready with their domain and GPU GUID, Deleting ones are removed, the version
    is recorded as applied and a waiting instance becomes Ready. Returns False, changing nothing,
    when the instance is gone, Terminating, or at another config version.
    """
    instance = await instances.locked_instance(session, instance_id, refresh=True)
    if (
        instance is None
        or instance.status == InstanceStatus.TERMINATING
        or instance.nvlink_config_version != version
    ):
        return False
    bindings = await instances.bindings_of_instance(session, instance_id)
    for binding in bindings:
        if binding.status == NvLinkInterfaceStatus.DELETING:
            await session.delete(binding)
            continue
        if binding.device_instance not in gpus:
            raise ValueError(
                f"no GPU reported for device_instance {binding.device_instance} of {instance_id}"
            )
        domain, gpu_uid = gpus[binding.device_instance]
        binding.status = NvLinkInterfaceStatus.READY
        binding.domain_uuid = domain
        binding.gpu_uid = gpu_uid
    instance.nvlink_applied_version = version
    if instance.status in WAITING_FOR_FABRIC:
        instance.status = InstanceStatus.READY
        await status.record(
            session, "instance_id", instance.id, InstanceStatus.READY, "Instance is ready for use"
        )
    await session.flush()
    return True


async def finish_instance_termination(session: AsyncSession, instance_id: UUID) -> bool:
    """The instance's GPUs are out of every tenant partition: remove a Terminating instance (its
    interfaces and history cascade; its machine is freed by ON DELETE SET NULL)."""
    instance = await instances.locked_instance(session, instance_id, refresh=True)
    if instance is None or instance.status != InstanceStatus.TERMINATING:
        return False
    await instances.delete_instance(session, instance_id)
    return True


async def finish_partition_deletion(session: AsyncSession, logical_partition_id: UUID) -> bool:
    """Remove a Deleting logical partition once no physical partition and no binding references it."""
    partition = await partitions.locked_partition(session, logical_partition_id, refresh=True)
    if partition is None or partition.status != LogicalPartitionStatus.DELETING:
        return False
    if await partitions.partition_referenced(session, logical_partition_id):
        return False
    await partitions.delete_partition(session, logical_partition_id)
    return True
