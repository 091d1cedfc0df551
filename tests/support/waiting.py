"""Waiting on a condition with a deadline, instead of sleeping a fixed time."""

from __future__ import annotations

import asyncio
import inspect
import sys
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


async def stop_within(what: str, step: Awaitable[object], seconds: float = 10.0) -> None:
    """Await one step of a fixture's teardown, at most ``seconds``: a reconciler or simulator that
    does not stop is reported on stderr (and left behind) instead of hanging the whole suite."""
    try:
        await asyncio.wait_for(step, timeout=seconds)
    except TimeoutError:
        print(f"teardown: {what} did not stop within {seconds:.0f} s", file=sys.stderr, flush=True)
