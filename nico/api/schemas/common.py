"""Base classes for request and response bodies, and the pieces every resource shares."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Protocol

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from nico.api.names import DESCRIPTION_PATTERN, NAME_PATTERN


class StatusEntry(Protocol):
    """One status history entry as services return it."""

    @property
    def status(self) -> str: ...

    @property
    def message(self) -> str | None: ...

    @property
    def created(self) -> datetime: ...

    @property
    def updated(self) -> datetime: ...


class Summarised(Protocol):
    """What every summary of a resource shows (``includeRelation``): its id, name and status. A summary's
    own protocol adds the rest; a service's record satisfies it, as does (until the instance, partition
    and machine services are on views) an ORM row."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def name(self) -> str: ...

    @property
    def status(self) -> str: ...


def declared(schema: dict[str, Any]) -> WithJsonSchema:
    """A request field's schema in the OpenAPI document, as the body's ``check`` enforces it. Only the
    document changes: binding stays lenient (so a broken rule answers the operation's own message and
    field map, in the reference's order), and the hot paths parse exactly as before."""
    return WithJsonSchema(schema)


# The shared field rules (spec §1.2), as JSON Schema. Names: 2..256 characters, no leading or trailing
# whitespace, and the character rule of nico.api.names (descriptions too).
NAME_SCHEMA = {"type": "string", "minLength": 2, "maxLength": 256, "pattern": NAME_PATTERN}
DESCRIPTION_SCHEMA = {"type": "string", "maxLength": 1024, "pattern": DESCRIPTION_PATTERN}
UUID_SCHEMA = {"type": "string", "format": "uuid"}
# parsing.uuid_problem(required=False): null, "" or a UUID
OPTIONAL_UUID_SCHEMA = {"type": ["string", "null"], "anyOf": [{"format": "uuid"}, {"maxLength": 0}]}
# parsing.labels_problem: up to 10 pairs, keys 1..255 characters, values strings of at most 255
LABELS_MAX = 10
LABELS_SCHEMA = {
    "type": ["object", "null"],
    "maxProperties": LABELS_MAX,
    "propertyNames": {"minLength": 1, "maxLength": 255},
    "additionalProperties": {"type": "string", "maxLength": 255},
}


@dataclass(frozen=True)
class MaxItems:
    """A request list's item limit, checked on the raw JSON list before any of its items is validated
    (pydantic's own ``max_length`` counts after validating every item: 130,000 items took 7 s of the
    event loop), and declared as ``maxItems``. Over the limit: 400 naming the field with ``message``."""

    limit: int
    message: str = "a maximum of {limit} items can be specified"

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        declared = handler(schema)
        target = handler.resolve_ref_schema(declared)
        arrays = [s for s in target.get("anyOf", [target]) if "array" in _types(s)]
        for array in arrays:
            array["maxItems"] = min(array.get("maxItems", self.limit), self.limit)
        return declared

    def _check(self, value: Any) -> Any:
        if isinstance(value, list) and len(value) > self.limit:
            raise PydanticCustomError("too_long", self.message, {"limit": self.limit})
        return value


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type", [])
    return [kind] if isinstance(kind, str) else list(kind)


def _eleven_pairs(value: Any) -> Any:
    if isinstance(value, dict) and len(value) > LABELS_MAX:
        return dict(itertools.islice(value.items(), LABELS_MAX + 1))
    return value


# ``labels`` of every request: parsing.labels_problem refuses more than 10 pairs before looking at any,
# so the first 11 tell it as well as 60,000 would, and only they are validated.
LABELS_BOUND = BeforeValidator(_eleven_pairs)


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or null: an optional field the server reads null as absent."""
    return {**schema, "type": [schema["type"], "null"]}


def required(*fields: str) -> ConfigDict:
    """A request model's required fields in the OpenAPI document (each refused when absent, null or
    empty: declare the field itself non-nullable, with its minimum length)."""
    return ConfigDict(json_schema_extra={"required": list(fields)})


def omit_if_none(value: Any) -> bool:
    return value is None


def omit_if_empty(value: Any) -> bool:
    return not value


class RequestModel(BaseModel):
    """A request body bound like Go's ``encoding/json``: keys match case-insensitively (an exact match
    wins), unknown keys are ignored, and JSON types must match (``"5"`` is not an int)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, strict=True, extra="ignore")

    _key_index: ClassVar[dict[str, str]]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._key_index = {
            (info.alias or name).lower(): (info.alias or name) for name, info in cls.model_fields.items()
        }

    @model_validator(mode="before")
    @classmethod
    def _fold_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        folded: dict[str, Any] = {}
        exact: dict[str, Any] = {}
        for key, value in data.items():
            if not isinstance(key, str):
                continue
            alias = cls._key_index.get(key.lower())
            if alias is None:
                continue
            if key == alias:
                exact[alias] = value
            else:
                folded[alias] = value
        folded.update(exact)
        return folded

    def given(self, field: str) -> bool:
        """Whether the client sent this field at all (``null`` counts as sent)."""
        return field in self.model_fields_set


class ResponseModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True)


class StatusDetail(ResponseModel):
    status: str
    message: str | None
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, row: StatusEntry) -> StatusDetail:
        return cls(status=row.status, message=row.message, created=row.created, updated=row.updated)

    @classmethod
    def many(cls, rows: Iterable[StatusEntry]) -> list[StatusDetail]:
        return [cls.of(row) for row in rows]


class Deprecation(ResponseModel):
    attribute: str
    replacedby: str = Field(serialization_alias="replacedby")
    effective: str
    notice: str
