"""Query parameters, declared once: each :class:`QueryParam` holds a parameter's name, schema and the
error a bad value answers; a route declares its parameters in the OpenAPI document from the objects
its handler reads them with (``openapi_extra=declared(...)``), so the document and the handler name
the same parameters (tests/api/test_query_contract.py walks every route both ways)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from nico.api.errors import stating_error
from nico.api.pagination import INTEGER, page_declarations
from nico.api.parsing import GO_FALSE, GO_TRUE, NUL_TEXT, list_param, parse_go_bool, parse_uuid, single_param
from nico.services.errors import ServiceError, bad_request

# Go's strconv.ParseBool spellings, which the server accepts: a client sends `true` or `false`.
BOOLEAN = {"type": "string", "enum": sorted(GO_TRUE | GO_FALSE, key=lambda s: (s.lower() != "true", s))}
TEXT = {"type": "string", "pattern": "^[^\\u0000]*$"}
UUID = {"type": "string", "format": "uuid"}
INT32 = {"type": "integer", "format": "int32", "minimum": -(2**31), "maximum": 2**31 - 1}


@dataclass(frozen=True)
class QueryParam:
    """One query parameter: ``schema`` for one value (``repeat``: the key may be given again, the
    reference's lists), ``error`` the answer to a value the schema refuses (``{value}``: the value)."""

    name: str
    schema: dict[str, Any]
    description: str
    error: str | None = None
    status: int = 400
    repeat: bool = False
    required: bool = False
    allow_empty: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # schema keys beside the value's (deprecated, ...)

    def parameter(self) -> dict[str, Any]:
        """The parameter's OpenAPI declaration."""
        value = self.schema
        if self.allow_empty and not self.required:  # an empty value reads as none
            value = {"anyOf": [value, {"type": "string", "maxLength": 0}]}
        schema = {"type": "array", "items": value} if self.repeat else dict(value)
        description = self.description
        if self.error is not None:
            description = stating_error(description, self.status, self.error)
        declared = {"name": self.name, "in": "query", "required": self.required, "schema": schema}
        return {**declared, "description": description, **self.extra}

    def value(self, request: Request) -> str | None:
        """The first value given (the reference binds single-valued parameters so), NUL refused."""
        return _no_nul(self.name, single_param(request, self.name))

    def values(self, request: Request) -> list[str]:
        return [_no_nul(self.name, v) or "" for v in list_param(request, self.name)]

    def given(self, request: Request) -> str | None:
        """The first value; None when absent, or empty where ``allow_empty``."""
        raw = self.value(request)
        return None if raw == "" and self.allow_empty else raw

    def uuid_value(self, request: Request) -> uuid.UUID | None:
        """The first value given as a UUID, or ``error``."""
        raw = self.given(request)
        return None if raw is None else self._parsed(raw)

    def int_value(self, request: Request) -> int | None:
        """The first value given as an integer (strconv.Atoi's spellings), or ``error``."""
        raw = self.given(request)
        if raw is None:
            return None
        if not INTEGER.match(raw):
            raise self.refused(raw)
        return int(raw)

    def uuid_values(self, request: Request) -> list[uuid.UUID]:
        """Every value as a UUID; the first that is not one answers ``error``."""
        return [self._parsed(raw) for raw in self.values(request)]

    def _parsed(self, raw: str) -> uuid.UUID:
        parsed = parse_uuid(raw)
        if parsed is None:
            raise self.refused(raw)
        return parsed

    def refused(self, raw: str, data: dict[str, Any] | None = None) -> ServiceError:
        """The answer to ``raw``, a value this parameter does not take."""
        assert self.error is not None, self.name
        return ServiceError(self.status, self.error.format(value=raw), data)

    def boolean(self, request: Request, default: bool = False) -> bool:
        given = self.maybe_boolean(request)
        return default if given is None else given

    def maybe_boolean(self, request: Request) -> bool | None:
        """The first value given in Go's ``strconv.ParseBool`` spellings, or ``error``."""
        raw = self.given(request)
        if raw is None:
            return None
        parsed = parse_go_bool(raw)
        if parsed is None:
            raise self.refused(raw)
        return parsed


def _no_nul(name: str, value: str | None) -> str | None:
    if value is not None and "\x00" in value:  # PostgreSQL cannot compare text holding NUL
        raise bad_request(f"Invalid value specified for `{name}` query param", {name: NUL_TEXT})
    return value


def text(name: str, description: str, *, repeat: bool = False) -> QueryParam:
    return QueryParam(name, TEXT, description, repeat=repeat)


def uuids(name: str, description: str, error: str, *, repeat: bool = True, status: int = 400) -> QueryParam:
    return QueryParam(name, UUID, description, error, status, repeat=repeat)


def flag(name: str, description: str, error: str | None = None) -> QueryParam:
    return QueryParam(
        name, BOOLEAN, description, error or f"Invalid value specified for `{name}` query param"
    )


def choice(
    name: str, allowed: Iterable[str], description: str, error: str, *, repeat: bool = True
) -> QueryParam:
    return QueryParam(name, {"type": "string", "enum": sorted(allowed)}, description, error, repeat=repeat)


def integer(name: str, description: str, error: str, *, repeat: bool = False) -> QueryParam:
    """An integer the database compares with an ``integer`` column (a larger one is refused there)."""
    return QueryParam(name, INT32, description, error, repeat=repeat)


# The reference's free-text search, as every list but the machines' has it.
SEARCH = text("query", "Free text matched against name, description and status")


def page_params(order_fields: Iterable[str]) -> tuple[QueryParam, ...]:
    """``pageNumber``, ``pageSize`` and ``orderBy`` of a route that reads them itself
    (``pagination.parse_page``, where the reference checks the page after the resource), declared as
    ``parsing.paging`` declares them."""
    declarations = page_declarations(frozenset(order_fields))
    return tuple(QueryParam(name, schema, about) for name, (schema, about) in declarations.items())


def declared(*params: QueryParam | Iterable[QueryParam], **extra: Any) -> dict[str, Any]:
    """``openapi_extra`` declaring ``params`` (in the order the handler checks them); ``extra`` is the
    rest of the route's ``openapi_extra`` (a body, say: ``declared(P, **json_body(M))``)."""
    flat: list[QueryParam] = []
    for item in params:
        flat.extend([item] if isinstance(item, QueryParam) else item)
    return {"parameters": [p.parameter() for p in flat], **extra}
