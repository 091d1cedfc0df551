"""A simulated GB200 / GB300 site registered in the database: every rack of a :class:`SimFabric` becomes an
NVLink domain with its machines (one per compute tray) and GPUs, and each chassis serial gets an
NMX-C endpoint row. Provider data, a tenant with an allocation, a VPC and a subnet come with it."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, NvLinkInterfaceStatus
from nico.db.models import (
    Gpu,
    Instance,
    LogicalPartition,
    Machine,
    MachineCapability,
    NvlinkDomain,
    NvlinkInterface,
    NvlinkNmxcEndpoint,
)
from nico.services.nvlink_events import desired_state_changed
from nico.sim.fabric import SimFabric
from tests.support import factories as f


@dataclass
class SimSite:
    fabric: SimFabric
    nv: f.NvlinkSite
    machines: dict[uuid.UUID, list[Machine]] = field(default_factory=dict)  # domain -> machines by tray

    @property
    def domains(self) -> list[uuid.UUID]:
        return list(self.fabric.domains)


async def seed(
    session: AsyncSession,
    fabric: SimFabric,
    endpoints: dict[str, str] | None = None,
    *,
    tenant_org: str = "tenant-org",
    machines_per_domain: int | None = None,
    machine_id_prefix: str = "",
) -> SimSite:
    """Register ``fabric`` (``endpoints``: chassis serial -> NMX-C URL; in-process placeholders when
    None). ``machines_per_domain`` registers only the first trays, leaving the rest unknown to nico;
    ``machine_id_prefix`` starts every machine id (another site's ids for the same trays)."""
    owner = await f.provider(session)
    at = await f.site(session, owner)
    gpu_name = next(iter(fabric.domains.values())).gpu_description
    itype = await f.instance_type(session, at, gpu_name=gpu_name)
    by_domain: dict[uuid.UUID, list[Machine]] = {}
    registered: set[str] = set()  # a minipod's chassis serial holds several domains: one row
    for domain in fabric.domains.values():
        session.add(NvlinkDomain(uuid=domain.domain_uuid, site_id=at.id))
        await session.flush()
        trays: dict[tuple[str, int], list[int]] = defaultdict(list)
        for gpu in domain.gpus.values():
            trays[(gpu.chassis_serial, gpu.tray_index)].append(gpu.gpu_uid)
        machines = []
        for (serial, tray), uids in sorted(trays.items())[:machines_per_domain]:
            machine = Machine(
                id=f"{machine_id_prefix}{serial}-t{tray:02d}",
                site_id=at.id,
                instance_type_id=itype.id,
                domain_uuid=domain.domain_uuid,
                chassis_serial=serial,
                tray_index=tray,
            )
            session.add(machine)
            machines.append(machine)
            await session.flush()
            # What registration derives for the tray: its GPUs' name as the fabric reports it.
            session.add(
                MachineCapability(
                    machine_id=machine.id,
                    type="GPU",
                    name=domain.gpu_description,
                    count=len(uids),
                    device_type="NVLink",
                )
            )
            for uid in uids:
                gpu = domain.gpus[uid]
                session.add(
                    Gpu(machine_id=machine.id, device_id=gpu.device_id, gpu_uid=uid, slot_id=gpu.slot_id)
                )
        by_domain[domain.domain_uuid] = machines
        for serial in set(domain.chassis_serials) - registered:
            url = (endpoints or {}).get(serial, f"http://in-process.invalid/{serial}")
            session.add(NvlinkNmxcEndpoint(chassis_serial=serial, endpoint=url))
            registered.add(serial)
    await session.flush()
    who = await f.tenant(session, tenant_org)
    everything = [m for ms in by_domain.values() for m in ms]
    alloc = await f.allocation(session, who, at, itype, len(everything))
    network = await f.vpc(session, who, at)
    net = await f.subnet(session, network)
    nv = f.NvlinkSite(owner, at, itype, who, alloc, network, net, everything, list(by_domain))
    await session.commit()
    return SimSite(fabric, nv, by_domain)


async def place(
    session: AsyncSession,
    site: SimSite,
    machine: Machine,
    bindings: dict[int, LogicalPartition],
    name: str | None = None,
) -> Instance:
    """An instance on ``machine`` whose GPUs ``bindings`` (device_instance -> LP) are bound, handed to
    the reconciler as the API does (version bump + NOTIFY); committed."""
    instance = Instance(
        tenant_id=site.nv.tenant.id,
        site_id=site.nv.site.id,
        vpc_id=site.nv.vpc.id,
        instance_type_id=site.nv.instance_type.id,
        name=name or f"i-{machine.id}",
        status=InstanceStatus.PENDING,
    )
    session.add(instance)
    await session.flush()
    machine.instance_id = instance.id
    for device, lp in bindings.items():
        session.add(
            NvlinkInterface(
                instance_id=instance.id,
                logical_partition_id=lp.id,
                site_id=site.nv.site.id,
                device_instance=device,
                status=NvLinkInterfaceStatus.PENDING,
            )
        )
    await session.flush()
    await desired_state_changed(session, instance_ids=[instance.id])
    await session.commit()
    return instance


def instance_body(site: SimSite, name: str, nvlink: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The API body of an instance of the site's type in its VPC and subnet, with ``nvlink`` as its
    NVLink interfaces."""
    return {
        "name": name,
        "instanceTypeId": str(site.nv.instance_type.id),
        "vpcId": str(site.nv.vpc.id),
        "ipxeScript": "#!ipxe",
        "interfaces": [{"subnetId": str(site.nv.subnet.id)}],
        "nvLinkInterfaces": nvlink or [],
    }
