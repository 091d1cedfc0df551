"""Column types nico needs beyond SQLAlchemy's: the unsigned 64-bit GPU fabric GUID."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import Dialect, Numeric
from sqlalchemy.types import TypeDecorator

U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1


class GpuUid(TypeDecorator[int]):
    """A GPU fabric GUID: unsigned 64-bit, stored as NUMERIC(20, 0) (it does not fit a signed BIGINT).

    Pair every column of this type with a CHECK of the range ``0 .. 2**64-1`` (see :func:`u64_check`).
    """

    impl = Numeric(20, 0)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        number = int(value)
        if not 0 <= number <= U64_MAX:
            raise ValueError(f"gpu_uid {number} is outside the unsigned 64-bit range")
        return Decimal(number)

    def process_result_value(self, value: Any, dialect: Dialect) -> int | None:
        return None if value is None else int(value)


def u64_check(column: str) -> str:
    return f"{column} >= 0 AND {column} <= {U64_MAX}"
