"""The full pass's scans: every domain read without locks, to find the few with something to do.

A quick scan compares each domain's fabric digest with the one recorded at its last settled pass; a
deep scan (every ``deep_pass_every``-th full pass) lists every GPU too, compares each one, and audits
the fabric's GPU inventory against nico's records. Neither writes anything: the domains they return
get a locked pass (:mod:`nico.reconciler.domain_pass`). Each scan covers the domains it is given:
the full pass hands a deep scan its domains a part at a time, and only its reconciler's share.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.engine import reading
from nico.db.queries.reconciler import all_domain_uuids
from nico.fabric.backend import DomainTarget, FabricError, FabricGpu, FabricPartition
from nico.reconciler import state as statemod
from nico.reconciler import trays
from nico.reconciler.domain_pass import error_label, refresh_registry
from nico.reconciler.fingerprint import fabric_digest
from nico.reconciler.parts import PART_SIZE, PARTS_AT_ONCE
from nico.reconciler.pass_context import DomainResult, PassContext
from nico.reconciler.planner import DomainDesire, Plan, classify, plan, without_home
from nico.reconciler.writeback import finish_deleted_partitions


class Listing(NamedTuple):
    """A domain's partitions and GPUs as a scan read them (None: not read: ``error`` says why)."""

    partitions: list[FabricPartition] | None
    gpus: list[FabricGpu] | None
    error: str | None
    target: DomainTarget | None = None
    read_at: float = 0.0


# Domains a deep scan loads and compares at a time (the loop's passes run between): as many as the
# parts passed at once take, so the domains with work of a part of the scan fill them.
DEEP_PART = PART_SIZE * PARTS_AT_ONCE


@dataclass
class FullPassReport:
    domains: int = 0
    reconciled: int = 0
    errors: int = 0
    duration_ms: float = 0.0
    deep: bool = False
    mismatches: int = 0  # GPUs whose recorded identity disagrees with the fabric's (deep scans)
    registry_read: bool = False  # the NMX-C registry was read this pass (once: a deep scan has parts)
    results: dict[uuid.UUID, DomainResult] = field(default_factory=dict)


async def every_domain(ctx: PassContext) -> list[uuid.UUID]:
    """Every NVLink domain, as stored now."""
    async with reading(ctx.engine) as conn:
        return await all_domain_uuids(conn)


async def scan(
    ctx: PassContext, limit: asyncio.Semaphore, report: FullPassReport, domains: Collection[uuid.UUID]
) -> list[uuid.UUID]:
    """Those of ``domains`` that need a locked pass (``report.deep``: the deep scan), at most
    ``limit`` listings at a time; counts domains, errors and mismatches in ``report``."""
    if report.deep:
        return await _deep_scan(ctx, limit, report, domains)
    return await _quick_scan(ctx, limit, report, domains)


async def in_parts(
    ctx: PassContext,
    limit: asyncio.Semaphore,
    report: FullPassReport,
    every: list[uuid.UUID],
    covers: Callable[[uuid.UUID], bool],
) -> AsyncIterator[list[uuid.UUID]]:
    """:func:`scan` of the domains of ``every`` this reconciler ``covers``, a part at a time: the
    domains of each part that need a locked pass. A deep scan goes :data:`DEEP_PART` of its own
    domains at a time (the loop's passes run between the parts' loads and compares, and the part's
    locked passes beside the next part's scan), each taken as the reconcilers running now split the
    site (one that starts or stops meanwhile changes the share of what is left). A part is
    :data:`DEEP_PART` of this reconciler's domains, not its share of that many of the site's: with
    two reconcilers each would otherwise pass the same number of parts as one alone, each half as
    full, and end no sooner."""
    size = DEEP_PART if report.deep else max(len(every), 1)
    rest = iter(every)
    while part := _next_part(rest, covers, size):
        yield await scan(ctx, limit, report, part)


def _next_part(rest: Iterator[uuid.UUID], covers: Callable[[uuid.UUID], bool], size: int) -> list[uuid.UUID]:
    """The next ``size`` domains of ``rest`` that this reconciler ``covers`` now (fewer at the end)."""
    part: list[uuid.UUID] = []
    for domain in rest:
        if covers(domain):
            part.append(domain)
            if len(part) == size:
                break
    return part


async def _quick_scan(
    ctx: PassContext, limit: asyncio.Semaphore, report: FullPassReport, domains: Collection[uuid.UUID]
) -> list[uuid.UUID]:
    async with reading(ctx.engine) as conn:
        found = await statemod.summaries(conn, list(domains))  # this reconciler's share, not the site
        await refresh_registry(conn, ctx.observer)
    report.domains += len(found)
    listed = await asyncio.gather(
        *(_observe(ctx, limit, s.domain, s.chassis_serials, gpus=False) for s in found.values())
    )
    needs_work = []
    for summary, (partitions, _, error, *_) in zip(found.values(), listed, strict=True):
        if error is not None or partitions is None:
            report.errors += 1
            needs_work.append(summary.domain)
            continue
        ctx.metrics.snapshot.partitions[summary.domain] = len(partitions)
        if not summary.quiet_if(fabric_digest(partitions, ctx.config.default_partition_mode)):
            needs_work.append(summary.domain)
    return needs_work


async def _deep_scan(
    ctx: PassContext, limit: asyncio.Semaphore, report: FullPassReport, domains: Collection[uuid.UUID]
) -> list[uuid.UUID]:
    async with ctx.engine.connect() as conn:
        states = await statemod.load(conn, list(domains))
        if not report.registry_read:
            await refresh_registry(conn, ctx.observer)
            report.registry_read = True
        await conn.commit()
    report.domains += len(states)
    observed = await asyncio.gather(
        *(_observe(ctx, limit, s.domain, s.chassis_serials, gpus=True) for s in states.values())
    )
    needs_work: list[uuid.UUID] = []
    for s, (partitions, gpus, error, target, read_at) in zip(states.values(), observed, strict=True):
        if error is not None or partitions is None or target is None:
            report.errors += 1
            needs_work.append(s.domain)  # records the error (and retries with backoff)
            continue
        ctx.metrics.snapshot.partitions[s.domain] = len(partitions)
        if gpus is not None:
            ctx.metrics.snapshot.gpus[s.domain] = len(gpus)
            if swapped := trays.swaps(s, gpus):
                await trays.record(ctx, swapped)
                needs_work.append(s.domain)
                continue
            report.mismatches += _mismatches(s, gpus)
        desire = s.desire(ctx.config.default_partition_mode, ctx.config.foreign_partitions)
        work, planned = _has_work(s, desire, partitions)
        if work:
            needs_work.append(s.domain)
            ctx.read_backs.scanned(target, partitions, read_at, s, planned)  # for its pass
        else:  # no pass will set its homeless-GPU gauge: a restarted reconciler still reports every domain
            seen = classify(partitions, desire.owned_names, desire.adopted)
            ctx.metrics.gpus_without_home(s.domain, len(without_home(desire, seen)))
    return needs_work


async def _observe(
    ctx: PassContext,
    limit: asyncio.Semaphore,
    domain: uuid.UUID,
    chassis_serials: Iterable[str],
    *,
    gpus: bool,
) -> Listing:
    async with limit:
        try:
            target = await ctx.observer.target(domain, chassis_serials)
            read_at = time.monotonic()
            partitions = await ctx.backend.list_partitions(target)
            listed = await ctx.backend.list_gpus(target) if gpus else None
        except FabricError as exc:
            return Listing(None, None, error_label(exc, ctx.backend.capabilities.manager))
        return Listing(partitions, listed, None, target, read_at)


async def finish_deleted(ctx: PassContext) -> None:
    """Deleting logical partitions with nothing left on the fabric vanish even when no domain had
    work (one that never had a physical partition, or whose last one went in an earlier pass)."""
    async with ctx.engine.connect() as conn, AsyncSession(bind=conn, expire_on_commit=False) as session:
        await finish_deleted_partitions(session)
        await session.commit()


def _has_work(
    s: statemod.DomainState, desire: DomainDesire, partitions: list[FabricPartition]
) -> tuple[bool, Plan | None]:
    """Whether a domain needs a locked pass: operations to do (``desire``: what ``s`` wants of the
    fabric), instances to settle, intents to close, records or observations that no longer match;
    and the plan made to tell (None: none was)."""
    if s.unsettled or s.intents:
        return True, None
    planned = plan(desire, partitions)
    if planned.operations:
        return True, planned
    by_name = {p.name: p for p in partitions}
    for name, record in s.partitions.items():
        found = by_name.get(name)
        if found is None or found.nmx_partition_id != record.nmx_partition_id:
            return True, planned
    location = {g: p.nmx_partition_id for p in partitions for g in p.gpu_uids}
    return any(location.get(g.gpu_uid) != g.observed_fabric_partition for g in s.gpus.values()), planned


def _mismatches(s: statemod.DomainState, gpus: list[FabricGpu]) -> int:
    """GPUs whose recorded identity (machine, device index) disagrees with what the fabric reports,
    plus recorded GPUs the fabric does not report at all."""
    reported = {g.gpu_uid: g for g in gpus}
    count = 0
    for row in s.gpus.values():
        found = reported.get(row.gpu_uid)
        if found is None or found.device_id != row.device_id or found.domain_uuid.int != s.domain.int:
            count += 1
    return count
