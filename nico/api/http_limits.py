"""Limits on a request's head, enforced where its bytes arrive: uvicorn's httptools protocol.

uvicorn buffers a request line and headers of any size (httptools has no limit to set) and waits for
them forever: a 64 MB header was read, and answered, after 8 s; a client sending a byte a second held
its connection for good. This protocol counts a head's bytes before the parser sees them and answers
at once, in the API's error envelope, then closes the connection:

* 431 when the head (request line and headers) passes ``api.max_header_bytes``, or one header line
  passes ``api.max_header_line_bytes``;
* 414 when the request target passes ``api.max_request_line_bytes``;
* 400 when the query has more than ``api.max_query_parameters`` parameters;
* 408 when a head is not complete ``api.header_timeout_seconds`` after its first byte (or after the
  connection opened): slow senders are cut off.

Each response's head goes out with the start of its body, in one write (``nico.api.one_write``).

The body limit stays in the app (``nico.api.front``, an ASGI middleware): bodies reach it as a stream.
"""

from __future__ import annotations

import asyncio
import functools
import http
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from nico.api.one_write import OneWriteHead

if TYPE_CHECKING:
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from nico.config import Settings


@dataclass(frozen=True)
class HttpLimits:
    """The ``[api]`` limits a connection enforces, and the envelope's ``source``."""

    source: str
    max_header_bytes: int
    max_header_line_bytes: int
    max_request_line_bytes: int
    max_query_parameters: int
    header_timeout: float

    @classmethod
    def of(cls, settings: Settings) -> HttpLimits:
        api = settings.api
        return cls(
            source=api.name,
            max_header_bytes=api.max_header_bytes,
            max_header_line_bytes=api.max_header_line_bytes,
            max_request_line_bytes=api.max_request_line_bytes,
            max_query_parameters=api.max_query_parameters,
            header_timeout=api.header_timeout_seconds,
        )


class _Refused(Exception):
    """Raised inside a parser callback: the head breaks a limit (httptools stops parsing on it)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


HEAD_TOO_LARGE = "Request header fields too large"
LINE_TOO_LARGE = "Request header field too large"
TARGET_TOO_LONG = "Request URI too long"
TOO_MANY_PARAMETERS = "Too many query parameters"
HEAD_TIMEOUT = "Request header not received in time"


class LimitedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with head limits and a head timeout (see the module's docstring)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        limits: HttpLimits,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = limits
        self.in_head = True  # the bytes arriving belong to a request line or headers
        self.head_bytes = 0
        self.head_timer: asyncio.TimerHandle | None = None
        self.refusal: _Refused | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.in_head:
            super().data_received(data)
            return
        if self.head_timer is None:
            self._arm_head_timer()
        room = self.limits.max_header_bytes - self.head_bytes
        self.head_bytes += min(len(data), room)
        if len(data) <= room:
            super().data_received(data)
            return
        super().data_received(data[:room])  # the head may end inside what fits
        if self.transport.is_closing():
            return
        if self.in_head:
            self._answer(_Refused(431, HEAD_TOO_LARGE))
            return
        self.data_received(data[room:])

    # Parser callbacks: a limit broken raises, httptools stops and uvicorn calls send_400_response.
    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self.limits.max_request_line_bytes:
            raise _Refused(414, TARGET_TOO_LONG)

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > self.limits.max_header_line_bytes:
            raise _Refused(431, LINE_TOO_LARGE)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        _, _, query = self.url.partition(b"?")
        if query.count(b"&") >= self.limits.max_query_parameters:
            raise _Refused(400, TOO_MANY_PARAMETERS)
        self.in_head, self.head_bytes = False, 0
        self._cancel_head_timer()
        previous = self.cycle
        super().on_headers_complete()
        if self.cycle is not previous and self.cycle is not None:  # a request's cycle, not an upgrade
            self.cycle.transport = cast("asyncio.Transport", OneWriteHead(self.transport, self.loop))

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self.in_head = True

    def send_400_response(self, msg: str) -> None:
        refusal = self._callback_refusal()
        if refusal is None:
            super().send_400_response(msg)
        else:
            self._answer(refusal)

    def _callback_refusal(self) -> _Refused | None:
        """The limit a callback raised, if the parser's error is one (its ``__context__``)."""
        error = sys.exc_info()[1]
        cause = error.__context__ if error is not None else None
        return cause if isinstance(cause, _Refused) else None

    def _answer(self, refusal: _Refused) -> None:
        self._cancel_head_timer()
        body = json.dumps({"source": self.limits.source, "message": refusal.message, "data": None}).encode()
        phrase = http.HTTPStatus(refusal.status).phrase
        head = (
            f"HTTP/1.1 {refusal.status} {phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()
        self.in_head = False  # nothing more is read from this connection

    def _arm_head_timer(self) -> None:
        self.head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timed_out(self) -> None:
        self.head_timer = None
        if self.transport.is_closing():
            return
        if self.head_bytes:
            self._answer(_Refused(408, HEAD_TIMEOUT))
        else:
            self.transport.close()  # a connection that never sent a byte gets no answer


def limited_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """What ``uvicorn.Config(http=...)`` takes: the protocol with the settings' limits. uvicorn only
    calls it, as it would a class; a partial (unlike a class made here) pickles for ``--workers``."""
    return cast(
        "type[asyncio.Protocol]", functools.partial(LimitedHttpProtocol, limits=HttpLimits.of(settings))
    )
