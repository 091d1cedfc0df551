"""The provider side of the demo site, written through the service layer: a provider with a site that
has NVLink partitioning on, an instance type of trays with 4 NVLink GPUs named as the fabric reports
them (GB200 or GB300), the machines the simulated fabric reports (registered like ``nvlink-info
populate --update-db`` records them), the chassis serial -> NMX-C endpoint rows, and an allocation of
the free machines for the tenant org.

Every step finds what an earlier run made, so seeding twice changes nothing, and a second run whose
simulators listen on other ports only moves the endpoint rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import CapabilityType, ConstraintType, ResourceType
from nico.db.models import (
    Allocation,
    AllocationConstraint,
    InstanceType,
    NvlinkDomain,
    Site,
)
from nico.fabric.backend import FabricBackend
from nico.inventory.records import DERIVED_GPU_NAME, MachineRecord, RegistrationResult
from nico.inventory.registration import register_machines
from nico.reconciler.discovery import DiscoveredMachine, discover_endpoint, discover_site
from nico.services import allocation, fabric_registry, orgs
from nico.services import instance_type as instance_types
from nico.services import site as sites
from nico.services.errors import ServiceError

PROVIDER_ORG = "demo-provider"
SITE_NAME = "demo-site"
INSTANCE_TYPE_NAME = "gb200-4gpu"  # for GB200 trays; "<model>-4gpu" for others ("gb300-4gpu")
ALLOCATION_NAME = "demo"
GPUS_PER_TRAY = 4


def gpu_name(machines: Mapping[tuple[str, int], DiscoveredMachine]) -> str:
    """The name the fabric reports for the site's GPUs (e.g. "NVIDIA GB300"): registration names each
    machine's GPU capability so, and the instance type asks for the same."""
    names = sorted({g.name for m in machines.values() for g in m.gpus if g.name})
    if len(names) > 1:
        raise ServiceError(409, f"the fabric reports GPUs of several kinds ({', '.join(names)})")
    return names[0] if names else DERIVED_GPU_NAME


def tray_capability(name: str) -> instance_types.CapabilitySpec:
    return instance_types.CapabilitySpec(
        type=CapabilityType.GPU, name=name, count=GPUS_PER_TRAY, device_type="NVLink"
    )


def model_of(name: str) -> str:
    """The model in a GPU name: "NVIDIA GB300" -> "GB300"."""
    return name.removeprefix("NVIDIA").strip() or name


Machines = dict[tuple[str, int], DiscoveredMachine]


@dataclass(frozen=True)
class SeededSite:
    """What seeding left in the database, for the demo's banner and its tests."""

    site_id: uuid.UUID
    instance_type_id: uuid.UUID
    tenant_org: str
    registration: RegistrationResult
    machines: int
    domains: int
    reserved: int  # machines the tenant org may use
    endpoints_changed: int


@dataclass(frozen=True)
class Discovery:
    """What the fabric reported: machines by (chassis serial, tray index), and for NMX-C the endpoint
    that serves each chassis serial."""

    machines: Machines
    endpoints: dict[str, str]


async def discover(
    backend: FabricBackend,
    endpoints: Sequence[str],
    *,
    discovered: Callable[[str, int], None] | None = None,
) -> Discovery:
    """Every machine the fabric reports: per NMX-C endpoint (each names its domain in its Hello), or
    the whole site from NMX-M. ``discovered(where, machines)`` is called after each call."""
    site = backend.capabilities.site
    if site is not None:
        machines = await discover_site(site)
        if discovered:
            discovered(site.base_url, len(machines))
        return Discovery(machines, {})
    found: Machines = {}
    serials: dict[str, str] = {}
    for endpoint in endpoints:
        machines = await discover_endpoint(backend, endpoint)
        found.update(machines)
        for serial, _ in machines:  # a minipod's chassis: the first endpoint (the others by Hello)
            serials.setdefault(serial, endpoint)
        if discovered:
            discovered(endpoint, len(machines))
    return Discovery(found, serials)


def machine_records(machines: Mapping[tuple[str, int], DiscoveredMachine]) -> list[MachineRecord]:
    """One registration record per compute tray, named ``<chassis serial>-t<tray>``."""
    product = f"{model_of(gpu_name(machines))} compute tray" if machines else "compute tray"
    return [
        MachineRecord(
            id=f"{serial}-t{tray:02d}",
            hostname=f"{serial.lower()}-t{tray:02d}",
            vendor="NVIDIA",
            product_name=product,
            nvlink=found.nvlink_info(),
        )
        for (serial, tray), found in sorted(machines.items())
    ]


async def provider_site(
    session: AsyncSession, gpu: str = DERIVED_GPU_NAME
) -> tuple[orgs.ProviderRecord, Site, InstanceType]:
    """The demo provider, its site (NVLink partitioning on) and its instance type for trays of 4
    ``gpu`` GPUs (as the fabric names them), made on first use."""
    provider = await orgs.current_provider(session, PROVIDER_ORG, "nico demo provider")
    site = await session.scalar(
        select(Site).where(Site.infrastructure_provider_id == provider.id, Site.name == SITE_NAME)
    )
    if site is None:
        created_site = await sites.create_site(
            session,
            provider.org,
            name=SITE_NAME,
            description="Simulated NVLink racks (nico demo)",
            serial_console_hostname=None,
            location=None,
            contact=None,
            capabilities={"nvlink_partition": True},
        )
        site = await session.get(Site, created_site.site.id)
        assert site is not None
    elif not site.nvlink_partition:
        raise ServiceError(409, f"site {SITE_NAME} exists with NVLink partitioning off")
    model = model_of(gpu)
    type_name = INSTANCE_TYPE_NAME if gpu == DERIVED_GPU_NAME else f"{model.lower()}-4gpu"
    itype = await session.scalar(
        select(InstanceType).where(InstanceType.site_id == site.id, InstanceType.name == type_name)
    )
    if itype is None:
        created_type = await instance_types.create_instance_type(
            session,
            provider.org,
            name=type_name,
            description=f"One {model} compute tray: 4 GPUs on NVLink",
            site_id=site.id,
            labels=None,
            controller_machine_type=None,
            capabilities=[tray_capability(gpu)],
        )
        itype = await session.get(InstanceType, created_type.instance_type.id)
        assert itype is not None
    return provider, site, itype


async def register_endpoints(session: AsyncSession, endpoints: Mapping[str, str]) -> int:
    """Upsert chassis serial -> NMX-C endpoint rows; returns how many were created or changed."""
    changed = 0
    for serial, url in sorted(endpoints.items()):
        rows = await fabric_registry.list_endpoints(session, serial)
        if not rows:
            await fabric_registry.create_endpoint(session, serial, url)
        elif rows[0].endpoint != url:
            await fabric_registry.update_endpoint(session, serial, url)
        else:
            continue
        changed += 1
    return changed


async def allocate_free_machines(
    session: AsyncSession,
    provider: orgs.ProviderRecord,
    site: Site,
    itype: InstanceType,
    tenant: orgs.TenantRecord,
) -> int:
    """Reserve every machine of the type that no allocation holds for the tenant (in its demo
    allocation, grown when racks were added); returns what the tenant holds there."""
    free = await instance_types.machine_count(session, itype.id) - await instance_types.reserved_total(
        session, itype.id
    )
    found = (
        await session.execute(
            select(Allocation, AllocationConstraint)
            .join(AllocationConstraint, AllocationConstraint.allocation_id == Allocation.id)
            .where(
                Allocation.tenant_id == tenant.id,
                Allocation.site_id == site.id,
                Allocation.name == ALLOCATION_NAME,
                AllocationConstraint.instance_type_id == itype.id,
            )
        )
    ).first()
    if free > 0 and found is None:
        await allocation.create_allocation(
            session,
            provider.org,
            name=ALLOCATION_NAME,
            description="Every free machine of the demo site",
            tenant_id=tenant.id,
            site_id=site.id,
            constraint=allocation.ConstraintSpec(
                ResourceType.INSTANCE_TYPE, itype.id, ConstraintType.RESERVED, free
            ),
        )
    elif free > 0 and found is not None:
        row, constraint = found
        await allocation.update_constraint(
            session, provider.org, row.id, constraint.id, constraint.constraint_value + free
        )
    return await instance_types.reserved_total(session, itype.id, tenant_id=tenant.id)


async def seed(session: AsyncSession, *, tenant_org: str, discovery: Discovery) -> SeededSite:
    """Provider data, the discovered machines and NMX-C endpoints, and the tenant org's allocation.
    One transaction: the caller commits."""
    machines = discovery.machines
    if not machines:
        raise ServiceError(400, "the fabric reported no machines")
    provider, site, itype = await provider_site(session, gpu_name(machines))
    known = await session.scalar(select(func.count()).where(NvlinkDomain.site_id == site.id)) or 0
    reported = len({m.domain_uuid for m in machines.values()})
    if known > reported:
        raise ServiceError(
            409,
            f"the demo site already has {known} NVLink domains but the fabric reports {reported}: run with "
            f"--racks {known}, or start over with another data directory (NICO_DATA_DIR)",
        )
    registration = await register_machines(
        session, site_id=site.id, machines=machine_records(machines), instance_type_id=itype.id
    )
    endpoints_changed = await register_endpoints(session, discovery.endpoints)
    tenant = await orgs.current_tenant(session, tenant_org, None)
    reserved = await allocate_free_machines(session, provider, site, itype, tenant)
    return SeededSite(
        site_id=site.id,
        instance_type_id=itype.id,
        tenant_org=tenant_org,
        registration=registration,
        machines=len(machines),
        domains=reported,
        reserved=reserved,
        endpoints_changed=endpoints_changed,
    )
