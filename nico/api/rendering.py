"""Turning response models into HTTP responses quickly (pydantic serialises; no re-validation)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, TypeAdapter
from starlette.responses import PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from nico.api.pagination import Page, page_response

DELETION_ACCEPTED = "Deletion request was accepted"

_adapters: dict[type, TypeAdapter[list[BaseModel]]] = {}


def json_response(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


def dump_list(items: Sequence[BaseModel]) -> bytes:
    if not items:
        return b"[]"
    kind = type(items[0])
    adapter = _adapters.get(kind)
    if adapter is None:
        adapter = _adapters[kind] = TypeAdapter(list[kind])  # type: ignore[valid-type]
    return adapter.dump_json(list(items), by_alias=True)


def list_response(items: Sequence[BaseModel], status: int = 200) -> Response:
    return Response(dump_list(items), status_code=status, media_type="application/json")


class RenderedWhenSent(Response):
    """A JSON response whose body is built when it is sent, not when the handler returns: after the
    request's transaction has committed (the session dependency commits in between), so the locks a
    create holds to its commit (the tenant's quota, last) are not held while its response is built."""

    media_type = "application/json"

    def __init__(self, render: Callable[[], bytes], status_code: int) -> None:
        super().__init__(b"", status_code=status_code)
        self._render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.body = self._render()
        self.headers["content-length"] = str(len(self.body))  # other headers stay as set
        await super().__call__(scope, receive, send)


def json_response_when_sent(build: Callable[[], BaseModel], status: int = 200) -> Response:
    """:func:`json_response` of ``build()``, built after the commit (:class:`RenderedWhenSent`)."""
    return RenderedWhenSent(lambda: build().model_dump_json().encode(), status)


def list_response_when_sent(build: Callable[[], Sequence[BaseModel]], status: int = 200) -> Response:
    """:func:`list_response` of ``build()``, built after the commit (:class:`RenderedWhenSent`)."""
    return RenderedWhenSent(lambda: dump_list(build()), status)


def paged_response(items: Sequence[BaseModel], page: Page, total: int) -> Response:
    return page_response(dump_list(items), page, total)


def deletion_accepted() -> Response:
    return PlainTextResponse(DELETION_ACCEPTED, status_code=202)
