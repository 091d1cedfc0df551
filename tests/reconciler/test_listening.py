"""The NOTIFY listener (``listening.listen``) on real PostgreSQL: each notification's domains reach
the reconciler as they come (one alone, several in one commit, one that arrived before the listener
began to read its socket), and a listener whose connection is killed connects again, asks for every
domain, and hears the notifications after that."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterable

import psycopg
import pytest_asyncio
from sqlalchemy.engine import make_url

from nico.db.engine import libpq_url, make_engine
from nico.reconciler.listening import listen
from nico.reconciler.outages import Outages
from nico.services.nvlink_events import CHANNEL, payload
from tests.support.waiting import wait_for

LISTENER_NAME = "nico-test-listener"


class Heard:
    """What the listener passed on: the domains requested, and each (re)connection."""

    def __init__(self, url: str) -> None:
        self.url = url  # the test database's, for notifications
        self.requested: list[set[uuid.UUID]] = []
        self.connections = 0
        self.on_connect: list[str] = []  # notifications to send from the connect callback (once)

    def request(self, domains: Iterable[uuid.UUID]) -> None:
        self.requested.append(set(domains))

    def connected(self, domains: list[uuid.UUID]) -> None:
        self.connections += 1
        for note in self.on_connect:
            notify(self.url, note)
        self.on_connect = []

    def domains(self) -> set[uuid.UUID]:
        return set().union(*self.requested)


def notify(url: str, note: str) -> None:
    """One NOTIFY, committed, from a connection of its own (blocking: the caller waits for it)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, note))


@pytest_asyncio.fixture
async def heard(database_url: str, db: str) -> AsyncIterator[Heard]:
    """A listener running against the test database until the test ends."""
    # Named, so that the test kills this listener's session and no other (an earlier test's may linger).
    named = make_url(database_url).update_query_dict({"application_name": LISTENER_NAME})
    engine = make_engine(named.render_as_string(hide_password=False), pool_size=1)
    found = Heard(libpq_url(database_url))
    task = asyncio.create_task(listen(engine, found.request, Outages(), found.connected))
    yield found
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await engine.dispose()


async def test_notifications_reach_the_reconciler_as_they_come(heard: Heard) -> None:
    await wait_for(lambda: heard.connections == 1, what="the listener connected")
    one, two, three = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await asyncio.to_thread(notify, heard.url, payload([one]))
    await wait_for(lambda: heard.domains() == {one}, what="the first notification heard")

    with psycopg.connect(heard.url) as conn:  # two in one commit: they arrive together
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload([two])))
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload([three])))
        conn.commit()

    await wait_for(lambda: heard.domains() == {one, two, three}, what="both of one commit heard")


async def test_a_notification_before_the_listener_reads_its_socket_is_heard(heard: Heard) -> None:
    """Sent once LISTEN is in place, while the listener still reads the domains (its socket not yet
    watched): it waits in the socket and is heard as soon as the listener watches it."""
    early = uuid.uuid4()
    heard.on_connect = [payload([early])]
    await wait_for(lambda: heard.connections == 1, what="the listener connected")
    await wait_for(lambda: early in heard.domains(), what="the early notification heard")


async def test_a_killed_connection_is_made_again_and_heard_from(heard: Heard) -> None:
    await wait_for(lambda: heard.connections == 1, what="the listener connected")
    with psycopg.connect(heard.url, autocommit=True) as conn:
        killed = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE query = %s AND application_name = %s AND datname = current_database()",
            (f"LISTEN {CHANNEL}", LISTENER_NAME),
        ).fetchone()
    assert killed is not None and killed[0] == 1, "the listener's session was found and ended"

    await wait_for(lambda: heard.connections == 2, within=10.0, what="the listener connected again")
    after = uuid.uuid4()
    await asyncio.to_thread(notify, heard.url, payload([after]))
    await wait_for(lambda: after in heard.domains(), what="a notification after the reconnection heard")
