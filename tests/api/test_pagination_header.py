"""Every list that answers ``X-Pagination`` declares that header in the OpenAPI document, and every
operation that declares it answers it."""

from __future__ import annotations

import json
import re
import uuid

import httpx
from fastapi import FastAPI

from nico.config import Settings
from tests.api.conftest import BASE, instance_body
from tests.support import factories as f
from tests.support.auth import bearer


def fill(path: str, values: dict[str, str]) -> str:
    """``path`` with its parameters from ``values`` (an id nothing has for any other: a 404)."""
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), str(uuid.uuid4())), path)


async def test_every_get_answering_x_pagination_declares_it_and_every_declared_one_answers_it(
    app: FastAPI, client: httpx.AsyncClient, world: f.NvlinkSite, headers: dict[str, str], settings: Settings
) -> None:
    created = await client.post(f"{BASE}/instance", json=instance_body(world), headers=headers)
    assert created.status_code == 201, created.text
    ids = {
        "instanceId": created.json()["id"],
        "siteId": str(world.site.id),
        "machineId": str(world.machines[0].id),
        "instanceTypeId": str(world.instance_type.id),
    }
    callers = {
        "tenant-org": headers,
        "provider-org": bearer(settings, "provider-org", "PROVIDER_ADMIN"),
    }
    document = app.openapi()
    answered: set[str] = set()
    for path, item in document["paths"].items():
        operation = item.get("get")
        if operation is None or not path.startswith("/v2/org/{org}/"):
            continue
        if "text/event-stream" in operation["responses"]["200"].get("content", {}):
            continue  # a stream: never ends, and pages nothing
        declared = "X-Pagination" in operation["responses"]["200"].get("headers", {})
        for org, caller in callers.items():
            values = {**ids, "org": org}
            url = fill(path, values)
            response = await client.get(url, headers=caller)
            if response.status_code != 200:
                continue
            answered.add(operation["operationId"])
            if "x-pagination" in response.headers:
                assert declared, f"{operation['operationId']} answers X-Pagination but does not declare it"
                page = json.loads(response.headers["x-pagination"])
                assert set(page) == {"pageNumber", "pageSize", "total", "orderBy"}
            else:
                assert not declared, f"{operation['operationId']} declares X-Pagination but did not answer it"
    # The walk reached the lists (a broken fixture must not make this pass by calling nothing).
    assert {"get-all-instance", "get-instance-status-history", "get-all-site", "get-all-machine"} <= answered
