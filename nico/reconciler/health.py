"""Reading a domain's health (and multicast budget) from the fabric on each pass: stored where
tenants can read it (``gpu.health``, ``physical_partition.health``, ``nvlink_domain.
max_multicast_groups``), applied to placement (``machine.held_unhealthy``) and exported as gauges
(:mod:`nico.reconciler.health_metrics`).

A health read that fails never fails the pass: partitions matter more than their health, and the
next pass reads again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

from sqlalchemy.ext.asyncio import AsyncConnection

from nico.db.queries import reconciler as queries
from nico.fabric.backend import (
    DomainHealth,
    DomainTarget,
    FabricBackend,
    FabricError,
    FabricPartition,
    health_counts,
)
from nico.reconciler.health_metrics import HealthMetrics

log = logging.getLogger(__name__)
A = TypeVar("A")
B = TypeVar("B")


@dataclass(frozen=True)
class HealthRead:
    """What the fabric said of a domain's health: each GPU's (by GUID), its summary (None: the
    backend gives none; :func:`export` counts it from the GPUs and partitions), its multicast budget
    (None: unknown) and whether that budget was read now (to be stored)."""

    gpus: dict[int, str]
    summary: DomainHealth | None
    budget: int | None
    budget_is_new: bool


async def fetch(
    backend: FabricBackend, domain: uuid.UUID, target: DomainTarget, budget: int | None
) -> HealthRead | None:
    """Ask the fabric for the domain's health (and for its multicast budget when ``budget``, the one
    stored, is None); None when it could not say (the failure is logged, never raised)."""
    try:
        reporting, topology = backend.capabilities.health, backend.capabilities.topology
        summary: DomainHealth | None = None
        if reporting is not None:  # asked at once: a backend lists the GPUs once for both
            gpus, summary = await _both(reporting.health_gpus(target), reporting.domain_health(target))
        else:
            gpus = await backend.list_gpus(target)
        new = False
        if budget is None and topology is not None:
            budget, new = (await topology.domain_limits(target)).max_multicast_groups, True
    except FabricError as exc:
        log.info("domain %s: health not read: %s", domain, exc.message)
        return None
    return HealthRead({g.gpu_uid: g.health for g in gpus}, summary, budget, new)


async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both answers, asked at once; the first failure raised once both have ended (none left running)."""
    a, b = await asyncio.gather(first, second, return_exceptions=True)
    for answer in (a, b):
        if isinstance(answer, BaseException):
            raise answer
    return cast(A, a), cast(B, b)


async def observe(
    conn: AsyncConnection,
    backend: FabricBackend,
    metrics: HealthMetrics | None,
    domain: uuid.UUID,
    target: DomainTarget,
    partitions: Sequence[FabricPartition],
    *,
    place_on_unhealthy: bool = False,
    budget: int | None = None,
) -> DomainHealth | None:
    """Read, store and export the domain's health; None when the fabric could not say. A machine with
    a GPU reporting anything but healthy is held out of placement unless ``place_on_unhealthy``.
    ``budget``: the domain's multicast budget as stored (loaded with the pass: no round trip of its
    own); None, it is read from the fabric and stored. (A pass whose health is not read aside writes
    it with its write-back instead: :func:`fetch`, then :func:`export`.)"""
    read = await fetch(backend, domain, target, budget)
    if read is None:
        await conn.rollback()
        return None
    # Its statements are one transaction in autocommit mode too (the pipeline's): no BEGIN, no COMMIT.
    await conn.execution_options(isolation_level="AUTOCOMMIT")
    await queries.record_health(
        conn,
        domain,
        read.gpus,
        {p.name: p.health for p in partitions},
        hold=not place_on_unhealthy,
        budget=read.budget if read.budget_is_new else None,
    )
    await conn.commit()  # committed by record_health already: nothing is sent
    return export(metrics, domain, read, partitions)


def export(
    metrics: HealthMetrics | None, domain: uuid.UUID, read: HealthRead, partitions: Sequence[FabricPartition]
) -> DomainHealth:
    """The domain's health gauges, from a read stored already; its summary."""
    summary = read.summary
    if summary is None:
        summary = DomainHealth(
            domain,
            gpus=health_counts(read.gpus.values()),
            compute_nodes={},
            switch_nodes={},
            partitions=health_counts(p.health for p in partitions),
        )
    if metrics is not None:
        available = summary.available_multicast_groups
        if available is None and read.budget is not None:
            reserved = sum(p.multicast_groups_limit or 0 for p in partitions)
            available = max(read.budget - reserved, 0)
        metrics.record(
            domain,
            gpus=summary.gpus,
            compute_nodes=summary.compute_nodes,
            switch_nodes=summary.switch_nodes,
            partitions=summary.partitions,
            multicast_budget=read.budget,
            multicast_available=available,
        )
    return summary
