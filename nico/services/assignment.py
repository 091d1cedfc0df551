"""Giving free machines to new instances without ever giving one machine twice.

Placement (pure) chooses; this module locks the choice with ``FOR UPDATE SKIP LOCKED``, re-checking
that each machine is still Ready and unassigned. A machine another transaction holds or has taken is
left out and placement chooses again, so a request fails only when capacity is really gone. Each try
runs in a savepoint, so a partial pick is released before the next one.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable

from sqlalchemy import func, select, union
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import MachineStatus, NvLinkInterfaceStatus
from nico.db.models import Machine, NvlinkInterface, PhysicalPartition
from nico.services.placement import Ask, MachineSlot, place


async def partition_domains(
    session: AsyncSession, partition_ids: Collection[uuid.UUID]
) -> frozenset[uuid.UUID]:
    """Domains where the partitions are present: a physical partition of theirs, or a machine whose
    instance has a live binding to them (the reconciler may not have built the physical one yet)."""
    if not partition_ids:
        return frozenset()
    physical = select(PhysicalPartition.domain_uuid).where(
        PhysicalPartition.logical_partition_id.in_(partition_ids)
    )
    bound = (
        select(Machine.nvlink_domain_uuid)
        .join(NvlinkInterface, NvlinkInterface.instance_id == Machine.instance_id)
        .where(
            NvlinkInterface.logical_partition_id.in_(partition_ids),
            NvlinkInterface.status != NvLinkInterfaceStatus.DELETING,
            Machine.nvlink_domain_uuid.is_not(None),
        )
    )
    rows = await session.scalars(select(union(physical, bound).subquery().c[0]))
    return frozenset(d for d in rows if d is not None)


async def machine_slots(
    session: AsyncSession, site_id: uuid.UUID, instance_type_id: uuid.UUID
) -> tuple[list[MachineSlot], dict[uuid.UUID, int]]:
    """The free machines of the type at the site, and how many are assigned in each domain.

    Aggregated by PostgreSQL: a site of 200 racks has 3600 machines, and only the free ones matter.
    """
    free = (
        (Machine.instance_id.is_(None))
        & (Machine.status == MachineStatus.READY)
        & Machine.is_missing_on_site.is_(False)
    )
    rows = await session.execute(
        select(
            Machine.nvlink_domain_uuid,
            func.count().filter(Machine.instance_id.is_not(None)),
            func.array_agg(Machine.id).filter(free),
        )
        .where(Machine.site_id == site_id, Machine.instance_type_id == instance_type_id)
        .group_by(Machine.nvlink_domain_uuid)
    )
    slots: list[MachineSlot] = []
    used: dict[uuid.UUID, int] = {}
    for domain, assigned, ids in rows:
        if domain is not None:
            used[domain] = assigned
        slots.extend(MachineSlot(i, domain, instance_type_id, ready=True, assigned=False) for i in ids or ())
    return slots, used


async def claim(
    session: AsyncSession,
    *,
    site_id: uuid.UUID,
    ask: Ask,
    partition_ids: Iterable[uuid.UUID] = (),
    seed: int | None = None,
) -> list[str]:
    """Lock ``ask.count`` machines for this transaction (the caller then sets their ``instance_id``).

    Raises :class:`nico.services.placement.NoCapacity` when there are not enough.
    """
    lp_domains = await partition_domains(session, set(partition_ids))
    ask = Ask(
        instance_type_id=ask.instance_type_id,
        count=ask.count,
        needs_nvlink=ask.needs_nvlink,
        topology_optimized=ask.topology_optimized,
        lp_domains=lp_domains,
    )
    slots, used = await machine_slots(session, site_id, ask.instance_type_id)
    lost: set[str] = set()
    while True:  # ends: every failed try loses at least one more machine, until placement gives up
        candidates = [s._replace(assigned=True) if s.id in lost else s for s in slots] if lost else slots
        chosen = place(candidates, ask, seed, used)
        savepoint = await session.begin_nested()
        locked = set(
            await session.scalars(
                select(Machine.id)
                .where(
                    Machine.id.in_(chosen),
                    Machine.instance_id.is_(None),
                    Machine.status == MachineStatus.READY,
                    Machine.is_missing_on_site.is_(False),
                )
                .with_for_update(skip_locked=True)
            )
        )
        if len(locked) == len(chosen):
            await savepoint.commit()  # the row locks now belong to the request's transaction
            return chosen
        await savepoint.rollback()  # releases the partial pick for other requests
        lost.update(set(chosen) - locked)
