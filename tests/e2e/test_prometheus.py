"""A real Prometheus server (the Debian ``prometheus`` package) scrapes nico's /metrics over loopback
and answers a query for a reconciler series."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import httpx
import pytest
import uvicorn
from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.app import create_app
from nico.api.auth import TokenVerifier
from nico.api.context import AppContext
from nico.config import NvLinkConfig, Settings
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.sim.fabric import SimFabric
from nico.sim.inprocess import InProcessBackend
from tests.support import factories as f
from tests.support.net import free_port
from tests.support.sim_site import place, seed
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e


async def test_prometheus_scrapes_nico_and_answers_a_query(
    session: AsyncSession, app_context: AppContext, settings: Settings, tmp_path: Path
) -> None:
    binary = shutil.which("prometheus")
    assert binary, "the prometheus binary is required (Debian package prometheus; .ci/run installs it)"
    fabric = SimFabric(racks=1, seed=5)
    site = await seed(session, fabric)
    lp = await f.logical_partition(session, site.nv.tenant, site.nv.site)
    await place(session, site, site.machines[site.domains[0]][0], {0: lp})

    registry = CollectorRegistry()
    ctx = AppContext(settings, app_context.engine, app_context.sessions, TokenVerifier(settings), registry)
    backend = InProcessBackend(fabric)
    reconciler = Reconciler(
        app_context.engine, backend, NvLinkConfig(), ReconcilerMetrics(registry, "nmxc", 600)
    )
    await reconciler.full_pass()

    nico_port, prom_port = free_port(), free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, context=ctx),
            host="127.0.0.1",
            port=nico_port,
            log_level="warning",
            lifespan="off",
        )
    )
    serving = asyncio.create_task(server.serve())
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: nico\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{nico_port}']\n"
    )
    prometheus = await asyncio.create_subprocess_exec(
        binary,
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{prom_port}",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{prom_port}") as client:
            answer: dict[str, object] = {}

            async def answered() -> bool:
                try:
                    response = await client.get(
                        "/api/v1/query",
                        params={"query": "nico_nvlink_partition_monitor_num_physical_partitions"},
                    )
                except httpx.HTTPError:
                    return False
                if response.status_code != 200:  # 503 while Prometheus starts
                    return False
                result = response.json().get("data", {}).get("result", [])
                if result:
                    answer.update(result[0])
                return bool(result)

            await wait_for(answered, within=60, what="Prometheus to scrape nico and answer")
        assert answer["metric"]["job"] == "nico"  # type: ignore[index]
        assert answer["value"][1] == "1"  # type: ignore[index]
    finally:
        prometheus.terminate()
        await asyncio.wait_for(prometheus.wait(), timeout=30)
        server.should_exit = True
        await serving
        await reconciler.close()
        await backend.close()
