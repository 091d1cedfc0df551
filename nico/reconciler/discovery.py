"""Reading a machine's NVLink identity from the fabric (``nvlink-info populate`` and the demo).

The fabric reports every GPU with its chassis serial, compute-tray index, slot, 1-based module id and
name; a machine (one compute tray) is the GPUs of one (chassis serial, tray index). The slot comes
from the GPU's location (the reference reads the wrong JSON path for it). NMX-C is asked with
``GetTopologyInfo``, whose ``GpuTopoInfo`` carries the GPU's name (``description``, e.g. "NVIDIA
GB300"); NMX-M's GPU records carry it as ``Description``. The name becomes the machine's GPU
capability at registration, so a GB300 site gets GB300 capabilities without any product check.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from nico.fabric.backend import DomainTarget, FabricBackend, FabricGpu, SiteInventory
from nico.inventory.records import GpuRecord, NvlinkInfo


@dataclass(frozen=True)
class DiscoveredGpu:
    device_id: int
    guid: int
    slot_id: int
    tray_index: int
    name: str = ""  # as the fabric reports the GPU ("" when it does not say)


@dataclass(frozen=True)
class DiscoveredMachine:
    domain_uuid: uuid.UUID
    chassis_serial: str
    tray_index: int
    gpus: tuple[DiscoveredGpu, ...]

    def nvlink_info(self) -> NvlinkInfo:
        """What registration (and ``populate --update-db``) records for this machine."""
        return NvlinkInfo(
            self.domain_uuid,
            self.chassis_serial,
            self.tray_index,
            tuple(GpuRecord(g.device_id, g.guid, g.slot_id, g.name or None) for g in self.gpus),
        )

    def as_json(self) -> dict[str, object]:
        """The reference's ``populate`` output shape (keys in alphabetical order)."""
        return {
            "chassis_serial": self.chassis_serial,
            "domain_uuid": str(self.domain_uuid),
            "gpus": [
                {"device_id": g.device_id, "guid": g.guid, "slot_id": g.slot_id, "tray_index": g.tray_index}
                for g in self.gpus
            ],
        }


def group_machines(domain: uuid.UUID, gpus: list[FabricGpu]) -> dict[tuple[str, int], DiscoveredMachine]:
    trays: dict[tuple[str, int], list[DiscoveredGpu]] = defaultdict(list)
    for gpu in gpus:
        trays[(gpu.chassis_serial.strip(), gpu.tray_index)].append(
            DiscoveredGpu(gpu.device_id, gpu.gpu_uid, gpu.slot_id, gpu.tray_index, gpu.description)
        )
    return {
        key: DiscoveredMachine(domain, key[0], key[1], tuple(sorted(found, key=lambda g: g.device_id)))
        for key, found in sorted(trays.items())
    }


async def discover_endpoint(
    backend: FabricBackend, endpoint: str
) -> dict[tuple[str, int], DiscoveredMachine]:
    """Every machine of the domain an NMX-C endpoint serves (its Hello names the domain), keyed by
    (chassis serial, tray index), with the GPUs' names where the backend reports the topology."""
    hello = await backend.hello(DomainTarget(uuid.UUID(int=0), endpoint))
    target = DomainTarget(hello.domain_uuid, endpoint)
    topology = backend.capabilities.gpu_topology
    if topology is not None:
        gpus = await topology.gpu_topology(target)
    else:
        gpus = await backend.list_gpus(target)
    return group_machines(hello.domain_uuid, gpus)


async def discover_site(site: SiteInventory) -> dict[tuple[str, int], DiscoveredMachine]:
    """Every machine a site-wide manager (NMX-M) knows, in every domain."""
    by_domain: dict[uuid.UUID, list[FabricGpu]] = defaultdict(list)
    for gpu in await site.site_gpus():
        by_domain[gpu.domain_uuid].append(gpu)
    found: dict[tuple[str, int], DiscoveredMachine] = {}
    for domain, gpus in by_domain.items():
        found.update(group_machines(domain, gpus))
    return found


async def discover_machine(
    backend: FabricBackend, endpoints: Sequence[str], chassis_serial: str, tray_index: int
) -> DiscoveredMachine | None:
    """The machine at (chassis serial, tray index), as the fabric reports it: from NMX-M, or from the
    first of the NMX-C ``endpoints`` that serves it (a minipod chassis has one endpoint per domain)."""
    site = backend.capabilities.site
    if site is not None:
        return (await discover_site(site)).get((chassis_serial.strip(), tray_index))
    for endpoint in dict.fromkeys(endpoints):
        found = (await discover_endpoint(backend, endpoint)).get((chassis_serial.strip(), tray_index))
        if found is not None:
            return found
    return None
