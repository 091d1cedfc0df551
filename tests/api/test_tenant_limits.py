"""A tenant's limits at a site (``[quotas]``): logical partitions and NVLink changes in flight never
pass their quota, even when the creates race (they run concurrently through the API on real
PostgreSQL), and fabric-changing requests over the tenant's rate get 429 with ``Retry-After``. Every
refusal is the error envelope with a message naming the limit, and changes nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api import messages
from nico.api.app import build_context, create_app
from nico.api.context import AppContext
from nico.api.routers import hot_routes
from nico.config import QuotaConfig, QuotaLimits
from nico.db.models import Instance, LogicalPartition, Machine
from nico.logical_partition.service import partition_quota_reached
from nico.services.fabric_rate import rate_exceeded
from nico.services.quotas import changes_quota_reached
from tests.api.conftest import BASE, instance_body
from tests.support import factories as f
from tests.support.state import fingerprint

PARTITION = f"{BASE}/nvlink-logical-partition"
INSTANCE = f"{BASE}/instance"
ROOMY = {"fabric_requests_per_second": 1000.0, "fabric_request_burst": 1000}


def limits(monkeypatch: pytest.MonkeyPatch, app_context: AppContext, **quotas: object) -> QuotaConfig:
    """The app's ``[quotas]`` for this test (the routes read them on every request)."""
    config = QuotaConfig.model_validate(quotas)
    monkeypatch.setattr(app_context.settings, "quotas", config)
    return config


async def count(session: AsyncSession, model: type[LogicalPartition] | type[Instance]) -> int:
    return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def settle_all(session: AsyncSession) -> None:
    """What the reconciler writes when the fabric holds every instance's NVLink config."""
    await session.execute(text("UPDATE instance SET nvlink_applied_version = nvlink_config_version"))
    await session.commit()


async def test_concurrent_partition_creates_never_pass_the_quota(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
    app_context: AppContext,
) -> None:
    limits(monkeypatch, app_context, logical_partitions=3, **ROOMY)
    bodies = [{"name": f"lp-{n}", "siteId": str(world.site.id)} for n in range(12)]
    answers = await asyncio.gather(*(client.post(PARTITION, json=b, headers=headers) for b in bodies))
    assert Counter(r.status_code for r in answers) == {201: 3, 403: 9}
    refused = next(r for r in answers if r.status_code == 403)
    assert refused.json() == {
        "source": "nico",
        "message": partition_quota_reached(3, world.site.id),
        "data": None,
    }
    assert "quotas.logical_partitions" in refused.json()["message"]
    assert await count(session, LogicalPartition) == 3


async def test_a_per_org_exception_overrides_the_default(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    monkeypatch: pytest.MonkeyPatch,
    app_context: AppContext,
) -> None:
    limits(
        monkeypatch, app_context, logical_partitions=0, orgs={"tenant-org": QuotaLimits(logical_partitions=1)}
    )
    site = str(world.site.id)
    assert (
        await client.post(PARTITION, json={"name": "lp-1", "siteId": site}, headers=headers)
    ).status_code == 201
    refused = await client.post(PARTITION, json={"name": "lp-2", "siteId": site}, headers=headers)
    assert (refused.status_code, refused.json()["message"]) == (
        403,
        partition_quota_reached(1, world.site.id),
    )


async def test_concurrent_instance_creates_never_pass_the_changes_in_flight_quota(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
    app_context: AppContext,
) -> None:
    limits(monkeypatch, app_context, nvlink_changes_in_flight=2, **ROOMY)
    bodies = [instance_body(world, name=f"node-{n}") for n in range(6)]
    answers = await asyncio.gather(*(client.post(INSTANCE, json=b, headers=headers) for b in bodies))
    assert Counter(r.status_code for r in answers) == {201: 2, 409: 4}, [r.text for r in answers]
    refused = next(r for r in answers if r.status_code == 409).json()
    assert refused["source"] == "nico" and refused["data"] is None
    assert refused["message"] == changes_quota_reached(3, 2, world.site.id)
    assert await count(session, Instance) == 2
    assigned = await session.scalar(select(func.count()).where(Machine.instance_id.is_not(None)))
    assert assigned == 2
    # Once the fabric has settled them, the tenant may start as many again.
    await settle_all(session)
    again = await asyncio.gather(
        *(
            client.post(INSTANCE, json=instance_body(world, name=f"more-{n}"), headers=headers)
            for n in range(3)
        )
    )
    assert Counter(r.status_code for r in again) == {201: 2, 409: 1}


async def test_an_nvlink_change_over_the_changes_in_flight_quota_is_refused_and_changes_nothing(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
    app_context: AppContext,
) -> None:
    limits(monkeypatch, app_context, nvlink_changes_in_flight=1, **ROOMY)
    lp = await client.post(PARTITION, json={"name": "lp-1", "siteId": str(world.site.id)}, headers=headers)
    first = await client.post(INSTANCE, json=instance_body(world, name="first"), headers=headers)
    assert first.status_code == 201
    await settle_all(session)
    second = await client.post(INSTANCE, json=instance_body(world, name="second"), headers=headers)
    assert second.status_code == 201  # one in flight: the limit
    change = {"nvLinkInterfaces": [{"nvLinkLogicalPartitionId": lp.json()["id"], "deviceInstance": 0}]}
    before = await fingerprint(session)
    refused = await client.patch(f"{INSTANCE}/{first.json()['id']}", json=change, headers=headers)
    assert refused.status_code == 409, refused.text
    assert refused.json()["message"] == changes_quota_reached(2, 1, world.site.id)
    assert await fingerprint(session) == before
    # A change that moves no NVLink interface is no fabric change: not held to the quota.
    renamed = await client.patch(
        f"{INSTANCE}/{first.json()['id']}", json={"name": "renamed"}, headers=headers
    )
    assert renamed.status_code == 200, renamed.text
    await settle_all(session)
    accepted = await client.patch(f"{INSTANCE}/{first.json()['id']}", json=change, headers=headers)
    assert accepted.status_code == 200, accepted.text


async def test_fabric_requests_over_the_rate_get_429_with_retry_after_and_change_nothing(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
    app_context: AppContext,
) -> None:
    quotas = limits(monkeypatch, app_context, fabric_requests_per_second=0.01, fabric_request_burst=2)
    site = str(world.site.id)
    for n in range(2):
        made = await client.post(PARTITION, json={"name": f"lp-{n}", "siteId": site}, headers=headers)
        assert made.status_code == 201
    before = await fingerprint(session)
    refused = await client.post(PARTITION, json={"name": "lp-2", "siteId": site}, headers=headers)
    assert refused.status_code == 429
    assert refused.json() == {"source": "nico", "message": rate_exceeded(quotas), "data": None}
    assert "quotas.fabric_requests_per_second" in refused.json()["message"]
    # One token comes back in 1 / 0.01 s: the client is told to wait that long (whole seconds).
    assert 90 <= int(refused.headers["Retry-After"]) <= 100
    for method, path, body in [
        ("POST", INSTANCE, instance_body(world)),
        ("DELETE", f"{PARTITION}/{made.json()['id']}", None),
        ("DELETE", f"{INSTANCE}/{uuid.uuid4()}", {}),
    ]:
        answer = await client.request(method, path, json=body, headers=headers)
        assert (answer.status_code, answer.json()["message"]) == (429, rate_exceeded(quotas)), method + path
        assert int(answer.headers["Retry-After"]) >= 1
    assert await fingerprint(session) == before
    # Reads and changes that touch no fabric are not counted.
    assert (await client.get(PARTITION, headers=headers)).status_code == 200
    renamed = await client.patch(f"{PARTITION}/{made.json()['id']}", json={"name": "lp-x"}, headers=headers)
    assert renamed.status_code == 200


async def test_every_api_replica_draws_from_the_same_bucket(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    monkeypatch: pytest.MonkeyPatch,
    app_context: AppContext,
    app: FastAPI,
    database_url: str,
) -> None:
    limits(monkeypatch, app_context, fabric_requests_per_second=0.01, fabric_request_burst=2)
    other_context = build_context(app_context.settings, database_url)
    replica = create_app(app_context.settings, context=other_context)
    try:
        transport = httpx.ASGITransport(app=replica)
        async with httpx.AsyncClient(transport=transport, base_url="http://nico.test") as other:
            site = str(world.site.id)
            statuses = []
            for n, caller in enumerate([client, other, client, other]):
                answer = await caller.post(
                    PARTITION, json={"name": f"lp-{n}", "siteId": site}, headers=headers
                )
                statuses.append(answer.status_code)
            assert statuses == [201, 201, 429, 429]
    finally:
        await other_context.close()


async def test_the_hoisted_create_checks_as_the_router_did_in_its_order(
    app: FastAPI,
    client: httpx.AsyncClient,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
    app_context: AppContext,
) -> None:
    """``POST /instance`` is served ahead of the routers (``HOT_ROUTES``); its checks run by hand in the
    order the route's dependencies ran: the token, the role, the body, the rate; and a refusal of
    any of them spends no token and changes nothing."""
    hoisted = [route.path for route in hot_routes(app.state.tenant_prefix) if "POST" in route.methods]
    assert hoisted == ["/v2/org/{org}/nico/instance"]
    quotas = limits(monkeypatch, app_context, fabric_requests_per_second=0.01, fabric_request_burst=1)
    before = await fingerprint(session)
    body = instance_body(world)
    assert (await client.post(INSTANCE, json=body)).status_code == 401
    provider = {"Authorization": headers["Authorization"]}
    assert (
        await client.post("/v2/org/other-org/nico/instance", json=body, headers=provider)
    ).status_code == 403
    unreadable = await client.post(
        INSTANCE, content=b"{", headers=headers | {"content-type": "application/json"}
    )
    assert unreadable.status_code == 400
    invalid = await client.post(INSTANCE, json=body | {"name": ""}, headers=headers)
    assert invalid.status_code == 400 and invalid.json()["message"] == messages.INSTANCE_CREATE_INVALID
    assert await fingerprint(session) == before
    made = await client.post(INSTANCE, json=body, headers=headers)  # the one token of the burst
    assert made.status_code == 201, made.text
    # The body is checked before the rate: an invalid body is a 400 even with the bucket empty.
    again = await client.post(INSTANCE, json=body | {"name": ""}, headers=headers)
    assert again.status_code == 400 and again.json()["message"] == messages.INSTANCE_CREATE_INVALID
    refused = await client.post(INSTANCE, json=instance_body(world, name="inst-2"), headers=headers)
    assert (refused.status_code, refused.json()["message"]) == (429, rate_exceeded(quotas))
    # The list of the same path still reaches the router.
    listed = await client.get(INSTANCE, headers=headers)
    assert listed.status_code == 200 and [i["id"] for i in listed.json()] == [made.json()["id"]]
