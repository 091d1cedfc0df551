"""The end every list endpoint shares: a service's page of views, each rendered by its schema, answered
with the ``X-Pagination`` header (spec §1.4). The endpoint parses its filters and page (``paging`` or
``parse_page``, where the reference checks the page after the resource) and names the service call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from pydantic import BaseModel
from starlette.responses import Response

from nico.api.pagination import Page
from nico.api.rendering import paged_response

View = TypeVar("View")


async def render_page(
    page: Page, found: Awaitable[tuple[Sequence[View], int]], render: Callable[[View], BaseModel]
) -> Response:
    """``found`` (a service call answering the page's views and how many match in all) answered as
    ``render(view)`` for each view (a schema's ``of``), with the header for ``page``."""
    views, total = await found
    return paged_response([render(view) for view in views], page, total)
