"""A small pool of raw psycopg connections for the hottest requests.

Requests that are one or two statements (``GET /instance/{id}``, ``POST /nvlink-logical-partition``)
need none of the session machinery, which costs more CPU than their SQL; connections stay in
autocommit mode (a statement is its own transaction; ``conn.transaction()`` groups several), so
psycopg also keeps its prepared statements from one request to the next. Connections are opened on
demand up to ``size``, reused last-in first-out, and dropped when broken or found closed by the
server when taken from the pool (so a database restart costs no request).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import RowFactory, dict_row, tuple_row
from psycopg.types.array import ListBinaryDumper
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm import Session

from nico.db.engine import PREPARE_THRESHOLD, is_stale, libpq_url


class RawPool:
    def __init__(self, url: str, size: int) -> None:
        self._url = libpq_url(url)
        self._size = size
        self._opened = 0
        # None wakes a waiter after a connection was discarded: it may open a replacement.
        self._idle: asyncio.LifoQueue[psycopg.AsyncConnection | None] = asyncio.LifoQueue()
        self._closed = False

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        conn = await self._acquire()
        reusable = False
        try:
            yield conn
            reusable = True
        except (psycopg.Error, asyncio.CancelledError):
            raise  # interrupted or failed mid-query: its state is unknown, never hand it out again
        except Exception:
            reusable = True  # the caller's own error (a 404, say): the connection is fine
            raise
        finally:
            if reusable and not (conn.closed or conn.broken or self._closed):
                self._idle.put_nowait(conn)
            else:
                self._opened -= 1
                self._idle.put_nowait(None)
                await conn.close()

    async def _acquire(self) -> psycopg.AsyncConnection:
        while True:
            if self._idle.empty() and self._opened < self._size:
                self._opened += 1  # counted before the await, so concurrent callers respect the size
                try:
                    return await psycopg.AsyncConnection.connect(
                        self._url, autocommit=True, prepare_threshold=PREPARE_THRESHOLD
                    )
                except BaseException:
                    self._opened -= 1
                    self._idle.put_nowait(None)
                    raise
            conn = await self._idle.get()
            if conn is None:
                continue
            if not is_stale(conn):
                return conn
            self._opened -= 1  # the server closed it while idle (it restarted, say): open another
            await conn.close()

    async def close(self) -> None:
        self._closed = True
        while not self._idle.empty():
            conn = self._idle.get_nowait()
            if conn is not None:
                await conn.close()


async def driver_connection(holder: AsyncSession | AsyncConnection) -> psycopg.AsyncConnection[Any]:
    """The psycopg connection under a session's (or a connection's) transaction, begun if need be,
    for statements on a hot path that run at the driver level (SQLAlchemy's statement machinery costs
    more CPU than they do); SQLAlchemy knows of the transaction, so its commit or rollback ends it."""
    if isinstance(holder, AsyncSession):
        connection = await holder.connection()
    else:
        connection = holder
        if not connection.in_transaction():
            await connection.begin()
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    assert isinstance(driver, psycopg.AsyncConnection)
    return driver


def array_literal(values: Iterable[str | int | uuid.UUID | None]) -> str:
    """The text form of a one-dimensional PostgreSQL array: strings quoted, integers (booleans: True,
    False) and UUIDs as they are, None as NULL. For a parameter the statement casts to its array type
    (``CAST(%(uids)s AS numeric[])``): psycopg dumps a list element by element, 25 times the CPU of one
    string for a domain's 72 GPUs."""
    return (
        "{"
        + ",".join(
            "NULL"
            if v is None
            else str(v)
            if isinstance(v, (int, uuid.UUID))
            else '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
            for v in values
        )
        + "}"
    )


@dataclass(frozen=True)
class Statement:
    """One statement of :func:`pipelined`: psycopg placeholders (``%(name)s``) and its parameters."""

    sql: str
    params: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class NumberedStatement:
    """One :class:`Numbered` statement of :func:`pipelined` with its parameters by name: prepared on
    its first execution on the connection, its lists in binary, its rows as dicts (as
    :func:`fetch_numbered` runs it)."""

    statement: Numbered
    params: Mapping[str, Any]


async def pipelined(
    driver: psycopg.AsyncConnection[Any],
    statements: Sequence[Statement | NumberedStatement],
    *,
    commit: bool = False,
    then: Sequence[Statement] | None = None,
    begin: bool = False,
) -> list[list[Any]]:
    """Send ``statements`` (and then COMMIT, with ``commit``) in one psycopg pipeline: one round trip
    for all of them, run one after another in order, in the connection's current transaction. Returns
    each statement's rows (none for a statement without rows), ``then``'s last; the first error
    raises, and what follows it is not run.

    With ``then`` (with ``commit``, even empty) the COMMIT goes out as a statement, with the others:
    the connection's commit() waits for its answer before anything else is sent (a round trip of its
    own), and a statement sent after it would begin a transaction. ``then`` follows it, each
    statement its own transaction: until the pipeline syncs the connection is never idle. With
    ``begin``, on a connection in autocommit mode and outside any transaction, a BEGIN goes out first
    (psycopg begins a transaction with a round trip of its own): the statements are in a transaction
    that a later call commits.

    The caller's SQLAlchemy transaction must have begun on the connection (the statements are in it);
    after ``commit`` its own commit finds nothing to do and sends nothing."""
    if then is not None and not commit:
        raise ValueError("statements to send after the COMMIT, and no COMMIT")
    in_transaction = driver.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
    beginning = begin and driver.autocommit and not in_transaction
    in_transaction = in_transaction or beginning or bool(statements and not driver.autocommit)
    cursors: list[psycopg.AsyncCursor[Any]] = []
    async with driver.pipeline():  # leaving the block syncs: every result has arrived
        if beginning:
            await driver.cursor().execute("BEGIN ISOLATION LEVEL READ COMMITTED", prepare=False)
        for statement in statements:
            cursors.append(await _sent(driver, statement))
        if then is not None:
            if in_transaction:  # else the statements are their own transactions
                await driver.cursor().execute("COMMIT", prepare=False)
            for statement in then:
                cursor = driver.cursor()
                await cursor.execute(statement.sql, statement.params)
                cursors.append(cursor)
        elif commit:
            await driver.commit()
    if then and not driver.autocommit and driver.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        await driver.commit()  # never left open by ``then``, whatever the driver did
    return [await c.fetchall() if _has_rows(c) else [] for c in cursors]


def _has_rows(cursor: psycopg.AsyncCursor[Any]) -> bool:
    """Whether the cursor's statement answered with rows (none for INSERT without RETURNING, COMMIT,
    ...): asked of its result's status, not of ``description``, which builds a column object for each
    column at every call."""
    result = cursor.pgresult
    return result is not None and result.status == psycopg.pq.ExecStatus.TUPLES_OK


async def _sent(
    driver: psycopg.AsyncConnection[Any], statement: Statement | NumberedStatement
) -> psycopg.AsyncCursor[Any]:
    """The cursor of ``statement``, executed (in a pipeline: sent)."""
    if isinstance(statement, NumberedStatement):
        numbered = raw_cursor(driver, row_factory=dict_row)
        await numbered.execute(
            statement.statement.sql, statement.statement.values(statement.params), prepare=True
        )
        return numbered
    cursor = driver.cursor()
    await cursor.execute(statement.sql, statement.params)
    return cursor


_NAMED = re.compile(r"%\((\w+)\)[sb]")


@dataclass(frozen=True)
class Numbered:
    """A long statement written with psycopg's named placeholders (``%(name)s``, ``%(name)b``), sent
    with PostgreSQL's own (``$1``, ``$2``, ...): psycopg caches the translation of a statement's
    placeholders only for statements under 4 KB, and translates a longer one again at every execution
    (0.3 ms of CPU for a create's insert). Translated once, here; its lists go in binary
    (:func:`fetch_numbered`), as ``%(name)b`` asks."""

    sql: str
    names: tuple[str, ...]

    @classmethod
    def of(cls, sql: str) -> Numbered:
        names: dict[str, int] = {}

        def number(match: re.Match[str]) -> str:
            return f"${names.setdefault(match[1], len(names) + 1)}"

        numbered = _NAMED.sub(number, sql)
        if "%" in numbered:
            raise ValueError("a numbered statement holds no % but its placeholders")
        return cls(numbered, tuple(names))

    def values(self, params: Mapping[str, Any]) -> list[Any]:
        """The parameters in the statement's order."""
        return [params[name] for name in self.names]


async def fetch_numbered(
    driver: psycopg.AsyncConnection[Any], statement: Numbered, params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Run ``statement`` (prepared on its first execution on the connection) with ``params`` by name;
    its rows as dicts. Every list goes in binary (:func:`raw_cursor`): dumped as text, arrays cost the
    server several times the CPU to read."""
    async with raw_cursor(driver, row_factory=dict_row) as cursor:
        await cursor.execute(statement.sql, statement.values(params), prepare=True)
        return await cursor.fetchall()


def raw_cursor(
    driver: psycopg.AsyncConnection[Any], row_factory: RowFactory[Any] = tuple_row
) -> psycopg.AsyncRawCursor[Any]:
    """A cursor for :class:`Numbered` statements (``$n`` placeholders, parameters in order): its lists
    go in binary, as ``%(name)b`` has them go."""
    cursor = psycopg.AsyncRawCursor(driver, row_factory=row_factory)
    cursor.adapters.register_dumper(list, ListBinaryDumper)
    return cursor


# The transaction's statements take the plan their prepared statement keeps for any values, from here on
# (``SET LOCAL``: until the COMMIT). For transactions of statements that look rows up by key, whose
# plan does not depend on the values: PostgreSQL's default plans them anew at every execution for as
# long as it believes a plan for the values at hand beats the generic one, which for ``= ANY($1)`` (its
# guess: ten elements) and ``unnest`` it always does, so every execution paid for its planning.
GENERIC_PLANS = Statement("SET LOCAL plan_cache_mode = force_generic_plan")


# Where a session keeps the statements that go out with its COMMIT (``session.info``): the writes, then
# the checks.
_WRITES = "nico.writes_at_commit"
_AT_COMMIT = "nico.at_commit"


class WrittenAtCommit:
    """A write that goes out with the transaction's COMMIT, ahead of its checks (:class:`AtCommit`), in
    the same round trip (:func:`write_at_commit`): a statement whose answer is read only once the
    transaction has committed (a create's insert, which answers with the response's documents)."""

    def __init__(self, statement: NumberedStatement) -> None:
        self.statement = statement
        self._rows: list[dict[str, Any]] | None = None

    def rows(self) -> list[dict[str, Any]]:
        """What the statement answered; only after :func:`commit` sent it."""
        if self._rows is None:
            raise RuntimeError("a write sent with the COMMIT is read before the commit sent it")
        return self._rows


def write_at_commit(session: AsyncSession, statement: NumberedStatement) -> WrittenAtCommit:
    """Have the session's :func:`commit` send ``statement`` with its COMMIT, before the checks of
    :func:`send_at_commit` (which then see what it wrote): one round trip fewer for a request whose
    last write nothing else waits for. Its rows, once committed: the returned handle's ``rows()``."""
    written = WrittenAtCommit(statement)
    session.info.setdefault(_WRITES, []).append(written)
    return written


@dataclass(frozen=True)
class AtCommit:
    """A statement that goes out with the transaction's COMMIT, in the same round trip (a check whose
    locks are then held for no round trip), and what its error means: ``refused`` turns the error into
    the exception to raise instead (None: not one of its errors, raised as it is). The statement is a
    SELECT of one row of one value at most (a check function's call): several go out as one statement
    (:func:`together`)."""

    statement: Statement
    refused: Callable[[psycopg.Error], Exception | None]


def send_at_commit(session: AsyncSession, statement: AtCommit) -> None:
    """Have the session's :func:`commit` send ``statement`` with its COMMIT (services never commit:
    the request scope does, once)."""
    session.info.setdefault(_AT_COMMIT, []).append(statement)


async def commit(session: AsyncSession) -> None:
    """Commit the session's transaction, sending the writes of :func:`write_at_commit` and then the
    checks of :func:`send_at_commit` before the COMMIT in one pipeline: one round trip for them and the
    COMMIT. When one of them fails nothing is committed (the transaction is aborted: the caller's
    rollback ends it) and the error is raised, as a check's ``refused`` error when it is one."""
    writes: list[WrittenAtCommit] = session.info.pop(_WRITES, [])
    checks: list[AtCommit] = session.info.pop(_AT_COMMIT, [])
    if writes or checks:
        await session.flush()  # the ORM's pending changes go first (none on the create path: no round trip)
        statements = [w.statement for w in writes] + together([c.statement for c in checks])
        try:
            results = await pipelined(await driver_connection(session), statements, commit=True)
        except psycopg.Error as exc:
            for check in checks:
                if (refusal := check.refused(exc)) is not None:
                    raise refusal from None
            raise
        for write, rows in zip(writes, results, strict=False):
            write._rows = rows
    await session.commit()


def together(statements: Sequence[Statement]) -> list[Statement]:
    """The checks of :func:`send_at_commit` as one statement, run in their order (each a scalar subquery
    of one select list, evaluated left to right: a create's quota check, then its changes in flight,
    as when they went out one by one; every statement in a check function takes its own snapshot
    still): one statement fewer for PostgreSQL and the client. Apart when two of them give one
    parameter name different values."""
    params: dict[str, Any] = {}
    for statement in statements:
        for name, value in (statement.params or {}).items():
            if params.setdefault(name, value) != value:
                return list(statements)
    if len(statements) < 2:
        return list(statements)
    return [Statement("SELECT " + ", ".join(f"({s.sql.strip()})" for s in statements), params)]


@event.listens_for(Session, "before_commit")
def _nothing_left_behind(session: Session) -> None:
    """A commit that is not :func:`commit` would commit without the statements registered to go out
    with it (a create's quota check): refused, rather than skipping a check."""
    if session.info.get(_AT_COMMIT) or session.info.get(_WRITES):
        raise RuntimeError("statements to send with the COMMIT are waiting: commit with nico.db.raw.commit")


@event.listens_for(Session, "after_soft_rollback")
def _forget_at_commit(session: Session, _: object) -> None:
    """A rolled back transaction takes the statements it registered with it."""
    session.info.pop(_AT_COMMIT, None)
    session.info.pop(_WRITES, None)
