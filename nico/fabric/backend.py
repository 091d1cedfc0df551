"""The one protocol nico speaks to NVLink fabric managers, whatever the transport.

Two implementations: NMX-C (gRPC, one endpoint per rack chassis, synchronous) in ``nico.fabric.nmxc``
and NMX-M (REST, one site-wide endpoint, asynchronous operations) in ``nico.fabric.nmxm``. Both are
addressed per NVLink domain with a :class:`DomainTarget`. Every call has a deadline; every failure is
a :class:`FabricError` that says whether retrying the same call may succeed.

Partition membership is always by GPU fabric GUID (``gpu_uid``, unsigned 64-bit). A reply that the
transport delivered but whose status is not success (an NMX-C ``return_code`` other than SUCCESS, an
NMX-M operation that ``failed``) is an error, never a success.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal, NamedTuple, Protocol, runtime_checkable

log = logging.getLogger(__name__)

DEFAULT_PARTITION_ID = 32766
MIN_PARTITION_ID = 1
MAX_PARTITION_ID = 32765


@dataclass(frozen=True)
class DomainTarget:
    """Where a domain's fabric manager is: the domain, and (NMX-C) the endpoint URL serving it.

    ``endpoint`` is ``http://host:port`` (plaintext HTTP/2) or ``https://host:port`` (TLS) for NMX-C and
    is ignored by NMX-M, which has one site-wide endpoint from its configuration.
    """

    domain_uuid: uuid.UUID
    endpoint: str | None = None


@dataclass(frozen=True)
class FabricPartition:
    """A partition as the fabric manager reports it."""

    nmx_partition_id: int  # NMX network partition id (u32); 32766 is the default partition
    ref: str  # handle for changing it: the decimal id (NMX-C) or the entity ``ID`` (NMX-M)
    name: str
    gpu_uids: frozenset[int]
    # As reported; not part of identity. Health: UNKNOWN, HEALTHY, DEGRADED_BANDWIDTH, DEGRADED,
    # UNHEALTHY (NMX-M adds NEW). Attributes: None when the manager does not report them.
    health: str = field(default="UNKNOWN", compare=False)
    resiliency_mode: str | None = field(default=None, compare=False)
    multicast_groups_limit: int | None = field(default=None, compare=False)

    @property
    def is_default(self) -> bool:
        return self.nmx_partition_id == DEFAULT_PARTITION_ID


class FabricGpu(NamedTuple):
    """A GPU as the fabric manager reports it (a tuple: a deep scan reads one per GPU of the site, and
    a frozen dataclass costs three times as much to make)."""

    gpu_uid: int
    device_id: int  # 1-based module index within the compute tray (GB200: 1..4)
    chassis_serial: str
    tray_index: int  # 0-based compute tray index within the rack
    slot_id: int
    domain_uuid: uuid.UUID
    health: str  # UNKNOWN, HEALTHY, DEGRADED, NO_NVLINK, DEGRADED_BW
    nmx_partition_id: int | None  # the partition holding the GPU, if any
    # The GPU's name as the fabric reports it (NMX-C GpuTopoInfo.description, NMX-M Description),
    # e.g. "NVIDIA GB300"; "" where the call does not carry it (NMX-C GetGpuInfoList).
    description: str = ""


@dataclass(frozen=True)
class FabricComputeNode:
    """A compute tray as the fabric manager reports it."""

    chassis_serial: str
    tray_index: int
    slot_id: int
    num_gpus: int
    health: str  # UNKNOWN, HEALTHY, DEGRADED, UNHEALTHY
    partition_ids: frozenset[int]


@dataclass(frozen=True)
class FabricSwitchNode:
    """An NVLink switch tray as the fabric manager reports it."""

    chassis_serial: str
    tray_index: int
    slot_id: int
    num_switches: int
    health: str  # UNKNOWN, HEALTHY, MISSING_NVLINK, UNHEALTHY
    partition_ids: frozenset[int]


@dataclass(frozen=True)
class DomainLimits:
    """The limits a domain's manager reports (NMX-C ``GetDomainProperties``); budgets use them."""

    max_compute_nodes: int
    max_gpus_per_compute_node: int
    max_switch_nodes: int
    line_rate_mbps: int
    min_gpus_per_partition: int
    max_num_partitions: int
    max_num_alids: int
    max_multicast_groups: int  # the rack's multicast budget; partition limits add up to at most this
    max_num_ports: int


@dataclass(frozen=True)
class DomainHealth:
    """A domain's health summary: how many GPUs, compute nodes, switch trays and partitions are in
    each health state (the manager's own words, e.g. ``{"HEALTHY": 70, "NO_NVLINK": 2}``), and the
    controller's own state. Counts a manager does not report are empty."""

    domain_uuid: uuid.UUID
    gpus: Mapping[str, int]
    compute_nodes: Mapping[str, int]
    switch_nodes: Mapping[str, int]
    partitions: Mapping[str, int]
    controller: str = "UNKNOWN"  # NmxControllerHealth: HEALTHY, DEGRADED, UNHEALTHY, ...
    control_plane: str = "UNKNOWN"  # ControlPlaneState: CONFIGURED, DEGRADED, ...
    available_multicast_groups: int | None = None

    @property
    def healthy(self) -> bool:
        """Everything reported is HEALTHY (an empty count is no evidence against)."""
        counts = (self.gpus, self.compute_nodes, self.switch_nodes, self.partitions)
        return all(set(c) <= {"HEALTHY"} for c in counts) and self.controller in ("HEALTHY", "UNKNOWN")


def health_counts(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


@dataclass(frozen=True)
class DomainHello:
    domain_uuid: uuid.UUID
    app_version: str = ""


EventKind = Literal["partition", "health", "topology", "control_plane", "init_done", "resync"]


@dataclass(frozen=True)
class PartitionEvent:
    """The fabric reports that something about a domain changed.

    ``kind``: ``partition`` (``nmx_partition_id`` changed, or None: some partition), ``health`` (a GPU,
    compute node, switch or partition changed health: re-read health), ``topology`` (devices came or
    went), ``control_plane`` (the controller's state changed), ``init_done`` (the controller finished
    (re)initialising: re-read everything), ``resync`` (the stream was re-established after a break:
    changes may have been missed). Every kind but a known ``nmx_partition_id`` means "re-read the domain".
    """

    domain_uuid: uuid.UUID
    nmx_partition_id: int | None = None
    kind: EventKind = "partition"


class FabricError(Exception):
    """A fabric call failed. ``retryable``: the same call may succeed later (timeouts, unreachable or
    busy managers); otherwise it was refused for a reason that retrying does not change."""

    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, code: str | None = None, endpoint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # e.g. "NMX_ST_PARTITION_NAME_IN_USE", "HTTP_404", "UNAVAILABLE"
        self.endpoint = endpoint


class FabricUnavailable(FabricError):
    """Could not reach the manager (connection refused, endpoint down, 503)."""

    retryable = True


class FabricTimeout(FabricError):
    """The call did not finish before its deadline (the manager may still complete it)."""

    retryable = True


class FabricBusy(FabricError):
    """The manager answered but could not act now (not ready, internal or database error)."""

    retryable = True


class FabricRejected(FabricError):
    """The manager refused the request (bad parameter, name or id in use, GPU in another partition,
    partition limit reached, not found). Retrying the same request will not help."""

    retryable = False


class PartitionNotFound(FabricRejected):
    """The partition named in the request does not exist (any more)."""


class EndpointNotConfigured(FabricError):
    """No endpoint is known for the domain (no NMX-C endpoint for its chassis, no NMX-M URL)."""

    retryable = False


class OperationPending(FabricTimeout):
    """An asynchronous (NMX-M) operation was accepted but had not finished by its deadline. The
    manager may still complete it: keep ``operation_id`` and check on it later."""

    def __init__(self, message: str, *, operation_id: str, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.operation_id = operation_id


OperationState = Literal["pending", "in-progress", "completed", "failed", "cancelled", "unknown"]


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers beyond :class:`FabricBackend`, declared by the backend itself. Each
    optional interface is the backend seen through it, or None when the backend lacks it: a caller
    asks here (``backend.capabilities.events``) and never probes a backend by name, attribute or type.
    """

    manager: str  # how messages name the manager: "NMX-C" or "NMX-M"
    # Each domain is served by an endpoint of its own, found through the chassis registry and checked
    # with Hello (NMX-C); otherwise one site-wide endpoint serves every domain (NMX-M).
    per_endpoint: bool
    # A created partition takes a multicast groups limit drawn from the domain's budget (NMX-C
    # ``GetDomainProperties``); NMX-M partitions have no attributes and refuse one.
    multicast_limits: bool
    operations: AsyncOperations | None = None  # changes are asynchronous operations to poll
    events: PartitionEvents | None = None  # the manager pushes partition and health events
    credentials: StoredCredentials | None = None  # signs in with credentials stored by nico
    health: FabricHealth | None = None  # compute-node and domain health summaries
    topology: FabricTopology | None = None  # switch trays and the domain's limits
    gpu_topology: GpuTopology | None = None  # every GPU with its name, for machine discovery
    site: SiteInventory | None = None  # one call lists every domain's GPUs


@runtime_checkable
class FabricBackend(Protocol):
    """What the reconciler needs from a fabric manager, per NVLink domain."""

    kind: Literal["nmxc", "nmxm"]

    @property
    def capabilities(self) -> Capabilities:
        """What this backend offers beyond these calls."""

    async def hello(self, target: DomainTarget) -> DomainHello:
        """Say hello; the reply names the domain the manager actually serves."""

    async def list_partitions(self, target: DomainTarget) -> list[FabricPartition]:
        """Every partition of the domain (the default partition included) with its members."""

    async def create_partition(
        self,
        target: DomainTarget,
        name: str,
        gpu_uids: frozenset[int],
        *,
        resiliency_mode: str | None = None,
        multicast_groups_limit: int | None = None,
    ) -> FabricPartition:
        """Create a GPU-UID-based partition; the manager assigns its id. Names are unique per domain.

        ``resiliency_mode`` (FULL_BANDWIDTH, ADAPTIVE_BANDWIDTH, USER_ACTION_REQUIRED) and
        ``multicast_groups_limit`` (a multiple of 4, drawn from the domain's ``max_multicast_groups``
        budget) are sent only when given; they can be set at creation only. A limit that overruns the
        budget is refused (:class:`FabricRejected`, code ``NMX_ST_RESOURCE_EXHAUSTED``).
        """

    async def add_gpus(
        self, target: DomainTarget, partition: FabricPartition, gpu_uids: frozenset[int]
    ) -> None:
        """Add GPUs (which must be in no other partition) to an existing partition."""

    async def remove_gpus(
        self, target: DomainTarget, partition: FabricPartition, gpu_uids: frozenset[int]
    ) -> None:
        """Take GPUs out of a partition (they are then in no partition)."""

    async def delete_partition(self, target: DomainTarget, partition: FabricPartition) -> None:
        """Delete a partition; its GPUs are then in no partition."""

    async def list_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        """Every GPU of the domain with its location and health."""

    async def close(self) -> None:
        """Release channels and connections."""


@runtime_checkable
class AsyncOperations(Protocol):
    """Backends whose changes are asynchronous operations (NMX-M) can be asked about one later."""

    async def operation_state(self, operation_id: str) -> OperationState: ...


@runtime_checkable
class PartitionEvents(Protocol):
    """Backends that push partition changes (NMX-C ``Subscribe``)."""

    def partition_events(self, target: DomainTarget) -> AsyncIterator[PartitionEvent]: ...


@runtime_checkable
class FabricHealth(Protocol):
    """Backends that report compute-node and domain health (NMX-C, NMX-M)."""

    async def list_compute_nodes(self, target: DomainTarget) -> list[FabricComputeNode]: ...

    async def domain_health(self, target: DomainTarget) -> DomainHealth: ...

    async def health_gpus(self, target: DomainTarget) -> list[FabricGpu]:
        """The domain's GPUs for a health read: may come from a listing shared with other domains'
        health reads, up to a second old (NMX-M lists the whole site; ``list_gpus`` lists now)."""
        ...


@runtime_checkable
class FabricTopology(Protocol):
    """Backends that report switch trays and the domain's limits (NMX-C ``GetSwitchNodeInfoList``,
    ``GetDomainProperties``)."""

    async def list_switch_nodes(self, target: DomainTarget) -> list[FabricSwitchNode]: ...

    async def domain_limits(self, target: DomainTarget) -> DomainLimits: ...


@runtime_checkable
class GpuTopology(Protocol):
    """Backends that report every GPU with its name (NMX-C ``GetTopologyInfo``: ``GpuTopoInfo`` has
    the description, the device id and the location with its slot), for machine discovery."""

    async def gpu_topology(self, target: DomainTarget) -> list[FabricGpu]: ...


class NmxcManager(PartitionEvents, FabricHealth, FabricTopology, GpuTopology, Protocol):
    """What an NMX-C manager offers beyond :class:`FabricBackend` (the gRPC client and the in-process
    simulator both speak it)."""


def nmxc_capabilities(backend: NmxcManager) -> Capabilities:
    """The capabilities of an NMX-C manager: an endpoint per domain, multicast limits, events, health
    and topology; changes apply at once (no operations to poll) and need no stored credentials."""
    return Capabilities(
        manager="NMX-C",
        per_endpoint=True,
        multicast_limits=True,
        events=backend,
        health=backend,
        topology=backend,
        gpu_topology=backend,
    )


@runtime_checkable
class StoredCredentials(Protocol):
    """Backends that sign in with credentials nico stores (NMX-M basic auth, ``nico admin credential
    add-nmx-m``): the reconciler hands them what is stored at every pass."""

    def use_credentials(self, credentials: tuple[str, str]) -> None: ...


@runtime_checkable
class SiteInventory(Protocol):
    """Backends with one site-wide endpoint (``base_url``) that list every domain's GPUs in one call
    (NMX-M)."""

    base_url: str

    async def site_gpus(self) -> list[FabricGpu]: ...


@runtime_checkable
class PartitionCounts(Protocol):
    """Backends that answer the cheap partition questions (NMX-C ``GetPartitionCount`` and
    ``GetPartitionIdList``) without sending every partition's member list."""

    async def partition_count(self, target: DomainTarget) -> int: ...

    async def partition_sizes(self, target: DomainTarget) -> dict[int, int]:
        """Partition id -> number of GPUs, for every partition of the domain."""


EventHandler = Callable[[PartitionEvent], Awaitable[None] | None]


def watch_events(
    backend: PartitionEvents, target: DomainTarget, handler: EventHandler, *, retry: float = 1.0
) -> asyncio.Task[None]:
    """Call ``handler`` with every event of the domain as it arrives (health changes, init-done and
    topology changes included), until the returned task is cancelled. The handler may be a plain or
    an async function (e.g. ``queue.put_nowait`` or a reconciler's "wake this domain"); a stream that
    ends or fails is opened again after ``retry`` seconds."""

    async def run() -> None:
        while True:
            try:
                async for event in backend.partition_events(target):
                    result = handler(event)
                    if result is not None:
                        await result
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("events of %s stopped: %s", target.domain_uuid, exc)
            await asyncio.sleep(retry)

    task = asyncio.create_task(run(), name=f"fabric-events-{target.domain_uuid}")
    return task


async def stop_watching(task: asyncio.Task[None]) -> None:
    """Cancel a :func:`watch_events` task and wait for it to end."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
