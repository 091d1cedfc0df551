"""Reading a domain's health (and multicast budget) from the fabric on each pass: stored where
tenants can read it (``gpu.health``, ``physical_partition.health``, ``nvlink_domain.
max_multicast_groups``), applied to placement (``machine.held_unhealthy``) and exported as gauges
(:mod:`nico.reconciler.health_metrics`).

A health read that fails never fails the pass: partitions matter more than their health, and the
next pass reads again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

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
    own); None, it is read from the fabric and stored."""
    try:
        reporting, topology = backend.capabilities.health, backend.capabilities.topology
        if reporting is not None:
            gpus = await reporting.health_gpus(target)
            summary: DomainHealth | None = await reporting.domain_health(target)
        else:
            gpus, summary = await backend.list_gpus(target), None
        new_budget = None
        if budget is None and topology is not None:
            budget = new_budget = (await topology.domain_limits(target)).max_multicast_groups
    except FabricError as exc:
        log.info("domain %s: health not read: %s", domain, exc.message)
        await conn.rollback()
        return None
    if summary is None:
        summary = DomainHealth(
            domain,
            gpus=health_counts(g.health for g in gpus),
            compute_nodes={},
            switch_nodes={},
            partitions=health_counts(p.health for p in partitions),
        )
    await queries.record_health(
        conn,
        domain,
        {g.gpu_uid: g.health for g in gpus},
        {p.name: p.health for p in partitions},
        hold=not place_on_unhealthy,
        budget=new_budget,
    )
    await conn.commit()  # committed by record_health already: nothing is sent
    if metrics is not None:
        available = summary.available_multicast_groups
        if available is None and budget is not None:
            reserved = sum(p.multicast_groups_limit or 0 for p in partitions)
            available = max(budget - reserved, 0)
        metrics.record(
            domain,
            gpus=summary.gpus,
            compute_nodes=summary.compute_nodes,
            switch_nodes=summary.switch_nodes,
            partitions=summary.partitions,
            multicast_budget=budget,
            multicast_available=available,
        )
    return summary
