"""Health, readiness, metrics and the error envelope on every kind of failure."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from nico.api.app import build_context, create_app
from nico.config import Settings
from tests.support import db as testdb
from tests.support.auth import bearer


async def test_healthz_and_readyz(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}


async def test_readyz_is_503_with_the_reason_when_schema_is_not_at_head(settings: Settings) -> None:
    url = testdb.create_database("nico_unmigrated")
    ctx = build_context(settings, url)
    try:
        app = create_app(settings, context=ctx)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            response = await c.get("/readyz")
        assert response.status_code == 503
        assert response.json()["source"] == "nico"
        assert "nico migrate" in response.json()["message"]
    finally:
        await ctx.engine.dispose()
        testdb.drop_database(url)


async def test_readyz_is_503_when_database_is_unreachable(settings: Settings) -> None:
    ctx = build_context(settings, "postgresql+psycopg://nobody:x@127.0.0.1:1/none?connect_timeout=2")
    try:
        app = create_app(settings, context=ctx)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            response = await c.get("/readyz")
        assert response.status_code == 503
        assert response.json()["message"].startswith("database unreachable")
    finally:
        await ctx.engine.dispose()


async def test_metrics_are_prometheus_text(client: httpx.AsyncClient) -> None:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    list(text_string_to_metric_families(response.text))  # parses


@pytest.mark.parametrize(
    "path", ["/nope", "/v2/org/acme/nico/no-such-thing", "/v2/org/acme/carbide/tenant/current"]
)
async def test_unknown_paths_are_404_in_the_envelope_before_auth(
    client: httpx.AsyncClient, path: str
) -> None:
    response = await client.get(path)
    assert response.status_code == 404
    assert response.json() == {
        "source": "nico",
        "message": "The requested path could not be found",
        "data": None,
    }


async def test_wrong_method_is_405_in_the_envelope(client: httpx.AsyncClient) -> None:
    response = await client.delete("/v2/org/acme/nico/tenant/current")
    assert response.status_code == 405
    assert response.json() == {"source": "nico", "message": "Method Not Allowed", "data": None}


async def test_missing_org_in_path_is_400(client: httpx.AsyncClient) -> None:
    response = await client.get("/v2/org//nico/tenant/current")
    assert response.status_code == 400
    assert response.json()["message"] == "Organization name is required in request path"


async def test_bodies_over_10_mb_are_refused(client: httpx.AsyncClient, settings: Settings) -> None:
    headers = bearer(settings, "acme") | {"content-type": "application/json"}
    response = await client.post(
        "/v2/org/acme/nico/tenant", content=b"x" * (10 * 1024 * 1024 + 1), headers=headers
    )
    assert response.status_code == 413
    assert response.json()["message"] == "Request Entity Too Large"


async def test_openapi_and_swagger_ui_are_served(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    assert "/v2/org/{org}/nico/tenant/current" in spec["paths"]
    assert (await client.get("/docs")).status_code == 200
