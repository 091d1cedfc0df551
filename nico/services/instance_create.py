"""Creating instances: one on a machine placed by policy (or a targeted one), or a batch on one
NVLink domain (spec §5, §6). The checks are in :mod:`nico.services.instance_checks`; everything a
create writes is one statement (:func:`nico.db.queries.instance.insert_instances`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, MachineStatus, SiteStatus
from nico.db.models import Machine, Tenant, Vpc
from nico.db.queries import instance as queries
from nico.db.queries.instance import commit_within_quota
from nico.services import assignment
from nico.services.assignment import Claimed
from nico.services.errors import bad_request, conflict, forbidden
from nico.services.instance_bindings import creation_bindings
from nico.services.instance_checks import (
    BATCH_CREATE,
    BATCH_SUBNETS,
    NO_ALLOCATION,
    PENDING_MESSAGE,
    QUOTA_REACHED,
    READY_MESSAGE,
    SINGLE_CREATE,
    SINGLE_SUBNETS,
    InstanceSpec,
    Port,
    batch_quota_message,
    check_subnets,
    check_tenant,
    check_vpc,
    creation_context,
    requested_partitions,
)
from nico.services.instance_view import InstanceView
from nico.services.nvlink_events import CHANNEL, payload
from nico.services.nvlink_interface import Binding, nvlink_capabilities
from nico.services.placement import Ask, NoCapacity


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
) -> list[InstanceView]:
    """Insert the instances with their interfaces, bindings and first history, assign the machines,
    and hand the change to the reconciler (NOTIFY of the machines' domains, in the same statement,
    so in the same transaction). A new instance starts at NVLink config version 1. Returns the new
    instances as their response shows them (chronological history), in ``names`` order: the insert
    answers with them, nothing is read back.

    Assigning the machines moves their domains' free counts (``domain_capacity``'s trigger locks
    those rows to the commit). The caller then, last, checks the quota under its lock and commits in
    the same round trip (:func:`commit_within_quota`): the locks other creates wait for are held only
    for the commit (lock order: docs/architecture.md, "Locks")."""
    ports = list(spec.ports)
    if not any(p.is_physical for p in ports):
        ports[0] = Port(ports[0].subnet_id, True)  # the first interface is the physical one
    rows: list[queries.NewInstance] = []
    history: list[tuple[uuid.UUID, str, str]] = []
    for name, machine in zip(names, machines, strict=True):
        ready = machine.domain_uuid is None  # nothing on the fabric to wait for
        row = queries.NewInstance(
            uuid.uuid4(), name, str(InstanceStatus.READY if ready else InstanceStatus.PENDING), machine.id
        )
        rows.append(row)
        history.append((row.id, str(InstanceStatus.PENDING), PENDING_MESSAGE))
        if ready:
            history.append((row.id, str(InstanceStatus.READY), READY_MESSAGE))
    domains = {m.domain_uuid for m in machines if m.domain_uuid is not None}
    documents = await queries.insert_instances(
        session,
        queries.SharedFields(
            tenant_id=tenant.id,
            site_id=vpc.site_id,
            instance_type_id=itype_id,
            vpc_id=vpc.id,
            description=spec.description,
            ipxe_script=spec.ipxe_script,
            user_data=spec.user_data,
            always_boot_with_custom_ipxe=spec.always_boot_with_custom_ipxe,
            phone_home_enabled=spec.phone_home_enabled,
            labels=spec.labels,
            created_by=spec.created_by,
        ),
        rows,
        history,
        [(r.id, p.subnet_id, p.is_physical) for r in rows for p in ports],
        [(r.id, b.partition_id, b.device_instance, b.device) for r in rows for b in bindings],
        channel=CHANNEL,
        notify=payload(domains) if domains else None,
    )
    by_id = {d["id"]: InstanceView(d) for d in documents}
    assert len(by_id) == len(rows) and all(v.data["machine_id"] is not None for v in by_id.values())
    return [by_id[r.id] for r in rows]


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
    context = await creation_context(session, org, spec, instance_type_id=instance_type_id, names=[name])
    tenant = check_tenant(context, spec.tenant_id)
    vpc = check_vpc(context)
    if context.site_status != SiteStatus.REGISTERED:
        raise bad_request("The Site where this Instance is being created is not in Registered state")
    check_subnets(context, vpc, spec.ports, SINGLE_SUBNETS)
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
                partition_ids=requested_partitions(spec, vpc),
                seed=seed,
            )
        except NoCapacity:
            # Out of machines is a conflict with the site's state on every path (batch: 409 as the
            # reference), so a client handles one code for one cause (docs/compatibility.md).
            raise conflict("No Machines are available for specified Instance Type") from None
    else:
        assert machine_id is not None
        itype, capabilities = None, []
        target = await _targeted_machine(session, tenant, vpc.site_id, machine_id)
        machine = Claimed(target.id, target.domain_uuid)
    if not capabilities:
        capabilities = await nvlink_capabilities(session, machine_id=machine.id)
    bindings = await creation_bindings(
        session, tenant, vpc, explicit, capabilities, SINGLE_CREATE, context.partitions
    )
    if bindings and machine.domain_uuid is None:
        raise bad_request(SINGLE_CREATE.no_capability)
    (view,) = await _add_instances(
        session,
        tenant=tenant,
        vpc=vpc,
        itype_id=itype.id if itype else None,
        spec=spec,
        names=[name],
        machines=[machine],
        bindings=bindings,
    )
    if itype is not None:
        refused = await commit_within_quota(session, tenant.id, itype.id)  # the check again, with the commit
        if refused is not None:
            raise forbidden(NO_ALLOCATION if refused.reserved is None else QUOTA_REACHED)
    return view


async def _targeted_machine(
    session: AsyncSession, tenant: Tenant, site_id: uuid.UUID, machine_id: str
) -> Machine:
    if not tenant.targeted_instance_creation:
        raise forbidden("Tenant does not have the capability to create Instances on a specific Machine")
    machine = await queries.locked_machine(session, machine_id)
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
    context = await creation_context(session, org, spec, instance_type_id=instance_type_id, names=names)
    tenant = check_tenant(context, spec.tenant_id)
    itype = context.itype
    if itype is None:
        raise bad_request("Could not find Instance Type with ID specified in request data")
    vpc = check_vpc(context)
    if vpc.site_id != itype.site_id:
        raise bad_request("VPC and Instance Type specified in request data do not belong to the same Site")
    if context.site_status != SiteStatus.REGISTERED:
        raise bad_request("The Site where Instances are being created is not in Registered state")
    check_subnets(context, vpc, spec.ports, BATCH_SUBNETS)
    if context.clash is not None:
        raise conflict(
            f"Instance with name '{context.clash[1]}' already exists for Tenant at this Site. "
            "Please choose a different name prefix."
        )
    if not context.uses_site or context.reserved is None:
        raise forbidden(NO_ALLOCATION)
    if context.instances_of_type + count > context.reserved:
        raise forbidden(batch_quota_message(context.instances_of_type, count, context.reserved))
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
            partition_ids=requested_partitions(spec, vpc),
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
    bindings = await creation_bindings(
        session, tenant, vpc, explicit, capabilities, BATCH_CREATE, context.partitions
    )
    machines = chosen
    if bindings and any(m.domain_uuid is None for m in machines):
        raise bad_request(BATCH_CREATE.no_capability)
    views = await _add_instances(
        session,
        tenant=tenant,
        vpc=vpc,
        itype_id=itype.id,
        spec=spec,
        names=names,
        machines=machines,
        bindings=bindings,
    )
    refused = await commit_within_quota(session, tenant.id, itype.id)  # the check again, with the commit
    if refused is not None:
        if refused.count is None or refused.reserved is None:
            raise forbidden(NO_ALLOCATION)
        raise forbidden(batch_quota_message(refused.count - count, count, refused.reserved))  # these included
    return views
