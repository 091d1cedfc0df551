"""Who covers what when several reconcilers run (``Members.covers``): the slots held split every
domain between them, each to exactly one; a reconciler without a slot among those held covers every
domain. And the full pass's limit (``Yielding``) waits for the passes for changes, but not forever."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from nico.reconciler import queueing
from nico.reconciler.members import Members
from nico.reconciler.queueing import Yielding

DOMAINS = [uuid.uuid4() for _ in range(300)]


def member(slot: int | None, held: tuple[int, ...]) -> Members:
    m = Members(None)  # type: ignore[arg-type]  # only the bookkeeping: no database
    m.slot, m.held = slot, held
    return m


@pytest.mark.parametrize("held", [(0, 1), (0, 2, 5), (1, 3, 4, 7)])
def test_the_slots_held_split_every_domain_to_exactly_one(held: tuple[int, ...]) -> None:
    members = [member(slot, held) for slot in held]
    for domain in DOMAINS:
        assert sum(m.covers(domain) for m in members) == 1
    for m in members:  # and each gets a share
        assert sum(m.covers(d) for d in DOMAINS) > len(DOMAINS) // (2 * len(held))


def test_alone_or_without_a_slot_among_those_held_covers_everything() -> None:
    for slot, held in ((0, (0,)), (None, ()), (None, (0, 1)), (3, (0, 1))):
        assert all(member(slot, held).covers(d) for d in DOMAINS)


async def test_the_full_pass_s_limit_waits_for_a_change_s_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idle = asyncio.Event()
    limit = Yielding(2, idle)
    step = asyncio.create_task(limit.acquire())
    for _ in range(5):  # let it run as far as it can
        await asyncio.sleep(0)
    assert not step.done()  # a pass for a change runs: the full pass's step waits
    idle.set()
    assert await asyncio.wait_for(step, 5)
    limit.release()

    idle.clear()
    monkeypatch.setattr(queueing, "YIELD_MAX", 0.01)
    assert await asyncio.wait_for(limit.acquire(), 5)  # under a steady stream of changes it moves on
