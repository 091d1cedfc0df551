"""A seeded site on a simulated fabric (NMX-C or NMX-M over loopback) with a reconciler running over
it: what the end-to-end NVLink tests stand on. Teardown stops each piece within a bound, so a piece
that does not stop is reported instead of hanging the suite."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from nico.config import NvLinkConfig
from nico.db.models import Tenant
from nico.fabric.backend import FabricBackend
from nico.fabric.nmxc.client import NmxcBackend
from nico.fabric.nmxm.client import NmxmBackend
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from nico.sim.nmxm_app import NmxmSimulator
from tests.support.sim_site import SimSite, seed
from tests.support.waiting import stop_within


@dataclass
class FabricStack:
    kind: str  # nmxc | nmxm
    fabric: SimFabric
    site: SimSite
    reconciler: Reconciler
    registry: CollectorRegistry
    nmxc: NmxcSimulator | None


@asynccontextmanager
async def fabric_stack(
    kind: str,
    session: AsyncSession,
    engine: AsyncEngine,
    *,
    fabric_seed: int,
    call_timeout: str,
    operation_timeout: str,
    fabric: SimFabric | None = None,
    discover: bool = False,
) -> AsyncIterator[FabricStack]:
    """Two racks (or ``fabric``) seeded through the services, targeted creation on (tests choose
    racks by machineId, as the reference allows), and a reconciler running until the block ends.
    NMX-C endpoints are registered per chassis serial; ``discover`` also lists every domain's
    endpoint in ``nmxc_endpoints`` (how the reconciler finds a minipod's other domains)."""
    fabric = fabric or SimFabric(racks=2, seed=fabric_seed)
    nmxc: NmxcSimulator | None = None
    nmxm: NmxmSimulator | None = None
    backend: FabricBackend
    if kind == "nmxc":
        nmxc = await NmxcSimulator(fabric).start()
        site = await seed(session, fabric, nmxc.endpoints)
        config = NvLinkConfig(
            backend="nmxc",
            fabric_call_timeout=call_timeout,
            notify_debounce="2ms",
            nmxc_endpoints=sorted(nmxc.domain_endpoints.values()) if discover else [],
        )
        backend = NmxcBackend(config)
    else:
        nmxm = await NmxmSimulator(fabric, username="nmx", password="secret", operation_delay=0.01).start()
        site = await seed(session, fabric)
        config = NvLinkConfig(
            backend="nmxm",
            nmx_m_endpoint=nmxm.url,
            fabric_call_timeout=call_timeout,
            nmx_m_operation_timeout=operation_timeout,
            notify_debounce="2ms",
        )
        backend = NmxmBackend.from_config(config, "nmx", "secret")
    await session.execute(
        update(Tenant).where(Tenant.id == site.nv.tenant.id).values(targeted_instance_creation=True)
    )
    await session.commit()
    registry = CollectorRegistry()
    reconciler = Reconciler(engine, backend, config, ReconcilerMetrics(registry, kind, 120.0))
    task = asyncio.create_task(reconciler.run())
    try:
        yield FabricStack(kind, fabric, site, reconciler, registry, nmxc)
    finally:
        task.cancel()
        await stop_within("reconciler", asyncio.gather(task, return_exceptions=True))
        await stop_within("fabric backend", backend.close())
        if nmxc is not None:
            await stop_within("NMX-C simulator", nmxc.stop())
        if nmxm is not None:
            await stop_within("NMX-M simulator", nmxm.stop())
