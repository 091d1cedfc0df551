"""Reading NVLink domains' partitions from their fabric managers, for adoption and import.

The manager is found as the reconciler finds it (an NMX-C endpoint registered for one of the domain's
chassis and checked with Hello, or NMX-M's site-wide URL); what it lists is handed to the services as
plain values (:class:`~nico.adoption.views.DomainListing`), which know nothing of fabric backends.
Reading never changes the fabric.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from nico.adoption import queries
from nico.adoption.views import DomainListing, SeenPartition
from nico.config import Settings
from nico.db.engine import make_session_factory, transaction
from nico.fabric.backend import FabricBackend, FabricPartition
from nico.fabric.observation import Endpoints
from nico.reconciler.homes import is_tray_partition_name
from nico.reconciler.runtime import open_backend


def seen(partition: FabricPartition) -> SeenPartition:
    home = partition.is_default or is_tray_partition_name(partition.name)
    return SeenPartition(partition.nmx_partition_id, partition.ref, partition.name, partition.gpu_uids, home)


async def list_domains(
    settings: Settings, engine: AsyncEngine, domains: Sequence[uuid.UUID] | None = None
) -> dict[uuid.UUID, DomainListing]:
    """The partitions of ``domains`` (every domain nico knows when None), as listed now, with the
    configured backend opened for the read and closed after it."""
    backend = await open_backend(settings, engine)
    try:
        return await list_with(backend, engine, domains)
    finally:
        await backend.close()


async def list_with(
    backend: FabricBackend, engine: AsyncEngine, domains: Sequence[uuid.UUID] | None = None
) -> dict[uuid.UUID, DomainListing]:
    """:func:`list_domains` through an open ``backend``; the domains are read at once."""
    async with transaction(make_session_factory(engine)) as session:
        chassis = await queries.chassis_of_domains(session, domains)
        registry = await queries.nmxc_registry(session)
    endpoints = Endpoints(backend, ())
    endpoints.registry = registry

    async def one(domain: uuid.UUID) -> DomainListing:
        target = await endpoints.target(domain, chassis.get(domain, set()))
        listed = await backend.list_partitions(target)
        return DomainListing(domain, tuple(seen(p) for p in sorted(listed, key=lambda p: p.nmx_partition_id)))

    wanted = list(domains) if domains is not None else sorted(chassis)
    found = await asyncio.gather(*(one(d) for d in wanted))
    return {listing.domain_uuid: listing for listing in found}
