"""The runs of ``nico admin logical-partition adopt`` and ``nico admin import``: the database, the
fabric read and the transactions around the services (:mod:`nico.adoption.service`,
:mod:`nico.adoption.importing`).

Adoption is one transaction. An import takes a NICo site's objects of one org over, each in its own
transaction.
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

from nico.adoption import importing, listing, service
from nico.adoption.source import NicoSource
from nico.adoption.views import Adoption, AdoptRequest, DomainListing, Imported
from nico.config import Settings
from nico.db.engine import make_engine, make_session_factory, transaction
from nico.services import orgs
from nico.services.errors import ServiceError, bad_request

Progress = Callable[[Imported], None]


async def adopt_partition(settings: Settings, url: str, request: AdoptRequest) -> Adoption:
    """Read the request's domain from its fabric manager and adopt the partition, in one transaction
    on the database at ``url``."""
    engine = make_engine(url, pool_size=2)
    try:
        listed = await listing.list_domains(settings, engine, [request.domain_uuid])
        async with transaction(make_session_factory(engine)) as session:
            return await service.adopt(session, request, listed[request.domain_uuid])
    finally:
        await engine.dispose()


async def import_org(
    settings: Settings, url: str, source: NicoSource, org: str, progress: Progress | None = None
) -> list[Imported]:
    """Every domain's partitions read, then the org's objects imported from ``source``
    (:func:`run_import`) into the database at ``url``; the source is closed after."""
    engine = make_engine(url, pool_size=2)
    try:
        listed = await listing.list_domains(settings, engine)
        return await run_import(engine, source, org, listed, progress)
    finally:
        await source.close()
        await engine.dispose()


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
    async with transaction(factory) as session:
        if await orgs.tenant_of(session, org) is None:
            raise bad_request(f"org {org} has no tenant here: create it and its allocations first")
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
