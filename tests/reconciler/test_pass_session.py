"""What a domain's pass leaves on its connection: the lock it took is let go (with the write-back's
COMMIT, or after a failure) and the session's plan settings are its own again, so the next user of the
pooled connection (a request of the API, whose engine ``nico serve``'s reconciler shares) plans as
before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from nico.api.context import AppContext
from nico.config import NvLinkConfig
from nico.db.engine import make_engine
from nico.reconciler.domain_pass import lock_key
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.sim.inprocess import InProcessBackend
from tests.support import factories as f
from tests.support.sim_site import SimSite, place


@pytest_asyncio.fixture
async def one_connection(app_context: AppContext) -> AsyncIterator[tuple[AsyncEngine, list[Any]]]:
    """An engine on the test database whose pool keeps one connection, and every connection it
    opened (a pass's connection is the one a later check-out gets, as long as only one was opened)."""
    engine = make_engine(app_context.engine.url.render_as_string(hide_password=False), pool_size=1)
    opened: list[Any] = []
    event.listen(engine.sync_engine, "connect", lambda conn, _: opened.append(conn))
    yield engine, opened
    await engine.dispose()


async def settings_of(engine: AsyncEngine) -> tuple[str, str, str]:
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT current_setting('plan_cache_mode'), current_setting('jit'), "
                    "current_setting('enable_seqscan')"
                )
            )
        ).one()
        await conn.commit()
    return str(row[0]), str(row[1]), str(row[2])


async def converging(session: AsyncSession, site: SimSite) -> None:
    """An instance on the first domain whose partition its next pass makes."""
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    await place(session, site, site.machines[site.domains[0]][0], dict.fromkeys(range(4), lp))
    await session.commit()


async def lock_is_free(session: AsyncSession, site: SimSite) -> bool:
    key = lock_key(site.domains[0])
    taken = await session.scalar(text("SELECT pg_try_advisory_lock(:k)"), {"k": key})
    return bool(taken) and bool(await session.scalar(text("SELECT pg_advisory_unlock(:k)"), {"k": key}))


async def reconcile_once(engine: AsyncEngine, backend: InProcessBackend, site: SimSite, **config: Any) -> str:
    nv = NvLinkConfig(backend="nmxc", monitor_run_interval="60s", **config)
    metrics = ReconcilerMetrics(CollectorRegistry(), "nmxc", hold_seconds=120.0)
    reconciler = Reconciler(engine, backend, nv, metrics)
    try:
        d0 = site.domains[0]
        return (await reconciler.reconcile([d0], figures=False))[d0].status
    finally:
        await reconciler.close()


@pytest.mark.parametrize("fabric", ["answers", "hangs"])
async def test_a_pass_lets_go_of_its_lock_and_its_plan_settings_whatever_its_end(
    session: AsyncSession,
    site: SimSite,
    backend: InProcessBackend,
    one_connection: tuple[AsyncEngine, list[Any]],
    fabric: str,
) -> None:
    """With the write-back's COMMIT when the pass makes one; after it fails, on the way out."""
    engine, opened = one_connection
    before = await settings_of(engine)
    assert before[0] != "force_generic_plan" and before[2] == "on"
    await converging(session, site)
    site.fabric.set_faults(site.domains[0], hang=fabric == "hangs")

    status = await reconcile_once(engine, backend, site, fabric_call_timeout="300ms")

    assert status == ("ok" if fabric == "answers" else "error")
    assert len(opened) == 1  # the pass's connection is the one checked
    assert await settings_of(engine) == before
    async with engine.connect() as conn:
        held = await conn.scalar(
            text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        )
        await conn.commit()
    assert held == 0
    assert await lock_is_free(session, site)
