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
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import delete, exists, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import (
    InstanceStatus,
    MachineStatus,
    NvLinkInterfaceStatus,
    SiteStatus,
    SubnetStatus,
    VpcStatus,
)
from nico.db.models import (
    Instance,
    InstanceType,
    Machine,
    MachineCapability,
    NvlinkInterface,
    Site,
    Tenant,
    Vpc,
)
from nico.db.raw import driver_connection
from nico.services import assignment, status
from nico.services.access import tenant_uses_site
from nico.services.assignment import Claimed
from nico.services.errors import ServiceError, bad_request, conflict, forbidden, not_found
from nico.services.instance_view import InstanceView, Source, load, load_for_caller
from nico.services.listing import PageRequest, fetch_page
from nico.services.nvlink_events import CHANNEL, desired_state_changed, payload
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
QUOTA_REACHED = (
    "Tenant has reached the maximum number of Instances for Instance Type specified in request data"
)


def _batch_quota_message(current: int, requested: int, maximum: int) -> str:
    return (
        "Tenant has reached the maximum number of Instances for Instance Type. "
        f"Current: {current}, Requested: {requested}, Max: {maximum}"
    )


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


# Creation reads everything its checks need in one driver-level statement (the checks themselves
# run in Python, in the reference's order): a batch is a hot path, and a dozen small ORM lookups
# cost more CPU than all its SQL.
_CONTEXT = """
SELECT t.id, t.targeted_instance_creation,
       EXISTS (SELECT 1 FROM tenant r WHERE r.id = %(requested)s),
       v.id, v.tenant_id, v.site_id, v.status, v.nvlink_logical_partition_id,
       s.status,
       it.id, it.site_id,
       (SELECT coalesce(json_agg(json_build_object('id', sn.id, 'tenant_id', sn.tenant_id,
                                                   'status', sn.status, 'vpc_id', sn.vpc_id)), '[]')
        FROM subnet sn WHERE sn.id = ANY(%(subnets)s)),
       (SELECT ARRAY[i.id::text, i.name] FROM instance i
        WHERE i.tenant_id = t.id AND i.site_id = v.site_id AND i.name = ANY(%(names)s)
        ORDER BY i.name LIMIT 1),
       EXISTS (SELECT 1 FROM tenant_site ts WHERE ts.tenant_id = t.id AND ts.site_id = it.site_id),
       (SELECT count(*) FROM instance i WHERE i.tenant_id = t.id AND i.instance_type_id = it.id),
       (SELECT sum(ac.constraint_value) FROM allocation_constraint ac
        JOIN allocation a ON a.id = ac.allocation_id
        WHERE a.tenant_id = t.id AND ac.instance_type_id = it.id),
       (SELECT coalesce(json_agg(json_build_object('name', mc.name, 'count', mc.count)
                                 ORDER BY mc.position, mc.created), '[]')
        FROM machine_capability mc
        WHERE mc.instance_type_id = it.id AND mc.type = 'GPU' AND mc.device_type = 'NVLink')
FROM tenant t
LEFT JOIN vpc v ON v.id = %(vpc)s
LEFT JOIN site s ON s.id = v.site_id
LEFT JOIN instance_type it ON it.id = %(itype)s
WHERE t.org = %(org)s
"""
# FOR SHARE: a concurrent change of the VPC's default partition waits for this transaction.
_LOCK_VPC = "SELECT 1 FROM vpc WHERE id = %(vpc)s FOR SHARE"
# The tenant's reservations for the type are locked, so concurrent creates of one tenant and type
# take turns at the count (a second statement: its snapshot must follow the lock).
_LOCK_QUOTA = """
SELECT ac.constraint_value FROM allocation_constraint ac JOIN allocation a ON a.id = ac.allocation_id
WHERE a.tenant_id = %(tenant)s AND ac.instance_type_id = %(itype)s
ORDER BY ac.id
FOR UPDATE OF ac
"""
_COUNT = "SELECT count(*) FROM instance WHERE tenant_id = %(tenant)s AND instance_type_id = %(itype)s"


@dataclass
class _Context:
    """What creation checks, read in one statement (ORM objects are transient, for reading only)."""

    tenant: Tenant
    requested_tenant_exists: bool
    vpc: Vpc | None
    site_status: str | None
    itype: InstanceType | None
    subnets: dict[uuid.UUID, dict[str, Any]]
    clash: tuple[str, str] | None  # (instance id, name) of an existing instance with a requested name
    uses_site: bool
    instances_of_type: int
    reserved: int | None  # None: no allocation for the type
    capabilities: list[MachineCapability]


async def _context(
    session: AsyncSession,
    org: str,
    spec: InstanceSpec,
    *,
    instance_type_id: uuid.UUID | None,
    names: Sequence[str],
) -> _Context:
    conn = await driver_connection(session)
    params = {
        "org": org,
        "requested": spec.tenant_id,
        "vpc": spec.vpc_id,
        "itype": instance_type_id,
        "subnets": [p.subnet_id for p in spec.ports],
        "names": list(names),
    }
    row = await (await conn.execute(_CONTEXT, params)).fetchone()
    if row is None:
        raise bad_request("Org does not have a Tenant associated")
    (
        tenant_id,
        targeted,
        requested_exists,
        vpc_id,
        vpc_tenant,
        vpc_site,
        vpc_status,
        vpc_default,
        site_status,
        itype_id,
        itype_site,
        subnets,
        clash,
        uses_site,
        of_type,
        reserved,
        capabilities,
    ) = row
    await conn.execute(_LOCK_VPC, {"vpc": spec.vpc_id})
    return _Context(
        tenant=Tenant(id=tenant_id, org=org, targeted_instance_creation=targeted),
        requested_tenant_exists=requested_exists,
        vpc=(
            Vpc(
                id=vpc_id,
                tenant_id=vpc_tenant,
                site_id=vpc_site,
                status=vpc_status,
                nvlink_logical_partition_id=vpc_default,
            )
            if vpc_id is not None
            else None
        ),
        site_status=site_status,
        itype=InstanceType(id=itype_id, site_id=itype_site) if itype_id is not None else None,
        subnets={uuid.UUID(s["id"]): s for s in subnets},
        clash=(clash[0], clash[1]) if clash else None,
        uses_site=uses_site,
        instances_of_type=int(of_type),
        reserved=int(reserved) if reserved is not None else None,
        capabilities=[
            MachineCapability(type="GPU", name=c["name"], count=c["count"], device_type="NVLink")
            for c in capabilities
        ],
    )


def _check_tenant(context: _Context, requested: uuid.UUID | None) -> Tenant:
    if requested is not None and requested != context.tenant.id:
        if not context.requested_tenant_exists:
            raise bad_request("TenantID in request is not valid")
        raise bad_request("TenantID in request does not match tenant in org")
    return context.tenant


def _check_vpc(context: _Context) -> Vpc:
    vpc = context.vpc
    if vpc is None:
        raise bad_request("Could not find VPC with ID specified in request data")
    if vpc.tenant_id != context.tenant.id:
        raise bad_request("VPC specified in request is not owned by Tenant")
    if vpc.status != VpcStatus.READY:
        raise bad_request("VPC specified in request data is not ready")
    return vpc


def _check_subnets(context: _Context, vpc: Vpc, ports: Sequence[Port], texts: SubnetTexts) -> None:
    for port in ports:
        subnet = context.subnets.get(port.subnet_id)
        if subnet is None:
            raise bad_request(texts.not_found.format(id=port.subnet_id))
        if uuid.UUID(subnet["tenant_id"]) != context.tenant.id:
            raise bad_request(texts.tenant.format(id=port.subnet_id))
        if subnet["status"] != SubnetStatus.READY:
            raise bad_request(texts.ready.format(id=port.subnet_id))
        if uuid.UUID(subnet["vpc_id"]) != vpc.id:
            raise bad_request(texts.vpc.format(id=port.subnet_id))


async def _quota_now(session: AsyncSession, tenant: Tenant, itype: InstanceType) -> tuple[int, int] | None:
    """(instances of the type, reserved machines) for the tenant, under the lock of its reservations
    (held to the end of the transaction), or None without an allocation."""
    conn = await driver_connection(session)
    where = {"tenant": tenant.id, "itype": itype.id}
    values = [row[0] for row in await (await conn.execute(_LOCK_QUOTA, where)).fetchall()]
    if not values:
        return None
    count = await (await conn.execute(_COUNT, where)).fetchone()
    assert count is not None
    return int(count[0]), sum(values)


def _requested_partitions(spec: InstanceSpec, vpc: Vpc) -> set[uuid.UUID]:
    if spec.nvlink:
        return {b.partition_id for b in spec.nvlink}
    return {vpc.nvlink_logical_partition_id} if vpc.nvlink_logical_partition_id else set()


# One statement for everything a create writes (a batch is 18 instances with their interfaces,
# bindings and history): row-by-row statements cost more CPU than the inserts themselves. Foreign keys
# are checked at the end of the statement, when every row of it exists. Rows that are listed in
# creation order get clock_timestamp(), taken row by row in request order.
_ADD_INSTANCES = """
WITH new AS (
    INSERT INTO instance (id, tenant_id, site_id, instance_type_id, vpc_id, name, description, ipxe_script,
                          user_data, always_boot_with_custom_ipxe, phone_home_enabled, labels, status,
                          created_by, nvlink_config_version, nvlink_config_changed_at, created, updated)
    SELECT u.id, %(tenant)s, %(site)s, %(itype)s, %(vpc)s, u.name, %(description)s, %(ipxe)s, %(user_data)s,
           %(always_ipxe)s, %(phone_home)s, %(labels)s::jsonb, u.status, %(by)s, 1, now(), now(), now()
    FROM unnest(%(ids)s::uuid[], %(names)s::text[], %(statuses)s::text[]) AS u(id, name, status)
    RETURNING id
), assigned AS (
    UPDATE machine SET instance_id = u.instance_id, updated = now()
    FROM unnest(%(machines)s::text[], %(ids)s::uuid[]) AS u(machine_id, instance_id)
    WHERE machine.id = u.machine_id
    RETURNING machine.id
), history AS (
    INSERT INTO status_detail (instance_id, status, message, created, updated)
    SELECT u.instance_id, u.status, u.message, clock_timestamp(), clock_timestamp()
    FROM unnest(%(h_ids)s::uuid[], %(h_statuses)s::text[], %(h_messages)s::text[])
         WITH ORDINALITY AS u(instance_id, status, message, n)
    ORDER BY u.n
), ports AS (
    INSERT INTO instance_interface (id, instance_id, subnet_id, is_physical, status, created, updated)
    SELECT gen_random_uuid(), u.instance_id, u.subnet_id, u.physical, 'Ready', clock_timestamp(),
           clock_timestamp()
    FROM unnest(%(p_ids)s::uuid[], %(p_subnets)s::uuid[], %(p_physical)s::boolean[])
         WITH ORDINALITY AS u(instance_id, subnet_id, physical, n)
    ORDER BY u.n
), bindings AS (
    INSERT INTO nvlink_interface (id, instance_id, logical_partition_id, site_id, device_instance, device,
                                  status, created_by, created, updated)
    SELECT gen_random_uuid(), u.instance_id, u.partition_id, %(site)s, u.device_instance, u.device, 'Pending',
           %(by)s, clock_timestamp(), clock_timestamp()
    FROM unnest(%(b_ids)s::uuid[], %(b_partitions)s::uuid[], %(b_devices)s::int[], %(b_names)s::text[])
         WITH ORDINALITY AS u(instance_id, partition_id, device_instance, device, n)
    ORDER BY u.n
)
SELECT (SELECT count(*) FROM new), (SELECT count(*) FROM assigned),
       CASE WHEN %(notify)s::text IS NOT NULL THEN pg_notify(%(channel)s, %(notify)s) END
"""


async def _add_instances(
    session: AsyncSession,
    *,
    tenant: Tenant,
    vpc: Vpc,
    itype_id: uuid.UUID | None,
    spec: InstanceSpec,
    names: Sequence[str],
    machines: Sequence[Claimed],
    bindings: Sequence[Binding],
) -> list[uuid.UUID]:
    """Insert the instances with their interfaces, bindings and first history, assign the machines,
    and hand the change to the reconciler (NOTIFY of the machines' domains, in the same statement,
    so in the same transaction). A new instance starts at NVLink config version 1. Returns the new
    ids in ``names`` order."""
    ids = [uuid.uuid4() for _ in names]
    ports = list(spec.ports)
    if not any(p.is_physical for p in ports):
        ports[0] = Port(ports[0].subnet_id, True)  # the first interface is the physical one
    statuses, h_ids, h_statuses, h_messages = [], [], [], []
    for instance_id, machine in zip(ids, machines, strict=True):
        ready = machine.nvlink_domain_uuid is None  # nothing on the fabric to wait for
        statuses.append(InstanceStatus.READY if ready else InstanceStatus.PENDING)
        h_ids.append(instance_id)
        h_statuses.append(InstanceStatus.PENDING)
        h_messages.append(PENDING_MESSAGE)
        if ready:
            h_ids.append(instance_id)
            h_statuses.append(InstanceStatus.READY)
            h_messages.append(READY_MESSAGE)
    domains = {m.nvlink_domain_uuid for m in machines if m.nvlink_domain_uuid is not None}
    conn = await driver_connection(session)
    cursor = await conn.execute(
        _ADD_INSTANCES,
        {
            "tenant": tenant.id,
            "site": vpc.site_id,
            "itype": itype_id,
            "vpc": vpc.id,
            "description": spec.description,
            "ipxe": spec.ipxe_script,
            "user_data": spec.user_data,
            "always_ipxe": spec.always_boot_with_custom_ipxe,
            "phone_home": spec.phone_home_enabled,
            "labels": Jsonb(spec.labels) if spec.labels is not None else None,
            "by": spec.created_by,
            "ids": ids,
            "names": list(names),
            "statuses": [str(v) for v in statuses],
            "machines": [m.id for m in machines],
            "h_ids": h_ids,
            "h_statuses": [str(v) for v in h_statuses],
            "h_messages": h_messages,
            "p_ids": [i for i in ids for _ in ports],
            "p_subnets": [p.subnet_id for _ in ids for p in ports],
            "p_physical": [p.is_physical for _ in ids for p in ports],
            "b_ids": [i for i in ids for _ in bindings],
            "b_partitions": [b.partition_id for _ in ids for b in bindings],
            "b_devices": [b.device_instance for _ in ids for b in bindings],
            "b_names": [b.device for _ in ids for b in bindings],
            "channel": CHANNEL,
            "notify": payload(domains) if domains else None,
        },
    )
    row = await cursor.fetchone()
    assert row is not None and row[0] == row[1] == len(ids), row
    return ids


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
    context = await _context(session, org, spec, instance_type_id=instance_type_id, names=[name])
    tenant = _check_tenant(context, spec.tenant_id)
    vpc = _check_vpc(context)
    if context.site_status != SiteStatus.REGISTERED:
        raise bad_request("The Site where this Instance is being created is not in Registered state")
    _check_subnets(context, vpc, spec.ports, SINGLE_SUBNETS)
    if context.clash is not None:
        raise conflict("An Instance with specified name already exists for Tenant", {"id": context.clash[0]})
    explicit = list(spec.nvlink or ())
    machine: Claimed
    if instance_type_id is not None:
        itype = context.itype
        if itype is None:
            raise bad_request("Could not find Instance Type with ID specified in request data")
        if itype.site_id != vpc.site_id:
            raise bad_request(
                "VPC and Instance Type specified in request data do not belong to the same Site"
            )
        if not context.uses_site or context.reserved is None:
            raise forbidden(NO_ALLOCATION)
        if context.instances_of_type >= context.reserved:
            raise forbidden(QUOTA_REACHED)
        capabilities = context.capabilities
        wants_nvlink = bool(explicit) or (vpc.nvlink_logical_partition_id is not None and bool(capabilities))
        try:
            (machine,) = await assignment.claim(
                session,
                site_id=vpc.site_id,
                ask=Ask(instance_type_id=itype.id, needs_nvlink=wants_nvlink),
                partition_ids=_requested_partitions(spec, vpc),
                seed=seed,
            )
        except NoCapacity:
            raise bad_request("No Machines are available for specified Instance Type") from None
        quota = await _quota_now(session, tenant, itype)  # the check again, now under its lock
        if quota is None:
            raise forbidden(NO_ALLOCATION)
        if quota[0] >= quota[1]:
            raise forbidden(QUOTA_REACHED)
    else:
        assert machine_id is not None
        itype, capabilities = None, []
        target = await _targeted_machine(session, tenant, vpc.site_id, machine_id)
        machine = Claimed(target.id, target.nvlink_domain_uuid)
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


async def _targeted_machine(
    session: AsyncSession, tenant: Tenant, site_id: uuid.UUID, machine_id: str
) -> Machine:
    if not tenant.targeted_instance_creation:
        raise forbidden("Tenant does not have the capability to create Instances on a specific Machine")
    machine = await session.scalar(select(Machine).where(Machine.id == machine_id).with_for_update())
    if machine is None or machine.site_id != site_id:
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
    suffix = uuid.uuid4().hex[:6]
    names = [f"{name_prefix}-{suffix}-{n}" for n in range(1, count + 1)]
    context = await _context(session, org, spec, instance_type_id=instance_type_id, names=names)
    tenant = _check_tenant(context, spec.tenant_id)
    itype = context.itype
    if itype is None:
        raise bad_request("Could not find Instance Type with ID specified in request data")
    vpc = _check_vpc(context)
    if vpc.site_id != itype.site_id:
        raise bad_request("VPC and Instance Type specified in request data do not belong to the same Site")
    if context.site_status != SiteStatus.REGISTERED:
        raise bad_request("The Site where Instances are being created is not in Registered state")
    _check_subnets(context, vpc, spec.ports, BATCH_SUBNETS)
    if context.clash is not None:
        raise conflict(
            f"Instance with name '{context.clash[1]}' already exists for Tenant at this Site. "
            "Please choose a different name prefix."
        )
    if not context.uses_site or context.reserved is None:
        raise forbidden(NO_ALLOCATION)
    if context.instances_of_type + count > context.reserved:
        raise forbidden(_batch_quota_message(context.instances_of_type, count, context.reserved))
    capabilities = context.capabilities  # no machine fallback in a batch
    explicit = list(spec.nvlink or ())
    wants_nvlink = bool(explicit) or (vpc.nvlink_logical_partition_id is not None and bool(capabilities))
    try:
        chosen = await assignment.claim(
            session,
            site_id=vpc.site_id,
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
    quota = await _quota_now(session, tenant, itype)  # the check again, now under its lock
    if quota is None:
        raise forbidden(NO_ALLOCATION)
    if quota[0] + count > quota[1]:
        raise forbidden(_batch_quota_message(quota[0], count, quota[1]))
    bindings = await _create_bindings(session, tenant, vpc, explicit, capabilities, BATCH_CREATE)
    machines = chosen
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
