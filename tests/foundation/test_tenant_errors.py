"""Tenants see fabric errors in their own terms: a domain whose NMX-C endpoint is down shows the
tenant that its fabric manager is unreachable, with no address, while the admin CLI shows the
endpoint the reconciler could not reach."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncSession
from typer.testing import CliRunner

from nico.api.context import AppContext
from nico.cli import app as cli
from nico.config import NvLinkConfig, Settings
from nico.fabric.backend import EndpointNotConfigured, FabricRejected, FabricUnavailable
from nico.fabric.nmxc.client import NmxcBackend
from nico.reconciler.domain_pass import error_label
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.scheduler import Reconciler
from nico.services.fabric_errors import NOT_CONFIGURED, REFUSED, UNREACHABLE, tenant_error_message
from nico.sim.fabric import SimFabric
from tests.support.auth import bearer
from tests.support.net import free_port
from tests.support.sim_site import seed

LEAKS = ("http://", "https://", "127.0.0.1", "Traceback", "secret")


def leaks(text: str, port: int | None = None) -> list[str]:
    found = [word for word in LEAKS if word in text]
    if port is not None and str(port) in text:
        found.append(str(port))
    return found


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (FabricUnavailable("connect to http://127.0.0.1:47165 failed: Connection refused"), UNREACHABLE),
        (FabricUnavailable("10.0.0.5:50051 UNAVAILABLE: failed to connect to all addresses"), UNREACHABLE),
        (EndpointNotConfigured("no NMX-C endpoint registered for chassis S1"), NOT_CONFIGURED),
        (FabricRejected("bad credentials for user admin:secret@https://nmx-m.example:8443"), REFUSED),
    ],
)
def test_fabric_errors_are_told_to_tenants_without_infrastructure(error: Exception, shown: str) -> None:
    assert isinstance(error, FabricUnavailable | EndpointNotConfigured | FabricRejected)
    raw = error_label(error, "NMX-C")
    assert tenant_error_message(raw) == shown
    assert not leaks(shown)


def test_other_errors_keep_their_words_but_lose_addresses() -> None:
    raw = "partition nico-x could not be created on 10.1.2.3:50051 (see http://host:1/x)\nTraceback ..."
    assert tenant_error_message(raw) == (
        "partition nico-x could not be created on [address hidden] (see [address hidden])"
    )
    assert tenant_error_message(None) is None


async def test_a_domain_with_its_endpoint_down_shows_tenants_no_address_and_operators_the_endpoint(
    session: AsyncSession,
    app_context: AppContext,
    settings: Settings,
    client: httpx.AsyncClient,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fabric = SimFabric(racks=1, seed=3)
    port = free_port()  # nothing listens there: the NMX-C endpoint is down
    endpoint = f"http://127.0.0.1:{port}"
    serials = [s for d in fabric.domains.values() for s in d.chassis_serials]
    site = await seed(session, fabric, dict.fromkeys(serials, endpoint))
    config = NvLinkConfig(backend="nmxc", fabric_call_timeout="1s", monitor_run_interval="60s")
    backend = NmxcBackend(config)
    try:
        reconciler = Reconciler(
            app_context.engine, backend, config, ReconcilerMetrics(CollectorRegistry(), "nmxc", 120.0)
        )
        await reconciler.full_pass()
    finally:
        await backend.close()
    domain = site.domains[0]
    raw = reconciler.metrics.snapshot.errors[domain]
    assert f"127.0.0.1:{port}" in raw  # the detail operators need (metrics, log, database)

    response = await client.get(
        f"/v2/org/{site.nv.tenant.org}/nico/nvlink-topology", headers=bearer(settings, site.nv.tenant.org)
    )
    assert response.status_code == 200, response.text
    shown = next(d for d in response.json()["domains"] if d["id"] == str(domain))
    assert shown["error"] == UNREACHABLE
    assert not leaks(shown["error"], port) and not leaks(response.text), response.text

    monkeypatch.setenv("NICO_DATABASE_URL", database_url)
    monkeypatch.setenv("NICO_DATA_DIR", str(tmp_path))
    result = await asyncio.to_thread(CliRunner().invoke, cli, ["admin", "nvlink-domains"])
    assert result.exit_code == 0, result.output
    listed = {row["uuid"]: row for row in json.loads(result.output)}
    assert f"127.0.0.1:{port}" in (listed[str(domain)]["last_error"] or "")
