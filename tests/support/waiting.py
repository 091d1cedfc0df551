"""Waiting on a condition with a deadline, instead of sleeping a fixed time."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

POLL = 0.01


async def wait_for(
    condition: Callable[[], bool | Awaitable[bool]], *, within: float = 5.0, what: str = "condition"
) -> None:
    """Return as soon as ``condition()`` (sync or async) is true; fail after ``within`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return
        if loop.time() >= deadline:
            raise AssertionError(f"{what} not reached within {within}s")
        await asyncio.sleep(POLL)
