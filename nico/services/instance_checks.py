"""What creating instances checks, in the reference's order: the request's types and messages, the
creation context read in one statement, the tenant, VPC and subnet checks, and the quota under its
lock."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import SubnetStatus, VpcStatus
from nico.db.models import InstanceType, LogicalPartition, MachineCapability, Tenant, Vpc
from nico.db.queries import instance as queries
from nico.services.errors import bad_request
from nico.services.nvlink_interface import BATCH, SINGLE, Binding, PartitionTexts

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


async def creation_context(
    session: AsyncSession,
    org: str,
    spec: InstanceSpec,
    *,
    instance_type_id: uuid.UUID | None,
    names: Sequence[str],
) -> Context:
    row, partitions = await queries.creation_context(
        session,
        org=org,
        requested_tenant=spec.tenant_id,
        vpc_id=spec.vpc_id,
        instance_type_id=instance_type_id,
        subnet_ids=[p.subnet_id for p in spec.ports],
        names=list(names),
        partition_ids=list(dict.fromkeys(b.partition_id for b in spec.nvlink or ())),
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


def requested_partitions(spec: InstanceSpec, vpc: Vpc) -> set[uuid.UUID]:
    if spec.nvlink:
        return {b.partition_id for b in spec.nvlink}
    return {vpc.nvlink_logical_partition_id} if vpc.nvlink_logical_partition_id else set()
