"""``pageNumber``/``pageSize``/``orderBy`` parsing and the ``X-Pagination`` header (spec §1.4)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from fastapi import Request
from starlette.responses import Response

from nico.api.errors import stating_error
from nico.services.errors import bad_request

ORDER_BY = re.compile(r"^[A-Z0-9_]+_(ASC|DESC)$")
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
# The reference states no upper bound; Go's int would overflow the SQL offset (bigint) far below 2**63.
# nico's bound is documented in docs/compatibility.md ("Input limits").
MAX_PAGE_NUMBER = 2**31 - 1
INTEGER = re.compile(r"^[+-]?[0-9]+$")  # strconv.Atoi's spellings: no spaces, no underscores

# What every paged list answers beside its items, as the OpenAPI document declares it: the route's
# ``responses=PAGED`` (the header itself is set by :func:`page_response`).
PAGED: dict[int | str, dict[str, Any]] = {
    200: {
        "headers": {
            "X-Pagination": {
                "description": "The page answered and the total count, as JSON: "
                '`{"pageNumber":1,"pageSize":20,"total":57,"orderBy":null}` '
                "(`orderBy` as the query gave it).",
                "required": True,
                "schema": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": {
                        "type": "object",
                        "properties": {
                            "pageNumber": {"type": "integer", "minimum": 1},
                            "pageSize": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE},
                            "total": {"type": "integer", "minimum": 0},
                            "orderBy": {"type": ["string", "null"]},
                        },
                        "required": ["pageNumber", "pageSize", "total", "orderBy"],
                    },
                },
            }
        }
    }
}


PAGE_PARSE_ERROR = "Failed to parse request pagination data"
PAGE_INVALID = "Failed to validate pagination request data"


def page_declarations(order_fields: frozenset[str] | set[str]) -> dict[str, tuple[dict[str, Any], str]]:
    """``pageNumber``, ``pageSize`` and ``orderBy`` as the OpenAPI document declares them: each one's
    schema and description, which states the error a value outside the schema answers (``orderBy``: the
    fields ``page_of`` can parse, no dots)."""
    orders = sorted(
        f"{f.upper()}_{way}"
        for f in order_fields
        for way in ("ASC", "DESC")
        if ORDER_BY.match(f"{f.upper()}_ASC")
    )
    return {
        "pageNumber": (
            {"type": "integer", "minimum": 0, "maximum": MAX_PAGE_NUMBER},
            stating_error("1 and up; 0 or absent: 1", 400, PAGE_PARSE_ERROR),
        ),
        "pageSize": (
            {"type": "integer", "minimum": 0, "maximum": MAX_PAGE_SIZE},
            stating_error(f"1..{MAX_PAGE_SIZE}; 0 or absent: {DEFAULT_PAGE_SIZE}", 400, PAGE_PARSE_ERROR),
        ),
        "orderBy": (
            {"type": "string", "enum": orders},
            stating_error("<FIELD>_ASC or <FIELD>_DESC", 400, PAGE_INVALID),
        ),
    }


@dataclass(frozen=True)
class Page:
    number: int = 1
    size: int = DEFAULT_PAGE_SIZE
    order_field: str = "created"
    descending: bool = False
    order_by_raw: str | None = None

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.size

    def header(self, total: int) -> str:
        return json.dumps(
            {"pageNumber": self.number, "pageSize": self.size, "total": total, "orderBy": self.order_by_raw},
            separators=(",", ":"),
        )


def parse_page(request: Request, allowed_fields: frozenset[str] | set[str]) -> Page:
    params = request.query_params
    return page_of(params.get("pageNumber"), params.get("pageSize"), params.get("orderBy"), allowed_fields)


def page_of(
    raw_number: str | None,
    raw_size: str | None,
    raw_order: str | None,
    allowed_fields: frozenset[str] | set[str],
) -> Page:
    """The page the raw query values ask for, checked like the reference (spec §1.4)."""
    try:
        number = _integer(raw_number)
        size = _integer(raw_size)
    except ValueError:
        raise bad_request(PAGE_PARSE_ERROR) from None
    errors: dict[str, str] = {}
    if number < 0:
        errors["pageNumber"] = "must be greater than 0"
    elif number > MAX_PAGE_NUMBER:
        errors["pageNumber"] = f"must be less than or equal to: {MAX_PAGE_NUMBER}"
    if size < 0:
        errors["pageSize"] = "must be greater than 0"
    elif size > MAX_PAGE_SIZE:
        errors["pageSize"] = f"must be less that or equal to: {MAX_PAGE_SIZE}"
    field, descending = "created", False
    if raw_order is not None:
        match = ORDER_BY.match(raw_order)
        if not match:
            errors["orderBy"] = "must be in the format of field_ASC or field_DESC"
        else:
            field = raw_order[: raw_order.rfind("_")].lower()
            descending = match.group(1) == "DESC"
    if errors:
        raise bad_request(PAGE_INVALID, errors)
    if field not in allowed_fields:
        raise bad_request(PAGE_INVALID, {})
    return Page(
        number=number or 1,
        size=size or DEFAULT_PAGE_SIZE,
        order_field=field,
        descending=descending,
        order_by_raw=raw_order,
    )


def _integer(raw: str | None) -> int:
    if raw is None or raw == "":
        return 0
    if len(raw) > 20 or not INTEGER.match(raw):
        raise ValueError(raw)
    return int(raw)


def page_response(
    body: bytes, page: Page, total: int, extra_headers: dict[str, Any] | None = None
) -> Response:
    response = Response(body, media_type="application/json")
    response.headers["X-Pagination"] = page.header(total)
    for key, value in (extra_headers or {}).items():
        response.headers[key] = str(value)
    return response


def newest_first(page: Page) -> Page:
    """``page``, ordered newest first when the caller gave no ``orderBy`` (as status histories are)."""
    return page if page.order_by_raw is not None else replace(page, order_field="created", descending=True)
