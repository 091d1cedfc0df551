"""Reconciler fixtures: a simulated site registered in the database, and reconcilers over it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.context import AppContext
from nico.config import NvLinkConfig
from nico.fabric.backend import FabricBackend
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend
from tests.support.sim_site import SimSite, seed
from tests.support.waiting import wait_for

MakeReconciler = Callable[..., Reconciler]


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, database_url: str, db: str, tmp_path: Path) -> dict[str, str]:
    """The CLI's environment: the test database and a scratch data dir."""
    env = {"NICO_DATABASE_URL": database_url, "NICO_DATA_DIR": str(tmp_path)}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest_asyncio.fixture
async def site(session: AsyncSession) -> SimSite:
    return await seed(session, SimFabric(racks=2, seed=7))


@pytest_asyncio.fixture
async def make_reconciler(app_context: AppContext, db: str) -> AsyncIterator[MakeReconciler]:
    """Reconcilers for a test; each is closed at the test's end (its partition-event watches
    cancelled), so none leaves tasks running into the next test."""
    made: list[Reconciler] = []

    def make(
        backend: FabricBackend, *, registry: CollectorRegistry | None = None, **config: Any
    ) -> Reconciler:
        settings = {"fabric_call_timeout": "2s", "monitor_run_interval": "60s", "notify_debounce": "2ms"}
        settings.update(config)
        nv = NvLinkConfig(backend=backend.kind, **settings)
        metrics = ReconcilerMetrics(registry or CollectorRegistry(), backend.kind, hold_seconds=120.0)
        made.append(Reconciler(app_context.engine, backend, nv, metrics))
        return made[-1]

    yield make
    for reconciler in made:
        await reconciler.close()


@pytest_asyncio.fixture
async def backend(site: SimSite) -> AsyncIterator[InProcessBackend]:
    backend = InProcessBackend(site.fabric, call_timeout=1.0)
    yield backend
    await backend.close()


@contextlib.asynccontextmanager
async def running_reconciler(
    make: MakeReconciler, backend: FabricBackend, **config: Any
) -> AsyncIterator[tuple[Reconciler, CollectorRegistry]]:
    """A reconciler running its loop (with its own registry), yielded once its first full pass is
    done; stopped at the end. Full passes come only every hour: what a test sees, targeted passes did."""
    registry = CollectorRegistry()
    reconciler = make(backend, registry=registry, monitor_run_interval="1h", **config)
    task = asyncio.create_task(reconciler.run())
    try:
        await wait_for(lambda: reconciler.full_passes == 1, within=10.0, what="the first full pass")
        yield reconciler, registry
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
