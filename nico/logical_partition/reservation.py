"""A logical partition's reservation: machines of one instance type held in one NVLink domain for the
partition's future instances. Its machines are marked (``machine.reserved_lp_id``): the partition's
creates take them first (:mod:`nico.instance.claim`), nobody else's ever does (the pick and the free
counts leave them out), and the tenant's allocation counts them as taken (``nico_check_quota``).

A machine stays the reservation's while an instance of the partition runs on it, and is free in the
reservation again when that instance goes. The domain is the reservation's (when it holds machines),
else the partition's (the best of its domains when it is in several), else the best single domain of
the site, by placement's policy (best fit).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg

from nico.instance.checks import batch_quota_message
from nico.logical_partition import queries
from nico.services.errors import ServiceError, bad_request, conflict, forbidden
from nico.services.placement import Ask, NoCapacity, plan_choices

# Domains tried in placement's order when others take machines of the first meanwhile.
CHOICES = 4
NO_ALLOCATION = "Tenant does not have any Allocations for Site and Instance Type specified in reservation"


@dataclass(frozen=True)
class Reservation:
    """What a request asks to hold: ``count`` machines of ``instance_type_id`` (0: none)."""

    instance_type_id: uuid.UUID
    count: int


# What a request that clears the reservation asks (a null reservation).
NO_RESERVATION = Reservation(uuid.UUID(int=0), 0)


@dataclass(frozen=True)
class Partition:
    """The partition whose reservation changes (locked by the caller)."""

    id: uuid.UUID
    name: str
    tenant_id: uuid.UUID
    site_id: uuid.UUID


async def set_reservation(
    conn: psycopg.AsyncConnection[Any], lp: Partition, wanted: Reservation | None
) -> None:
    """Make the partition hold what ``wanted`` says (None or a count of 0: nothing), all or nothing:
    a 409 naming the best domain's free count when the machines are not there, a 403 when the
    tenant's allocation cannot take them; nothing is held then."""
    spread = (await queries.spreads(conn, [lp.id]))[lp.id]
    if wanted is None or wanted.count == 0:
        await queries.release_reserved(conn, lp.id)
        await queries.set_reservation_type(conn, lp.id, None)
        return
    if await queries.instance_type_site(conn, wanted.instance_type_id) != lp.site_id:
        raise bad_request(
            f"Instance Type {wanted.instance_type_id} specified in reservation was not found at the "
            "NVLink Logical Partition's Site"
        )
    held, domain = spread.reserved, spread.reserved_domain
    if spread.reserved_type != wanted.instance_type_id:
        await queries.release_reserved(conn, lp.id)
        held, domain = 0, None
    await queries.set_reservation_type(conn, lp.id, wanted.instance_type_id)
    if wanted.count < held:
        await queries.release_reserved(conn, lp.id, held - wanted.count)
        return
    if wanted.count == held:
        return
    need = wanted.count - held
    await _hold(conn, lp, wanted, need, domain, frozenset(spread.gpu_domains))
    await _check_allocation(conn, lp.tenant_id, wanted.instance_type_id, need)


async def _hold(
    conn: psycopg.AsyncConnection[Any],
    lp: Partition,
    wanted: Reservation,
    need: int,
    domain: uuid.UUID | None,
    gpu_domains: frozenset[uuid.UUID],
) -> None:
    """Mark ``need`` more machines: in ``domain`` when the reservation has one, else in the best
    domain placement chooses among the partition's (or the site's, when it is nowhere yet)."""
    free = await queries.free_by_domain(conn, lp.site_id, wanted.instance_type_id)
    where = "its NVLink domain" if domain is not None else "the best NVLink domain"
    if domain is not None:
        candidates = {domain: free.get(domain, 0)}
    elif gpu_domains:
        candidates = {d: free.get(d, 0) for d in gpu_domains}
        where = "the best NVLink domain of the partition"
    else:
        candidates = free
    ask = Ask(wanted.instance_type_id, need, True, topology_optimized=True, lp_domains=gpu_domains)
    try:
        plans = plan_choices(candidates, 0, ask, random.Random(), most=CHOICES)
    except NoCapacity as exc:
        raise _short(lp, wanted, need, where, exc.best_domain) from None
    best = 0
    for ((choice, _),) in plans:
        assert choice is not None
        marked = await queries.reserve_machines(
            conn,
            partition_id=lp.id,
            site_id=lp.site_id,
            instance_type_id=wanted.instance_type_id,
            domain=choice,
            count=need,
        )
        if len(marked) == need:
            return
        best = max(best, len(marked))
        await queries.unreserve_machines(conn, marked)  # others hold some now: all or nothing
    raise _short(lp, wanted, need, where, best)


def _short(lp: Partition, wanted: Reservation, need: int, where: str, free: int) -> ServiceError:
    return conflict(
        f"Failed to reserve {need} Machines of Instance Type {wanted.instance_type_id} for NVLink Logical "
        f"Partition '{lp.name}': {where} has {free} free"
    )


async def _check_allocation(
    conn: psycopg.AsyncConnection[Any], tenant_id: uuid.UUID, instance_type_id: uuid.UUID, need: int
) -> None:
    """The tenant's allocation for the type, which counts reserved machines as taken, under its lock
    (``nico_check_quota``): a 403 when it cannot take ``need`` more."""
    try:
        await queries.check_quota(conn, tenant_id, instance_type_id)
    except psycopg.Error as exc:
        state = exc.sqlstate
        if state == "NC002":
            raise forbidden(NO_ALLOCATION) from None
        if state == "NC003":
            counted, _, reserved = (exc.diag.message_detail or "0/0").partition("/")
            raise forbidden(batch_quota_message(int(counted) - need, need, int(reserved))) from None
        raise
