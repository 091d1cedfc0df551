"""A domain's health read beside its passes (on a connection of its own) stores every change the fabric
reports (a GPU's health, its machine's hold, a partition's health, the domain's multicast budget) in
three statements and one transaction, with no BEGIN nor COMMIT of their own; the part of a full pass
stores the same in one statement for all its domains."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.context import AppContext
from nico.db.models import Gpu, Machine, PhysicalPartition
from nico.db.queries import reconciler as queries
from nico.db.raw import Statement
from nico.fabric.backend import DomainTarget
from nico.reconciler import health
from nico.reconciler.health_metrics import HealthMetrics
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.reconciler.test_domain_pass import uids
from tests.support import factories as f
from tests.support.sim_site import SimSite, place


async def test_a_health_read_aside_stores_every_change_in_one_transaction_of_three_statements(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
    app_context: AppContext,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    d0 = site.domains[0]
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    machine = site.machines[d0][0]
    await place(session, site, machine, dict.fromkeys(range(4), lp))
    await session.commit()
    assert (await make_reconciler(backend).reconcile([d0], figures=False))[d0].status == "ok"
    sick = min(uids(machine, site))
    site.fabric.set_gpu_health(sick, "NO_NVLINK")  # the machine is to be held, its partition degraded
    await session.execute(
        text("UPDATE nvlink_domain SET max_multicast_groups = NULL WHERE uuid = :d"), {"d": d0}
    )
    await session.commit()
    sent: list[tuple[bool, Sequence[Statement]]] = []
    real = queries.pipelined

    async def recording(driver: Any, statements: Sequence[Statement], **kwargs: Any) -> list[list[Any]]:
        sent.append((driver.autocommit, statements))
        return await real(driver, statements, **kwargs)

    monkeypatch.setattr(queries, "pipelined", recording)
    partitions = await backend.list_partitions(DomainTarget(d0))
    async with app_context.engine.connect() as conn:
        found = await health.observe(conn, backend, HealthMetrics(120.0), d0, DomainTarget(d0), partitions)
    assert found is not None

    assert len(sent) == 1 and sent[0][0], "the health went out in more than one round trip, or in a BEGIN"
    assert len(sent[0][1]) == 3, [s.sql[:60] for s in sent[0][1]]
    gpu = await session.scalar(
        select(Gpu.health).where(Gpu.gpu_uid == sick).execution_options(populate_existing=True)
    )
    assert gpu == "NO_NVLINK"
    held = await session.scalar(
        select(Machine.held_unhealthy)
        .where(Machine.id == machine.id)
        .execution_options(populate_existing=True)
    )
    assert held is True
    pp = await session.scalar(
        select(PhysicalPartition.health)
        .where(PhysicalPartition.logical_partition_id == lp.id)
        .execution_options(populate_existing=True)
    )
    assert pp == "DEGRADED"
    budget = await session.scalar(
        text("SELECT max_multicast_groups FROM nvlink_domain WHERE uuid = :d"), {"d": d0}
    )
    assert budget is not None, "the budget read anew was not stored"
