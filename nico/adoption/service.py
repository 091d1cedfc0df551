"""Adopting a foreign partition: a physical partition nico did not make becomes a tenant's logical
partition, with an instance on each machine whose GPUs it holds and bindings for exactly those GPUs,
recorded under the fabric's own name and id. The checks run first and every refusal is one line with
nothing written (the caller's transaction is rolled back); adopting the same partition again says so
and changes nothing. Never commits."""

from __future__ import annotations

import uuid
from collections import defaultdict

from sqlalchemy.ext.asyncio import AsyncSession

from nico.adoption import creation, queries
from nico.adoption.naming import lp_of_fabric_name
from nico.adoption.views import AdoptedInstance, Adoption, AdoptRequest, DomainListing, SeenPartition
from nico.db.enums import LogicalPartitionStatus
from nico.db.models import LogicalPartition, Machine, PhysicalPartition, Tenant, Vpc
from nico.services import orgs
from nico.services import vpc as vpcs
from nico.services.errors import bad_request, conflict, forbidden, not_found
from nico.services.nvlink_events import desired_state_changed


async def adopt(session: AsyncSession, request: AdoptRequest, listing: DomainListing) -> Adoption:
    """Adopt partition ``request.nmx_partition_id`` of ``listing`` (the domain as listed just now)."""
    tenant = await orgs.tenant_of(session, request.org)
    if tenant is None:
        raise bad_request(f"org {request.org} has no tenant")
    domain, number = request.domain_uuid, request.nmx_partition_id
    seen = listing.partition(number)
    if seen is None:
        raise not_found(f"domain {domain} has no partition {number} on the fabric")
    if seen.is_home:
        raise bad_request(f"partition {number} of domain {domain} is a default or tray partition: nobody's")
    recorded = await queries.physical_partition_at(session, domain, number)
    if recorded is not None:
        return await _done_before(session, tenant, recorded, seen)
    site = await queries.site_of_domain(session, domain)
    if site is None:
        raise not_found(f"domain {domain} is not one nico knows")
    if not seen.gpu_uids:
        raise bad_request(f"partition {number} of domain {domain} holds no GPU")
    machines = await _checked_machines(session, tenant, request.org, site, listing, seen)
    lp = await _logical_partition(session, tenant, site, request, seen)
    await creation.physical_partition(session, lp.id, domain, seen)
    instances = await _bind_machines(session, tenant, request, lp.id, machines)
    await desired_state_changed(session, instance_ids=[i.id for i in instances], domains=[domain])
    return Adoption(lp.id, lp.name, domain, number, seen.name, tuple(instances))


async def _done_before(
    session: AsyncSession, tenant: Tenant, recorded: PhysicalPartition, seen: SeenPartition
) -> Adoption:
    lp = await session.get(LogicalPartition, recorded.logical_partition_id)
    assert lp is not None  # RESTRICT: a partition's record keeps its LP
    if lp.tenant_id != tenant.id or recorded.name != seen.name:
        raise conflict(
            f"partition {seen.nmx_partition_id} of domain {recorded.domain_uuid} is already nico's: "
            f"logical partition {lp.id}"
        )
    return Adoption(
        lp.id, lp.name, recorded.domain_uuid, recorded.nmx_partition_id, seen.name, done_before=True
    )


async def _checked_machines(
    session: AsyncSession,
    tenant: Tenant,
    org: str,
    site: uuid.UUID,
    listing: DomainListing,
    seen: SeenPartition,
) -> list[tuple[Machine, tuple[int, ...]]]:
    """The partition's machines, each checked: every GPU known, in no other partition and bound to
    nothing, each machine in the domain, free or the org's, of a type the org's allocations cover."""
    number, domain = seen.nmx_partition_id, listing.domain_uuid
    known = await queries.known_gpus(session, seen.gpu_uids)
    if unknown := sorted(seen.gpu_uids - set(known)):
        raise bad_request(
            f"partition {number} holds {len(unknown)} GPU(s) nico does not know (first: {unknown[0]}): "
            "register their machines first"
        )
    for other in listing.partitions:
        if other.nmx_partition_id != number and (both := sorted(other.gpu_uids & seen.gpu_uids)):
            raise conflict(
                f"GPU {both[0]} is in two partitions on the fabric: {number} and {other.nmx_partition_id}"
            )
    allocated = await queries.allocated_types(session, tenant.id, site)
    devices: dict[str, list[int]] = defaultdict(list)
    for gpu in sorted(known.values(), key=lambda g: g.gpu_uid):
        machine = gpu.machine
        if gpu.bound_to is not None:
            raise conflict(
                f"GPU {gpu.gpu_uid} (machine {machine.id}) is already bound to logical partition "
                f"{gpu.bound_to}"
            )
        if machine.domain_uuid != domain:
            raise conflict(
                f"GPU {gpu.gpu_uid}'s machine {machine.id} is recorded in domain {machine.domain_uuid}"
            )
        if machine.instance_id is not None and gpu.instance_tenant_id != tenant.id:
            raise forbidden(f"machine {machine.id} holds an instance of another tenant")
        creation.check_allocation(machine, allocated, org)
        devices[machine.id].append(gpu.device_id - 1)
    machines = {g.machine.id: g.machine for g in known.values()}
    return [(machines[m], tuple(sorted(d))) for m, d in sorted(devices.items())]


async def _logical_partition(
    session: AsyncSession, tenant: Tenant, site: uuid.UUID, request: AdoptRequest, seen: SeenPartition
) -> LogicalPartition:
    """The LP the partition becomes: the one given or named by the fabric name (NICo's
    ``<LP><GUID>``, nico's ``nico-<LP>``) when it exists and is the org's, else a new one with that id."""
    lp_id = request.logical_partition_id or lp_of_fabric_name(seen.name)
    existing = await session.get(LogicalPartition, lp_id) if lp_id is not None else None
    if existing is None:
        return await creation.logical_partition(
            session,
            tenant,
            site,
            lp_id=lp_id or uuid.uuid4(),
            name=request.name or seen.name,
            description=f"adopted from partition {seen.nmx_partition_id} of domain {request.domain_uuid}",
        )
    if existing.tenant_id != tenant.id:
        raise forbidden(f"logical partition {existing.id} belongs to another tenant")
    if existing.site_id != site or existing.status == LogicalPartitionStatus.DELETING:
        raise conflict(f"logical partition {existing.id} is {existing.status} at site {existing.site_id}")
    return existing


async def _bind_machines(
    session: AsyncSession,
    tenant: Tenant,
    request: AdoptRequest,
    lp: uuid.UUID,
    held: list[tuple[Machine, tuple[int, ...]]],
) -> list[AdoptedInstance]:
    """Bindings for exactly the partition's GPUs: on the org's instance already on a machine, else on
    a new instance of the machine's type in ``request.vpc_id`` (or the org's VPC at the site)."""
    done: list[AdoptedInstance] = []
    vpc: Vpc | None = None
    types: set[uuid.UUID | None] = set()
    for machine, devices in held:
        created = machine.instance_id is None
        if created:
            vpc = vpc or await _vpc(session, tenant, request, machine.site_id, lp)
            await creation.instance_on(
                session,
                tenant,
                machine,
                vpc_id=vpc.id,
                instance_id=uuid.uuid4(),
                name=f"adopted-{machine.id}",
            )
            types.add(machine.instance_type_id)
        instance_id = machine.instance_id
        assert instance_id is not None
        bindings = [creation.NewBinding(lp, d) for d in devices]
        await creation.bind(session, instance_id, machine, bindings)
        done.append(AdoptedInstance(instance_id, machine.id, devices, created))
    await creation.check_quota(session, tenant, types, request.org)
    return done


async def _vpc(
    session: AsyncSession, tenant: Tenant, request: AdoptRequest, site: uuid.UUID, lp: uuid.UUID
) -> Vpc:
    """The VPC adopted instances join: the one given, else the org's VPC at the site that defaults to
    the LP, else its only one there, else a new ``adopted`` VPC; several to choose from is refused."""
    found = list(await queries.vpcs_at(session, tenant.id, site))
    if request.vpc_id is not None:
        given = next((v for v in found if v.id == request.vpc_id), None)
        if given is None:
            raise not_found(f"org {request.org} has no VPC {request.vpc_id} at site {site}")
        return given
    defaulting = [v for v in found if v.nvlink_logical_partition_id == lp]
    if len(defaulting) == 1 or len(found) == 1:
        return (defaulting or found)[0]
    if found:
        raise bad_request(f"org {request.org} has {len(found)} VPCs at site {site}: name one with --vpc-id")
    view = await vpcs.create(
        session,
        request.org,
        creation.VpcBody(
            name="adopted",
            site_id=str(site),
            description="instances adopted from NVLink partitions nico did not make",
        ),
    )
    made = await session.get(Vpc, view.vpc.id)
    assert made is not None
    return made
