"""One cause, one code: running out of machines answers 409 on every path that places machines (single
create, batch, batch on one NVLink domain), with the reference's message, and changes nothing; the
tenant's quota is another cause and answers 403 (docs/compatibility.md row 86)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api import deps
from nico.db.enums import MachineStatus
from nico.db.models import Machine
from tests.api.conftest import BASE, batch_body, error, instance_body
from tests.support import factories as f
from tests.support.state import fingerprint

CASES: list[tuple[str, str, Callable[[f.NvlinkSite], dict[str, Any]], str]] = [
    ("single create", "instance", instance_body, "No Machines are available for specified Instance Type"),
    (
        "batch",
        "instance/batch",
        lambda w: batch_body(w, count=2, topologyOptimized=False),
        "Insufficient machines available: requested 2, available 0",
    ),
    (
        "batch on one domain",
        "instance/batch",
        lambda w: batch_body(w, count=2),
        "Insufficient machines available: requested 2, available 0",
    ),
]


@pytest.mark.parametrize(("path", "body", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_out_of_machines_is_409_on_every_path(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    session: AsyncSession,
    path: str,
    body: Callable[[f.NvlinkSite], dict[str, Any]],
    message: str,
) -> None:
    world = await f.nvlink_site(session, racks=1, trays=2, quota=10)
    await session.execute(update(Machine).values(status=MachineStatus.MAINTENANCE))
    await session.commit()
    before = await fingerprint(session)
    response = await client.post(f"{BASE}/{path}", json=body(world), headers=headers)
    assert error(response) == (409, message)
    assert await fingerprint(session) == before


@pytest.mark.parametrize(
    "lost",
    [psycopg.errors.DeadlockDetected("deadlock detected"), psycopg.errors.SerializationFailure("conflict")],
    ids=["deadlock", "serialization failure"],
)
async def test_a_create_that_loses_a_race_in_the_database_is_409_retry_never_500(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    session: AsyncSession,
    monkeypatch: pytest.MonkeyPatch,
    lost: psycopg.Error,
) -> None:
    """Two creates whose domains' free counts change in opposite orders can deadlock at the commit
    (``domain_capacity``'s deferred trigger; docs/architecture.md, "Locks"): PostgreSQL rolls one back,
    and its client is told to retry, as for a constraint race, whichever connection raised it."""
    world = await f.nvlink_site(session, racks=2, trays=2, quota=10)
    await session.commit()
    before = await fingerprint(session)

    async def loses(*_: Any, **__: Any) -> Any:
        raise lost

    monkeypatch.setattr(deps, "commit", loses)  # the request's commit, the quota check's round trip
    response = await client.post(f"{BASE}/instance/batch", json=batch_body(world, count=2), headers=headers)
    assert error(response) == (409, "The request conflicts with a concurrent change, please retry")
    assert await fingerprint(session) == before
