"""Ending the reconciler's tasks within a deadline: a pass stuck in a call that ignores cancellation
(or psycopg's LISTEN connection, slow to give up a cancelled wait) must not keep the process from
stopping."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


async def drain(tasks: Iterable[asyncio.Task[Any] | None], grace: float) -> None:
    """Let the tasks still running finish for up to ``grace`` seconds (the caller cancels the rest)."""
    running = [task for task in tasks if task is not None and not task.done()]
    if running:
        _, left = await asyncio.wait(running, timeout=grace)
        if left:
            log.warning("stopping: %d pass(es) still running after %.0f s are cancelled", len(left), grace)


async def cancel(tasks: Iterable[asyncio.Task[Any] | None], wait: float) -> None:
    """Cancel the tasks and wait up to ``wait`` seconds for them to end."""
    running = [task for task in tasks if task is not None and not task.done()]
    for task in running:
        task.cancel()
    if not running:
        return
    _, stuck = await asyncio.wait(running, timeout=wait)
    for task in stuck:
        log.warning("%s did not stop within %.0f s of its cancellation", task.get_name(), wait)
