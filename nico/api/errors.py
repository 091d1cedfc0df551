"""The error envelope ``{"source", "message", "data"}`` for every non-2xx response (spec §1.2)."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from nico.services.errors import ServiceError

log = logging.getLogger(__name__)

PARSE_ERROR = "Failed to parse request data, potentially invalid structure"
NOT_FOUND_PATH = "The requested path could not be found"
UNEXPECTED = "An unexpected error occurred while processing the request"


def error_response(source: str, status: int, message: str, data: Any = None) -> Response:
    body = json.dumps({"source": source, "message": message, "data": data}, separators=(",", ":"))
    return Response(body, status_code=status, media_type="application/json")


def field_map(errors: list[Any]) -> dict[str, str]:
    """Pydantic errors -> ``{jsonFieldName: message}``, first error per field, like ozzo-validation."""
    out: dict[str, str] = {}
    for err in errors:
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path")]
        key = ".".join(loc) or "__all__"
        out.setdefault(key, str(err.get("msg", "invalid value")).removeprefix("Value error, "))
    return out


def install_error_handlers(app: FastAPI, source: str) -> None:
    async def service_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, ServiceError)
        return error_response(source, exc.status, exc.message, exc.data)

    async def validation_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_response(source, 400, PARSE_ERROR, field_map(list(exc.errors())) or None)

    async def http_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            message = NOT_FOUND_PATH
        elif exc.status_code == 405:
            message = "Method Not Allowed"
        else:
            message = str(exc.detail)
        response = error_response(source, exc.status_code, message)
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(source, 500, UNEXPECTED)

    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
