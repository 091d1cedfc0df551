"""A domain whose passes keep moving the same instance waits ``interval`` for its next pass, so the
tenant's changes coalesce (``reconciler.flapping``); instances moved once make nobody wait."""

from __future__ import annotations

import uuid

from nico.reconciler.flapping import Flapping

DOMAIN, OTHER = uuid.uuid4(), uuid.uuid4()


def test_an_instance_moved_once_holds_nothing() -> None:
    flapping = Flapping(1.0)
    for n in range(5):  # creates: a new instance each pass, back to back
        flapping.after_pass(DOMAIN, [(uuid.uuid4(), 1)], 10.0 + n * 0.01)
        assert flapping.held_until(DOMAIN, 10.0 + n * 0.01) is None


def test_an_instance_moved_again_within_the_interval_holds_its_domain_for_the_interval() -> None:
    flapping = Flapping(1.0)
    instance = uuid.uuid4()
    flapping.after_pass(DOMAIN, [(instance, 2)], 10.0)
    flapping.after_pass(DOMAIN, [(instance, 3)], 10.2)
    assert flapping.held_until(DOMAIN, 10.3) == 10.2 + 1.0
    assert flapping.held_until(OTHER, 10.3) is None  # other domains are not held
    assert flapping.held_until(DOMAIN, 11.2) is None  # the interval has passed


def test_a_flood_stays_held_from_one_pass_to_the_next() -> None:
    flapping = Flapping(1.0)
    instance = uuid.uuid4()
    flapping.after_pass(DOMAIN, [(instance, 2)], 10.0)
    flapping.after_pass(DOMAIN, [(instance, 3)], 10.1)
    for n in range(1, 4):  # each pass the hold lets through, just over an interval after the last
        at = 10.1 + n * 1.01
        assert flapping.held_until(DOMAIN, at) is None
        flapping.after_pass(DOMAIN, [(instance, 10 * n)], at)
        assert flapping.held_until(DOMAIN, at) == at + 1.0


def test_a_move_two_intervals_after_the_last_is_no_flap() -> None:
    flapping = Flapping(1.0)
    instance = uuid.uuid4()
    flapping.after_pass(DOMAIN, [(instance, 2)], 10.0)
    flapping.after_pass(DOMAIN, [(instance, 3)], 12.5)
    assert flapping.held_until(DOMAIN, 12.6) is None


def test_a_pass_that_moved_nothing_leaves_the_hold_and_forgets_old_moves() -> None:
    flapping = Flapping(1.0)
    instance = uuid.uuid4()
    flapping.after_pass(DOMAIN, [(instance, 2)], 10.0)
    flapping.after_pass(DOMAIN, [(instance, 3)], 10.5)
    flapping.after_pass(DOMAIN, [], 10.6)  # A -> B -> A meanwhile: nothing to do
    assert flapping.held_until(DOMAIN, 10.7) == 11.5
    flapping.after_pass(DOMAIN, [], 12.6)
    assert flapping._moved == {}  # nothing kept for a domain that is quiet


def test_a_pass_that_finishes_the_same_change_is_no_flap() -> None:
    """A change that takes two passes (a follow-up after a failed call, say) holds nothing."""
    flapping = Flapping(1.0)
    instance = uuid.uuid4()
    flapping.after_pass(DOMAIN, [(instance, 2)], 10.0)
    flapping.after_pass(DOMAIN, [(instance, 2)], 10.1)
    assert flapping.held_until(DOMAIN, 10.2) is None
