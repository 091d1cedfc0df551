"""The front of the app (``nico.api.front``): the hot routes it serves without FastAPI's router answer
what the router answers, exceptions included; and its checks (body size, NUL characters) come before
them as before every other route."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException
from starlette.responses import Response

from nico.api.errors import install_error_handlers
from nico.api.front import Front, FrontRoute
from nico.services.errors import ServiceError
from tests.api.conftest import BASE, instance_body
from tests.support import factories as f


def _raises(exc: Exception) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        raise exc

    return endpoint


async def _fails_after_starting(request: Request) -> Response:
    class Broken(Response):
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            raise ServiceError(404, "too late to answer")

    return Broken()


OUTCOMES: list[tuple[str, Callable[[Request], Any]]] = [
    ("service error", _raises(ServiceError(404, "Instance not found", {"id": "x"}, {"Retry-After": "1"}))),
    ("lost race", _raises(psycopg.errors.SerializationFailure("could not serialize access"))),
    ("database away", _raises(psycopg.OperationalError("connection refused"))),
    ("http error", _raises(HTTPException(418, "teapot"))),
    ("answered", _raises(ServiceError(400, "bad", None))),
]


def _app(endpoint: Callable[[Request], Any], *, front: bool) -> FastAPI:
    """A small app with nico's error handlers and front: ``endpoint`` at ``/v2/org/{org}/x/{id}``, served
    by the front (``front``) or by FastAPI's router."""
    app = FastAPI()
    install_error_handlers(app, "nico")
    hot = [FrontRoute("/v2/org/{org}/x/{id}", endpoint, ["GET"])] if front else []
    app.add_middleware(
        Front, source="nico", limit=100, bulk_limit=100, hot=hot, handlers=app.exception_handlers
    )
    app.add_api_route("/v2/org/{org}/x/{id}", endpoint, methods=["GET"])
    return app


async def _get(app: FastAPI, path: str = "/v2/org/acme/x/1") -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://nico.test") as client:
        return await client.get(path)


@pytest.mark.parametrize(("what", "endpoint"), OUTCOMES, ids=[what for what, _ in OUTCOMES])
async def test_a_hot_route_answers_an_exception_as_the_router_does(
    what: str, endpoint: Callable[[Request], Any]
) -> None:
    routed, served = await _get(_app(endpoint, front=False)), await _get(_app(endpoint, front=True))
    assert (served.status_code, served.content) == (routed.status_code, routed.content), what
    assert served.headers == routed.headers
    assert routed.status_code != 500


async def test_a_hot_route_reads_its_path_parameters() -> None:
    async def echo(request: Request) -> Response:
        return Response(f"{request.path_params['org']}/{request.path_params['id']}")

    served = await _get(_app(echo, front=True), "/v2/org/acme/x/42")
    assert served.text == "acme/42"


@pytest.mark.parametrize("endpoint", [_raises(RuntimeError("a bug")), _fails_after_starting])
async def test_what_no_handler_answers_goes_on_to_the_server_s_error_handling(
    endpoint: Callable[[Request], Any],
) -> None:
    """A bug is FastAPI's outermost layer's (its 500, then the exception raised again for the server to
    log), and so is an exception after the response began: never a second response."""
    for front in (False, True):
        with pytest.raises((RuntimeError, ServiceError)):
            await _get(_app(endpoint, front=front))


async def test_a_hot_route_s_streamed_body_stops_at_the_limit(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite
) -> None:
    """``POST /instance`` is the front's: a body sent without a length, over ``api.max_body_bytes``, is
    413 as anywhere else (its endpoint reads through the front's counting)."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"name": "big", "description": "'
        for _ in range(1200):
            yield b"d" * 1024
        yield b'"}'

    response = await client.post(f"{BASE}/instance", content=chunks(), headers=headers)
    assert response.status_code == 413 and response.json()["message"] == "Request Entity Too Large"
    made = await client.post(f"{BASE}/instance", json=instance_body(world), headers=headers)
    assert made.status_code == 201, made.text


async def test_a_nul_in_a_hot_route_s_query_is_refused_first(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    """The NUL check comes before the hot GET's own checks (which would call the value an unknown
    relation)."""
    response = await client.get(f"{BASE}/instance/{uuid.uuid4()}?includeRelation=a%00", headers=headers)
    assert response.status_code == 400
    assert response.json()["message"] == "Invalid value specified for `includeRelation` query param"


def test_an_app_with_a_status_code_s_handler_is_refused() -> None:
    """Starlette answers an HTTP error by its status code's handler first; the front does not, so an
    app that registers one does not start with a front that would answer otherwise."""
    app = _app(_raises(HTTPException(418, "teapot")), front=True)

    async def teapot(request: Request, exc: Exception) -> Response:
        return Response("short and stout", status_code=418)

    app.add_exception_handler(418, teapot)
    with pytest.raises(ValueError, match="status code"):
        app.build_middleware_stack()
