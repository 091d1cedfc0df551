"""Turning response models into HTTP responses quickly (pydantic serialises; no re-validation)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, TypeAdapter
from starlette.responses import PlainTextResponse, Response

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


def paged_response(items: Sequence[BaseModel], page: Page, total: int) -> Response:
    return page_response(dump_list(items), page, total)


def deletion_accepted() -> Response:
    return PlainTextResponse(DELETION_ACCEPTED, status_code=202)
