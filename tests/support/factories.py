"""Test data written straight through the ORM: providers, sites, racks of GB200 machines, tenants,
allocations, VPCs, subnets, logical partitions. Each factory flushes; the caller commits."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import (
    AllocationStatus,
    CapabilityType,
    ConstraintType,
    LogicalPartitionStatus,
    MachineStatus,
    ResourceType,
    SiteStatus,
    SubnetStatus,
    VpcStatus,
)
from nico.db.models import (
    Allocation,
    AllocationConstraint,
    Gpu,
    InfrastructureProvider,
    InstanceType,
    LogicalPartition,
    Machine,
    MachineCapability,
    NvlinkDomain,
    PhysicalPartition,
    Site,
    Subnet,
    Tenant,
    TenantSite,
    Vpc,
)

GPU_UID_BASE = 0xB000_0000_0000_0000  # above 2**63: every test exercises the unsigned range
TRAYS_PER_RACK = 18
GPUS_PER_TRAY = 4
NAMESPACE = uuid.UUID("6f1c1c57-8d0e-4c1e-9a55-0b5e1f6a7c00")


def gpu_uid(rack: int, tray: int, device_id: int) -> int:
    return GPU_UID_BASE | (rack << 16) | (tray << 8) | device_id


def domain_uuid(site_name: str, rack: int) -> uuid.UUID:
    return uuid.uuid5(NAMESPACE, f"{site_name}/domain/{rack}")


async def provider(session: AsyncSession, org: str = "provider-org") -> InfrastructureProvider:
    row = InfrastructureProvider(org=org, org_display_name=f"{org} (display)")
    session.add(row)
    await session.flush()
    return row


async def tenant(session: AsyncSession, org: str = "tenant-org") -> Tenant:
    row = Tenant(org=org, org_display_name=f"{org} (display)")
    session.add(row)
    await session.flush()
    return row


async def site(
    session: AsyncSession,
    owner: InfrastructureProvider,
    *,
    name: str = "site-1",
    registered: bool = True,
    nvlink: bool = True,
) -> Site:
    row = Site(
        infrastructure_provider_id=owner.id,
        name=name,
        status=SiteStatus.REGISTERED if registered else SiteStatus.PENDING,
        nvlink_partition=nvlink,
    )
    session.add(row)
    await session.flush()
    return row


async def instance_type(
    session: AsyncSession,
    at: Site,
    *,
    name: str = "gb200-4gpu",
    gpus: int | None = GPUS_PER_TRAY,
    gpu_name: str = "NVIDIA GB200",
) -> InstanceType:
    row = InstanceType(infrastructure_provider_id=at.infrastructure_provider_id, site_id=at.id, name=name)
    session.add(row)
    await session.flush()
    if gpus:
        session.add(
            MachineCapability(
                instance_type_id=row.id,
                type=CapabilityType.GPU,
                name=gpu_name,
                count=gpus,
                device_type="NVLink",
            )
        )
        await session.flush()
    return row


async def rack(
    session: AsyncSession,
    at: Site,
    itype: InstanceType | None,
    *,
    index: int,
    trays: int = TRAYS_PER_RACK,
    gpus_per_tray: int = GPUS_PER_TRAY,
    with_nvlink: bool = True,
) -> list[Machine]:
    """One NVL72 rack: its NVLink domain, ``trays`` machines and their GPUs."""
    domain = domain_uuid(at.name, index) if with_nvlink else None
    if domain is not None:
        session.add(NvlinkDomain(uuid=domain, site_id=at.id))
        await session.flush()
    machines = []
    for tray in range(trays):
        machine = Machine(
            id=f"{at.name}-r{index:03d}-t{tray:02d}",
            site_id=at.id,
            instance_type_id=itype.id if itype else None,
            status=MachineStatus.READY,
            domain_uuid=domain,
            chassis_serial=f"{at.name}-CHS{index:04d}" if with_nvlink else None,
            tray_index=tray if with_nvlink else None,
        )
        session.add(machine)
        machines.append(machine)
    await session.flush()
    for tray, machine in enumerate(machines):
        for device_id in range(1, gpus_per_tray + 1):
            session.add(
                Gpu(
                    machine_id=machine.id,
                    device_id=device_id,
                    gpu_uid=gpu_uid(index, tray, device_id),
                    slot_id=tray,
                )
            )
    await session.flush()
    return machines


async def allocation(
    session: AsyncSession,
    owner: Tenant,
    at: Site,
    itype: InstanceType,
    value: int,
    *,
    name: str | None = None,
) -> Allocation:
    row = Allocation(
        infrastructure_provider_id=at.infrastructure_provider_id,
        tenant_id=owner.id,
        site_id=at.id,
        name=name or f"alloc-{uuid.uuid4().hex[:6]}",
        status=AllocationStatus.REGISTERED,
    )
    session.add(row)
    await session.flush()
    session.add(
        AllocationConstraint(
            allocation_id=row.id,
            resource_type=ResourceType.INSTANCE_TYPE,
            resource_type_id=itype.id,
            instance_type_id=itype.id,
            constraint_type=ConstraintType.RESERVED,
            constraint_value=value,
        )
    )
    if await session.get(TenantSite, (owner.id, at.id)) is None:
        session.add(TenantSite(tenant_id=owner.id, site_id=at.id))
    await session.flush()
    return row


async def logical_partition(
    session: AsyncSession, owner: Tenant, at: Site, *, name: str = "lp-1", status: str = "Ready"
) -> LogicalPartition:
    row = LogicalPartition(
        tenant_id=owner.id, site_id=at.id, name=name, status=LogicalPartitionStatus(status)
    )
    session.add(row)
    await session.flush()
    return row


async def physical_partitions(
    session: AsyncSession, made: list[tuple[LogicalPartition, uuid.UUID, str]]
) -> list[PhysicalPartition]:
    """A physical partition per (logical partition, domain, name), NMX partition ids 1, 2, ... in
    order, committed."""
    rows = [
        PhysicalPartition(
            logical_partition_id=lp.id, domain_uuid=domain, nmx_partition_id=n, fabric_ref=str(n), name=name
        )
        for n, (lp, domain, name) in enumerate(made, start=1)
    ]
    session.add_all(rows)
    await session.commit()
    return rows


async def vpc(
    session: AsyncSession,
    owner: Tenant,
    at: Site,
    *,
    name: str = "vpc-1",
    default_lp: LogicalPartition | None = None,
) -> Vpc:
    row = Vpc(
        tenant_id=owner.id,
        site_id=at.id,
        name=name,
        status=VpcStatus.READY,
        nvlink_logical_partition_id=default_lp.id if default_lp else None,
    )
    session.add(row)
    await session.flush()
    return row


async def subnet(session: AsyncSession, network: Vpc, *, name: str = "subnet-1") -> Subnet:
    row = Subnet(
        tenant_id=network.tenant_id,
        site_id=network.site_id,
        vpc_id=network.id,
        name=name,
        status=SubnetStatus.READY,
    )
    session.add(row)
    await session.flush()
    return row


@dataclass
class NvlinkSite:
    """A registered NVLink site with racks, an instance type, a tenant with an allocation, a VPC and a
    subnet: everything a tenant needs to create instances."""

    provider: InfrastructureProvider
    site: Site
    instance_type: InstanceType
    tenant: Tenant
    allocation: Allocation
    vpc: Vpc
    subnet: Subnet
    machines: list[Machine] = field(default_factory=list)
    domains: list[uuid.UUID] = field(default_factory=list)


async def nvlink_site(
    session: AsyncSession,
    *,
    racks: int = 2,
    trays: int = TRAYS_PER_RACK,
    tenant_org: str = "tenant-org",
    provider_org: str = "provider-org",
    site_name: str = "site-1",
    quota: int | None = None,
) -> NvlinkSite:
    owner = await provider(session, provider_org)
    at = await site(session, owner, name=site_name)
    itype = await instance_type(session, at)
    machines: list[Machine] = []
    domains: list[uuid.UUID] = []
    for index in range(racks):
        rows = await rack(session, at, itype, index=index, trays=trays)
        machines.extend(rows)
        domains.append(domain_uuid(at.name, index))
    who = await tenant(session, tenant_org)
    alloc = await allocation(session, who, at, itype, quota if quota is not None else len(machines))
    network = await vpc(session, who, at)
    net = await subnet(session, network)
    return NvlinkSite(owner, at, itype, who, alloc, network, net, machines, domains)
