"""Plain copies of database rows: what views are made of, so that no ORM object leaves a service (a
view is read after its session has moved on, and the API must not reach back into the database)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Record = TypeVar("Record", bound="DataclassInstance")
Key = TypeVar("Key")


@functools.cache
def _names(kind: type[Any]) -> tuple[str, ...]:
    # Read once per kind: lists copy thousands of rows (a page of VPCs with their histories).
    return tuple(field.name for field in fields(kind))


def copy_of(kind: type[Record], row: Any) -> Record:
    """``kind`` (a frozen dataclass of plain values) with each field read from ``row``'s attribute of
    the same name."""
    return kind(**{name: getattr(row, name) for name in _names(kind)})


def copies_of(kind: type[Record], rows: Mapping[Key, Any]) -> dict[Key, Record]:
    """:func:`copy_of` each row of ``rows``, by the same keys."""
    return {key: copy_of(kind, row) for key, row in rows.items()}
