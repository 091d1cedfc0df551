"""What a converging pass asks of PostgreSQL: its statements look every row up by key (no generic plan
of them reads a whole table that grows with the site, however small the site), its unsettled
instances come with the rest of its load and the logical partitions are counted in its figures'
statement, not in statements of their own."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.context import AppContext
from nico.db.models import FabricIntent, Gpu, Instance
from nico.db.queries import reconciler as queries
from nico.db.raw import Numbered, Statement, driver_connection
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place

# Tables with a row per machine, GPU, instance or binding of the site: never read whole by a pass.
GROWING = ("gpu", "machine", "instance", "nvlink_interface")


@pytest_asyncio.fixture
async def sent(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
    monkeypatch: pytest.MonkeyPatch,
) -> list[Statement]:
    """The statements a pass that creates an instance's partition sends through the pipeline (its
    load, intents and write-back; health read with it), once the instance is Ready."""
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    instance = await place(session, site, site.machines[site.domains[0]][0], dict.fromkeys(range(4), lp))
    instance_id = instance.id
    await session.commit()
    sent: list[Statement] = []
    real = queries.pipelined

    async def recording(driver: Any, statements: Sequence[Statement], **kwargs: Any) -> list[list[Any]]:
        sent.extend(statements)
        sent.extend(kwargs.get("then") or ())
        return await real(driver, statements, **kwargs)

    monkeypatch.setattr(queries, "pipelined", recording)
    reconciler = make_reconciler(backend)
    d0 = site.domains[0]
    assert (await reconciler.reconcile([d0], figures=False))[d0].status == "ok"
    status = await session.scalar(select(Instance.status).where(Instance.id == instance_id))
    assert status == "Ready", "the pass did not settle the instance: its load missed it"
    return sent


async def test_no_statement_of_a_pass_reads_a_whole_table_of_the_site(
    sent: list[Statement], app_context: AppContext
) -> None:
    """On a site this small the planner, left to itself, reads every GPU for the four a pass writes.
    The plans are those a prepared statement keeps (its generic plan: the pass's settings force it,
    so the NULLs it is executed with here choose nothing), under the pass's settings."""
    scans: dict[str, list[str]] = {}
    async with app_context.engine.connect() as conn:
        pgconn = (await driver_connection(conn)).pgconn  # the simple protocol: $n left unbound
        for statement in {s.sql: s for s in sent}.values():
            if statement.sql.lstrip().upper().startswith("SELECT PG_"):
                continue  # the lock's own statements read no table
            numbered = Numbered.of(statement.sql).sql
            count = max((int(n) for n in re.findall(r"\$(\d+)", numbered)), default=0)
            nulls = f"({', '.join(['NULL'] * count)})" if count else ""
            # In a transaction of the pass's settings (generic plans and the rest), as a pass plans;
            # EXPLAIN (GENERIC_PLAN) would say the same from PostgreSQL 16 on.
            sql = f"{queries.PASS_PLANS.sql}; PREPARE looked AS {numbered}; EXPLAIN EXECUTE looked{nulls}"
            result = pgconn.exec_(sql.encode())
            pgconn.exec_(b"DEALLOCATE ALL")
            assert result.status == psycopg.pq.ExecStatus.TUPLES_OK, result.error_message
            plan = [bytes(result.get_value(i, 0) or b"").decode() for i in range(result.ntuples)]
            whole = [line.strip() for line in plan for t in GROWING if f"Seq Scan on {t} " in line + " "]
            if whole:
                scans[" ".join(statement.sql.split())[:120]] = whole
        await conn.rollback()
    assert not scans, scans


async def test_a_pass_loads_its_unsettled_instances_and_counts_the_partitions_in_statements_it_sends_anyway(
    sent: list[Statement],
) -> None:
    texts = [" ".join(s.sql.split()) for s in sent]
    unsettled = [t for t in texts if "nvlink_config_changed_at" in t]
    assert len(unsettled) == 1 and "json_agg" in unsettled[0], "the unsettled instances went out alone"
    assert "SELECT count(*) FROM logical_partition" not in texts, "the count went out alone"
    assert any("(SELECT count(*) FROM logical_partition)" in t for t in texts), "no count with the pass"


async def test_a_pass_without_health_closes_observes_and_settles_in_one_statement_and_each_is_done(
    sent: list[Statement],
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
) -> None:
    """The second pass of a domain (its health read by the first) adds a machine to the partition: its
    intent closed, its GPUs' partition recorded, its instance Ready, from one statement."""
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site, name="second")
    machine = site.machines[site.domains[0]][1]
    second = (await place(session, site, machine, dict.fromkeys(range(4), lp))).id
    await session.commit()
    sent.clear()
    reconciler = make_reconciler(backend)
    reconciler.health_reads.store(site.domains[0])  # read just now: this pass reads none
    assert (await reconciler.reconcile([site.domains[0]], figures=False))[site.domains[0]].status == "ok"

    texts = [" ".join(s.sql.split()) for s in sent]
    together = [
        t for t in texts if "UPDATE fabric_intent" in t and "UPDATE gpu" in t and "status_detail" in t
    ]
    assert len(together) == 1, texts
    assert await session.scalar(select(Instance.status).where(Instance.id == second)) == "Ready"
    observed = (
        await session.scalars(select(Gpu.physical_partition_id).where(Gpu.machine_id == machine.id))
    ).all()
    assert len(observed) == 4 and None not in observed, "the GPUs' partition was not recorded"
    states = (await session.scalars(select(FabricIntent.state))).all()
    assert states and set(states) == {"completed"}, states
