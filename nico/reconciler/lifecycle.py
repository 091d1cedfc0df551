"""What the reconciler reports back: an instance's NVLink config realised, an instance's GPUs out of
their partitions, a logical partition's physical partitions gone.

Each function locks the row it finishes, changes nothing when the report is stale, and is idempotent,
so a report may be repeated or arrive after the tenant changed their mind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, LogicalPartitionStatus
from nico.db.queries import reconciler as reconciler_queries
from nico.instance import queries as instances
from nico.logical_partition import queries as partitions

WAITING_FOR_FABRIC = (InstanceStatus.PENDING, InstanceStatus.CONFIGURING)


@dataclass(frozen=True)
class Observation:
    """The fabric holds exactly the desired membership of NVLink config ``version`` of an instance;
    ``gpus`` maps its device_instance -> (domain uuid, gpu_uid)."""

    instance_id: UUID
    version: int
    gpus: Mapping[int, tuple[UUID, int]]


async def apply_nvlink_observation(
    session: AsyncSession, instance_id: UUID, version: int, gpus: Mapping[int, tuple[UUID, int]]
) -> bool:
    """:func:`apply_nvlink_observations` for one instance; whether it applied."""
    return bool(await apply_nvlink_observations(session, [Observation(instance_id, version, gpus)]))


async def apply_nvlink_observations(session: AsyncSession, observations: Sequence[Observation]) -> list[UUID]:
    """Each observed instance's NVLink config version is realised on the fabric.

    Live bindings become Ready with their domain and GPU GUID, Deleting ones are removed, the version
    is recorded as applied and a waiting instance becomes Ready (with a status history entry). An
    instance gone, Terminating, or at another config version than observed is left as it is. Every
    instance is locked first (one statement, in id order), then all are changed in one statement.
    Returns the instances applied, in the order observed.
    """
    if not observations:
        return []
    ids = [o.instance_id for o in observations]
    found = settlement(observations, await reconciler_queries.locked_settling_instances(session, ids))
    if found.versions:
        await reconciler_queries.settle_instances(session, found.versions, found.waiting, found.gpus)
    return found.applied


@dataclass(frozen=True)
class Settlement:
    """What :func:`apply_nvlink_observations` writes for observed instances, once they are locked:
    each applied instance's version, those waiting for the fabric, each bound GPU (instance,
    device_instance, domain, gpu_uid), and the instances applied in the order observed."""

    versions: dict[UUID, int]
    waiting: list[UUID]
    gpus: list[tuple[UUID, int, UUID, int]]
    applied: list[UUID]


def settlement(
    observations: Sequence[Observation], locked: Sequence[reconciler_queries.SettlingInstance]
) -> Settlement:
    """Which observed instances apply, as ``locked`` (the rows locked for them) shows them: not gone,
    not Terminating, still at the version observed (see :func:`apply_nvlink_observations`)."""
    wanted = {o.instance_id: o for o in observations}
    versions: dict[UUID, int] = {}
    waiting: list[UUID] = []
    gpus: list[tuple[UUID, int, UUID, int]] = []
    for row in locked:
        observed = wanted[row.id]
        if row.status == InstanceStatus.TERMINATING or row.version != observed.version:
            continue
        if missing := [d for d in row.devices if d not in observed.gpus]:
            raise ValueError(f"no GPU reported for device_instance {missing[0]} of {row.id}")
        versions[row.id] = row.version
        if row.status in WAITING_FOR_FABRIC:
            waiting.append(row.id)
        gpus.extend((row.id, device, domain, gpu_uid) for device, (domain, gpu_uid) in observed.gpus.items())
    return Settlement(versions, waiting, gpus, [i for i in wanted if i in versions])


async def finish_instance_termination(session: AsyncSession, instance_id: UUID) -> bool:
    """The instance's GPUs are out of every tenant partition: remove a Terminating instance (its
    interfaces and history cascade; its machine is freed by ON DELETE SET NULL, or leaves with it when
    it was force-deleted: :mod:`nico.inventory.decommission`)."""
    instance = await instances.locked_instance(session, instance_id, refresh=True)
    if instance is None or instance.status != InstanceStatus.TERMINATING:
        return False
    await instances.delete_decommissioned_machine(session, instance_id)
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


def waiting_message(devices: list[int]) -> str:
    """Why an instance is not Ready while GPUs of its (``devices``: their device instances) sit in a
    partition nico did not make and keeps (said without that partition's name: it is another
    manager's, maybe another tenant's)."""
    which = ", ".join(str(d) for d in devices)
    gpus = f"GPU {which} (deviceInstance) is" if len(devices) == 1 else f"GPUs {which} (deviceInstance) are"
    return (
        f"NVLink: {gpus} in a partition another fabric manager made; nico keeps that partition whole, "
        "and the instance waits until it releases them"
    )
