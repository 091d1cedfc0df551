"""A command's database: one transaction on a short-lived engine, and its failures told in one line.

The CLI's counterpart of the API's request scope. Commands hand the session straight to services and
name database failures through this module, so the CLI itself never imports the ORM.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias, TypeVar

from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.engine import make_engine, make_session_factory, transaction
from nico.db.revisions import schema_problem

T = TypeVar("T")

Work: TypeAlias = Callable[[AsyncSession], Awaitable[T]]
"""What a command does in its one transaction (a service call, given the session)."""

DatabaseError = SQLAlchemyError
"""Any failure the database or its driver reports (the server went away, the disk is full, ...)."""
Unreachable = OperationalError
"""The database cannot be reached (or dropped the connection)."""


class SchemaNotReady(Exception):
    """The database's schema is not the one this nico was built for; the message says what to do."""


async def in_transaction(url: str, work: Work[T], *, check_schema: bool = False) -> T:
    """Run ``work`` in one transaction on its own small engine (commands are short-lived); with
    ``check_schema``, first make sure the schema is at this nico's head (two small reads on the same
    connection), else raise :class:`SchemaNotReady` before ``work`` meets a missing table."""
    engine = make_engine(url, pool_size=2)
    try:
        async with transaction(make_session_factory(engine)) as session:
            if check_schema:
                problem = await schema_problem(await session.connection())
                if problem is not None:
                    raise SchemaNotReady(problem)
            return await work(session)
    finally:
        await engine.dispose()


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (drivers append SQL and links on later lines)."""
    output = getattr(exc, "stderr", None)  # a failed initdb or pg_ctl: its own last words
    if isinstance(output, str) and output.strip():
        return f"{output.strip().splitlines()[-1]} ({exc})"
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
