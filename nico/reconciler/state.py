"""Loading what the reconciler needs about NVLink domains, in a few bulk queries, as plain data.

Desired state comes from instances and their NVLink interfaces (a GPU of a live instance with a live
binding wants that logical partition; every other GPU of a known machine wants the default
partition); recorded state from physical partitions, open intents and the last observation of each
GPU. A full pass over thousands of racks loads everything at once; a pass triggered by a change
loads just the domains named.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy.ext.asyncio import AsyncConnection

from nico.db.enums import InstanceStatus
from nico.db.queries import reconciler as queries
from nico.reconciler.homes import Mode, home_names
from nico.reconciler.planner import DomainDesire, Foreign, lp_of_name


class GpuRow(NamedTuple):  # a tuple: a deep scan builds one per GPU of the site, 3x cheaper than a dataclass
    gpu_uid: int
    machine_id: str
    device_id: int
    instance_id: uuid.UUID | None
    wants: uuid.UUID | None  # the logical partition this GPU should be in (None: default partition)
    observed_physical_partition: uuid.UUID | None
    observed_fabric_partition: int | None
    chassis_serial: str = ""
    slot_id: int | None = None  # the tray's rack slot, for its home partition in tray mode
    machine_foreign: int = 0  # the machine's GPUs in foreign partitions as recorded (machine.foreign_gpus)


@dataclass(frozen=True)
class RecordedPartition:
    id: uuid.UUID
    lp: uuid.UUID
    nmx_partition_id: int
    ref: str
    name: str


@dataclass(frozen=True)
class OpenIntent:
    id: uuid.UUID
    name: str
    operation: str
    operation_id: str | None
    state: str


@dataclass(frozen=True)
class UnsettledInstance:
    """An instance whose NVLink state the reconciler still has to confirm (or finish deleting)."""

    id: uuid.UUID
    status: str
    version: int
    changed_at: datetime
    machine_id: str
    bindings: dict[int, uuid.UUID]  # device_instance -> logical partition (live bindings)

    @property
    def terminating(self) -> bool:
        return self.status == InstanceStatus.TERMINATING


@dataclass
class DomainState:
    domain: uuid.UUID
    site_id: uuid.UUID | None = None
    chassis_serials: set[str] = field(default_factory=set)
    gpus: dict[int, GpuRow] = field(default_factory=dict)
    partitions: dict[str, RecordedPartition] = field(default_factory=dict)  # by fabric name
    intents: list[OpenIntent] = field(default_factory=list)
    unsettled: dict[uuid.UUID, UnsettledInstance] = field(default_factory=dict)
    multicast_limits: dict[uuid.UUID, int] = field(default_factory=dict)  # wanted lp -> its limit
    multicast_budget: int | None = None  # as last read from the fabric and stored (None: never)
    # Desires made, by (mode, foreign): a pass asks up to four times (scan, plan, after the calls,
    # write-back) and the state does not change once loaded; each costs a walk over every GPU.
    _desires: dict[tuple[str, str], DomainDesire] = field(default_factory=dict, repr=False, compare=False)

    def owned_names(self) -> frozenset[str]:
        return frozenset(self.partitions) | {i.name for i in self.intents if i.operation == "create"}

    def adopted(self) -> dict[str, uuid.UUID]:
        """Recorded partitions whose name is not the one nico gives (taken over from another manager)."""
        return {name: p.lp for name, p in self.partitions.items() if lp_of_name(name) != p.lp}

    def desire(self, mode: Mode = "domain", foreign: Foreign = "keep") -> DomainDesire:
        """What nico wants of the domain, with the homes of ``mode`` and ``foreign``'s way with the
        partitions nico did not make (both as configured: ``nvlink_config``). Made once a state."""
        made = self._desires.get((mode, foreign))
        if made is not None:
            return made
        homes = home_names((g.gpu_uid, g.chassis_serial, g.slot_id) for g in self.gpus.values())
        gpus = {g.gpu_uid: g.wants for g in self.gpus.values()}
        made = self._desires[mode, foreign] = DomainDesire(
            self.domain,
            gpus,
            self.owned_names(),
            mode,
            homes,
            multicast_limits=self.multicast_limits,
            adopted=self.adopted(),
            foreign=foreign,
        )
        return made

    def pending_operations(self) -> list[OpenIntent]:
        """NMX-M operations that timed out and may still complete."""
        return [i for i in self.intents if i.operation_id and i.state in ("pending", "timedout")]

    def gpus_of(self, machine_id: str) -> dict[int, GpuRow]:
        """device_instance -> GPU of a machine."""
        return {g.device_id - 1: g for g in self.gpus.values() if g.machine_id == machine_id}


async def load(
    conn: AsyncConnection, domains: Sequence[uuid.UUID] | None = None
) -> dict[uuid.UUID, DomainState]:
    """State of ``domains`` (all NVLink domains when None)."""
    sites, gpus, partitions, intents, unsettled = await queries.domains_rows(conn, domains)
    states = _build(sites, gpus, partitions, intents, unsettled)
    wanted = {g.wants for s in states.values() for g in s.gpus.values() if g.wants is not None}
    if wanted:
        _limits(states, await queries.multicast_limits(conn, sorted(wanted)))
    return states


async def load_one(
    conn: AsyncConnection,
    domain: uuid.UUID,
    *,
    lock: int | None = None,
    endpoints: bool = True,
    credentials: bool = True,
) -> tuple[DomainState | None, Registry, bool]:
    """The state of one domain (None: no such domain), the registry of its chassis (its endpoints and
    the stored credentials, each only when asked for: none is read for a backend that has no use for
    it), and whether the domain's lock ``lock`` was taken (True without one), in one round trip
    (:func:`queries.one_domain_rows`): the load of a pass triggered by a change. Not locked: the state
    is not to be acted on."""
    rows = await queries.one_domain_rows(
        conn, domain, lock=lock, endpoints=endpoints, credentials=credentials
    )
    states = _build(rows.sites, rows.gpus, rows.partitions, rows.intents, rows.unsettled)
    _limits(states, rows.limits)
    state = states.get(domain)
    # The chassis whose registry rows were read: the domain's (a row of them that is gone is gone).
    serials = frozenset(state.chassis_serials if state is not None else ())
    found = _endpoint_map(rows.endpoints)
    registry = Registry(found, rows.credentials, covers=serials | frozenset(found))
    return state, registry, rows.locked


async def load_part(
    conn: AsyncConnection,
    domains: Sequence[uuid.UUID],
    locks: Sequence[int],
    *,
    endpoints: bool = True,
    credentials: bool = True,
) -> tuple[dict[uuid.UUID, DomainState], Registry, set[int]]:
    """:func:`load_one` for a part of a full pass: the states of ``domains``, the registry of their
    chassis, and which of the advisory locks ``locks`` were taken, in one round trip
    (:func:`queries.part_rows`). A domain whose lock was not taken is not to be acted on."""
    rows, taken = await queries.part_rows(conn, domains, locks, endpoints=endpoints, credentials=credentials)
    states = _build(rows.sites, rows.gpus, rows.partitions, rows.intents, rows.unsettled)
    _limits(states, rows.limits)
    serials = frozenset(serial for s in states.values() for serial in s.chassis_serials)
    found = _endpoint_map(rows.endpoints)
    return states, Registry(found, rows.credentials, covers=serials | frozenset(found)), taken


@dataclass(frozen=True)
class Registry:
    """Where the fabric managers are and how to sign in, as stored: chassis serial -> NMX-C endpoint
    URL, and the NMX-M credentials (None: none stored). ``covers``: the chassis whose rows these are
    (a domain's pass reads only its own chassis'); None: the whole registry."""

    endpoints: dict[str, str]
    nmxm_credentials: tuple[str, str] | None
    covers: frozenset[str] | None = None


def _build(
    sites: Iterable[Any],
    gpus: Iterable[Any],
    partitions: Iterable[Any],
    intents: Iterable[Any],
    unsettled: Iterable[Any],
) -> dict[uuid.UUID, DomainState]:
    states: dict[uuid.UUID, DomainState] = {}
    # Keyed by the uuid's integer: a UUID's own hash and equality are Python code, run once per row.
    by_int: dict[int, DomainState] = {}

    def state(domain: uuid.UUID) -> DomainState:
        found = by_int.get(domain.int)
        if found is None:
            found = by_int[domain.int] = states[domain] = DomainState(domain)
        return found

    # Strings every GPU of a machine or chassis repeats, kept once (a full load holds every GPU).
    machines: dict[str, str] = {}
    serials: dict[str, str] = {}
    for domain, site_id, budget in sites:
        found = state(domain)
        found.site_id, found.multicast_budget = site_id, budget
    # The GPU rows are the bulk of a load (one per GPU of the site) and come machine by machine, their
    # domain as text: a domain's state is looked up again only when the row's domain is another.
    by_text: dict[str, DomainState] = {}
    s: DomainState | None = None
    last = ""
    for domain, uid, machine_id, device_id, instance_id, wants, pp, fabric_pid, chassis, slot, held in gpus:
        if s is None or domain != last:
            s = by_text.get(domain) or by_text.setdefault(domain, state(uuid.UUID(domain)))
            last = domain
        gpu = int(uid)
        serial = serials.get(chassis) or serials.setdefault(chassis, chassis.strip())
        s.gpus[gpu] = GpuRow(
            gpu,
            machines.setdefault(machine_id, machine_id),
            device_id,
            instance_id,
            wants,
            pp,
            fabric_pid,
            serial,
            slot,
            held,
        )
        s.chassis_serials.add(serial)
    for pid, lp, domain, fabric_pid, ref, name in partitions:
        state(domain).partitions[name] = RecordedPartition(pid, lp, fabric_pid, ref, name)
    for iid, domain, name, operation, operation_id, intent_state in intents:
        state(domain).intents.append(OpenIntent(iid, name, operation, operation_id, intent_state))
    for iid, domain, status, version, changed_at, machine_id, bindings in unsettled:
        state(domain).unsettled[iid] = UnsettledInstance(
            iid,
            status,
            version,
            changed_at,
            machine_id,
            {int(device): uuid.UUID(lp) for device, lp in bindings.items()},
        )
    return states


def _limits(states: dict[uuid.UUID, DomainState], rows: Iterable[Any]) -> None:
    """The multicast limits of the logical partitions the domains' GPUs want."""
    # By the uuid's integer: a UUID's hash and equality are Python code, and this runs once per GPU.
    limits = {lp.int: (lp, limit) for lp, limit in rows}
    for s in states.values():
        for g in s.gpus.values():
            if g.wants is not None and (found := limits.get(g.wants.int)) is not None:
                s.multicast_limits[found[0]] = found[1]


async def endpoints(conn: AsyncConnection) -> dict[str, str]:
    """Chassis serial -> NMX-C endpoint URL."""
    return _endpoint_map(await queries.nmxc_endpoints(conn))


def _endpoint_map(rows: Iterable[Any]) -> dict[str, str]:
    """Chassis serial -> NMX-C endpoint URL, from the registry's (serial, endpoint) rows."""
    return {serial.strip(): endpoint.strip() for serial, endpoint in rows}


@dataclass(frozen=True)
class DomainSummary:
    """Enough to decide, against a fresh listing, whether a domain needs a pass."""

    domain: uuid.UUID
    chassis_serials: frozenset[str]
    fabric_digest: str | None
    settled: bool
    busy: bool  # unsettled instances or open intents

    def quiet_if(self, digest: str) -> bool:
        return self.settled and not self.busy and digest == self.fabric_digest


async def summaries(
    conn: AsyncConnection, domains: Sequence[uuid.UUID] | None = None
) -> dict[uuid.UUID, DomainSummary]:
    """One row per domain of ``domains`` (None: every domain), computed in the database."""
    rows = await queries.domain_summaries(conn, domains)
    return {
        domain: DomainSummary(domain, frozenset(s.strip() for s in serials), digest, settled, busy)
        for domain, digest, settled, serials, busy in rows
    }
