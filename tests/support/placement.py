"""Realise instances on the fabric as the reconciler would: a physical partition per (logical
partition, domain) with an NMX partition id, then the instance's bindings Ready."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Gpu, Instance, Machine, PhysicalPartition
from nico.reconciler.lifecycle import apply_nvlink_observation


async def physical_partition(
    session: AsyncSession, logical: uuid.UUID, domain: uuid.UUID, fabric_id: int
) -> PhysicalPartition:
    row = await session.scalar(
        select(PhysicalPartition).where(
            PhysicalPartition.logical_partition_id == logical, PhysicalPartition.domain_uuid == domain
        )
    )
    if row is None:
        row = PhysicalPartition(
            logical_partition_id=logical,
            domain_uuid=domain,
            nmx_partition_id=fabric_id,
            fabric_ref=str(fabric_id),
            name=f"{logical}{fabric_id}",
        )
        session.add(row)
        await session.flush()
    return row


async def realise(session: AsyncSession, instance_id: uuid.UUID, logical: uuid.UUID, fabric_id: int) -> str:
    """Make every binding of the instance Ready in its machine's domain; returns the clique id."""
    machine = await session.scalar(select(Machine).where(Machine.instance_id == instance_id))
    assert machine is not None and machine.domain_uuid is not None
    domain = machine.domain_uuid
    await physical_partition(session, logical, domain, fabric_id)
    gpus = {
        g.device_id - 1: (domain, g.gpu_uid)
        for g in await session.scalars(select(Gpu).where(Gpu.machine_id == machine.id))
    }
    version = await session.scalar(select(Instance.nvlink_config_version).where(Instance.id == instance_id))
    assert version is not None
    assert await apply_nvlink_observation(session, instance_id, version, gpus)
    return f"{domain}.{fabric_id}"
