"""Instances (spec §5, §6): create one, create a batch on one NVLink domain, list, get, update (the
NVLink bindings above all), delete.

An instance and its NVLink interfaces stay Pending until the reconciler reports the fabric matches
(:mod:`nico.services.lifecycle`); one on a machine without an NVLink domain has nothing to wait for
and is Ready at once. Every change of desired NVLink state is handed to the reconciler with
:func:`nico.services.nvlink_events.desired_state_changed` in the same transaction.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, delete, exists, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import (
    InstanceStatus,
    InterfaceStatus,
    MachineStatus,
    NvLinkInterfaceStatus,
    SiteStatus,
    SubnetStatus,
    VpcStatus,
)
from nico.db.models import (
    Allocation,
    AllocationConstraint,
    Instance,
    InstanceInterface,
    InstanceType,
    Machine,
    MachineCapability,
    NvlinkInterface,
    Site,
    StatusDetail,
    Subnet,
    Tenant,
    Vpc,
)
from nico.services import assignment, status
from nico.services.access import tenant_uses_site
from nico.services.errors import ServiceError, bad_request, conflict, forbidden, not_found
from nico.services.instance_view import InstanceView, Source, load, load_for_caller
from nico.services.listing import PageRequest, fetch_page
from nico.services.nvlink_events import desired_state_changed
from nico.services.nvlink_interface import (
    BATCH,
    SINGLE,
    Binding,
    PartitionTexts,
    check_partitions,
    default_bindings,
    gpu_range_problem,
    nvlink_capabilities,
)
from nico.services.orgs import require_tenant
from nico.services.placement import Ask, NoCapacity

ORDER_FIELDS = frozenset(
    {
        "name",
        "status",
        "created",
        "updated",
        "machine_id",
        "tenant_org_display_name",
        "instance_type_name",
        "has_infiniband",
        "network_security_group.name",
    }
)
PENDING_MESSAGE = "received instance creation request, pending"
READY_MESSAGE = "Instance is ready for use"
ORG_MISMATCH = "Org specified in request does not match Org of Tenant associated with Instance"
NO_ALLOCATION = "Tenant does not have any Allocations for Site and Instance Type specified in request data"


@dataclass(frozen=True)
class Port:
    """A requested Ethernet interface."""

    subnet_id: uuid.UUID
    is_physical: bool = False


@dataclass(frozen=True)
class InstanceSpec:
    """What single and batch creation share, parsed and checked field by field."""

    vpc_id: uuid.UUID
    ports: Sequence[Port]
    nvlink: Sequence[Binding] | None = None  # None: not given
    tenant_id: uuid.UUID | None = None
    description: str | None = None
    ipxe_script: str | None = None
    user_data: str | None = None
    phone_home_enabled: bool = False
    always_boot_with_custom_ipxe: bool = False
    labels: dict[str, str] | None = None
    created_by: str | None = None


@dataclass(frozen=True)
class SubnetTexts:
    not_found: str
    tenant: str = "Subnet: {id} specified in request is not owned by Tenant"
    ready: str = "Subnet: {id} specified in request data is not in Ready state"
    vpc: str = "Subnet: {id} specified in request does not match with VPC"


@dataclass(frozen=True)
class CreateTexts:
    """How single and batch creation word their NVLink errors."""

    no_capability: str
    invalid: str
    partitions: PartitionTexts
    lookup_first: bool  # batch compares with the VPC default before looking the partition up


SINGLE_CREATE = CreateTexts(
    no_capability="NVLink Interfaces cannot be specified if Instance Type doesn't have NVLink GPU Capability",
    invalid="Failed to validate NVLink interfaces specified in request data",
    partitions=SINGLE,
    lookup_first=True,
)
BATCH_CREATE = CreateTexts(
    no_capability="NVLink Interfaces cannot be specified if Instance Type doesn't have GPU Capabilities",
    invalid="NVLink interfaces validation failed: nvLinkInterfaces: {problem}.",
    partitions=BATCH,
    lookup_first=False,
)
SINGLE_SUBNETS = SubnetTexts(not_found="Subnet: {id} specified in request data is not found in DB")
BATCH_SUBNETS = SubnetTexts(not_found="Could not find Subnet with ID specified in request data")


async def _tenant(session: AsyncSession, org: str, requested: uuid.UUID | None) -> Tenant:
    tenant = await require_tenant(session, org, status=400)
    if requested is not None and requested != tenant.id:
        if await session.get(Tenant, requested) is None:
            raise bad_request("TenantID in request is not valid")
        raise bad_request("TenantID in request does not match tenant in org")
    return tenant


async def _vpc(session: AsyncSession, tenant: Tenant, vpc_id: uuid.UUID) -> Vpc:
    # FOR SHARE: a concurrent change of the VPC's default partition waits for this transaction.
    vpc = await session.scalar(select(Vpc).where(Vpc.id == vpc_id).with_for_update(read=True))
    if vpc is None:
        raise bad_request("Could not find VPC with ID specified in request data")
    if vpc.tenant_id != tenant.id:
        raise bad_request("VPC specified in request is not owned by Tenant")
    if vpc.status != VpcStatus.READY:
        raise bad_request("VPC specified in request data is not ready")
    return vpc


async def _check_subnets(
    session: AsyncSession, tenant: Tenant, vpc: Vpc, ports: Sequence[Port], texts: SubnetTexts
) -> None:
    ids = {p.subnet_id for p in ports}
    found = {s.id: s for s in await session.scalars(select(Subnet).where(Subnet.id.in_(ids)))}
    for port in ports:
        subnet = found.get(port.subnet_id)
        if subnet is None:
            raise bad_request(texts.not_found.format(id=port.subnet_id))
        if subnet.tenant_id != tenant.id:
            raise bad_request(texts.tenant.format(id=port.subnet_id))
        if subnet.status != SubnetStatus.READY:
            raise bad_request(texts.ready.format(id=port.subnet_id))
        if subnet.vpc_id != vpc.id:
            raise bad_request(texts.vpc.format(id=port.subnet_id))


async def _quota(session: AsyncSession, tenant: Tenant, itype: InstanceType) -> tuple[int, int] | None:
    """(instances of the type, reserved machines) for the tenant, or None without an allocation.

    The tenant's constraint rows for the type are locked, so concurrent creates of one tenant and type
    take turns at the count and can never exceed the quota together.
    """
    values = (
        await session.scalars(
            select(AllocationConstraint.constraint_value)
            .join(Allocation, Allocation.id == AllocationConstraint.allocation_id)
            .where(Allocation.tenant_id == tenant.id, AllocationConstraint.instance_type_id == itype.id)
            .order_by(AllocationConstraint.id)
            .with_for_update(of=AllocationConstraint)
        )
    ).all()
    if not values:
        return None
    used = await session.scalar(
        select(func.count()).where(Instance.tenant_id == tenant.id, Instance.instance_type_id == itype.id)
    )
    return int(used or 0), sum(values)


def _requested_partitions(spec: InstanceSpec, vpc: Vpc) -> set[uuid.UUID]:
    if spec.nvlink:
        return {b.partition_id for b in spec.nvlink}
    return {vpc.nvlink_logical_partition_id} if vpc.nvlink_logical_partition_id else set()


async def _add_instances(
    session: AsyncSession,
    *,
    tenant: Tenant,
    vpc: Vpc,
    itype_id: uuid.UUID | None,
    spec: InstanceSpec,
    names: Sequence[str],
    machines: Sequence[Machine],
    bindings: Sequence[Binding],
) -> list[uuid.UUID]:
    """Insert the instances with their interfaces, bindings and first history, assign the machines,
    and hand the change to the reconciler. Returns the new ids in ``names`` order."""
    ids = [uuid.uuid4() for _ in names]
    ports = list(spec.ports)
    if not any(p.is_physical for p in ports):
        ports[0] = Port(ports[0].subnet_id, True)  # the first interface is the physical one
    # Bulk statements (one round trip per table) rather than the unit of work: a batch is 18
    # instances with their interfaces, bindings and history, and the per-object bookkeeping of the
    # unit of work would cost more than the inserts.
    instances: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    interfaces: list[dict[str, Any]] = []
    nvlinks: list[dict[str, Any]] = []
    for instance_id, name, machine in zip(ids, names, machines, strict=True):
        ready = machine.nvlink_domain_uuid is None  # nothing on the fabric to wait for
        instances.append(
            {
                "id": instance_id,
                "tenant_id": tenant.id,
                "site_id": vpc.site_id,
                "instance_type_id": itype_id,
                "vpc_id": vpc.id,
                "name": name,
                "description": spec.description,
                "ipxe_script": spec.ipxe_script,
                "user_data": spec.user_data,
                "always_boot_with_custom_ipxe": spec.always_boot_with_custom_ipxe,
                "phone_home_enabled": spec.phone_home_enabled,
                "labels": spec.labels,
                "status": InstanceStatus.READY if ready else InstanceStatus.PENDING,
                "created_by": spec.created_by,
            }
        )
        history.append(
            {"instance_id": instance_id, "status": InstanceStatus.PENDING, "message": PENDING_MESSAGE}
        )
        if ready:
            history.append(
                {"instance_id": instance_id, "status": InstanceStatus.READY, "message": READY_MESSAGE}
            )
        interfaces.extend(
            {
                "instance_id": instance_id,
                "subnet_id": port.subnet_id,
                "is_physical": port.is_physical,
                "status": InterfaceStatus.READY,
            }
            for port in ports
        )
        nvlinks.extend(
            {
                "instance_id": instance_id,
                "logical_partition_id": binding.partition_id,
                "site_id": vpc.site_id,
                "device_instance": binding.device_instance,
                "device": binding.device,
                "status": NvLinkInterfaceStatus.PENDING,
                "created_by": spec.created_by,
            }
            for binding in bindings
        )
    for table, rows in (
        (Instance.__table__, instances),
        (StatusDetail.__table__, history),
        (InstanceInterface.__table__, interfaces),
        (NvlinkInterface.__table__, nvlinks),
    ):
        if rows:  # Core inserts: the ORM's bulk path adds bookkeeping that is not needed here
            await session.execute(insert(cast(Table, table)), rows)
    await session.execute(
        update(Machine), [{"id": m.id, "instance_id": i} for m, i in zip(machines, ids, strict=True)]
    )
    await desired_state_changed(session, instance_ids=ids)
    return ids


async def _machines(session: AsyncSession, ids: Sequence[str]) -> list[Machine]:
    by_id = {m.id: m for m in await session.scalars(select(Machine).where(Machine.id.in_(ids)))}
    return [by_id[i] for i in ids]


async def create(
    session: AsyncSession,
    org: str,
    spec: InstanceSpec,
    *,
    name: str,
    instance_type_id: uuid.UUID | None,
    machine_id: str | None,
    seed: int | None = None,
) -> InstanceView:
    """One instance on a machine placed by policy (or on ``machine_id`` for targeted creation)."""
    tenant = await _tenant(session, org, spec.tenant_id)
    vpc = await _vpc(session, tenant, spec.vpc_id)
    site = await session.get(Site, vpc.site_id)
    assert site is not None
    if site.status != SiteStatus.REGISTERED:
        raise bad_request("The Site where this Instance is being created is not in Registered state")
    await _check_subnets(session, tenant, vpc, spec.ports, SINGLE_SUBNETS)
    clash = await session.scalar(
        select(Instance.id).where(
            Instance.tenant_id == tenant.id, Instance.site_id == site.id, Instance.name == name
        )
    )
    if clash is not None:
        raise conflict("An Instance with specified name already exists for Tenant", {"id": str(clash)})
    explicit = list(spec.nvlink or ())
    if instance_type_id is not None:
        itype = await session.get(InstanceType, instance_type_id)
        if itype is None:
            raise bad_request("Could not find Instance Type with ID specified in request data")
        if itype.site_id != site.id:
            raise bad_request(
                "VPC and Instance Type specified in request data do not belong to the same Site"
            )
        if not await tenant_uses_site(session, tenant.id, itype.site_id):
            raise forbidden(NO_ALLOCATION)
        quota = await _quota(session, tenant, itype)
        if quota is None:
            raise forbidden(NO_ALLOCATION)
        if quota[0] >= quota[1]:
            raise forbidden(
                "Tenant has reached the maximum number of Instances for Instance Type specified in "
                "request data"
            )
        capabilities = await nvlink_capabilities(session, instance_type_id=itype.id)
        wants_nvlink = bool(explicit) or (vpc.nvlink_logical_partition_id is not None and bool(capabilities))
        try:
            (chosen,) = await assignment.claim(
                session,
                site_id=site.id,
                ask=Ask(instance_type_id=itype.id, needs_nvlink=wants_nvlink),
                partition_ids=_requested_partitions(spec, vpc),
                seed=seed,
            )
        except NoCapacity:
            raise bad_request("No Machines are available for specified Instance Type") from None
        (machine,) = await _machines(session, [chosen])
    else:
        assert machine_id is not None
        itype, capabilities = None, []
        machine = await _targeted_machine(session, tenant, site, machine_id)
    if not capabilities:
        capabilities = await nvlink_capabilities(session, machine_id=machine.id)
    bindings = await _create_bindings(session, tenant, vpc, explicit, capabilities, SINGLE_CREATE)
    if bindings and machine.nvlink_domain_uuid is None:
        raise bad_request(SINGLE_CREATE.no_capability)
    (new_id,) = await _add_instances(
        session,
        tenant=tenant,
        vpc=vpc,
        itype_id=itype.id if itype else None,
        spec=spec,
        names=[name],
        machines=[machine],
        bindings=bindings,
    )
    return (await load(session, [new_id], chronological=True))[0]


async def _targeted_machine(session: AsyncSession, tenant: Tenant, site: Site, machine_id: str) -> Machine:
    if not tenant.targeted_instance_creation:
        raise forbidden("Tenant does not have the capability to create Instances on a specific Machine")
    machine = await session.scalar(select(Machine).where(Machine.id == machine_id).with_for_update())
    if machine is None or machine.site_id != site.id:
        raise bad_request("Could not find Machine with ID specified in request data")
    if machine.instance_id is not None or machine.status != MachineStatus.READY or machine.is_missing_on_site:
        raise bad_request("Machine specified in request data is not available for Instance creation")
    return machine


async def create_batch(
    session: AsyncSession,
    org: str,
    spec: InstanceSpec,
    *,
    name_prefix: str,
    count: int,
    instance_type_id: uuid.UUID,
    topology_optimized: bool,
    seed: int | None = None,
) -> list[InstanceView]:
    """``count`` instances, all or nothing (spec §6)."""
    tenant = await _tenant(session, org, spec.tenant_id)
    itype = await session.get(InstanceType, instance_type_id)
    if itype is None:
        raise bad_request("Could not find Instance Type with ID specified in request data")
    vpc = await _vpc(session, tenant, spec.vpc_id)
    if vpc.site_id != itype.site_id:
        raise bad_request("VPC and Instance Type specified in request data do not belong to the same Site")
    site = await session.get(Site, vpc.site_id)
    assert site is not None
    if site.status != SiteStatus.REGISTERED:
        raise bad_request("The Site where Instances are being created is not in Registered state")
    await _check_subnets(session, tenant, vpc, spec.ports, BATCH_SUBNETS)
    suffix = uuid.uuid4().hex[:6]
    names = [f"{name_prefix}-{suffix}-{n}" for n in range(1, count + 1)]
    clash = await session.scalar(
        select(Instance.name)
        .where(Instance.tenant_id == tenant.id, Instance.site_id == site.id, Instance.name.in_(names))
        .limit(1)
    )
    if clash is not None:
        raise conflict(
            f"Instance with name '{clash}' already exists for Tenant at this Site. "
            "Please choose a different name prefix."
        )
    quota = (
        await _quota(session, tenant, itype) if await tenant_uses_site(session, tenant.id, site.id) else None
    )
    if quota is None:
        raise forbidden(NO_ALLOCATION)
    if quota[0] + count > quota[1]:
        raise forbidden(
            "Tenant has reached the maximum number of Instances for Instance Type. "
            f"Current: {quota[0]}, Requested: {count}, Max: {quota[1]}"
        )
    capabilities = await nvlink_capabilities(session, instance_type_id=itype.id)  # no machine fallback
    explicit = list(spec.nvlink or ())
    wants_nvlink = bool(explicit) or (vpc.nvlink_logical_partition_id is not None and bool(capabilities))
    try:
        chosen = await assignment.claim(
            session,
            site_id=site.id,
            ask=Ask(
                instance_type_id=itype.id,
                count=count,
                needs_nvlink=wants_nvlink,
                topology_optimized=topology_optimized,
            ),
            partition_ids=_requested_partitions(spec, vpc),
            seed=seed,
        )
    except NoCapacity as exc:
        if exc.available < count:
            raise conflict(
                f"Insufficient machines available: requested {count}, available {exc.available}"
            ) from None
        raise conflict(
            f"Topology optimization requires all {count} machines on same NVLink domain, but best domain "
            f"only has {exc.best_domain} available"
        ) from None
    bindings = await _create_bindings(session, tenant, vpc, explicit, capabilities, BATCH_CREATE)
    machines = await _machines(session, chosen)
    if bindings and any(m.nvlink_domain_uuid is None for m in machines):
        raise bad_request(BATCH_CREATE.no_capability)
    ids = await _add_instances(
        session,
        tenant=tenant,
        vpc=vpc,
        itype_id=itype.id,
        spec=spec,
        names=names,
        machines=machines,
        bindings=bindings,
    )
    return await load(session, ids, chronological=True)


async def _create_bindings(
    session: AsyncSession,
    tenant: Tenant,
    vpc: Vpc,
    explicit: list[Binding],
    capabilities: Sequence[MachineCapability],
    texts: CreateTexts,
) -> list[Binding]:
    """The bindings of new instances: the explicit ones, checked (spec §5.3, §6.4), or one per GPU on
    the VPC's default partition, or none."""
    if explicit:
        if not capabilities:
            raise bad_request(texts.no_capability)
        problem = gpu_range_problem(explicit, capabilities)
        if problem:
            raise bad_request(texts.invalid.format(problem=problem), {"nvLinkInterfaces": problem})
        await check_partitions(
            session,
            explicit,
            tenant_id=tenant.id,
            site_id=vpc.site_id,
            texts=texts.partitions,
            vpc_default=vpc.nvlink_logical_partition_id,
            lookup_first=texts.lookup_first,
        )
        return explicit
    if vpc.nvlink_logical_partition_id is not None:
        return default_bindings(vpc.nvlink_logical_partition_id, capabilities)
    return []


async def get(source: Source, org: str, instance_id: uuid.UUID) -> InstanceView:
    """The instance as its GET shows it (relations are attached separately, when asked for)."""
    caller, view = await load_for_caller(source, org, instance_id)
    if caller is None:
        raise forbidden("Org does not have a Tenant associated")
    if view is None:
        raise not_found("Could not find Instance with specified ID")
    if view.data["tenant_id"] != caller:
        raise forbidden("Instance does not belong to current Tenant")
    return view


@dataclass(frozen=True)
class InstanceFilter:
    site_ids: Sequence[uuid.UUID] = ()
    vpc_ids: Sequence[uuid.UUID] = ()
    instance_type_ids: Sequence[uuid.UUID] = ()
    machine_ids: Sequence[str] = ()
    statuses: Sequence[str] = ()
    nothing: bool = False  # a filter on something nico never records (OS, NSG, IP address)
    provider_id: uuid.UUID | None = None
    name: str | None = None
    query: str | None = None


async def list_instances(
    session: AsyncSession, org: str, where: InstanceFilter, relations: frozenset[str], page: PageRequest
) -> tuple[list[InstanceView], int]:
    tenant = await require_tenant(session, org, status=403)
    stmt = select(Instance.id).where(Instance.tenant_id == tenant.id)
    for site_id in where.site_ids:
        if not await tenant_uses_site(session, tenant.id, site_id):
            raise forbidden("Tenant is not associated with one or more of the Sites specified in query")
    if where.site_ids:
        stmt = stmt.where(Instance.site_id.in_(where.site_ids))
    if where.vpc_ids:
        known = set((await session.scalars(select(Vpc.id).where(Vpc.id.in_(where.vpc_ids)))).all())
        for vpc_id in where.vpc_ids:
            if vpc_id not in known:
                raise not_found(f"Could not find VPC with ID {vpc_id} specified in query")
        stmt = stmt.where(Instance.vpc_id.in_(where.vpc_ids))
    for value in where.statuses:
        if value not in set(InstanceStatus):
            raise bad_request("Invalid Status value in query")
    if where.statuses:
        stmt = stmt.where(Instance.status.in_(where.statuses))
    if where.instance_type_ids:
        stmt = stmt.where(Instance.instance_type_id.in_(where.instance_type_ids))
    if where.machine_ids:
        stmt = stmt.where(
            exists().where(Machine.instance_id == Instance.id, Machine.id.in_(where.machine_ids))
        )
    if where.provider_id is not None:
        stmt = stmt.where(
            Instance.site_id.in_(select(Site.id).where(Site.infrastructure_provider_id == where.provider_id))
        )
    if where.name is not None:
        stmt = stmt.where(Instance.name == where.name)
    if where.query:
        needle = where.query.lower()
        stmt = stmt.where(
            or_(
                func.strpos(func.lower(Instance.name), needle) > 0,
                func.strpos(func.lower(func.coalesce(Instance.description, "")), needle) > 0,
                func.strpos(func.lower(Instance.status), needle) > 0,
            )
        )
    if where.nothing:
        stmt = stmt.where(Instance.id.is_(None))
    machine_of = select(Machine.id).where(Machine.instance_id == Instance.id).scalar_subquery()
    type_name = (
        select(InstanceType.name).where(InstanceType.id == Instance.instance_type_id).scalar_subquery()
    )
    order: dict[str, Any] = {
        "name": Instance.name,
        "status": Instance.status,
        "created": Instance.created,
        "updated": Instance.updated,
        "machine_id": machine_of,
        "instance_type_name": type_name,
        # One tenant per list, no InfiniBand, no security groups: these orders are the creation order.
        "tenant_org_display_name": Instance.created,
        "has_infiniband": Instance.created,
        "network_security_group.name": Instance.created,
    }
    ids, total = await fetch_page(session, stmt, page, order, Instance.id)
    return await load(session, ids, relations=relations), total


async def update_instance(
    session: AsyncSession,
    org: str,
    instance_id: uuid.UUID,
    changes: dict[str, Any],
    nvlink: list[Binding] | None,
) -> InstanceView:
    """Apply ``changes`` (column -> value; ``name`` checked for clashes) and, when ``nvlink`` is given,
    replace the NVLink bindings (spec §5.6)."""
    row = await session.scalar(select(Instance).where(Instance.id == instance_id).with_for_update())
    if row is None:
        raise not_found("Could not retrieve Instance to update")
    owner = await session.get(Tenant, row.tenant_id)
    if owner is None or owner.org != org:
        raise forbidden(ORG_MISMATCH)
    site = await session.get(Site, row.site_id)
    if site is None or site.status != SiteStatus.REGISTERED:
        raise bad_request("Site is not in Registered state - cannot update Instance")
    if row.status == InstanceStatus.TERMINATING:
        raise conflict("Instance is terminating and cannot be updated")
    name = changes.get("name")
    if name is not None and name != row.name:
        clash = await session.scalar(
            select(Instance.id).where(
                Instance.tenant_id == row.tenant_id, Instance.site_id == row.site_id, Instance.name == name
            )
        )
        if clash is not None:
            raise conflict(
                "Another Instance with specified name already exists for Tenant", {"id": str(clash)}
            )
    reissued = await _replace_bindings(session, row, nvlink) if nvlink is not None else None
    for column, value in changes.items():
        setattr(row, column, value)
    await status.record(
        session,
        "instance_id",
        row.id,
        InstanceStatus.CONFIGURING,
        "received Instance config update request, processing",
    )
    (view,) = await load(session, [row.id])
    if reissued:
        # Like the reference, the answer to a re-issue lists the new bindings (once each).
        view.data["nvlink_interfaces"] = [b for b in view.data["nvlink_interfaces"] if b["id"] in reissued]
    return view


async def _replace_bindings(session: AsyncSession, row: Instance, items: list[Binding]) -> set[str]:
    """Replace the instance's bindings with ``items``; returns the new binding ids (as text)."""
    existing = list(
        await session.scalars(select(NvlinkInterface).where(NvlinkInterface.instance_id == row.id))
    )
    vpc = await session.get(Vpc, row.vpc_id)
    assert vpc is not None
    if items and existing and vpc.nvlink_logical_partition_id is not None:
        raise bad_request(
            "Cannot update NVLink Interfaces if VPC has default NVLink Logical Partition and "
            "NVLink Interfaces already exist for the Instance"
        )
    await check_partitions(session, items, tenant_id=row.tenant_id, site_id=row.site_id, texts=SINGLE)
    machine = await session.scalar(select(Machine).where(Machine.instance_id == row.id))
    capabilities: list[MachineCapability] = []
    if row.instance_type_id is not None:
        capabilities = await nvlink_capabilities(session, instance_type_id=row.instance_type_id)
    if not capabilities and machine is not None:
        capabilities = await nvlink_capabilities(session, machine_id=machine.id)
    if items and (not capabilities or machine is None or machine.nvlink_domain_uuid is None):
        raise bad_request(
            "NVLink interfaces cannot be specified if Instance Type or Machine doesn't have "
            "NVLink GPU Capability"
        )
    problem = gpu_range_problem(items, capabilities)
    if problem:
        raise bad_request(
            "Failed to validate NVLink interfaces specified in request", {"nvLinkInterfaces": problem}
        )
    live = [b for b in existing if b.status != NvLinkInterfaceStatus.DELETING]
    unchanged = (
        bool(items)
        and len(live) == len(existing)
        and all(b.status in (NvLinkInterfaceStatus.READY, NvLinkInterfaceStatus.PENDING) for b in live)
        and Counter((b.logical_partition_id, b.device_instance) for b in live)
        == Counter((i.partition_id, i.device_instance) for i in items)
    )
    if unchanged or (not items and not live):
        return set()
    for binding in live:
        binding.status = NvLinkInterfaceStatus.DELETING
    await session.flush()  # the live-GPU unique index must see the old bindings go first
    new = [
        NvlinkInterface(
            id=uuid.uuid4(),
            instance_id=row.id,
            logical_partition_id=item.partition_id,
            site_id=row.site_id,
            device_instance=item.device_instance,
            status=NvLinkInterfaceStatus.PENDING,
        )
        for item in items
    ]
    session.add_all(new)
    row.status = InstanceStatus.CONFIGURING
    await session.flush()
    await desired_state_changed(session, instance_ids=[row.id])
    return {str(b.id) for b in new}


async def delete_instance(
    session: AsyncSession,
    org: str,
    instance_id: uuid.UUID,
    *,
    repair_tenant: bool = False,
    health_issue: str | None = None,
) -> None:
    """Terminate: the instance stays Terminating until its GPUs are out of their partitions; one that
    never had NVLink bindings (or has none left) is removed at once."""
    row = await session.scalar(select(Instance).where(Instance.id == instance_id).with_for_update())
    if row is None:
        raise not_found("Could not find Instance with specified ID")
    owner = await session.get(Tenant, row.tenant_id)
    if owner is None or owner.org != org:
        raise forbidden(ORG_MISMATCH)
    site = await session.get(Site, row.site_id)
    if site is None or site.status != SiteStatus.REGISTERED:
        raise ServiceError(500, "Site is not in Registered state - cannot delete Instance")
    if repair_tenant and not owner.targeted_instance_creation:
        raise forbidden("Tenant must have Targeted Instance Creation capability to specify `isRepairTenant`")
    machine = await session.scalar(select(Machine).where(Machine.instance_id == row.id))
    if health_issue and machine is not None:
        await status.record(session, "machine_id", machine.id, machine.status, health_issue)
    bound = await session.scalar(select(exists().where(NvlinkInterface.instance_id == row.id)))
    await desired_state_changed(session, instance_ids=[row.id])
    if not bound:
        await session.execute(delete(Instance).where(Instance.id == row.id))
        return
    row.status = InstanceStatus.TERMINATING
    await status.record(
        session,
        "instance_id",
        row.id,
        InstanceStatus.TERMINATING,
        "Instance deletion successfully initiated on Site",
    )
