"""The one way a service rejects a request: status code, the reference's message, optional data."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """Rejects a request. The API renders it as ``{"source", "message", "data"}`` with ``status``."""

    def __init__(
        self,
        status: int,
        message: str,
        data: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.data = data
        self.headers = headers  # sent with the envelope (a 429's Retry-After)

    def __repr__(self) -> str:
        return f"ServiceError({self.status}, {self.message!r}, {self.data!r})"


def bad_request(message: str, data: dict[str, Any] | None = None) -> ServiceError:
    return ServiceError(400, message, data)


def forbidden(message: str, data: dict[str, Any] | None = None) -> ServiceError:
    return ServiceError(403, message, data)


def not_found(message: str, data: dict[str, Any] | None = None) -> ServiceError:
    return ServiceError(404, message, data)


def conflict(message: str, data: dict[str, Any] | None = None) -> ServiceError:
    return ServiceError(409, message, data)


def too_many_requests(message: str, retry_after: int) -> ServiceError:
    """429: the caller asked faster than its rate; ``retry_after``: whole seconds until it may again."""
    return ServiceError(429, message, headers={"Retry-After": str(retry_after)})
