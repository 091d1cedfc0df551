"""The ``nico`` command in a test, as the tests of the admin commands call it."""

from __future__ import annotations

import asyncio

from typer.testing import CliRunner

from nico.cli import app


async def run(*args: str) -> tuple[int, str]:
    """The CLI in a thread: its own event loop must not block the test's (simulator, session). What
    a command prints is on stdout; its notes and errors on stderr (shown when it fails)."""
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args))
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output
