"""The SQL of NVLink bindings (table ``nvlink_interface``) and of the partitions and capabilities
their checks read."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Select, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import CapabilityType
from nico.db.models import Instance, LogicalPartition, MachineCapability, NvlinkInterface, Site
from nico.db.queries.feed import CLIQUES_BY_INTERFACE
from nico.db.raw import driver_connection


async def nvlink_capabilities(
    session: AsyncSession, device_type: str, *, instance_type_id: uuid.UUID | None, machine_id: str | None
) -> list[MachineCapability]:
    """GPU capabilities of ``device_type`` of an instance type (when given) or else of a machine."""
    owner = (
        MachineCapability.instance_type_id == instance_type_id
        if instance_type_id is not None
        else MachineCapability.machine_id == machine_id
    )
    rows = await session.scalars(
        select(MachineCapability)
        .where(
            owner, MachineCapability.type == CapabilityType.GPU, MachineCapability.device_type == device_type
        )
        .order_by(MachineCapability.position, MachineCapability.created)
    )
    return list(rows)


# The logical partitions of ``ids`` that exist, FOR SHARE in id order (the lock order of
# docs/architecture.md): a concurrent delete of one waits for this transaction and then sees the new
# bindings. A create sends it in the pipeline of its context (``nico.instance.queries.creation_context``).
LOCK_PARTITIONS = """
SELECT id, tenant_id, site_id, status FROM logical_partition WHERE id = ANY(%(ids)s) ORDER BY id FOR SHARE
"""


def locked_partitions(rows: Iterable[tuple[Any, ...]]) -> dict[uuid.UUID, LogicalPartition]:
    """The rows of ``LOCK_PARTITIONS`` by id (transient ORM objects, for reading)."""
    return {
        lp_id: LogicalPartition(id=lp_id, tenant_id=tenant_id, site_id=site_id, status=status)
        for lp_id, tenant_id, site_id, status in rows
    }


async def partitions_for_share(
    session: AsyncSession, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, LogicalPartition]:
    """The logical partitions of ``ids`` that exist, locked FOR SHARE in id order."""
    conn = await driver_connection(session)
    return locked_partitions(await (await conn.execute(LOCK_PARTITIONS, {"ids": list(ids)})).fetchall())


async def instance_owner(session: AsyncSession, instance_id: uuid.UUID) -> uuid.UUID | None:
    """The tenant of the instance (None: no such instance)."""
    return await session.scalar(select(Instance.tenant_id).where(Instance.id == instance_id))


async def partition_owner(session: AsyncSession, partition_id: uuid.UUID) -> uuid.UUID | None:
    """The tenant of the logical partition (None: no such partition)."""
    return await session.scalar(select(LogicalPartition.tenant_id).where(LogicalPartition.id == partition_id))


def tenant_bindings_where(
    tenant_id: uuid.UUID,
    *,
    site_ids: Sequence[uuid.UUID] = (),
    instance_ids: Sequence[uuid.UUID] = (),
    partition_ids: Sequence[uuid.UUID] = (),
    domain_ids: Sequence[uuid.UUID] = (),
    statuses: Sequence[str] = (),
) -> Select[Any]:
    """The tenant's bindings that pass every given filter (by the tenant kept on each binding, so a
    page and its count read ``ix_nvlink_interface_tenant_order``, not every binding joined to its
    instance)."""
    stmt = select(NvlinkInterface).where(NvlinkInterface.tenant_id == tenant_id)
    if site_ids:
        stmt = stmt.where(NvlinkInterface.site_id.in_(site_ids))
    if instance_ids:
        stmt = stmt.where(NvlinkInterface.instance_id.in_(instance_ids))
    if partition_ids:
        stmt = stmt.where(NvlinkInterface.logical_partition_id.in_(partition_ids))
    if domain_ids:
        stmt = stmt.where(NvlinkInterface.domain_uuid.in_(domain_ids))
    if statuses:
        stmt = stmt.where(NvlinkInterface.status.in_(statuses))
    return stmt


BINDING_ORDER: dict[str, Any] = {
    "status": NvlinkInterface.status,
    "created": NvlinkInterface.created,
    "updated": NvlinkInterface.updated,
}


async def instances_with_provider(
    session: AsyncSession, instance_ids: set[uuid.UUID]
) -> dict[uuid.UUID, tuple[Instance, uuid.UUID]]:
    """Instances by id, each with its site's infrastructure provider."""
    found = await session.execute(
        select(Instance, Site.infrastructure_provider_id)
        .join(Site, Site.id == Instance.site_id)
        .where(Instance.id.in_(instance_ids))
    )
    return {inst.id: (inst, provider) for inst, provider in found}


async def partitions_by_id(session: AsyncSession, ids: set[uuid.UUID]) -> dict[uuid.UUID, LogicalPartition]:
    return {
        p.id: p for p in await session.scalars(select(LogicalPartition).where(LogicalPartition.id.in_(ids)))
    }


async def cliques_by_interface(session: AsyncSession, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The clique id (``<ClusterUUID>.<CliqueId>``) of each given interface that has one."""
    rows = await session.execute(text(CLIQUES_BY_INTERFACE), {"ids": list(ids)})
    return {row.id: row.clique_id for row in rows}


_HEALTH_BY_INTERFACE = """
SELECT n.id, g.health FROM nvlink_interface n JOIN gpu g ON g.gpu_uid = n.gpu_uid
WHERE n.id = ANY(:ids) AND g.health IS NOT NULL
"""


async def health_by_interface(session: AsyncSession, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The fabric's last word on the health of each given interface's GPU (those observed)."""
    rows = await session.execute(text(_HEALTH_BY_INTERFACE), {"ids": list(ids)})
    return {row.id: row.health for row in rows}
