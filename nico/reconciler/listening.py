"""LISTEN for commits that changed desired NVLink state (``NOTIFY nico_nvlink``), and wake the
reconciler for the domains each names; reconnect when the connection drops."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable

import psycopg
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
                async for note in conn.notifies():
                    domains = parse_payload(note.payload)
                    if domains:
                        request(domains)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not outages.database_failed(exc):
                log.warning("NOTIFY listener lost its connection (%s); reconnecting", exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)
