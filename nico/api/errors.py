"""The error envelope ``{"source", "message", "data"}`` for every non-2xx response (spec §1.2), and the
one place that maps exceptions to it: the services' refusals, request parsing, routing, and the database's
errors (unavailable, a lost race, a refused value)."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import psycopg
import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from nico.services.errors import ServiceError

log = logging.getLogger(__name__)

PARSE_ERROR = "Failed to parse request data, potentially invalid structure"
NOT_FOUND_PATH = "The requested path could not be found"
UNEXPECTED = "An unexpected error occurred while processing the request"
DB_UNAVAILABLE = "The database is unavailable, please retry shortly"
# Connection exceptions (class 08), the server shutting down or starting up, no connection slots left.
UNAVAILABLE_STATES = ("08", "57P01", "57P02", "57P03", "53300")
CONFLICT = "The request conflicts with a concurrent change, please retry"
# Serialization failure, deadlock detected: the transaction lost a race and was rolled back whole.
LOST_RACE_STATES = ("40001", "40P01")


def lost_race(exc: BaseException) -> bool:
    """Whether ``exc`` (a psycopg error from a raw connection, or SQLAlchemy's wrapper of one) is
    PostgreSQL rolling the transaction back because it lost a race: the client may simply retry."""
    if isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.orig is not None:
        exc = exc.orig
    return isinstance(exc, psycopg.Error) and exc.sqlstate in LOST_RACE_STATES


def database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` (a psycopg error, or SQLAlchemy's wrapper of one) means the database cannot be
    reached right now, rather than that a statement failed."""
    if isinstance(exc, sqlalchemy.exc.TimeoutError):
        return True  # no pooled connection came free (or could be opened) in time
    if isinstance(exc, sqlalchemy.exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        exc = exc.orig if exc.orig is not None else exc
    if not isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return False
    state = exc.sqlstate
    return state is None or state.startswith(UNAVAILABLE_STATES)


def unavailable_response(source: str, exc: BaseException) -> Response:
    """503 with a plain message; what went wrong goes to the log only."""
    detail = str(exc).strip()
    log.warning("database unavailable: %s: %s", type(exc).__name__, detail.splitlines()[0] if detail else "")
    return error_response(source, 503, DB_UNAVAILABLE)


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


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """The methods the OpenAPI document declares for the template ``path`` matches."""
    patterns: list[tuple[re.Pattern[str], list[str]]] | None = getattr(app.state, "allow_patterns", None)
    if patterns is None:
        patterns = []
        for template, item in app.openapi()["paths"].items():
            regex = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"
            patterns.append((re.compile(regex), sorted(m.upper() for m in item)))
        app.state.allow_patterns = patterns
    for pattern, methods in patterns:
        if pattern.match(path):
            return methods
    return []


class _Handlers:
    """The exception handlers of one app, answering in its envelope (``source``)."""

    def __init__(self, app: FastAPI, source: str) -> None:
        self.app, self.source = app, source

    async def service_error(self, _: Request, exc: Exception) -> Response:
        assert isinstance(exc, ServiceError)
        response = error_response(self.source, exc.status, exc.message, exc.data)
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    async def validation_error(self, _: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_response(self.source, 400, PARSE_ERROR, field_map(list(exc.errors())) or None)

    async def http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            message = NOT_FOUND_PATH
        elif exc.status_code == 405:
            message = "Method Not Allowed"
        else:
            message = str(exc.detail)
        response = error_response(self.source, exc.status_code, message)
        if exc.headers:
            response.headers.update(exc.headers)
        if exc.status_code == 405:  # every method of the path, not only the first route's that matched
            allowed = allowed_methods(self.app, request.url.path)
            if allowed:
                response.headers["Allow"] = ", ".join(allowed)
        return response

    async def constraint_violated(self, _: Request, exc: Exception) -> Response:
        log.info("request lost a race on a database constraint: %s", str(exc).splitlines()[0])
        return error_response(self.source, 409, CONFLICT)

    async def statement_failed(self, request: Request, exc: Exception) -> Response:
        """A statement of the request's session failed (SQLAlchemy's wrapper of the driver's error)."""
        assert isinstance(exc, sqlalchemy.exc.DBAPIError)
        if database_unavailable(exc):
            return unavailable_response(self.source, exc)
        if lost_race(exc):  # serialization failure, deadlock
            return await self.constraint_violated(request, exc)
        sqlstate = getattr(exc.orig, "sqlstate", None)
        if sqlstate is not None and sqlstate.startswith("22"):  # data exception: a value the column refuses
            log.warning("value refused by the database: %s", str(exc).splitlines()[0])
            return error_response(
                self.source, 400, "Invalid value in request", {"__all__": "value out of range"}
            )
        log.error("database error: %s", str(exc).splitlines()[0])
        return error_response(self.source, 500, UNEXPECTED)

    async def unexpected(self, request: Request, exc: Exception) -> Response:
        """Anything else: a raw connection's error (psycopg's own), the pool's timeout, or a bug."""
        if database_unavailable(exc):
            return unavailable_response(self.source, exc)
        if lost_race(exc):  # a raw connection's statement or commit
            log.info("request lost a race in the database: %s", str(exc).splitlines()[0])
            return error_response(self.source, 409, CONFLICT)
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(self.source, 500, UNEXPECTED)


def install_error_handlers(app: FastAPI, source: str) -> None:
    """Every exception a request may raise answered in the envelope: the services' refusals, bodies
    that do not parse, HTTP errors of the routing, and every database error (503 unavailable, 409 a
    lost race, 400 a value a column refuses, 500 the rest)."""
    handlers = _Handlers(app, source)
    app.add_exception_handler(ServiceError, handlers.service_error)
    app.add_exception_handler(RequestValidationError, handlers.validation_error)
    app.add_exception_handler(StarletteHTTPException, handlers.http_error)
    app.add_exception_handler(sqlalchemy.exc.IntegrityError, handlers.constraint_violated)
    app.add_exception_handler(sqlalchemy.exc.DBAPIError, handlers.statement_failed)
    for db_error in (psycopg.Error, sqlalchemy.exc.TimeoutError):  # raw connections, the engine's pool
        app.add_exception_handler(db_error, handlers.unexpected)
    app.add_exception_handler(Exception, handlers.unexpected)


def stating_error(description: str, status: int, message: str) -> str:
    """A query parameter's description, ending with what a value outside its schema answers (``{value}``
    in ``message``, the value, is written ``<value>``): one phrasing, which clients and tests can read."""
    return f"{description}. A bad value answers {status}: {message.replace('{value}', '<value>')}"
