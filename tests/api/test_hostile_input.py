"""Every class of hostile input answers 400 with the envelope naming the field, never a 5xx (issue 10)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from nico.api.pagination import MAX_PAGE_NUMBER
from nico.api.parsing import USER_DATA_MAX
from tests.api.conftest import BASE, instance_body
from tests.support import factories as f

PARTITION = f"{BASE}/nvlink-logical-partition"
INSTANCE = f"{BASE}/instance"


@dataclass(frozen=True)
class Hostile:
    name: str
    method: str
    path: str
    field: str  # the key the envelope's data must name
    json: Any = None
    content: bytes | None = None
    params: dict[str, str] | None = None


def site_body(world: f.NvlinkSite, **extra: Any) -> dict[str, Any]:
    return {"name": "lp-1", "siteId": str(world.site.id), **extra}


def cases(world: f.NvlinkSite) -> list[Hostile]:
    deep = b'{"name": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    return [
        Hostile("NUL in a body string", "POST", PARTITION, "name", json=site_body(world, name="a\x00b")),
        Hostile(
            "NUL in a nested body string",
            "POST",
            INSTANCE,
            "interfaces[0].subnetId",
            json=instance_body(world, interfaces=[{"subnetId": "\x00"}]),
        ),
        Hostile("NUL in ?name=", "GET", INSTANCE, "name", params={"name": "a\x00"}),
        Hostile("NUL in ?query=", "GET", PARTITION, "query", params={"query": "\x00"}),
        Hostile(
            "lone surrogate (escape)",
            "POST",
            PARTITION,
            "name",
            content=b'{"name": "ab\\ud800", "siteId": "' + str(world.site.id).encode() + b'"}',
        ),
        Hostile(
            "lone surrogate (raw UTF-8 bytes)",
            "POST",
            PARTITION,
            "description",
            content=b'{"name": "lp-1", "description": "\xed\xa0\x80", "siteId": "'
            + str(world.site.id).encode()
            + b'"}',
        ),
        Hostile("100,000 nested arrays", "POST", PARTITION, "__all__", content=deep),
        Hostile("pageNumber 2**62", "GET", PARTITION, "pageNumber", params={"pageNumber": str(2**62)}),
        Hostile("pageNumber 2**63", "GET", INSTANCE, "pageNumber", params={"pageNumber": str(2**63)}),
        Hostile(
            "pageNumber just over the cap",
            "GET",
            PARTITION,
            "pageNumber",
            params={"pageNumber": str(MAX_PAGE_NUMBER + 1)},
        ),
        Hostile(
            "userData over the cap",
            "POST",
            INSTANCE,
            "userData",
            json=instance_body(world, userData="u" * (USER_DATA_MAX + 1)),
        ),
        Hostile(
            "1 MB partition description",
            "POST",
            PARTITION,
            "description",
            json=site_body(world, description="d" * 1_000_000),
        ),
        Hostile("pageSize -1", "GET", PARTITION, "pageSize", params={"pageSize": "-1"}),
    ]


async def test_no_hostile_input_gives_a_5xx(
    client: httpx.AsyncClient, world: f.NvlinkSite, headers: dict[str, str]
) -> None:
    answers = {}
    for case in cases(world):
        request_headers = dict(headers)
        if case.content is not None:
            request_headers["Content-Type"] = "application/json"
        response = await client.request(
            case.method,
            case.path,
            json=case.json,
            content=case.content,
            params=case.params,
            headers=request_headers,
        )
        answers[case.name] = (response.status_code, response.json())
    server_errors = {name: answer for name, answer in answers.items() if answer[0] >= 500}
    assert server_errors == {}
    for case in cases(world):
        status, body = answers[case.name]
        assert status == 400, (case.name, body)
        assert set(body) == {"source", "message", "data"}, case.name
        assert case.field in (body["data"] or {}), (case.name, body)


@pytest.mark.parametrize("size", ["0", ""])
async def test_page_size_zero_is_the_default_and_negative_is_refused(
    client: httpx.AsyncClient, world: f.NvlinkSite, headers: dict[str, str], size: str
) -> None:
    """The reference's rule (spec §1.4): zero (or empty) means the default 20, negatives are refused."""
    ok = await client.get(PARTITION, params={"pageSize": size}, headers=headers)
    assert ok.status_code == 200 and '"pageSize":20' in ok.headers["X-Pagination"]
    refused = await client.get(PARTITION, params={"pageSize": "-1"}, headers=headers)
    assert refused.status_code == 400 and refused.json()["data"] == {"pageSize": "must be greater than 0"}


async def test_a_405_names_every_method_of_the_path(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    """Not only the methods of the first route that matched the path (POST, for ``/allocation``)."""
    response = await client.put(f"{BASE}/allocation", headers=headers)
    assert response.status_code == 405 and response.headers["Allow"] == "GET, POST"
    assert response.json()["message"] == "Method Not Allowed"
