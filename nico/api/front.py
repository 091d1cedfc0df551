"""The front of the app: what every request is checked for, then the hottest operations served at once.

One ASGI middleware, nico's outermost (inside FastAPI's own: a 500 is still its error handler's):

* a body over ``api.max_body_bytes`` (``api.max_registration_body_bytes`` for a provider's bulk machine
  registration), declared or streamed, is 413; every other body of the API is a few kilobytes, and the
  limit also bounds the CPU a body costs before any rule can refuse it (parsing 10 MB of JSON takes
  0.2 s);
* a NUL character in the path or in a query parameter (PostgreSQL cannot store one) is 400 naming the
  parameter, before any handler could pass it to a statement;
* the hottest operations (each router module's ``HOT_ROUTES``: ``GET /instance/{instanceId}`` of a
  canonical id, ``POST /instance``) are matched here, by their path's regular expression and their
  method, and their endpoint called with the request; its exceptions are answered by the app's
  exception handlers, as FastAPI's exception layer answers them. Every other request goes on to
  FastAPI's router. The layers a request crosses between here and an endpoint (exceptions, exit
  stack, the router asking route after route, the route's dependency solver) cost 60 to 80 us of CPU,
  more than the hot GET's own work; the endpoints run their dependencies' functions themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nico.api.errors import error_response
from nico.api.parsing import NUL_TEXT

# The one route whose bodies may be large: a provider's bulk machine registration (10,000 machines).
BULK_ROUTE_SUFFIX = "/machine/registration"

Handler = Callable[[Request, Exception], Any]


class FrontRoute:
    """An operation served at the front: its full path (``/v2/org/{org}/nico/instance``, with
    Starlette's parameter convertors), methods and endpoint (a coroutine function of the request,
    answering a response)."""

    def __init__(self, path: str, endpoint: Callable[[Request], Any], methods: list[str]) -> None:
        self.path, self.endpoint, self.methods = path, endpoint, frozenset(methods)
        self._regex, _, self._convertors = compile_path(path)

    def match(self, path: str, method: str) -> dict[str, Any] | None:
        """The path parameters when ``path`` and ``method`` are this route's, else None."""
        if method not in self.methods:
            return None
        found = self._regex.match(path)
        if found is None:
            return None
        return {name: self._convertors[name].convert(value) for name, value in found.groupdict().items()}


class Front:
    """See the module's docstring. ``handlers``: the app's exception handlers (``app.exception_handlers``),
    of which the front answers those FastAPI's exception layer answers (all but that of ``Exception``
    and 500, which answers in FastAPI's outermost layer, outside this one)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        source: str,
        limit: int,
        bulk_limit: int,
        hot: list[FrontRoute],
        handlers: Mapping[Any, Handler],
    ) -> None:
        self.app, self.source, self.limit, self.bulk_limit, self.hot = app, source, limit, bulk_limit, hot
        if any(isinstance(kind, int) and kind != 500 for kind in handlers):
            raise ValueError("the front answers exceptions by class: a status code's handler is not used")
        self._handlers = {kind: handler for kind, handler in handlers.items() if kind not in (500, Exception)}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        limit = self.bulk_limit if path.endswith(BULK_ROUTE_SUFFIX) else self.limit
        for key, value in scope["headers"]:
            if key == b"content-length" and value.isdigit() and int(value) > limit:
                await error_response(self.source, 413, "Request Entity Too Large")(scope, receive, send)
                return
        refusal = self._text_refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _TooLarge
            return message

        try:
            for route in self.hot if not scope.get("root_path") else ():
                params = route.match(path, scope["method"])
                if params is not None:
                    scope["path_params"] = params
                    await self._serve(route, scope, limited, send)
                    return
            await self.app(scope, limited, send)
        except _TooLarge:
            await error_response(self.source, 413, "Request Entity Too Large")(scope, receive, send)

    def _text_refusal(self, scope: Scope) -> Response | None:
        """400 for a NUL in the path or in a query parameter (naming it), else None."""
        if "\x00" in scope["path"]:
            return error_response(self.source, 400, "Invalid value in request path", {"path": NUL_TEXT})
        query: bytes = scope.get("query_string", b"")
        if b"%00" in query or b"\x00" in query:
            pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True, errors="replace")
            for key, value in pairs:
                if "\x00" in key or "\x00" in value:
                    name = key.replace("\x00", "") or "query"
                    message = f"Invalid value specified for `{name}` query param"
                    return error_response(self.source, 400, message, {name: NUL_TEXT})
        return None

    async def _serve(self, route: FrontRoute, scope: Scope, receive: Receive, send: Send) -> None:
        """The route's endpoint and its response; an exception the app has a handler for (and that came
        before the response began) answered by that handler, as FastAPI's exception layer does."""
        request = Request(scope, receive, send)
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            response = await route.endpoint(request)
            await response(scope, receive, sending)
        except _TooLarge:
            raise
        except Exception as exc:
            handler = self._handler_for(exc)
            if handler is None or started:
                raise
            answer = await handler(request, exc)
            await answer(scope, receive, send)

    def _handler_for(self, exc: Exception) -> Handler | None:
        """Starlette's choice: the handler of the exception's closest class."""
        for kind in type(exc).__mro__:
            if kind in self._handlers:
                return self._handlers[kind]
        return None


class _TooLarge(Exception):
    pass
