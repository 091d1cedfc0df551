"""An in-memory site of GB200 / GB300 racks with the NVLink partition rules of a real NMX controller.

Every simulated server (NMX-C gRPC, NMX-M REST) and the in-process backend share one
:class:`SimFabric`. It is deterministic from its seed: the same rack list gives the same domain
uuids, chassis serials (``SIM-0001``...) and GPU GUIDs, and about half of the GUIDs are >= 2**63 so
the unsigned 64-bit range is exercised everywhere.

Shapes: an NVL72 rack is one domain of 18 compute trays x 4 GPUs behind one chassis serial; an
NVL36x2 pair is one domain of 72 GPUs spanning two chassis serials of 9 trays each; a minipod is one
rack (one chassis serial, 18 trays) holding ``minipod_domains`` NMX-C domains of consecutive trays,
each with its own domain uuid (and, in :class:`~nico.sim.nmxc_server.NmxcSimulator`, its own
endpoint). ``gpu`` ("gb200" or "gb300") is the tray generation: the GPUs report it as their
description (``GpuTopoInfo.description``, NMX-M's ``Description``), e.g. "NVIDIA GB300". At start
every GPU of a domain is in the default partition 32766.

Rules, with the return code a controller answers (``NMX_ST_*``):

* a GPU is in at most one partition; adding or creating with a GPU that is in any partition (the
  default one included) -> RESOURCE_IN_USE; removing a GPU that is not in the partition ->
  RESOURCE_NOT_IN_USE;
* a partition lies inside one domain; a GPU that is unknown or of another domain -> BADPARAM; so is
  an empty or duplicated GPU list, and a name longer than 244 characters or not printable ASCII
  (NMX-M's limit);
* ids 1..32765 are assigned by the controller (lowest free); a requested id that is taken ->
  PARTITION_ID_IN_USE, outside 1..32766 -> BADPARAM;
* names are unique per domain (empty names are allowed and never clash) -> PARTITION_NAME_IN_USE;
* an unknown id -> PARTITION_ID_NOT_IN_USE, an unknown name -> PARTITION_NAME_NOT_IN_USE, an id and
  a name naming different partitions -> PARTITION_ID_NAME_MISMATCH;
* at most ``max_partitions`` partitions per domain, the default one counted -> RESOURCE_EXHAUSTED;
* location-based requests -> NOT_SUPPORTED (nico only makes GPU-UID-based partitions);
* a partition's ``multicast_groups_limit`` (set on create only) is a multiple of 4 -> else BADPARAM
  (NMX-C's INVALID_ARGUMENT), and the limits over a domain add up to at most ``max_multicast_groups``
  (1024 on an NVL72) -> else RESOURCE_EXHAUSTED.

Health knobs: GPU (:meth:`SimFabric.set_gpu_health`), compute node, switch tray, switch and partition
health can be set at run time; what is not set is derived (a tray with an unhealthy GPU is DEGRADED,
a partition with one is DEGRADED or DEGRADED_BANDWIDTH). Every change is pushed to subscribers as a
``health_state_changed`` notification; :meth:`SimFabric.reinitialize` pushes a topology change and
``init_done``.

The default partition is an ordinary partition to the controller, which creates it when it starts:
it may be emptied, and it may be deleted (the reference's partition monitor has a code path for "no
default partition found", so controllers accept that delete). Once deleted it comes back only if a
client creates a partition asking for id 32766, the one id that may be requested but is never
assigned.

Fault knobs (:class:`Faults`) are set at run time per domain (by domain uuid or any of its chassis
serials) with :meth:`SimFabric.set_faults`, and for the site-wide NMX-M endpoint with
:meth:`SimFabric.set_site_faults`.

Hardware changes: :meth:`SimFabric.replace_tray` swaps a compute tray, as a technician would: its
GPUs get new GUIDs (the new ones come from the seed, the tray and how many times it was swapped) and
appear where a controller puts GPUs it has just discovered (the default partition when there is one,
else no partition); the old GUIDs leave every partition.

Snapshots: :meth:`SimFabric.to_json` records the site's shape and every domain's partitions (ids,
names, members, attributes, NMX-M entity ids, times), the trays swapped and GPU health;
:meth:`SimFabric.from_json` builds the same site again, so a restarted simulator (``nico demo``)
finds the fabric as it left it. Fault and health knobs (other than GPU health) are run-time
settings and are not recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from nico.fabric.backend import DEFAULT_PARTITION_ID, MAX_PARTITION_ID, MIN_PARTITION_ID
from nico.fabric.nmxc import nmx_c_pb2 as pb

GPUS_PER_TRAY = 4
NVL72_TRAYS = 18
NVL36_TRAYS = 9
DEFAULT_MAX_PARTITIONS = 64
DEFAULT_PARTITION_NAME = "Default Partition"
MAX_NAME_LENGTH = 244
GPU_HEALTH = ("UNKNOWN", "HEALTHY", "DEGRADED", "NO_NVLINK", "DEGRADED_BW")
# Health enums of NMX-C, in wire order (index = enum number).
NODE_HEALTH = ("UNKNOWN", "HEALTHY", "DEGRADED", "UNHEALTHY")
SWITCH_HEALTH = ("UNKNOWN", "HEALTHY", "MISSING_NVLINK", "UNHEALTHY")
PARTITION_HEALTH = ("UNKNOWN", "HEALTHY", "DEGRADED_BANDWIDTH", "DEGRADED", "UNHEALTHY")
RESILIENCY_MODES = ("UNDEFINED", "FULL_BANDWIDTH", "ADAPTIVE_BANDWIDTH", "USER_ACTION_REQUIRED")
SWITCH_TRAYS = 9  # NVLink switch trays per chassis, between the upper and lower compute trays
SWITCHES_PER_TRAY = 2
SWITCH_PORTS = 72
MAX_MULTICAST_GROUPS = 1024  # per domain (NVL72): the budget every partition's limit draws from
MULTICAST_GROUP_QUANTUM = 4  # a partition's limit is a multiple of this
SNAPSHOT_VERSION = 1
# What a GPU of each tray generation reports as its description (name) to NMX-C and NMX-M clients.
GPU_DESCRIPTIONS = {"gb200": "NVIDIA GB200", "gb300": "NVIDIA GB300"}
DEFAULT_MINIPOD_DOMAINS = 2

# What a subscriber receives: ("partition", id) for a partition change, ("health", None) when any
# health changed, ("topology", None) for a topology change, ("init_done", None) after a re-init.
SimEvent = tuple[str, int | None]


class SimError(Exception):
    """A request the controller refuses, with the ``StReturnCode`` it answers."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class EndpointDown(Exception):
    """The endpoint is down (fault knob): servers refuse the call as unreachable."""


@dataclass(frozen=True)
class SimGpu:
    gpu_uid: int
    device_id: int  # 1..4 within the tray
    chassis_serial: str
    chassis_id: int
    tray_index: int  # 0-based within the chassis
    slot_id: int
    host_id: int
    domain_uuid: uuid.UUID
    entity_id: str  # NMX-M GPU ``ID``
    health: str = "HEALTHY"


@dataclass
class SimPartition:
    partition_id: int
    name: str
    gpu_uids: set[int]
    entity_id: str  # NMX-M partition ``ID``
    created_at: datetime
    updated_at: datetime
    resiliency_mode: int = 0  # ResiliencyMode enum number (0: not given)
    multicast_groups_limit: int = 0  # multicast groups reserved for it out of the domain's budget

    @property
    def is_default(self) -> bool:
        return self.partition_id == DEFAULT_PARTITION_ID


@dataclass(frozen=True)
class Faults:
    """Fault knobs of one endpoint (a domain's NMX-C, or the site's NMX-M).

    ``latency``: seconds added before every answer. ``error_rate``: fraction of calls answered with
    ``error_code`` instead of being served (drawn from the fabric's seeded RNG). ``down``: calls are
    refused as unreachable (the NMX-C simulator can also really close its port). ``hang``: calls are
    never answered while set. ``operation_delay`` / ``never_complete``: NMX-M operations on this
    domain finish after that many seconds / stay in progress while set (late completion = a delay
    longer than the client's operation timeout, or clearing ``never_complete`` later).
    """

    latency: float = 0.0
    error_rate: float = 0.0
    error_code: int = pb.NMX_ST_NOT_READY
    down: bool = False
    hang: bool = False
    operation_delay: float | None = None
    never_complete: bool = False


class FaultGate:
    """Applies one endpoint's :class:`Faults` to each call that enters it."""

    def __init__(self, rng: random.Random) -> None:
        self.faults = Faults()
        self.idle = True  # no knob set: callers may skip entering
        self.held = 0  # calls being held by ``hang`` right now
        self._rng = rng
        self._unhung = asyncio.Event()

    def set(self, **changes: object) -> Faults:
        was_hung = self.faults.hang
        self.faults = dataclasses.replace(self.faults, **changes)  # type: ignore[arg-type]
        self.idle = self.faults == Faults()
        if was_hung and not self.faults.hang:
            self._unhung.set()
            self._unhung = asyncio.Event()
        return self.faults

    async def enter(self) -> int | None:
        """Wait out hang and latency; raise :class:`EndpointDown` when down; return the return code
        to answer instead of serving the call (an injected error), or None to serve it."""
        faults = self.faults
        if faults.down:
            raise EndpointDown("endpoint down (simulated)")
        while self.faults.hang:
            self.held += 1
            try:
                await self._unhung.wait()
            finally:
                self.held -= 1
        if self.faults.latency > 0:
            await asyncio.sleep(self.faults.latency)
        if self.faults.error_rate > 0 and self._rng.random() < self.faults.error_rate:
            return self.faults.error_code
        return None


@dataclass
class SimDomain:
    """One NVLink domain: its chassis, GPUs and partitions."""

    domain_uuid: uuid.UUID
    chassis_serials: tuple[str, ...]
    trays_per_chassis: int
    gpus: dict[int, SimGpu]
    max_partitions: int
    gate: FaultGate
    app_uuid: uuid.UUID
    partitions: dict[int, SimPartition] = field(default_factory=dict)
    owner: dict[int, int] = field(default_factory=dict)  # gpu_uid -> partition id
    names: dict[str, int] = field(default_factory=dict)  # non-empty name -> partition id
    subscribers: set[asyncio.Queue[SimEvent]] = field(default_factory=set)
    # Health knobs: a compute node (chassis serial, tray index), a switch tray (chassis serial, switch
    # tray index 0..8), one switch of a tray, or a partition, set to something else than derived.
    node_health: dict[tuple[str, int], str] = field(default_factory=dict)
    switch_node_health: dict[tuple[str, int], str] = field(default_factory=dict)
    switch_health: dict[tuple[str, int, int], str] = field(default_factory=dict)
    partition_health: dict[int, str] = field(default_factory=dict)
    admin_state: dict[tuple[str, int, int], int] = field(default_factory=dict)  # transceiver -> AdminState
    max_multicast_groups: int = MAX_MULTICAST_GROUPS
    unhealthy_gpus: set[int] = field(default_factory=set)  # GPUs whose health is not HEALTHY
    gpu_description: str = GPU_DESCRIPTIONS["gb200"]  # what its GPUs report as their name
    rack_trays: int = 0  # compute trays of the rack its chassis is (0: trays_per_chassis)

    def set_gpu(self, gpu: SimGpu) -> None:
        """Store a GPU (after a health change), keeping ``unhealthy_gpus`` up to date."""
        self.gpus[gpu.gpu_uid] = gpu
        if gpu.health == "HEALTHY":
            self.unhealthy_gpus.discard(gpu.gpu_uid)
        else:
            self.unhealthy_gpus.add(gpu.gpu_uid)

    def compute_nodes(self) -> dict[tuple[str, int], list[SimGpu]]:
        """(chassis serial, tray index) -> the tray's GPUs, in rack order."""
        trays: dict[tuple[str, int], list[SimGpu]] = {}
        for gpu in self.gpus.values():
            trays.setdefault((gpu.chassis_serial, gpu.tray_index), []).append(gpu)
        return dict(sorted(trays.items()))

    def node_health_of(self, serial: str, tray_index: int) -> str:
        """A knob's value, else DEGRADED when a GPU of the tray is not HEALTHY, else HEALTHY."""
        set_to = self.node_health.get((serial, tray_index))
        if set_to is not None:
            return set_to
        sick = (self.gpus[uid] for uid in self.unhealthy_gpus)
        return (
            "DEGRADED"
            if any(g.chassis_serial == serial and g.tray_index == tray_index for g in sick)
            else "HEALTHY"
        )

    def switch_health_of(self, serial: str, tray: int, switch: int) -> str:
        set_to = self.switch_health.get((serial, tray, switch))
        if set_to is not None:
            return set_to
        return "UNHEALTHY" if self.switch_node_health.get((serial, tray)) == "UNHEALTHY" else "HEALTHY"

    def switch_node_health_of(self, serial: str, tray: int) -> str:
        """A knob's value, else the worst of its switches' health (UNHEALTHY > MISSING_NVLINK)."""
        set_to = self.switch_node_health.get((serial, tray))
        if set_to is not None:
            return set_to
        switches = {self.switch_health_of(serial, tray, n) for n in range(SWITCHES_PER_TRAY)}
        for worst in ("UNHEALTHY", "MISSING_NVLINK"):
            if worst in switches:
                return worst
        return "HEALTHY"

    def partition_health_of(self, partition: SimPartition) -> str:
        """A knob's value, else derived from the members: a GPU without NVLink or DEGRADED makes the
        partition DEGRADED, one with degraded bandwidth DEGRADED_BANDWIDTH; an unhealthy switch
        degrades every partition's bandwidth."""
        set_to = self.partition_health.get(partition.partition_id)
        if set_to is not None:
            return set_to
        if not self.unhealthy_gpus and not self.switch_health and not self.switch_node_health:
            return "HEALTHY"  # the common case, without looking at every member
        healths = {self.gpus[uid].health for uid in partition.gpu_uids & self.unhealthy_gpus}
        if healths & {"DEGRADED", "NO_NVLINK"}:
            return "DEGRADED"
        switches_bad = any(h != "HEALTHY" for h in self.switch_health.values()) or any(
            h != "HEALTHY" for h in self.switch_node_health.values()
        )
        if "DEGRADED_BW" in healths or (switches_bad and partition.gpu_uids):
            return "DEGRADED_BANDWIDTH"
        return "HEALTHY"

    def switch_slots(self, serial: str) -> list[int]:
        """Rack slots of a chassis' switch trays (between the upper and lower compute trays)."""
        upper = ((self.rack_trays or self.trays_per_chassis) + 1) // 2
        return [upper + 1 + k for k in range(SWITCH_TRAYS)]

    def multicast_groups_reserved(self) -> int:
        return sum(p.multicast_groups_limit for p in self.partitions.values())


class SimFabric:
    """The simulated site: ``racks`` NVL72 racks, then ``nvl36x2`` NVL36x2 pairs, then ``minipods``
    minipod racks of ``minipod_domains`` domains each; every tray of generation ``gpu``."""

    def __init__(
        self,
        racks: int = 1,
        *,
        nvl36x2: int = 0,
        minipods: int = 0,
        minipod_domains: int = DEFAULT_MINIPOD_DOMAINS,
        gpu: str = "gb200",
        seed: int = 0,
        max_partitions: int = DEFAULT_MAX_PARTITIONS,
    ) -> None:
        if racks < 0 or nvl36x2 < 0 or minipods < 0 or racks + nvl36x2 + minipods == 0:
            raise ValueError("a site needs at least one rack")
        if not 1 <= max_partitions <= MAX_PARTITION_ID:
            raise ValueError(f"max_partitions must be within 1..{MAX_PARTITION_ID}")
        if minipod_domains < 2 or NVL72_TRAYS % minipod_domains:
            raise ValueError(f"minipod_domains must be at least 2 and divide {NVL72_TRAYS} (trays per rack)")
        if gpu not in GPU_DESCRIPTIONS:
            raise ValueError(f"gpu must be one of {sorted(GPU_DESCRIPTIONS)}")
        self.seed = seed
        self.racks = racks
        self.nvl36x2 = nvl36x2
        self.minipods = minipods
        self.minipod_domains = minipod_domains
        self.gpu_model = gpu
        self.max_partitions = max_partitions
        self.domains: dict[uuid.UUID, SimDomain] = {}
        self._by_serial: dict[str, SimDomain] = {}
        self._gpu_by_entity: dict[str, SimGpu] = {}
        self._partition_by_entity: dict[str, tuple[SimDomain, int]] = {}
        self._uid_domain: dict[int, uuid.UUID] = {}
        self._entity_rng = random.Random(f"nico-sim:{seed}:entities")
        self._fault_rng = random.Random(f"nico-sim:{seed}:faults")
        self.site_gate = FaultGate(self._fault_rng)
        self.replacements: dict[tuple[str, int], int] = {}  # (chassis serial, tray index) -> swaps
        chassis = 0
        for _ in range(racks):
            chassis += 1
            self._add_domain([chassis], NVL72_TRAYS, max_partitions)
        for _ in range(nvl36x2):
            chassis += 2
            self._add_domain([chassis - 1, chassis], NVL36_TRAYS, max_partitions)
        per_domain = NVL72_TRAYS // minipod_domains
        for _ in range(minipods):
            chassis += 1
            for k in range(minipod_domains):
                self._add_domain([chassis], per_domain, max_partitions, first_tray=k * per_domain, part=k)

    # ------------------------------------------------------------------------------------- building

    @property
    def shape(self) -> str:
        """The site's shape: "nvl72", "nvl36x2", "minipod", or "mixed" for a site of several."""
        shapes = [
            name
            for name, n in (("nvl72", self.racks), ("nvl36x2", self.nvl36x2), ("minipod", self.minipods))
            if n
        ]
        return shapes[0] if len(shapes) == 1 else "mixed"

    def _add_domain(
        self,
        chassis_numbers: list[int],
        trays: int,
        max_partitions: int,
        *,
        first_tray: int = 0,
        part: int = 0,
    ) -> None:
        """One domain over ``chassis_numbers``, each contributing ``trays`` trays from ``first_tray``
        (a minipod domain is trays ``first_tray..`` of one rack; ``part`` > 0 seeds it apart from the
        rack's first domain)."""
        serials = tuple(f"SIM-{n:04d}" for n in chassis_numbers)
        # The first domain of a chassis keeps the seed it has always had (old snapshots still fit).
        rng = random.Random(f"nico-sim:{self.seed}:{serials[0]}" + (f"#{part}" if part else ""))
        domain_uuid = uuid.UUID(int=rng.getrandbits(128), version=4)
        # A minipod domain (part of one chassis) has the slots of its trays in the whole rack.
        rack_trays = NVL72_TRAYS if len(chassis_numbers) == 1 else trays
        gpus: dict[int, SimGpu] = {}
        for number, serial in zip(chassis_numbers, serials, strict=True):
            for tray in range(first_tray, first_tray + trays):
                for device in range(1, GPUS_PER_TRAY + 1):
                    uid = self._fresh_uid(rng, domain_uuid)
                    gpus[uid] = SimGpu(
                        gpu_uid=uid,
                        device_id=device,
                        chassis_serial=serial,
                        chassis_id=number,
                        tray_index=tray,
                        slot_id=_slot_of(tray, rack_trays),
                        host_id=1,
                        domain_uuid=domain_uuid,
                        entity_id=f"{rng.getrandbits(96):024x}",
                    )
        domain = SimDomain(
            domain_uuid=domain_uuid,
            chassis_serials=serials,
            trays_per_chassis=trays,
            gpus=gpus,
            max_partitions=max_partitions,
            gate=FaultGate(self._fault_rng),
            app_uuid=uuid.UUID(int=rng.getrandbits(128), version=4),
            gpu_description=GPU_DESCRIPTIONS[self.gpu_model],
            rack_trays=rack_trays if rack_trays != trays else 0,
        )
        self.domains[domain_uuid] = domain
        for serial in serials:
            self._by_serial.setdefault(serial, domain)  # a minipod's serial names its first domain
        for gpu in gpus.values():
            self._gpu_by_entity[gpu.entity_id] = gpu
        # The default partition's entity id comes from the domain's own generator, so a site grown by
        # more racks keeps the ids of the first ones (a smaller site's snapshot fits a larger one).
        self._insert(
            domain, DEFAULT_PARTITION_ID, DEFAULT_PARTITION_NAME, list(gpus), f"{rng.getrandbits(96):024x}"
        )

    def _fresh_uid(self, rng: random.Random, domain_uuid: uuid.UUID) -> int:
        while True:
            uid = rng.getrandbits(64)
            if uid and uid not in self._uid_domain:
                self._uid_domain[uid] = domain_uuid
                return uid

    # ------------------------------------------------------------------------------------ inspection

    def domain(self, key: uuid.UUID | str) -> SimDomain:
        """A domain by its uuid or by one of its chassis serials (a minipod's: its first domain)."""
        found = self._by_serial.get(key) if isinstance(key, str) else self.domains.get(key)
        if found is None:
            raise KeyError(f"no simulated domain {key}")
        return found

    @property
    def chassis_serials(self) -> dict[str, uuid.UUID]:
        """Chassis serial -> its domain (a minipod's: its first one)."""
        return {serial: d.domain_uuid for serial, d in self._by_serial.items()}

    def domains_of(self, serial: str) -> list[uuid.UUID]:
        """Every domain with trays in the chassis (several for a minipod)."""
        return [d.domain_uuid for d in self.domains.values() if serial in d.chassis_serials]

    def partitions(self, key: uuid.UUID | str) -> list[SimPartition]:
        return sorted(self.domain(key).partitions.values(), key=lambda p: p.partition_id)

    def members(self, key: uuid.UUID | str) -> dict[int, frozenset[int]]:
        """Partition id -> its GPU uids, for one domain."""
        return {p.partition_id: frozenset(p.gpu_uids) for p in self.domain(key).partitions.values()}

    def gpus(self, key: uuid.UUID | str) -> list[SimGpu]:
        return list(self.domain(key).gpus.values())

    def partition_of(self, gpu_uid: int) -> int | None:
        gpu = self.gpu(gpu_uid)
        return self.domains[gpu.domain_uuid].owner.get(gpu_uid)

    def gpu(self, gpu_uid: int) -> SimGpu:
        return self.domains[self._uid_domain[gpu_uid]].gpus[gpu_uid]

    def gpu_by_entity(self, entity_id: str) -> SimGpu | None:
        return self._gpu_by_entity.get(entity_id)

    def partition_by_entity(self, entity_id: str) -> tuple[SimDomain, SimPartition] | None:
        found = self._partition_by_entity.get(entity_id)
        if found is None:
            return None
        domain, partition_id = found
        return domain, domain.partitions[partition_id]

    def set_gpu_health(self, gpu_uid: int, health: str) -> None:
        if health not in GPU_HEALTH:
            raise ValueError(f"health must be one of {GPU_HEALTH}")
        gpu = self.gpu(gpu_uid)
        changed = dataclasses.replace(gpu, health=health)
        self.domains[gpu.domain_uuid].set_gpu(changed)
        self._gpu_by_entity[gpu.entity_id] = changed
        if gpu.health != health:
            self._emit(self.domains[gpu.domain_uuid], ("health", None))

    # ------------------------------------------------------------------------------------ health knobs

    def set_node_health(self, key: uuid.UUID | str, serial: str, tray_index: int, health: str | None) -> None:
        """Set a compute node's health (None: derive it from its GPUs again); emits a health event."""
        domain = self.domain(key)
        if (serial, tray_index) not in domain.compute_nodes():
            raise ValueError(f"no compute tray {tray_index} in chassis {serial} of {domain.domain_uuid}")
        self._knob(domain, domain.node_health, (serial, tray_index), health, NODE_HEALTH)

    def set_switch_node_health(
        self, key: uuid.UUID | str, serial: str, tray: int, health: str | None
    ) -> None:
        """Set a switch tray's health (0..8 within its chassis); emits a health event."""
        domain = self.domain(key)
        if serial not in domain.chassis_serials or not 0 <= tray < SWITCH_TRAYS:
            raise ValueError(f"no switch tray {tray} in chassis {serial} of {domain.domain_uuid}")
        self._knob(domain, domain.switch_node_health, (serial, tray), health, SWITCH_HEALTH)

    def set_switch_health(
        self, key: uuid.UUID | str, serial: str, tray: int, switch: int, health: str | None
    ) -> None:
        """Set one switch's health (switch 0..1 of switch tray 0..8); emits a health event."""
        domain = self.domain(key)
        if serial not in domain.chassis_serials or not 0 <= tray < SWITCH_TRAYS:
            raise ValueError(f"no switch tray {tray} in chassis {serial} of {domain.domain_uuid}")
        if not 0 <= switch < SWITCHES_PER_TRAY:
            raise ValueError(f"a switch tray has switches 0..{SWITCHES_PER_TRAY - 1}")
        self._knob(domain, domain.switch_health, (serial, tray, switch), health, SWITCH_HEALTH)

    def set_partition_health(self, key: uuid.UUID | str, partition_id: int, health: str | None) -> None:
        """Set a partition's health (None: derive it from its members again); emits a health event."""
        domain = self.domain(key)
        if partition_id not in domain.partitions:
            raise ValueError(f"no partition {partition_id} in {domain.domain_uuid}")
        self._knob(domain, domain.partition_health, partition_id, health, PARTITION_HEALTH)

    def _knob(
        self, domain: SimDomain, knobs: dict[Any, str], key: Any, health: str | None, allowed: tuple[str, ...]
    ) -> None:
        if health is not None and health not in allowed:
            raise ValueError(f"health must be one of {allowed}")
        before = knobs.get(key)
        if health is None:
            knobs.pop(key, None)
        else:
            knobs[key] = health
        if before != health:
            self._emit(domain, ("health", None))

    # -------------------------------------------------------------------------------------- hardware

    def replace_tray(self, serial: str, tray_index: int) -> tuple[list[int], list[int]]:
        """Swap the compute tray at (chassis ``serial``, ``tray_index``): its GPUs (same locations)
        get new GUIDs and NMX-M ids, the old ones leave every partition and the site, the new ones
        join the domain's default partition when it exists (else no partition). Subscribers get a
        topology change and the partitions' changes. Returns (old GUIDs, new GUIDs) by device."""
        domain, old = self._tray(serial, tray_index)
        swaps = self.replacements.get((serial, tray_index), 0) + 1
        rng = random.Random(f"nico-sim:{self.seed}:{serial}:{tray_index}:swap{swaps}")
        touched: set[int] = set()
        new: list[SimGpu] = []
        for gpu in old:
            holder = domain.owner.pop(gpu.gpu_uid, None)
            if holder is not None:
                domain.partitions[holder].gpu_uids.discard(gpu.gpu_uid)
                touched.add(holder)
            del domain.gpus[gpu.gpu_uid]
            domain.unhealthy_gpus.discard(gpu.gpu_uid)
            del self._gpu_by_entity[gpu.entity_id]
            uid = self._fresh_uid(rng, domain.domain_uuid)  # the old GUID stays taken: never reused
            fresh = dataclasses.replace(
                gpu, gpu_uid=uid, entity_id=f"{rng.getrandbits(96):024x}", health="HEALTHY"
            )
            domain.set_gpu(fresh)
            self._gpu_by_entity[fresh.entity_id] = fresh
            new.append(fresh)
        default = domain.partitions.get(DEFAULT_PARTITION_ID)
        if default is not None:
            for gpu in new:
                default.gpu_uids.add(gpu.gpu_uid)
                domain.owner[gpu.gpu_uid] = DEFAULT_PARTITION_ID
            touched.add(DEFAULT_PARTITION_ID)
        self.replacements[(serial, tray_index)] = swaps
        self._emit(domain, ("topology", None))
        for partition_id in sorted(touched):
            self._touch(domain, domain.partitions[partition_id])
        return [g.gpu_uid for g in old], [g.gpu_uid for g in new]

    def _tray(self, serial: str, tray_index: int) -> tuple[SimDomain, list[SimGpu]]:
        """The domain holding a compute tray and the tray's GPUs by device; KeyError when none."""
        for key in self.domains_of(serial):
            domain = self.domains[key]
            gpus = domain.compute_nodes().get((serial, tray_index))
            if gpus:
                return domain, sorted(gpus, key=lambda g: g.device_id)
        raise KeyError(f"no compute tray {tray_index} in chassis {serial}")

    def reinitialize(self, key: uuid.UUID | str) -> None:
        """The controller re-initialised the fabric: subscribers get a topology change and init-done."""
        domain = self.domain(key)
        self._emit(domain, ("topology", None))
        self._emit(domain, ("init_done", None))

    # ------------------------------------------------------------------------------------- snapshots

    def to_json(self) -> str:
        """The site's shape, every domain's partitions and the GPUs whose health is not HEALTHY."""
        return json.dumps(
            {
                "version": SNAPSHOT_VERSION,
                "racks": self.racks,
                "nvl36x2": self.nvl36x2,
                "minipods": self.minipods,
                "minipod_domains": self.minipod_domains,
                "gpu": self.gpu_model,
                "seed": self.seed,
                "max_partitions": self.max_partitions,
                "replacements": [
                    [serial, tray, n] for (serial, tray), n in sorted(self.replacements.items())
                ],
                "domains": {
                    str(domain.domain_uuid): {
                        "partitions": [
                            {
                                "id": p.partition_id,
                                "name": p.name,
                                "gpus": [str(uid) for uid in sorted(p.gpu_uids)],
                                "entity_id": p.entity_id,
                                "created_at": p.created_at.isoformat(),
                                "updated_at": p.updated_at.isoformat(),
                                "resiliency_mode": p.resiliency_mode,
                                "multicast_groups_limit": p.multicast_groups_limit,
                            }
                            for p in self.partitions(domain.domain_uuid)
                        ],
                        "unhealthy": {
                            str(g.gpu_uid): g.health for g in domain.gpus.values() if g.health != "HEALTHY"
                        },
                    }
                    for domain in self.domains.values()
                },
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> SimFabric:
        """The site a :meth:`to_json` snapshot recorded (same seed: same uuids, serials and GUIDs),
        with its partitions and GPU health. Raises ValueError on a malformed snapshot."""
        data = _snapshot(text)
        try:
            fabric = cls(
                int(data["racks"]),
                nvl36x2=int(data["nvl36x2"]),
                # Snapshots from before minipods and GB300 trays lack these keys: NVL72/NVL36x2 GB200.
                minipods=int(data.get("minipods", 0)),
                minipod_domains=int(data.get("minipod_domains", DEFAULT_MINIPOD_DOMAINS)),
                gpu=str(data.get("gpu", "gb200")),
                seed=int(data["seed"]),
                max_partitions=int(data["max_partitions"]),
            )
            for serial, tray, swaps in data.get("replacements", []):
                for _ in range(int(swaps)):
                    fabric.replace_tray(str(serial), int(tray))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a fabric snapshot: missing or bad {exc}") from None
        fabric.restore(data)
        return fabric

    def restore(self, snapshot: str | dict[str, Any]) -> None:
        """Replace the partitions and GPU health of the snapshot's domains with the recorded ones.
        Every recorded domain must exist here (a larger site of the same seed is fine; its extra
        domains keep their state). All or nothing: ValueError leaves the fabric unchanged."""
        data = _snapshot(snapshot) if isinstance(snapshot, str) else snapshot
        try:
            recorded = {uuid.UUID(key): value for key, value in data["domains"].items()}
            plans = {key: self._planned(key, value) for key, value in recorded.items()}
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a fabric snapshot: missing or bad {exc}") from None
        kept = [
            p.entity_id
            for d in self.domains.values()
            if d.domain_uuid not in plans
            for p in d.partitions.values()
        ]
        entities = kept + [p.entity_id for partitions, _ in plans.values() for p in partitions]
        if len(set(entities)) != len(entities):
            raise ValueError("not a fabric snapshot: a partition entity id is repeated")
        for key in plans:
            domain = self.domains[key]
            for partition in domain.partitions.values():
                del self._partition_by_entity[partition.entity_id]
            domain.partitions.clear()
            domain.owner.clear()
            domain.names.clear()
        for key, (partitions, unhealthy) in plans.items():
            domain = self.domains[key]
            for partition in partitions:
                domain.partitions[partition.partition_id] = partition
                if partition.name:
                    domain.names[partition.name] = partition.partition_id
                for uid in partition.gpu_uids:
                    domain.owner[uid] = partition.partition_id
                self._partition_by_entity[partition.entity_id] = (domain, partition.partition_id)
            for uid, gpu in list(domain.gpus.items()):
                health = unhealthy.get(uid, "HEALTHY")
                if gpu.health != health:
                    domain.set_gpu(dataclasses.replace(gpu, health=health))
                    self._gpu_by_entity[gpu.entity_id] = domain.gpus[uid]

    def _planned(
        self, domain_uuid: uuid.UUID, recorded: dict[str, Any]
    ) -> tuple[list[SimPartition], dict[int, str]]:
        """Check one recorded domain against this site and build its partitions (nothing applied)."""
        domain = self.domains.get(domain_uuid)
        if domain is None:
            raise ValueError(f"the snapshot has domain {domain_uuid}, which this site does not have")
        partitions: list[SimPartition] = []
        owner: dict[int, int] = {}
        names: set[str] = set()
        for item in recorded["partitions"]:
            partition_id, name = int(item["id"]), str(item["name"])
            if not MIN_PARTITION_ID <= partition_id <= DEFAULT_PARTITION_ID or any(
                p.partition_id == partition_id for p in partitions
            ):
                raise ValueError(f"domain {domain_uuid}: bad or repeated partition id {partition_id}")
            if name and name in names:
                raise ValueError(f"domain {domain_uuid}: partition name {name!r} is repeated")
            names.add(name)
            uids = {int(uid) for uid in item["gpus"]}
            for uid in uids:
                if uid not in domain.gpus:
                    raise ValueError(f"domain {domain_uuid}: GPU {uid} is not in this domain")
                if owner.setdefault(uid, partition_id) != partition_id:
                    raise ValueError(f"domain {domain_uuid}: GPU {uid} is in two partitions")
            partitions.append(
                SimPartition(
                    partition_id=partition_id,
                    name=name,
                    gpu_uids=uids,
                    entity_id=str(item["entity_id"]),
                    created_at=datetime.fromisoformat(item["created_at"]),
                    updated_at=datetime.fromisoformat(item["updated_at"]),
                    resiliency_mode=int(item.get("resiliency_mode", 0)),
                    multicast_groups_limit=int(item.get("multicast_groups_limit", 0)),
                )
            )
        unhealthy = {int(uid): str(health) for uid, health in recorded.get("unhealthy", {}).items()}
        for uid, health in unhealthy.items():
            if uid not in domain.gpus or health not in GPU_HEALTH:
                raise ValueError(f"domain {domain_uuid}: bad health {health!r} of GPU {uid}")
        return partitions, unhealthy

    # ---------------------------------------------------------------------------------------- faults

    def gate(self, key: uuid.UUID | str) -> FaultGate:
        return self.domain(key).gate

    def set_faults(self, key: uuid.UUID | str, **changes: object) -> Faults:
        """Change a domain's fault knobs (by domain uuid or chassis serial); see :class:`Faults`."""
        return self.domain(key).gate.set(**changes)

    def set_site_faults(self, **changes: object) -> Faults:
        """Change the fault knobs of the site-wide NMX-M endpoint."""
        return self.site_gate.set(**changes)

    # ---------------------------------------------------------------------------------------- events

    def subscribe(self, key: uuid.UUID | str) -> asyncio.Queue[SimEvent]:
        """A queue receiving every event of the domain from now on (see :data:`SimEvent`)."""
        queue: asyncio.Queue[SimEvent] = asyncio.Queue()
        self.domain(key).subscribers.add(queue)
        return queue

    def unsubscribe(self, key: uuid.UUID | str, queue: asyncio.Queue[SimEvent]) -> None:
        self.domain(key).subscribers.discard(queue)

    def subscriber_count(self, key: uuid.UUID | str) -> int:
        return len(self.domain(key).subscribers)

    def _changed(self, domain: SimDomain, partition_id: int) -> None:
        self._emit(domain, ("partition", partition_id))

    @staticmethod
    def _emit(domain: SimDomain, event: SimEvent) -> None:
        for queue in domain.subscribers:
            queue.put_nowait(event)

    # ------------------------------------------------------------------------------------- mutations

    def resolve(self, key: uuid.UUID | str, partition_id: int, name: str = "") -> SimPartition:
        """The partition named by id, by name (id 0), or by both (which must agree)."""
        domain = self.domain(key)
        if partition_id == 0 and not name:
            raise SimError(pb.NMX_ST_BADPARAM, "neither a partition id nor a name")
        by_name = None
        if name:
            by_name = domain.names.get(name)
            if by_name is None and partition_id == 0:
                raise SimError(pb.NMX_ST_PARTITION_NAME_NOT_IN_USE, f"no partition named {name!r}")
        if partition_id:
            if partition_id not in domain.partitions:
                raise SimError(pb.NMX_ST_PARTITION_ID_NOT_IN_USE, f"no partition {partition_id}")
            if name and by_name != partition_id:
                raise SimError(
                    pb.NMX_ST_PARTITION_ID_NAME_MISMATCH, f"partition {partition_id} is not named {name!r}"
                )
            return domain.partitions[partition_id]
        assert by_name is not None
        return domain.partitions[by_name]

    def create_partition(
        self,
        key: uuid.UUID | str,
        name: str,
        gpu_uids: Sequence[int],
        partition_id: int | None = None,
        *,
        resiliency_mode: int = 0,
        multicast_groups_limit: int = 0,
    ) -> SimPartition:
        """Create a partition. ``multicast_groups_limit`` must be a multiple of 4 (else BADPARAM, the
        NMX-C form of INVALID_ARGUMENT) and fit the domain's multicast budget: the limits of all its
        partitions add up to at most ``max_multicast_groups`` (else RESOURCE_EXHAUSTED)."""
        domain = self.domain(key)
        _check_name(name)
        if resiliency_mode not in range(len(RESILIENCY_MODES)):
            raise SimError(pb.NMX_ST_BADPARAM, f"unknown resiliency mode {resiliency_mode}")
        if multicast_groups_limit % MULTICAST_GROUP_QUANTUM:
            raise SimError(
                pb.NMX_ST_BADPARAM,
                f"multicast_groups_limit {multicast_groups_limit} is not a multiple of "
                f"{MULTICAST_GROUP_QUANTUM}",
            )
        if name and name in domain.names:
            raise SimError(pb.NMX_ST_PARTITION_NAME_IN_USE, f"name {name!r} is taken")
        if partition_id is not None:
            if not MIN_PARTITION_ID <= partition_id <= DEFAULT_PARTITION_ID:
                raise SimError(pb.NMX_ST_BADPARAM, f"partition id {partition_id} out of range")
            if partition_id in domain.partitions:
                raise SimError(pb.NMX_ST_PARTITION_ID_IN_USE, f"partition id {partition_id} is taken")
        uids = self._known_gpus(domain, gpu_uids)
        self._check_free(domain, uids)
        if len(domain.partitions) >= domain.max_partitions:
            raise SimError(
                pb.NMX_ST_RESOURCE_EXHAUSTED,
                f"domain holds its maximum of {domain.max_partitions} partitions",
            )
        reserved = domain.multicast_groups_reserved()
        if reserved + multicast_groups_limit > domain.max_multicast_groups:
            raise SimError(
                pb.NMX_ST_RESOURCE_EXHAUSTED,
                f"multicast groups: {reserved} of {domain.max_multicast_groups} are reserved, "
                f"{multicast_groups_limit} more do not fit",
            )
        if partition_id is None:
            partition_id = next(
                i for i in range(MIN_PARTITION_ID, MAX_PARTITION_ID + 1) if i not in domain.partitions
            )
        partition = self._insert(domain, partition_id, name, uids, notify=False)
        partition.resiliency_mode = resiliency_mode
        partition.multicast_groups_limit = multicast_groups_limit
        self._changed(domain, partition_id)
        return partition

    def add_gpus(
        self, key: uuid.UUID | str, partition_id: int, gpu_uids: Sequence[int], name: str = ""
    ) -> SimPartition:
        domain = self.domain(key)
        partition = self.resolve(key, partition_id, name)
        uids = self._known_gpus(domain, gpu_uids)
        self._check_free(domain, uids)
        for uid in uids:
            partition.gpu_uids.add(uid)
            domain.owner[uid] = partition.partition_id
        return self._touch(domain, partition)

    def remove_gpus(
        self, key: uuid.UUID | str, partition_id: int, gpu_uids: Sequence[int], name: str = ""
    ) -> SimPartition:
        domain = self.domain(key)
        partition = self.resolve(key, partition_id, name)
        uids = self._known_gpus(domain, gpu_uids)
        outside = [uid for uid in uids if uid not in partition.gpu_uids]
        if outside:
            raise SimError(
                pb.NMX_ST_RESOURCE_NOT_IN_USE,
                f"GPU {outside[0]} is not in partition {partition.partition_id}",
            )
        for uid in uids:
            partition.gpu_uids.discard(uid)
            del domain.owner[uid]
        return self._touch(domain, partition)

    def set_members(self, key: uuid.UUID | str, partition_id: int, gpu_uids: Sequence[int]) -> SimPartition:
        """Replace a partition's members (NMX-M updates send the full list); all or nothing."""
        domain = self.domain(key)
        partition = self.resolve(key, partition_id)
        uids = self._known_gpus(domain, gpu_uids, allow_empty=True)
        self._check_free(domain, [uid for uid in uids if uid not in partition.gpu_uids])
        for uid in partition.gpu_uids:
            del domain.owner[uid]
        partition.gpu_uids = set(uids)
        for uid in uids:
            domain.owner[uid] = partition.partition_id
        return self._touch(domain, partition)

    def delete_partition(self, key: uuid.UUID | str, partition_id: int, name: str = "") -> SimPartition:
        domain = self.domain(key)
        partition = self.resolve(key, partition_id, name)
        for uid in partition.gpu_uids:
            del domain.owner[uid]
        del domain.partitions[partition.partition_id]
        if partition.name:
            del domain.names[partition.name]
        del self._partition_by_entity[partition.entity_id]
        domain.partition_health.pop(partition.partition_id, None)
        self._changed(domain, partition.partition_id)
        return partition

    def _fresh_entity_id(self) -> str:
        while True:
            entity_id = f"{self._entity_rng.getrandbits(96):024x}"
            if entity_id not in self._partition_by_entity:  # restored partitions keep theirs
                return entity_id

    def _insert(
        self,
        domain: SimDomain,
        partition_id: int,
        name: str,
        uids: Iterable[int],
        entity_id: str | None = None,
        *,
        notify: bool = True,
    ) -> SimPartition:
        now = datetime.now(UTC)
        partition = SimPartition(
            partition_id=partition_id,
            name=name,
            gpu_uids=set(uids),
            entity_id=entity_id or self._fresh_entity_id(),
            created_at=now,
            updated_at=now,
        )
        domain.partitions[partition_id] = partition
        if name:
            domain.names[name] = partition_id
        for uid in partition.gpu_uids:
            domain.owner[uid] = partition_id
        self._partition_by_entity[partition.entity_id] = (domain, partition_id)
        if notify:
            self._changed(domain, partition_id)
        return partition

    def _touch(self, domain: SimDomain, partition: SimPartition) -> SimPartition:
        partition.updated_at = datetime.now(UTC)
        self._changed(domain, partition.partition_id)
        return partition

    @staticmethod
    def _known_gpus(domain: SimDomain, gpu_uids: Sequence[int], *, allow_empty: bool = False) -> list[int]:
        if not gpu_uids and not allow_empty:
            raise SimError(pb.NMX_ST_BADPARAM, "no GPUs given")
        if len(set(gpu_uids)) != len(gpu_uids):
            raise SimError(pb.NMX_ST_BADPARAM, "a GPU is listed twice")
        for uid in gpu_uids:
            if uid not in domain.gpus:
                raise SimError(pb.NMX_ST_BADPARAM, f"GPU {uid} is not in domain {domain.domain_uuid}")
        return list(gpu_uids)

    @staticmethod
    def _check_free(domain: SimDomain, uids: Iterable[int]) -> None:
        for uid in uids:
            holder = domain.owner.get(uid)
            if holder is not None:
                raise SimError(pb.NMX_ST_RESOURCE_IN_USE, f"GPU {uid} is in partition {holder}")


def _snapshot(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not a fabric snapshot: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != SNAPSHOT_VERSION:
        raise ValueError(f"not a fabric snapshot of version {SNAPSHOT_VERSION}")
    return data


def _check_name(name: str) -> None:
    if len(name) > MAX_NAME_LENGTH or not all(" " <= ch <= "~" for ch in name):
        raise SimError(pb.NMX_ST_BADPARAM, f"a name is at most {MAX_NAME_LENGTH} printable ASCII characters")


def _slot_of(tray_index: int, trays: int) -> int:
    """Rack slot of a compute tray: the first half sits above the 9 switch trays, the rest below."""
    upper = (trays + 1) // 2
    return tray_index + 1 if tray_index < upper else tray_index + 1 + 9
