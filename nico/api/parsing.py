"""Parsing requests the way the reference does: body shapes, field rules, query parameters.

Parse failures (malformed JSON, wrong JSON types, non-JSON content) answer 400 with
``Failed to parse request data, potentially invalid structure``. Rule failures answer 400 with the
endpoint's own message and a flat ``{field: message}`` map holding the first failure per field.
"""

from __future__ import annotations

import inspect
import json
import re
import uuid
from collections.abc import Iterable
from typing import Annotated, Any, Protocol, TypeVar

from fastapi import Depends, Path, Query, Request
from pydantic import BaseModel, ValidationError, WithJsonSchema

from nico.api.errors import PARSE_ERROR, field_map, stating_error
from nico.api.names import description_characters_problem, name_characters_problem
from nico.api.pagination import (
    Page,
    page_declarations,
    page_of,
)
from nico.services.errors import ServiceError, bad_request

M = TypeVar("M", bound=BaseModel)

GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})

# Common validation texts (spec §1.2).
REQUIRED = "a value is required"
INVALID_UUID = "must be a valid UUID"
NAME_LENGTH = "must be at least 2 characters and maximum 256 characters"
DESCRIPTION_LENGTH = "maximum 1024 characters are allowed in description"
INVALID_HOSTNAME = "invalid hostname"
# Limits the reference does not state, documented in docs/compatibility.md ("Input limits").
DESCRIPTION_MAX = 1024
USER_DATA_MAX = 16384
USER_DATA_LENGTH = f"maximum {USER_DATA_MAX} characters are allowed in userData"
NUL_TEXT = "must not contain NUL characters"
SURROGATE_TEXT = "must not contain unpaired UTF-16 surrogates"
TOO_DEEP = "JSON nesting is too deep"

# The only ways NUL or a lone surrogate reach a JSON string: a \u0000 or surrogate escape, or the UTF-8
# bytes of a surrogate (json decodes bytes with "surrogatepass"). Only a body holding one is walked to
# name the field (a megabyte of other escapes took 40 ms to walk).
_UNSTORABLE = re.compile(rb"\\u(?:0000|[dD][89abcdefABCDEF])|\xed[\xa0-\xbf]")
_HOSTNAME_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


async def read_body(request: Request, model: type[M]) -> M:
    raw = await request.body()
    if not raw.strip():
        data: Any = {}
    else:
        content_type = request.headers.get("content-type", "")
        if "json" not in content_type.lower():
            raise bad_request(PARSE_ERROR)
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise bad_request(PARSE_ERROR) from None
        except RecursionError:  # thousands of nested arrays or objects
            raise bad_request(PARSE_ERROR, {"__all__": TOO_DEEP}) from None
        if _UNSTORABLE.search(raw):
            problem = text_problem(data)
            if problem is not None:
                raise bad_request(PARSE_ERROR, dict([problem]))
    if not isinstance(data, dict):
        raise bad_request(PARSE_ERROR)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise bad_request(PARSE_ERROR, field_map(list(exc.errors()))) from None


def text_problem(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first string (key or value) in ``value`` that PostgreSQL cannot store: ``(field, reason)``."""
    if isinstance(value, str):
        if "\x00" in value:
            return path or "__all__", NUL_TEXT
        try:
            value.encode()
        except UnicodeEncodeError:
            return path or "__all__", SURROGATE_TEXT
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            field = f"{path}.{key}" if path else key
            problem = text_problem(key, field) or text_problem(item, field)
            if problem is not None:
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            problem = text_problem(item, f"{path}[{index}]" if path else f"[{index}]")
            if problem is not None:
                return problem
    return None


class Checked(Protocol):
    """A request body that knows its field rules."""

    def check(self, errors: FieldErrors) -> None: ...


C = TypeVar("C", bound=Checked)


async def read_checked(request: Request, model: type[C], invalid: str, parse_error: str = PARSE_ERROR) -> C:
    """The body bound to ``model`` (400 ``parse_error`` otherwise), then its rules (400 ``invalid`` with
    the field map of the first failure per field)."""
    try:
        body = await read_body(request, model)  # type: ignore[type-var]
    except ServiceError as exc:
        if parse_error == PARSE_ERROR:
            raise
        raise bad_request(parse_error, exc.data) from None
    errors = FieldErrors()
    body.check(errors)
    errors.raise_if_any(invalid)
    return body


def checked_body(model: type[C], invalid: str, parse_error: str = PARSE_ERROR) -> Any:
    """A dependency that answers the handler's body: read, bound, checked (see :func:`read_checked`).

    Declare it as ``Annotated[Model, checked_body(Model, messages.X_INVALID)]``; dependencies run in the
    order of the handler's parameters, so that order is the order of the checks."""

    async def body(request: Request) -> C:
        return await read_checked(request, model, invalid, parse_error)

    return Depends(body)


UUID_PATH = Annotated[str, Path(), WithJsonSchema({"type": "string", "format": "uuid"})]


def path_id(name: str, invalid: str) -> Any:
    """A dependency that answers the UUID in path parameter ``name``; a malformed one answers 400
    ``invalid`` (the resource's own message, see :mod:`nico.api.messages`; ``{value}`` is the raw id).

    The OpenAPI document declares the parameter ``format: uuid``: a request valid by the document is
    never answered 400 for its id, and one the server answers 400 is invalid by the document."""

    async def parsed_id(**path: str) -> uuid.UUID:
        return checked_id(path[name], invalid)

    parsed_id.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=UUID_PATH)],
        return_annotation=uuid.UUID,
    )
    return Depends(parsed_id)


def checked_id(raw: str, invalid: str) -> uuid.UUID:
    """The UUID of a path parameter, or 400 ``invalid`` (what :func:`path_id` answers)."""
    value = parse_uuid(raw)
    if value is None:
        raise bad_request(invalid.format(value=raw))
    return value


# ``pageNumber`` and ``pageSize`` alone, raw, for what comes in a fixed order (no ``orderBy``): the
# domains of the topology in rack order, the export's nodes by name. Parsed by ``page_of`` as every
# list's page is.
_UNORDERED = page_declarations(frozenset())
PageNumberQuery = Annotated[
    str | None,
    Query(alias="pageNumber", description=_UNORDERED["pageNumber"][1]),
    WithJsonSchema(_UNORDERED["pageNumber"][0]),
]
PageSizeQuery = Annotated[
    str | None,
    Query(alias="pageSize", description=_UNORDERED["pageSize"][1]),
    WithJsonSchema(_UNORDERED["pageSize"][0]),
]


def paging(order_fields: Iterable[str]) -> Any:
    """A dependency that answers the page the query asks for (``orderBy`` one of ``order_fields``).

    It declares ``pageNumber``, ``pageSize`` and ``orderBy`` with their ranges and the ``orderBy`` values
    (the OpenAPI document's parameters), and parses them itself, in the reference's order and with its
    messages (spec §1.4)."""
    allowed = frozenset(order_fields)
    schemas = page_declarations(allowed)
    declared = {
        key: Annotated[
            str | None,
            Query(alias=name, description=schemas[name][1]),
            WithJsonSchema(schemas[name][0]),
        ]
        for key, name in (("page_number", "pageNumber"), ("page_size", "pageSize"), ("order_by", "orderBy"))
    }

    async def page(
        page_number: str | None = None, page_size: str | None = None, order_by: str | None = None
    ) -> Page:
        return page_of(page_number, page_size, order_by, allowed)

    page.__signature__ = _signature(declared, Page)  # type: ignore[attr-defined]
    return Depends(page)


def _signature(declared: dict[str, Any], returns: Any) -> inspect.Signature:
    """Keyword parameters (default None) whose annotations are objects, not the strings that
    ``from __future__ import annotations`` would leave (FastAPI reads a dependency's signature)."""
    parameters = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=None)
        for name, annotation in declared.items()
    ]
    return inspect.Signature(parameters, return_annotation=returns)


def path_text(name: str) -> Any:
    """A dependency that answers path parameter ``name`` as it is (declared where its place in the
    handler's parameters should put it in the OpenAPI document)."""

    async def text(**path: str) -> str:
        return path[name]

    text.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str)], return_annotation=str
    )
    return Depends(text)


BAD_RELATION = "Invalid includeRelation value in query: {value}"
RELATIONS_DESCRIPTION = stating_error("Related objects to attach", 400, BAD_RELATION)


def relations(allowed: Iterable[str]) -> Any:
    """A dependency that answers the ``includeRelation`` values, each one of ``allowed`` (declared as
    the parameter's enum)."""
    allowed_set = frozenset(allowed)
    declared = {
        "values": Annotated[
            list[str] | None,
            Query(alias="includeRelation", description=RELATIONS_DESCRIPTION),
            relations_schema(allowed_set),
        ]
    }

    async def included(values: list[str] | None = None) -> frozenset[str]:
        return checked_relations(values, allowed_set)

    included.__signature__ = _signature(declared, frozenset)  # type: ignore[attr-defined]
    return Depends(included)


def relations_schema(allowed: Iterable[str]) -> WithJsonSchema:
    """The ``includeRelation`` parameter's schema (its values' enum), as :func:`relations` declares it;
    for a handler that takes the raw values itself and checks them with :func:`checked_relations`:
    ``Annotated[list[str] | None, Query(alias="includeRelation"), relations_schema(allowed)]``."""
    return WithJsonSchema({"type": "array", "items": {"type": "string", "enum": sorted(frozenset(allowed))}})


def checked_relations(values: list[str] | None, allowed: frozenset[str]) -> frozenset[str]:
    """The ``includeRelation`` values, each one of ``allowed``, or 400 (what :func:`relations` answers)."""
    for value in values or ():
        if value not in allowed:
            raise bad_request(BAD_RELATION.format(value=value))
    return frozenset(values or ())


class FieldErrors:
    """Collects the first failing rule per field, then raises one 400 with the whole map."""

    def __init__(self) -> None:
        self.errors: dict[str, Any] = {}

    def add(self, field: str, message: str | None) -> None:
        if message and field not in self.errors:
            self.errors[field] = message

    def merge(self, problems: dict[str, Any]) -> None:
        """Problems of a nested part (a list item's map, say); a field already failing keeps its own."""
        for field, problem in problems.items():
            self.errors.setdefault(field, problem)

    def raise_if_any(self, message: str) -> None:
        if self.errors:
            raise ServiceError(400, message, dict(self.errors))


def name_problem(
    value: str | None, *, required: bool = True, length_message: str = NAME_LENGTH
) -> str | None:
    """The reference's name rule: 2..256 characters (runes), no leading or trailing whitespace; then
    nico's character rule (:mod:`nico.api.names`)."""
    if value is None or value == "":
        return length_message if required else (length_message if value == "" else None)
    if not 2 <= len(value) <= 256:
        return length_message
    if value != value.lstrip():
        return "name field has leading whitespace"
    if value != value.rstrip():
        return "name field has trailing whitespace"
    return name_characters_problem(value)


def description_problem(value: str | None) -> str | None:
    if value is not None and len(value) > DESCRIPTION_MAX:
        return DESCRIPTION_LENGTH
    return None if value is None else description_characters_problem(value)


def user_data_problem(value: str | None) -> str | None:
    if value is not None and len(value) > USER_DATA_MAX:
        return USER_DATA_LENGTH
    return None


def hostname_problem(value: str | None) -> str | None:
    """RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens, 253 at most."""
    if value is None or value == "":
        return None
    labels = value.removesuffix(".").split(".")
    if len(value) > 253 or not all(_HOSTNAME_LABEL.match(label) for label in labels):
        return INVALID_HOSTNAME
    return None


def uuid_problem(value: str | None, *, required: bool = True) -> str | None:
    if value is None or value == "":
        return REQUIRED if required else None
    return None if parse_uuid(value) is not None else INVALID_UUID


def labels_problem(labels: dict[str, Any] | None) -> str | None:
    if labels is None:
        return None
    if len(labels) > 10:
        return "up to 10 key/value pairs can be specified in labels"
    for key, value in labels.items():
        if not key:
            return "one or more labels do not have a key specified"
        if len(key) > 255:
            return "label key must be at most 255 characters"
        if not isinstance(value, str) or len(value) > 255:
            return "label value must be a string of at most 255 characters"
    return None


def parse_uuid(value: str | None) -> uuid.UUID | None:
    """A canonical UUID string (36 chars with dashes, any case) or None."""
    if not value or len(value) != 36:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def parse_go_bool(value: str) -> bool | None:
    if value in GO_TRUE:
        return True
    if value in GO_FALSE:
        return False
    return None


def list_param(request: Request, name: str) -> list[str]:
    """A repeatable query parameter (``?status=A&status=B``)."""
    return request.query_params.getlist(name)


def single_param(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    return values[0] if values else None
