"""Outages told once: a database or fabric outage logs one warning when it starts and one when it
ends (its length and what failed meanwhile, per domain), not a line or a traceback per retry.

The reconciler retries every failed domain with backoff, so an outage of a minute used to log a
traceback per domain per retry (31-32 per reconciler for one database restart). A failure nico
understands (the database unreachable, a fabric manager unreachable or refusing) is counted here;
anything else (a bug) still gets its traceback where it is caught.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg
from sqlalchemy import exc as sa_exc

log = logging.getLogger(__name__)

DATABASE = "database"


def is_database_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached (as opposed to a query nico got wrong)."""
    if isinstance(exc, sa_exc.DBAPIError):
        return exc.connection_invalidated or isinstance(exc.orig, psycopg.OperationalError)
    return isinstance(
        exc, psycopg.OperationalError | sa_exc.InterfaceError | ConnectionError | TimeoutError | OSError
    )


@dataclass
class _Outage:
    started: float
    first: str
    failures: Counter[uuid.UUID | None] = field(default_factory=Counter)


class Outages:
    """The outages in progress: the database's, and each domain's fabric manager's."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._open: dict[str, _Outage] = {}

    @property
    def database_down(self) -> bool:
        return DATABASE in self._open

    def database_failed(self, exc: BaseException, domain: uuid.UUID | None = None) -> bool:
        """Count a failure; True when it is a database outage (logged once, at its start), False
        when it is something else (the caller logs it with its traceback)."""
        if not is_database_outage(exc):
            return False
        self._failed(DATABASE, domain, f"the database is unreachable: {_short(exc)}")
        return True

    def database_ok(self) -> None:
        self._ended(DATABASE, "the database is reachable again")

    def fabric_failed(self, domain: uuid.UUID, message: str) -> None:
        """A pass over ``domain`` failed on its fabric manager (``message`` says how)."""
        self._failed(f"fabric:{domain}", domain, f"domain {domain}: {message}")

    def fabric_ok(self, domain: uuid.UUID) -> None:
        self._ended(f"fabric:{domain}", f"domain {domain}: the fabric manager answers again")

    def _failed(self, key: str, domain: uuid.UUID | None, message: str) -> None:
        outage = self._open.get(key)
        if outage is None:
            outage = self._open[key] = _Outage(self._clock(), message)
            log.warning("%s (one line until it ends)", message)
        outage.failures[domain] += 1

    def _ended(self, key: str, message: str) -> None:
        outage = self._open.pop(key, None)
        if outage is None:
            return
        length = self._clock() - outage.started
        retries = sum(outage.failures.values())
        domains = sorted((d for d in outage.failures if d is not None), key=str)
        per_domain = ", ".join(f"{d}: {outage.failures[d]}" for d in domains[:10])
        more = f" and {len(domains) - 10} more" if len(domains) > 10 else ""
        where = f"; failures per domain: {per_domain}{more}" if domains else ""
        log.warning("%s after %.1f s (%d failed attempts%s)", message, length, retries, where)


def _short(exc: BaseException) -> str:
    """The first line of an exception's message: the driver's reason, without SQL or traceback."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
