"""The query parameters the OpenAPI document declares are the ones the server reads, both ways: every
operation that reads or declares any is called (with each role) while the names it looks up in the
query string are recorded, and must equal the declared names; each declared parameter given a value
its schema refuses answers the error its declaration states. The tenant filters of the reference
(spec §3.3, §4.4, §5.5, §7.4) are among the declared."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from starlette.datastructures import ImmutableMultiDict, QueryParams

from nico.config import Settings
from tests.api.conftest import BASE, make_instances
from tests.support import factories as f
from tests.support.auth import bearer

PREFIX = "/v2/org/{org}/nico"
# A stream that never ends: its two parameters are FastAPI's (scope, siteId), read by construction.
STREAMS = {("get", PREFIX + "/nvlink-topology/events")}
STATED_ERROR = re.compile(r"A bad value answers (\d{3}): (.*)$")
# The reference's filters a generated client must be able to send (spec §3.3, §4.4, §5.5, §7.4).
REFERENCE_FILTERS = {
    "/instance": {"siteId", "vpcId", "instanceTypeId", "machineId", "name", "status", "ipAddress", "query"}
    | {"operatingSystemId", "networkSecurityGroupId", "infrastructureProviderId", "includeRelation"},
    "/nvlink-logical-partition": {"siteId", "status", "query", "includeInterfaces", "includeStats"}
    | {"includeVpcs", "includeRelation"},
    "/vpc": {"nvLinkLogicalPartitionId", "siteId", "status", "networkSecurityGroupId", "query"}
    | {"infrastructureProviderId", "includeRelation"},
    "/nvlink-interface": {"instanceId", "nvLinkDomainId", "siteId", "nvLinkLogicalPartitionId", "status"}
    | {"includeRelation"},
}
PAGING = {"pageNumber", "pageSize", "orderBy"}


@pytest.fixture
def looked_up(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """Every name looked up in a request's query string while the test runs; ``*`` for a read of the
    whole query (which would make the declared list meaningless)."""
    names: set[str] = set()

    def by_name(real: Any) -> Any:
        def recorded(self: QueryParams, key: str, *rest: Any) -> Any:
            names.add(key)
            return real(self, key, *rest)

        return recorded

    def whole(real: Any) -> Any:
        def recorded(self: QueryParams, *rest: Any) -> Any:
            names.add("*")
            return real(self, *rest)

        return recorded

    for method in ("getlist", "__getitem__", "__contains__"):
        monkeypatch.setattr(QueryParams, method, by_name(getattr(ImmutableMultiDict, method)))
    for method in ("keys", "values", "items", "multi_items", "__iter__"):
        monkeypatch.setattr(QueryParams, method, whole(getattr(ImmutableMultiDict, method)))
    yield names


def query_parameters(operation: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "query"}


def needed(declared: dict[str, dict[str, Any]], ids: dict[str, str]) -> dict[str, str]:
    """A good value for each required parameter: an id of the world, or the first of its enum."""
    return {
        name: ids[name] if name in ids else p["schema"]["enum"][0]
        for name, p in declared.items()
        if p["required"]
    }


def bad_value(schema: dict[str, Any]) -> str | None:
    """A value the parameter's schema refuses (of one item, for a repeatable one), or None."""
    item = schema.get("items", schema)
    item = item.get("anyOf", [item])[0]  # a value or empty: the value's schema
    if "enum" in item:
        return "Bogus"
    if item.get("format") == "uuid":
        return "not-a-uuid"
    if item.get("type") == "integer":
        return "x"
    return None


async def world_ids(client: httpx.AsyncClient, world: f.NvlinkSite, tenant: dict[str, str]) -> dict[str, str]:
    """A value for every path parameter of a read: the world's objects, one partition, one instance."""
    response = await client.post(
        f"{BASE}/nvlink-logical-partition", json={"name": "lp", "siteId": str(world.site.id)}, headers=tenant
    )
    assert response.status_code == 201, response.text
    partition = uuid.UUID(response.json()["id"])
    (instance,) = await make_instances(client, tenant, world, partition, 1)
    return {
        "siteId": str(world.site.id),
        "instanceTypeId": str(world.instance_type.id),
        "instanceId": str(instance),
        "nvLinkLogicalPartitionId": str(partition),
        "vpcId": str(world.vpc.id),
        "subnetId": str(world.subnet.id),
        "machineId": str(world.machines[0].id),
        "allocationId": str(world.allocation.id),
    }


def operations(app: FastAPI) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """The operations to walk: every read, and every other operation that declares a query parameter."""
    for path, item in app.openapi()["paths"].items():
        if not path.startswith(PREFIX):
            continue
        for method, operation in item.items():
            if (method == "get" or query_parameters(operation)) and (method, path) not in STREAMS:
                yield method, path, operation


@pytest_asyncio.fixture
async def callers(
    client: httpx.AsyncClient, world: f.NvlinkSite, settings: Settings
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Headers of the tenant and of the provider, by org; a value for every path parameter."""
    tenant = bearer(settings, "tenant-org")
    roles = {"tenant-org": tenant, "provider-org": bearer(settings, "provider-org", "PROVIDER_ADMIN")}
    return roles, await world_ids(client, world, tenant)


async def test_every_operation_reads_exactly_the_query_parameters_it_declares(
    app: FastAPI,
    client: httpx.AsyncClient,
    callers: tuple[dict[str, dict[str, str]], dict[str, str]],
    looked_up: set[str],
) -> None:
    roles, ids = callers
    walked = 0
    for method, path, operation in operations(app):
        declared = query_parameters(operation)
        required = needed(declared, ids)
        read: set[str] = set()
        answered, passed = [], False
        for org, headers in roles.items():
            url = path.format(org=org, **ids)
            looked_up.clear()
            response = await client.request(method.upper(), url, params=required, headers=headers)
            answered.append(response.status_code)
            if response.status_code < 400 or (method == "delete" and response.status_code == 403):
                read |= looked_up  # a site with allocations refuses deletion after reading the query
                passed = True
        assert passed, (method, path, answered)  # some role got past every check
        assert read == set(declared), (
            method,
            path,
            "read, undeclared:",
            read - set(declared),
            "declared, unread:",
            set(declared) - read,
        )
        walked += 1
    assert walked >= 30


async def test_a_value_outside_a_declared_schema_answers_the_declared_error(
    app: FastAPI, client: httpx.AsyncClient, callers: tuple[dict[str, dict[str, str]], dict[str, str]]
) -> None:
    roles, ids = callers
    checked = 0
    for method, path, operation in operations(app):
        for name, parameter in query_parameters(operation).items():
            bad = bad_value(parameter["schema"])
            if bad is None:
                continue
            stated = STATED_ERROR.search(parameter.get("description", ""))
            assert stated, (method, path, name, "declares no error")
            status, message = int(stated[1]), stated[2].replace("<value>", bad)
            answers = []
            for org, headers in roles.items():
                params = needed(query_parameters(operation), ids)
                params[name] = bad
                url = path.format(org=org, **ids)
                response = await client.request(method.upper(), url, params=params, headers=headers)
                answers.append((response.status_code, response.json().get("message")))
            assert (status, message) in answers, (method, path, name, answers)
            checked += 1
    assert checked >= 60


def test_the_reference_filters_are_declared(app: FastAPI) -> None:
    paths = app.openapi()["paths"]
    for path, names in REFERENCE_FILTERS.items():
        declared = set(query_parameters(paths[PREFIX + path]["get"]))
        assert names | PAGING <= declared, (path, names - declared)
