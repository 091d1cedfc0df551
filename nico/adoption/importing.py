"""Importing one object of a NICo site (a logical partition, a VPC, an instance) with its id: each
call is one object, for its own transaction. An object already here under its id is ``present``;
one that cannot be taken over is refused with why (:class:`~nico.services.errors.ServiceError`),
nothing written. Logical partitions come with nico's record of their partitions on the fabric (named
``<LP><GUID>`` by NICo, ``nico-<LP>`` by another nico), instances with their bindings on the machine
whose GPUs the fabric shows in those partitions (or the machine of the same id). Never commits."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from sqlalchemy.ext.asyncio import AsyncSession

from nico.adoption import creation, queries
from nico.adoption.naming import lp_of_fabric_name
from nico.adoption.views import (
    DomainListing,
    Imported,
    SeenPartition,
    SourceInstance,
    SourcePartition,
    SourceVpc,
)
from nico.db.enums import InstanceStatus, LogicalPartitionStatus
from nico.db.models import Instance, LogicalPartition, Machine, Site, Tenant, Vpc
from nico.services import orgs
from nico.services import vpc as vpcs
from nico.services.errors import bad_request, conflict
from nico.services.nvlink_events import desired_state_changed

Listings = Mapping[uuid.UUID, DomainListing]


def partitions_named_for(listings: Listings, lp: uuid.UUID) -> list[tuple[uuid.UUID, SeenPartition]]:
    """(domain, partition) of every partition on the fabric whose name speaks for ``lp``."""
    return [
        (domain, p)
        for domain, listing in sorted(listings.items())
        for p in listing.partitions
        if not p.is_home and lp_of_fabric_name(p.name) == lp
    ]


async def _tenant(session: AsyncSession, org: str) -> Tenant:
    tenant = await orgs.tenant_of(session, org)
    if tenant is None:
        raise bad_request(f"org {org} has no tenant here")
    return tenant


def _present(kind: str, row: LogicalPartition | Vpc | Instance, tenant: Tenant) -> Imported:
    if row.tenant_id != tenant.id:
        raise conflict(f"id {row.id} is another tenant's {kind} here")
    return Imported(kind, row.id, row.name, "present", "already here under its id")


async def _site(
    session: AsyncSession, tenant: Tenant, given: uuid.UUID, domain: uuid.UUID | None
) -> uuid.UUID:
    """The local site of a source object: the same id when this site has it, else the site of the
    domain its partition is on, else the org's only site."""
    if await session.get(Site, given) is not None:
        return given
    if domain is not None and (site := await queries.site_of_domain(session, domain)) is not None:
        return site
    sites = await queries.sites_of_tenant(session, tenant.id)
    if len(sites) != 1:
        raise bad_request(f"no site {given} here and the org has {len(sites)} sites: cannot tell which")
    return sites[0]


async def import_partition(
    session: AsyncSession, org: str, source: SourcePartition, listings: Listings
) -> Imported:
    """The logical partition with its id and name, Ready, and nico's record of each partition the
    fabric holds for it (at most one per domain)."""
    tenant = await _tenant(session, org)
    kind = "logical-partition"
    if (row := await session.get(LogicalPartition, source.id)) is not None:
        return _present(kind, row, tenant)
    if source.status == LogicalPartitionStatus.DELETING:
        raise bad_request("being deleted at the source")
    found = partitions_named_for(listings, source.id)
    domains = [d for d, _ in found]
    if len(set(domains)) != len(domains):
        raise conflict("the fabric holds two partitions named for it in one domain")
    site = await _site(session, tenant, source.site_id, domains[0] if domains else None)
    lp = await creation.logical_partition(
        session, tenant, site, lp_id=source.id, name=source.name, description=source.description
    )
    for domain, seen in found:
        await creation.physical_partition(session, lp.id, domain, seen)
    where = f"its partition on {len(found)} domain(s) recorded" if found else "no partition on the fabric yet"
    return Imported(kind, lp.id, lp.name, "imported", where)


async def import_vpc(session: AsyncSession, org: str, source: SourceVpc) -> Imported:
    """The VPC with its id, name and default logical partition (which must be here already)."""
    tenant = await _tenant(session, org)
    if (row := await session.get(Vpc, source.id)) is not None:
        return _present("vpc", row, tenant)
    default = source.logical_partition_id
    lp = await session.get(LogicalPartition, default) if default is not None else None
    if default is not None and lp is None:
        raise bad_request(f"its default logical partition {default} was not imported")
    site = lp.site_id if lp is not None else await _site(session, tenant, source.site_id, None)
    view = await vpcs.create(
        session,
        org,
        creation.VpcBody(
            name=source.name,
            site_id=str(site),
            description=source.description,
            id=str(source.id),
            network_virtualization_type=source.network_virtualization_type,
            labels=source.labels,
            nv_link_logical_partition_id=str(default) if default is not None else None,
        ),
    )
    return Imported("vpc", view.vpc.id, view.vpc.name, "imported")


async def import_instance(
    session: AsyncSession, org: str, source: SourceInstance, listings: Listings
) -> Imported:
    """The instance with its id on the machine the fabric shows its GPUs on, bound as at the source
    (the bindings keep their ids)."""
    tenant = await _tenant(session, org)
    if (row := await session.get(Instance, source.id)) is not None:
        return _present("instance", row, tenant)
    if source.status == InstanceStatus.TERMINATING:
        raise bad_request("terminating at the source")
    vpc = await session.get(Vpc, source.vpc_id)
    if vpc is None or vpc.tenant_id != tenant.id:
        raise bad_request(f"its VPC {source.vpc_id} was not imported")
    for lp_id in {i.logical_partition_id for i in source.interfaces}:
        lp = await session.get(LogicalPartition, lp_id)
        if lp is None or lp.tenant_id != tenant.id:
            raise bad_request(f"its logical partition {lp_id} was not imported")
    machine = await _machine(session, source, listings)
    if machine.instance_id is not None:
        raise conflict(f"machine {machine.id} holds instance {machine.instance_id}")
    creation.check_allocation(
        machine, await queries.allocated_types(session, tenant.id, machine.site_id), org
    )
    await creation.instance_on(
        session,
        tenant,
        machine,
        vpc_id=vpc.id,
        instance_id=source.id,
        name=source.name,
        description=source.description,
        labels=source.labels,
    )
    bindings = [
        creation.NewBinding(i.logical_partition_id, i.device_instance, i.id) for i in source.interfaces
    ]
    await creation.bind(session, source.id, machine, bindings)
    await creation.check_quota(session, tenant, {machine.instance_type_id}, org)
    await desired_state_changed(session, instance_ids=[source.id])
    return Imported("instance", source.id, source.name, "imported", f"on machine {machine.id}")


async def _machine(session: AsyncSession, source: SourceInstance, listings: Listings) -> Machine:
    """The machine holding the source instance's GPUs in the partitions the fabric holds for their
    logical partitions (each GPU at its device instance), else the machine with the source's id."""
    shown = {
        i.gpu_uid: i.device_instance
        for i in source.interfaces
        if i.gpu_uid is not None
        and any(i.gpu_uid in p.gpu_uids for _, p in partitions_named_for(listings, i.logical_partition_id))
    }
    known = await queries.known_gpus(session, shown) if shown else {}
    machines = {g.machine.id: g.machine for g in known.values()}
    if len(machines) > 1:
        raise conflict(f"its GPUs are on {len(machines)} machines here: {', '.join(sorted(machines))}")
    if machines and len(known) == len(shown):
        for uid, gpu in known.items():
            if gpu.device_id - 1 != shown[uid]:
                raise conflict(f"GPU {uid} is device {gpu.device_id - 1} here, {shown[uid]} at the source")
        return next(iter(machines.values()))
    if source.machine_id and (machine := await queries.machine_by_id(session, source.machine_id)) is not None:
        return machine
    raise bad_request("no machine here holds its GPUs in its partitions on the fabric or has its machine id")
