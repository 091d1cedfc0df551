"""A response's head and the start of its body in one write to the socket.

uvicorn writes a response's status line and headers when the app starts the response, and its body
when the app sends it: two writes, two system calls (on loopback each also wakes the reader) for a
response whose body follows at once, as every JSON answer's does. The ASGI specification has the server
send nothing of a response before its first body message; this transport, given to each request's
cycle by ``nico.api.http_limits``, holds the cycle's first write (the head) until its second (the body),
and sends them together. A head with no body after it in the same turn of the event loop (a HEAD
request, a stream whose first chunk is not ready yet) goes out at the end of that turn; a close sends
what is held first. Every later write goes through at once.
"""

from __future__ import annotations

import asyncio
from typing import Any


class OneWriteHead:
    """The transport of one request's response cycle (see the module's docstring); the rest of the
    connection (the protocol, its flow control) keeps using ``transport`` itself."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._first = True
        self._held: bytes | None = None
        self._flush: asyncio.Handle | None = None

    def write(self, data: bytes) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            self._cancel_flush()
            self._transport.writelines((held, data))  # one system call (writev), the body not copied
        elif self._first:
            self._first = False
            self._held = data
            self._flush = self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def flush(self) -> None:
        """Send what is held (nothing once the connection is closing: the peer is gone)."""
        self._flush = None
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self._cancel_flush()
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def _cancel_flush(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
