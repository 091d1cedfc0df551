"""``nico admin import``: a NICo site's objects of one org taken over, each in its own transaction.

Logical partitions first (with nico's record of their partitions on the fabric), then VPCs (whose
default partition is then here), then instances. An object here under its id already is ``present``,
so a second run, or a run after one that failed half-way, goes on where the first stopped; an object
that cannot be taken over is ``skipped`` with the reason and the run goes on.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from nico.adoption import importing
from nico.adoption.source import NicoSource
from nico.adoption.views import DomainListing, Imported
from nico.db.engine import make_session_factory, transaction
from nico.services.errors import ServiceError

Progress = Callable[[Imported], None]


async def run_import(
    engine: AsyncEngine,
    source: NicoSource,
    org: str,
    listings: dict[uuid.UUID, DomainListing],
    progress: Progress | None = None,
) -> list[Imported]:
    """Import the org's objects from ``source`` (``listings``: every domain's partitions, as listed
    before the run); returns what became of each, in the order they were handled."""
    factory = make_session_factory(engine)
    done: list[Imported] = []

    async def one(
        kind: str, id: uuid.UUID, name: str, work: Callable[[AsyncSession], Awaitable[Imported]]
    ) -> None:
        try:
            async with transaction(factory) as session:
                result = await work(session)
        except ServiceError as exc:
            result = Imported(kind, id, name, "skipped", exc.message)
        done.append(result)
        if progress is not None:
            progress(result)

    for lp in await source.logical_partitions():
        await one(
            "logical-partition",
            lp.id,
            lp.name,
            partial(importing.import_partition, org=org, source=lp, listings=listings),
        )
    for vpc in await source.vpcs():
        await one("vpc", vpc.id, vpc.name, partial(importing.import_vpc, org=org, source=vpc))
    for instance in await source.instances():
        await one(
            "instance",
            instance.id,
            instance.name,
            partial(importing.import_instance, org=org, source=instance, listings=listings),
        )
    return done


def summary(results: Sequence[Imported]) -> dict[str, int]:
    """How many objects each outcome had."""
    counts = {"imported": 0, "present": 0, "skipped": 0}
    for r in results:
        counts[r.outcome] += 1
    return counts
