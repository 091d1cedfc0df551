"""Work a domain's pass no longer repeats: a pass that makes no call plans once for what it read (the
plan after the calls would have the same inputs, and so would a plan of a listing equal to the cached
read-back; for a single domain's pass and for a part's); a pass whose read-back holds what its calls
promised plans once, while one whose fabric moved under its calls plans the read-back again; and a
pass whose write-back counts the logical partitions leaves no read of the count to follow it, while
a pass that did not count asks for one (so the gauge still follows every change)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import LogicalPartition
from nico.reconciler import pass_steps
from nico.reconciler.operations import CreatePartition, Operation
from nico.reconciler.parts import reconcile_part
from nico.reconciler.planner import Plan
from nico.sim.inprocess import InProcessBackend
from tests.reconciler.conftest import MakeReconciler
from tests.support import factories as f
from tests.support.sim_site import SimSite, place


async def logical_partitions(session: AsyncSession) -> int:
    return int(await session.scalar(select(func.count()).select_from(LogicalPartition)) or 0)


async def placed(session: AsyncSession, site: SimSite) -> None:
    """An instance of four GPUs in a logical partition on the first domain, not yet passed."""
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    await place(session, site, site.machines[site.domains[0]][0], dict.fromkeys(range(4), lp))


def count_plans(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, list[Any]]]:
    """Every plan's inputs from now on."""
    inputs: list[tuple[Any, list[Any]]] = []
    planned = pass_steps.plan

    def counting(desire: Any, observed: Any) -> Plan:
        observed = list(observed)
        inputs.append((desire, observed))
        return planned(desire, observed)

    monkeypatch.setattr(pass_steps, "plan", counting)
    return inputs


def no_plan_repeated(inputs: list[tuple[Any, list[Any]]]) -> None:
    assert inputs, "the pass planned"
    repeated = [i for i, seen in enumerate(inputs) if seen in inputs[:i]]
    assert not repeated, f"plans {repeated} had the inputs of an earlier plan of the same pass"


@pytest.mark.parametrize("way", ["domain", "part"])
async def test_a_pass_that_makes_no_call_plans_no_input_twice(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
    monkeypatch: pytest.MonkeyPatch,
    way: str,
) -> None:
    """A single domain's pass, and a part's (the full pass's) of that domain alone."""
    d0 = site.domains[0]
    await placed(session, site)
    reconciler = make_reconciler(backend)
    await reconciler.reconcile([d0])  # converges, and leaves its read-back cached
    inputs = count_plans(monkeypatch)

    if way == "domain":
        result = (await reconciler.reconcile([d0]))[d0]
    else:
        (result,) = await reconcile_part(reconciler.context(), [d0], asyncio.Semaphore(4))

    assert result.status == "ok" and result.operations == 0 and not result.follow_up
    no_plan_repeated(inputs)


@pytest.mark.parametrize("moved", [False, True], ids=["as-promised", "moved-under-its-calls"])
async def test_a_pass_plans_its_read_back_again_only_when_it_is_not_as_its_calls_promised(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    make_reconciler: MakeReconciler,
    monkeypatch: pytest.MonkeyPatch,
    moved: bool,
) -> None:
    """``moved``: another manager takes a GPU out of the partition the pass just made, so the read-back
    is not what the calls promised: the pass plans it and looks again soon (it would call the domain
    settled and done otherwise). Otherwise one plan, and the instance Ready."""
    d0 = site.domains[0]
    await placed(session, site)
    reconciler = make_reconciler(backend)

    async def taken_behind_its_back(op: Operation) -> None:
        if moved and isinstance(op, CreatePartition):
            (made,) = [p for p in site.fabric.partitions(d0) if p.name == op.name]
            site.fabric.remove_gpus(d0, made.partition_id, [min(made.gpu_uids)])

    reconciler.after_call = taken_behind_its_back
    inputs = count_plans(monkeypatch)

    result = (await reconciler.reconcile([d0]))[d0]

    assert result.status == "ok" and result.operations > 0
    assert result.report is not None and bool(result.report.instances_ready) is not moved
    if moved:
        assert len(inputs) == 2, "the read-back that broke the promise was not planned"
        assert result.follow_up, "the GPU taken out is left where it is"
    else:
        assert len(inputs) == 1, "the read-back was planned again though it held what the calls promised"
        assert not result.follow_up


async def test_a_pass_that_counts_the_logical_partitions_leaves_no_count_to_follow(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    await placed(session, site)
    await f.logical_partition(session, site.nv.tenant, site.nv.site, name="lp-2")
    await session.commit()
    reconciler = make_reconciler(backend)
    count = reconciler.metrics.partition_count
    assert count.due(), "no count read yet: the pass's write-back is to carry one"

    await reconciler.reconcile([d0], figures=False)
    reconciler.figures.after_pass(d0)  # as the loop does after its passes

    assert reconciler.metrics.snapshot.logical_partitions == await logical_partitions(session) == 2
    assert reconciler.figures.count_due_at() is None, "a read of the count was asked for after all"


async def test_a_pass_that_did_not_count_asks_for_a_count_that_then_sees_its_change(
    session: AsyncSession, site: SimSite, backend: InProcessBackend, make_reconciler: MakeReconciler
) -> None:
    d0 = site.domains[0]
    await placed(session, site)
    reconciler = make_reconciler(backend)
    await reconciler.reconcile([d0], figures=False)  # counts: 1
    reconciler.figures.after_pass(d0)
    assert reconciler.metrics.snapshot.logical_partitions == 1
    await f.logical_partition(session, site.nv.tenant, site.nv.site, name="lp-2")
    await session.commit()
    count = reconciler.metrics.partition_count
    count.at = count.at + 3600.0  # the last read is recent: the next pass does not count
    assert not count.due()

    await reconciler.reconcile([d0], figures=False)
    reconciler.figures.after_pass(d0)

    assert reconciler.metrics.snapshot.logical_partitions == 1  # not counted by that pass
    assert reconciler.figures.count_due_at() is not None, "the pass's change was left uncounted"
    await reconciler.figures.count_partitions()  # what the loop does once it is due
    assert reconciler.metrics.snapshot.logical_partitions == 2
    assert reconciler.figures.count_due_at() is None
