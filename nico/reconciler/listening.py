"""LISTEN for commits that changed desired NVLink state (``NOTIFY nico_nvlink``), and wake the
reconciler for the domains each names; reconnect when the connection drops.

The listening connection is woken by its socket alone: psycopg's ``notifies()`` also looks every
0.1 s (to let a Ctrl-C in), ten wake-ups a second of a reconciler with nothing to do."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any

import psycopg
from psycopg import pq
from sqlalchemy.ext.asyncio import AsyncEngine

from nico.db.engine import libpq_url, reading
from nico.db.queries import reconciler as queries
from nico.reconciler.outages import Outages
from nico.services.nvlink_events import CHANNEL, parse_payload

log = logging.getLogger(__name__)
BACKOFF_MAX = 10.0


async def listen(
    engine: AsyncEngine,
    request: Callable[[Iterable[uuid.UUID]], None],
    outages: Outages,
    connected: Callable[[list[uuid.UUID]], None],
) -> None:
    """Until cancelled: every notification's domains go to ``request``; after each (re)connection,
    every domain goes to ``connected`` (anything committed while nobody listened is to be found)."""
    url = libpq_url(engine.url.render_as_string(hide_password=False))
    backoff = 0.5
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
            async with conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                backoff = 0.5
                outages.database_ok()
                async with reading(engine) as reader:
                    connected(await queries.all_domain_uuids(reader))
                async for payload in notifications(conn):
                    domains = parse_payload(payload)
                    if domains:
                        request(domains)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not outages.database_failed(exc):
                log.warning("NOTIFY listener lost its connection (%s); reconnecting", exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)


async def notifications(conn: psycopg.AsyncConnection[Any]) -> AsyncGenerator[str]:
    """The payload of each notification ``conn`` receives, as it arrives (those that came while it
    ran a statement first); woken only when its socket has something. Raises
    :class:`psycopg.OperationalError` when the connection is lost."""
    async for came in conn.notifies(timeout=0):  # what came with LISTEN, or since
        yield came.payload
    pgconn, loop, encoding = conn.pgconn, asyncio.get_running_loop(), conn.info.encoding
    readable = asyncio.Event()
    fd = conn.fileno()
    loop.add_reader(fd, readable.set)
    try:
        while True:
            await readable.wait()
            readable.clear()
            pgconn.consume_input()  # raises when the server is gone
            if pgconn.status != pq.ConnStatus.OK:
                raise psycopg.OperationalError("the NOTIFY connection is lost")
            while (note := pgconn.notifies()) is not None:
                yield note.extra.decode(encoding)
    finally:
        loop.remove_reader(fd)
