"""Database outages: 503 in the envelope while PostgreSQL is unreachable, no internal text in
``/readyz``, and no failed request once it is back (pooled connections it closed are not reused)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import pytest_asyncio

from nico.api.app import build_context, create_app
from nico.api.errors import DB_UNAVAILABLE
from nico.config import Settings, load_settings
from nico.db.engine import libpq_url
from tests.conftest import TEST_SECRET
from tests.support.auth import bearer
from tests.support.net import free_port
from tests.support.waiting import wait_for

ORG = "outage-org"
BASE = f"/v2/org/{ORG}/nico"
INTERNALS = ("Error", "psycopg", "127.0.0.1", "connection", "socket", "Traceback", "port")


def data_operations(app: Any) -> list[tuple[str, str]]:
    """Every tenant API operation as (method, path) with the org and ids filled in."""
    operations = []
    for path, item in app.openapi()["paths"].items():
        if not path.startswith("/v2/") or path.endswith("/metadata"):
            continue  # /metadata is the build's version: no data
        filled = path.replace("{org}", ORG)
        while "{" in filled:
            start = filled.index("{")
            filled = filled[:start] + str(uuid.uuid4()) + filled[filled.index("}", start) + 1 :]
        for method, operation in item.items():
            operations.append((method.upper(), filled + required_query(operation)))
    return operations


def required_query(operation: dict[str, Any]) -> str:
    """A query string giving each required query parameter its first declared value (a fresh UUID for
    an id), so that the request reaches the database instead of being refused for what it lacks."""
    pairs = [
        f"{p['name']}={p['schema']['enum'][0] if 'enum' in p['schema'] else uuid.uuid4()}"
        for p in operation.get("parameters", [])
        if p.get("in") == "query" and p.get("required")
    ]
    return "?" + "&".join(pairs) if pairs else ""


@pytest_asyncio.fixture
async def unreachable(data_dir: Path) -> AsyncIterator[tuple[Any, Settings]]:
    """The app against a database nobody listens for."""
    url = f"postgresql+psycopg://nico@127.0.0.1:{free_port()}/nico"
    settings = load_settings(database_url=url, data_dir=data_dir, auth={"hs256_secret": TEST_SECRET})
    app = create_app(settings, context=build_context(settings, url), owns_context=True)
    async with app.router.lifespan_context(app):
        yield app, settings


async def test_every_data_endpoint_answers_503_in_the_envelope_while_the_database_is_down(
    unreachable: tuple[Any, Settings],
) -> None:
    app, settings = unreachable
    operations = data_operations(app)
    assert len(operations) > 20
    headers = {**bearer(settings, ORG, "TENANT_ADMIN", "PROVIDER_ADMIN"), "Content-Type": "application/json"}
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    answers: dict[str, int] = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://nico.test") as client:
        for method, path in operations:
            response = await client.request(method, path, headers=headers, content=b"{}")
            answers[f"{method} {path}"] = response.status_code
            if response.status_code == 400:
                continue  # the body was refused before anything needed the database
            assert response.status_code == 503, (method, path, response.text)
            body = response.json()
            assert body == {"source": "nico", "message": DB_UNAVAILABLE, "data": None}
    reads = [k for k, status in answers.items() if k.startswith(("GET", "DELETE"))]
    refused = {k: answers[k] for k in reads if answers[k] != 503}
    assert reads and not refused, refused


async def test_readyz_says_503_without_the_exception_text(
    unreachable: tuple[Any, Settings], caplog: pytest.LogCaptureFixture
) -> None:
    app, _ = unreachable
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://nico.test") as client:
        response = await client.get("/readyz")
    assert response.status_code == 503
    message = response.json()["message"]
    assert message == "database unreachable"
    for word in INTERNALS:
        assert word not in response.text
    assert any("OperationalError" in r.getMessage() for r in caplog.records)  # the detail is logged


async def test_connections_the_server_closed_while_pooled_cost_no_request(
    app: Any, settings: Settings, database_url: str, client: httpx.AsyncClient
) -> None:
    """Both pools (the engine's and the raw one) hold connections whose backends are then
    terminated, as a database restart does: every later request must still succeed."""
    headers = bearer(settings, ORG)
    ctx = app.state.ctx

    async def burst() -> list[int]:
        calls = []
        for _ in range(6):
            calls.append(client.get(f"{BASE}/vpc", headers=headers))  # sessions on the engine
            calls.append(client.get(f"{BASE}/instance/{uuid.uuid4()}", headers=headers))  # raw pool
        return [r.status_code for r in await asyncio.gather(*calls)]

    await burst()
    assert ctx.raw._opened > 1 and ctx.engine.pool.checkedin() > 1  # both pools hold connections
    with psycopg.connect(libpq_url(database_url), autocommit=True) as admin:
        others = "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        killed = admin.execute(f"SELECT count(pg_terminate_backend(pid)) {others}").fetchone()
        assert killed is not None and killed[0] > 1

        def gone() -> bool:  # pg_terminate_backend only signals: wait for the backends to exit
            left = admin.execute(f"SELECT count(*) {others}").fetchone()
            return left is not None and left[0] == 0

        await wait_for(gone, within=30, what="terminated backends exit")
    statuses = await burst()
    assert statuses.count(500) + statuses.count(503) == 0, statuses
