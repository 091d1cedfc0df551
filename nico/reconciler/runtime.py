"""Building a running reconciler from settings: the configured fabric backend and its metrics."""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncEngine

from nico.config import ConfigError, Settings
from nico.db.engine import make_session_factory, transaction
from nico.fabric.backend import FabricBackend
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.services import fabric_registry

log = logging.getLogger(__name__)


async def open_backend(settings: Settings, engine: AsyncEngine) -> FabricBackend:
    """The backend ``nvlink_config.backend`` names: NMX-C (per-chassis endpoints from the registry)
    or NMX-M (``nmx_m_endpoint`` with the credentials stored by ``nico admin credential add-nmx-m``)."""
    config = settings.nvlink_config
    if config.backend == "nmxc":
        from nico.fabric.nmxc.client import NmxcBackend

        return NmxcBackend(config)
    if not config.nmx_m_endpoint:
        raise ConfigError('nvlink_config.nmx_m_endpoint: required when nvlink_config.backend is "nmxm"')
    async with transaction(make_session_factory(engine)) as session:
        credentials = await fabric_registry.nmxm_credentials(session)
    if credentials is None:
        log.warning("no NMX-M credentials stored; calling NMX-M without authentication")
    from nico.fabric.nmxm.client import NmxmBackend

    username, password = credentials or (None, None)
    return NmxmBackend.from_config(config, username, password)


def pool_size(settings: Settings) -> int:
    """Connections the reconciler's own engine keeps: one per domain it may work on at once (up to
    ``reconcile_concurrency`` for changes and as many for its full pass), its member slot and a health
    read, or ``db_pool_size`` when that is larger. A pool smaller than that let the passes over it run
    on overflow connections, each closed when its pass returned it and opened again by the next: a new
    server process and every statement prepared anew, about a third of a first pass's CPU at 200 racks
    with ``reconcile_concurrency`` 16 and the default pool."""
    return max(settings.db_pool_size, 2 * settings.nvlink_config.reconcile_concurrency + 2)


def reconciler_metrics(settings: Settings, registry: CollectorRegistry) -> ReconcilerMetrics:
    config = settings.nvlink_config
    hold = config.monitor_run_interval.total_seconds() + 60.0
    metrics = ReconcilerMetrics(registry, config.backend, hold)
    metrics.quotas.limits = settings.quotas
    return metrics


async def run_reconciler(settings: Settings, engine: AsyncEngine, registry: CollectorRegistry) -> None:
    """Run the reconciler until cancelled (the API runs this beside itself; ``nico reconcile`` alone)."""
    backend = await open_backend(settings, engine)
    reconciler = Reconciler(engine, backend, settings.nvlink_config, reconciler_metrics(settings, registry))
    try:
        await reconciler.run()
    finally:
        await asyncio.shield(backend.close())
