"""The SQL of adoption and import, named for what each statement returns."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import (
    Allocation,
    AllocationConstraint,
    Instance,
    LogicalPartition,
    Machine,
    NvlinkDomain,
    NvlinkNmxcEndpoint,
    PhysicalPartition,
    TenantSite,
    Vpc,
)


@dataclass(frozen=True)
class KnownGpu:
    """A GPU nico knows, with its machine and what the machine holds now."""

    gpu_uid: int
    device_id: int
    machine: Machine
    instance_tenant_id: uuid.UUID | None
    bound_to: uuid.UUID | None  # the logical partition its live binding names, if any


# Machines locked FOR UPDATE in id order (docs/architecture.md, "Locks": the rows being changed); the
# live binding of each GPU read beside it.
_GPU_BINDINGS = """
SELECT g.gpu_uid, g.device_id, g.machine_id, i.tenant_id,
       (SELECT n.logical_partition_id FROM nvlink_interface n
        WHERE n.instance_id = m.instance_id AND n.device_instance = g.device_id - 1
          AND n.status <> 'Deleting' LIMIT 1)
FROM gpu g JOIN machine m ON m.id = g.machine_id LEFT JOIN instance i ON i.id = m.instance_id
WHERE g.gpu_uid = ANY(CAST(:uids AS numeric[]))
"""


async def known_gpus(session: AsyncSession, gpu_uids: Iterable[int]) -> dict[int, KnownGpu]:
    """The GPUs of ``gpu_uids`` nico knows, their machines locked for update (in id order)."""
    uids = sorted(gpu_uids)
    rows = (await session.execute(text(_GPU_BINDINGS), {"uids": [str(u) for u in uids]})).all()
    ids = sorted({str(r[2]) for r in rows})
    machines = {
        m.id: m
        for m in (
            await session.scalars(
                select(Machine).where(Machine.id.in_(ids)).order_by(Machine.id).with_for_update()
            )
        ).all()
    }
    return {int(r[0]): KnownGpu(int(r[0]), int(r[1]), machines[r[2]], r[3], r[4]) for r in rows}


async def physical_partition_at(
    session: AsyncSession, domain: uuid.UUID, nmx_partition_id: int
) -> PhysicalPartition | None:
    """nico's record of the partition with this NMX id in the domain."""
    found = await session.scalars(
        select(PhysicalPartition).where(
            PhysicalPartition.domain_uuid == domain, PhysicalPartition.nmx_partition_id == nmx_partition_id
        )
    )
    return found.first()


async def physical_partition_of(
    session: AsyncSession, lp: uuid.UUID, domain: uuid.UUID
) -> PhysicalPartition | None:
    found = await session.scalars(
        select(PhysicalPartition).where(
            PhysicalPartition.logical_partition_id == lp, PhysicalPartition.domain_uuid == domain
        )
    )
    return found.first()


async def partition_named(session: AsyncSession, tenant_id: uuid.UUID, name: str) -> LogicalPartition | None:
    found = await session.scalars(
        select(LogicalPartition).where(LogicalPartition.tenant_id == tenant_id, LogicalPartition.name == name)
    )
    return found.first()


async def allocated_types(session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID) -> set[uuid.UUID]:
    """The instance types the tenant's allocations at the site reserve machines of."""
    found = await session.scalars(
        select(AllocationConstraint.instance_type_id)
        .join(Allocation, Allocation.id == AllocationConstraint.allocation_id)
        .where(Allocation.tenant_id == tenant_id, Allocation.site_id == site_id)
    )
    return {t for t in found.all() if t is not None}


async def vpcs_at(session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID) -> Sequence[Vpc]:
    found = await session.scalars(
        select(Vpc).where(Vpc.tenant_id == tenant_id, Vpc.site_id == site_id).order_by(Vpc.created, Vpc.id)
    )
    return found.all()


async def site_of_domain(session: AsyncSession, domain: uuid.UUID) -> uuid.UUID | None:
    return await session.scalar(select(NvlinkDomain.site_id).where(NvlinkDomain.uuid == domain))


async def sites_of_tenant(session: AsyncSession, tenant_id: uuid.UUID) -> list[uuid.UUID]:
    found = await session.scalars(select(TenantSite.site_id).where(TenantSite.tenant_id == tenant_id))
    return sorted(found.all())


async def machine_by_id(session: AsyncSession, machine_id: str) -> Machine | None:
    found = await session.scalars(select(Machine).where(Machine.id == machine_id).with_for_update())
    return found.first()


async def instance_named(
    session: AsyncSession, tenant_id: uuid.UUID, site_id: uuid.UUID, name: str
) -> Instance | None:
    found = await session.scalars(
        select(Instance).where(
            Instance.tenant_id == tenant_id, Instance.site_id == site_id, Instance.name == name
        )
    )
    return found.first()


_QUOTA = "SELECT nico_check_quota(:tenant, :itype)"  # nico/db/sql/quota.sql
QUOTA_REFUSALS = {"NC002": "no allocation", "NC003": "over"}


async def quota_refusal(session: AsyncSession, tenant_id: uuid.UUID, itype: uuid.UUID) -> str | None:
    """None when the tenant's instances of the type fit its allocations (the reservations locked),
    else why not (the transaction is then aborted: the caller refuses and nothing is committed)."""
    try:
        await session.execute(text(_QUOTA), {"tenant": tenant_id, "itype": itype})
    except DBAPIError as exc:
        state = getattr(exc.orig, "sqlstate", None)
        if state in QUOTA_REFUSALS:
            detail = getattr(getattr(exc.orig, "diag", None), "message_detail", None) or ""
            return f"{QUOTA_REFUSALS[state]} {detail}".strip()
        raise
    return None


async def chassis_of_domains(
    session: AsyncSession, domains: Sequence[uuid.UUID] | None
) -> dict[uuid.UUID, set[str]]:
    """The chassis serials of each NVLink domain's machines (every domain nico knows when None)."""
    found = select(NvlinkDomain.uuid, Machine.chassis_serial).outerjoin(
        Machine, Machine.domain_uuid == NvlinkDomain.uuid
    )
    if domains is not None:
        found = found.where(NvlinkDomain.uuid.in_(list(domains)))
    out: dict[uuid.UUID, set[str]] = {}
    for domain, serial in (await session.execute(found)).all():
        out.setdefault(domain, set()).update([serial] if serial else [])
    return out


async def nmxc_registry(session: AsyncSession) -> dict[str, str]:
    """Chassis serial -> NMX-C endpoint, as registered."""
    found = await session.execute(select(NvlinkNmxcEndpoint.chassis_serial, NvlinkNmxcEndpoint.endpoint))
    return {str(s): str(e) for s, e in found.all()}
