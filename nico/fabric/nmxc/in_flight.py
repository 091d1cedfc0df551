"""Reads made at once share one call: a read of a domain's GPUs asked for while the same read is on
its way waits for that call's answer instead of making another (a health read asks for the GPUs
twice at once: for each GPU's health and for the domain's summary; the listing is the largest
answer NMX-C gives)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class InFlight(Generic[T]):
    """The reads on their way, by key; a read that ended is never handed out again (no caching)."""

    def __init__(self) -> None:
        self._calls: dict[Hashable, asyncio.Future[T]] = {}

    async def read(self, key: Hashable, call: Callable[[], Awaitable[T]]) -> T:
        """``call``'s answer, shared with the reads of ``key`` made while it is on its way. A reader
        cancelled does not cancel the call the others wait for; a failure reaches every reader."""
        pending = self._calls.get(key)
        if pending is None:
            pending = self._calls[key] = asyncio.ensure_future(call())
            pending.add_done_callback(lambda done: self._ended(key, done))
        return await asyncio.shield(pending)

    def _ended(self, key: Hashable, done: asyncio.Future[T]) -> None:
        if self._calls.get(key) is done:
            del self._calls[key]
        if not done.cancelled():
            done.exception()  # retrieved: every reader may have been cancelled meanwhile
