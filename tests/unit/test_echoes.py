"""Which partition events the reconciler takes for the echoes of its own calls (``echoes.Echoes``):
only calls made while the domain's event stream was known to be live, one event per call, for a
short window; anything else still brings a pass."""

from __future__ import annotations

import time
import uuid

from nico.reconciler.echoes import Echoes

DOMAIN = uuid.uuid4()


def test_calls_made_before_the_stream_delivered_anything_expect_no_echo() -> None:
    echoes = Echoes()
    before = time.monotonic()
    echoes.expect(DOMAIN, [(5, before)])  # no event heard yet: the stream may not be open
    assert not echoes.heard(DOMAIN, 5)
    echoes.listening(DOMAIN)  # the stream delivers its first event
    echoes.expect(DOMAIN, [(5, before)])  # a call that ended before: its event may never come
    assert not echoes.heard(DOMAIN, 5)


def test_one_echo_per_call_of_the_partition_it_touched() -> None:
    echoes = Echoes()
    echoes.listening(DOMAIN)
    after = time.monotonic() + 0.001
    echoes.expect(DOMAIN, [(5, after), (5, after), (7, after)])
    assert not echoes.heard(DOMAIN, 9)  # another partition
    assert not echoes.heard(DOMAIN, None)  # "some partition": re-read
    assert echoes.heard(DOMAIN, 5) and echoes.heard(DOMAIN, 5) and echoes.heard(DOMAIN, 7)
    assert not echoes.heard(DOMAIN, 5)  # one more than the calls: a change behind nico's back


def test_a_stream_that_ends_or_is_opened_anew_forgets_what_it_was_owed() -> None:
    echoes = Echoes()
    echoes.listening(DOMAIN)
    echoes.expect(DOMAIN, [(5, time.monotonic() + 0.001)])
    echoes.deaf(DOMAIN)
    assert not echoes.heard(DOMAIN, 5)
    echoes.listening(DOMAIN)
    echoes.expect(DOMAIN, [(5, time.monotonic() + 0.001)])
    echoes.listening(DOMAIN, fresh=True)  # resync: the old stream's events may be lost
    assert not echoes.heard(DOMAIN, 5)


def test_echoes_are_owed_only_for_the_window() -> None:
    echoes = Echoes(window=0.0)
    echoes.listening(DOMAIN)
    echoes.expect(DOMAIN, [(5, time.monotonic() + 0.001)])
    assert not echoes.heard(DOMAIN, 5)
