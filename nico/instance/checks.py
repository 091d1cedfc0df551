"""What creating instances checks, in the reference's order: the creation context read in one
statement, then one sequence of checks single and batch creation share (:func:`check_request`: the
tenant, VPC, site, subnets, names, instance type and quota), each worded as the reference words it for
the one or the other (:class:`CreateTexts`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nico.db.enums import SiteStatus, SubnetStatus, VpcStatus
from nico.db.models import InstanceType, LogicalPartition, MachineCapability, Tenant, Vpc
from nico.instance import queries
from nico.instance.views import InstanceSpec, Port
from nico.services.errors import ServiceError, bad_request, conflict, forbidden
from nico.services.nvlink_interface import BATCH, SINGLE, PartitionTexts
from nico.services.placement import NoCapacity

PENDING_MESSAGE = "received instance creation request, pending"
READY_MESSAGE = "Instance is ready for use"
ORG_MISMATCH = "Org specified in request does not match Org of Tenant associated with Instance"
NO_ALLOCATION = "Tenant does not have any Allocations for Site and Instance Type specified in request data"
QUOTA_REACHED = (
    "Tenant has reached the maximum number of Instances for Instance Type specified in request data"
)


def batch_quota_message(current: int, requested: int, maximum: int) -> str:
    return (
        "Tenant has reached the maximum number of Instances for Instance Type. "
        f"Current: {current}, Requested: {requested}, Max: {maximum}"
    )


@dataclass(frozen=True)
class SubnetTexts:
    not_found: str
    tenant: str = "Subnet: {id} specified in request is not owned by Tenant"
    ready: str = "Subnet: {id} specified in request data is not in Ready state"
    vpc: str = "Subnet: {id} specified in request does not match with VPC"


SINGLE_SUBNETS = SubnetTexts(not_found="Subnet: {id} specified in request data is not found in DB")
BATCH_SUBNETS = SubnetTexts(not_found="Could not find Subnet with ID specified in request data")


def _single_clash(instance_id: str, _: str) -> ServiceError:
    return conflict("An Instance with specified name already exists for Tenant", {"id": instance_id})


def _batch_clash(_: str, name: str) -> ServiceError:
    return conflict(
        f"Instance with name '{name}' already exists for Tenant at this Site. "
        "Please choose a different name prefix."
    )


def _single_no_capacity(_: NoCapacity, __: int) -> str:
    # Out of machines is a conflict with the site's state on every path (batch: 409 as the
    # reference), so a client handles one code for one cause (docs/compatibility.md).
    return "No Machines are available for specified Instance Type"


def _batch_no_capacity(exc: NoCapacity, count: int) -> str:
    if exc.available < count:
        return f"Insufficient machines available: requested {count}, available {exc.available}"
    return (
        f"Topology optimization requires all {count} machines on same NVLink domain, but best domain "
        f"only has {exc.best_domain} available"
    )


@dataclass(frozen=True)
class CreateTexts:
    """How single and batch creation differ: the order of their first checks, the words of their
    errors, and whether the machine's capabilities stand in for the type's."""

    no_capability: str
    invalid: str
    partitions: PartitionTexts
    lookup_first: bool  # batch compares with the VPC default before looking the partition up
    type_first: bool  # batch checks the instance type before the VPC, and its site with the VPC's
    site_not_registered: str
    subnets: SubnetTexts
    clash: Callable[[str, str], ServiceError]  # (instance id, name) of the instance already named so
    over_quota: Callable[[int, int, int], str]  # (instances of the type, requested, reserved)
    no_capacity: Callable[[NoCapacity, int], str]  # (why, requested)
    machine_capabilities: bool  # a single create reads the machine's when the type has none


SINGLE_CREATE = CreateTexts(
    no_capability="NVLink Interfaces cannot be specified if Instance Type doesn't have NVLink GPU Capability",
    invalid="Failed to validate NVLink interfaces specified in request data",
    partitions=SINGLE,
    lookup_first=True,
    type_first=False,
    site_not_registered="The Site where this Instance is being created is not in Registered state",
    subnets=SINGLE_SUBNETS,
    clash=_single_clash,
    over_quota=lambda *_: QUOTA_REACHED,
    no_capacity=_single_no_capacity,
    machine_capabilities=True,
)
BATCH_CREATE = CreateTexts(
    no_capability="NVLink Interfaces cannot be specified if Instance Type doesn't have GPU Capabilities",
    invalid="NVLink interfaces validation failed: nvLinkInterfaces: {problem}.",
    partitions=BATCH,
    lookup_first=False,
    type_first=True,
    site_not_registered="The Site where Instances are being created is not in Registered state",
    subnets=BATCH_SUBNETS,
    clash=_batch_clash,
    over_quota=batch_quota_message,
    no_capacity=_batch_no_capacity,
    machine_capabilities=False,
)


@dataclass
class Context:
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
    # The logical partitions the request binds GPUs to that exist, locked FOR SHARE.
    partitions: dict[uuid.UUID, LogicalPartition]
    placement: queries.Inputs | None  # what placement starts from, when asked


async def creation_context(
    conn: queries.Connection,
    org: str,
    spec: InstanceSpec,
    *,
    instance_type_id: uuid.UUID | None,
    names: Sequence[str],
    per_kind: int | None = None,
) -> Context:
    """What the checks read, and for a create of a type (placed by policy) what placement starts from
    (with a sample of ``per_kind`` domains of each kind, None: every domain), in one round trip."""
    explicit = list(dict.fromkeys(b.partition_id for b in spec.nvlink or ()))
    placement = (
        queries.InputsAsk(instance_type_id, explicit, per_kind) if instance_type_id is not None else None
    )
    row, partitions = await queries.creation_context(
        conn,
        org=org,
        requested_tenant=spec.tenant_id,
        vpc_id=spec.vpc_id,
        instance_type_id=instance_type_id,
        subnet_ids=[p.subnet_id for p in spec.ports],
        names=list(names),
        partition_ids=explicit,
        placement=placement,
    )
    if row is None:
        raise bad_request("Org does not have a Tenant associated")
    return Context(
        tenant=Tenant(id=row.tenant_id, org=org, targeted_instance_creation=row.targeted),
        requested_tenant_exists=row.requested_tenant_exists,
        vpc=(
            Vpc(
                id=row.vpc_id,
                tenant_id=row.vpc_tenant_id,
                site_id=row.vpc_site_id,
                status=row.vpc_status,
                nvlink_logical_partition_id=row.vpc_default_partition_id,
            )
            if row.vpc_id is not None
            else None
        ),
        site_status=row.site_status,
        itype=(
            InstanceType(id=row.instance_type_id, site_id=row.instance_type_site_id)
            if row.instance_type_id is not None
            else None
        ),
        subnets={uuid.UUID(s["id"]): s for s in row.subnets},
        clash=(row.clash[0], row.clash[1]) if row.clash else None,
        uses_site=row.uses_site,
        instances_of_type=int(row.instances_of_type),
        reserved=int(row.reserved) if row.reserved is not None else None,
        capabilities=[
            MachineCapability(type="GPU", name=c["name"], count=c["count"], device_type="NVLink")
            for c in row.capabilities
        ],
        partitions=partitions,
        placement=row.placement,
    )


def check_tenant(context: Context, requested: uuid.UUID | None) -> Tenant:
    if requested is not None and requested != context.tenant.id:
        if not context.requested_tenant_exists:
            raise bad_request("TenantID in request is not valid")
        raise bad_request("TenantID in request does not match tenant in org")
    return context.tenant


def check_vpc(context: Context) -> Vpc:
    vpc = context.vpc
    if vpc is None:
        raise bad_request("Could not find VPC with ID specified in request data")
    if vpc.tenant_id != context.tenant.id:
        raise bad_request("VPC specified in request is not owned by Tenant")
    if vpc.status != VpcStatus.READY:
        raise bad_request("VPC specified in request data is not ready")
    return vpc


def check_subnets(context: Context, vpc: Vpc, ports: Sequence[Port], texts: SubnetTexts) -> None:
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


@dataclass(frozen=True)
class Checked:
    """What passed the checks: the tenant, the VPC and the instance type (None: a targeted create)."""

    tenant: Tenant
    vpc: Vpc
    itype: InstanceType | None


def check_request(
    context: Context, spec: InstanceSpec, texts: CreateTexts, *, typed: bool, count: int
) -> Checked:
    """The checks single and batch creation share, in the order the reference makes them for each
    (``texts``), with its words: ``typed``, ``count`` instances of the context's instance type (else
    one on a targeted machine, which has no type, allocation or quota to check)."""
    tenant = check_tenant(context, spec.tenant_id)
    itype = _known_type(context) if texts.type_first else None
    vpc = check_vpc(context)
    if itype is not None:
        _same_site(itype, vpc)
    if context.site_status != SiteStatus.REGISTERED:
        raise bad_request(texts.site_not_registered)
    check_subnets(context, vpc, spec.ports, texts.subnets)
    if context.clash is not None:
        raise texts.clash(*context.clash)
    if not typed:
        return Checked(tenant, vpc, None)
    if itype is None:
        itype = _known_type(context)
        _same_site(itype, vpc)
    if not context.uses_site or context.reserved is None:
        raise forbidden(NO_ALLOCATION)
    if context.instances_of_type + count > context.reserved:
        raise forbidden(texts.over_quota(context.instances_of_type, count, context.reserved))
    return Checked(tenant, vpc, itype)


def _known_type(context: Context) -> InstanceType:
    if context.itype is None:
        raise bad_request("Could not find Instance Type with ID specified in request data")
    return context.itype


def _same_site(itype: InstanceType, vpc: Vpc) -> None:
    if itype.site_id != vpc.site_id:
        raise bad_request("VPC and Instance Type specified in request data do not belong to the same Site")


def requested_partitions(spec: InstanceSpec, vpc: Vpc) -> set[uuid.UUID]:
    if spec.nvlink:
        return {b.partition_id for b in spec.nvlink}
    return {vpc.nvlink_logical_partition_id} if vpc.nvlink_logical_partition_id else set()
