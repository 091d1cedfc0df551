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

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, runtime_checkable

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

    partition_id: int  # NMX network partition id (u32); 32766 is the default partition
    ref: str  # handle for changing it: the decimal id (NMX-C) or the entity ``ID`` (NMX-M)
    name: str
    gpu_uids: frozenset[int]

    @property
    def is_default(self) -> bool:
        return self.partition_id == DEFAULT_PARTITION_ID


@dataclass(frozen=True)
class FabricGpu:
    """A GPU as the fabric manager reports it."""

    gpu_uid: int
    device_id: int  # 1-based module index within the compute tray (GB200: 1..4)
    chassis_serial: str
    tray_index: int  # 0-based compute tray index within the rack
    slot_id: int
    domain_uuid: uuid.UUID
    health: str  # UNKNOWN, HEALTHY, DEGRADED, NO_NVLINK, DEGRADED_BW
    partition_id: int | None  # the partition holding the GPU, if any


@dataclass(frozen=True)
class DomainHello:
    domain_uuid: uuid.UUID
    app_version: str = ""


@dataclass(frozen=True)
class PartitionEvent:
    """The fabric reports that something about a domain's partitions changed."""

    domain_uuid: uuid.UUID
    partition_id: int | None = None


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


@runtime_checkable
class FabricBackend(Protocol):
    """What the reconciler needs from a fabric manager, per NVLink domain."""

    kind: Literal["nmxc", "nmxm"]

    async def hello(self, target: DomainTarget) -> DomainHello:
        """Say hello; the reply names the domain the manager actually serves."""

    async def list_partitions(self, target: DomainTarget) -> list[FabricPartition]:
        """Every partition of the domain (the default partition included) with its members."""

    async def create_partition(
        self, target: DomainTarget, name: str, gpu_uids: frozenset[int]
    ) -> FabricPartition:
        """Create a GPU-UID-based partition; the manager assigns its id. Names are unique per domain."""

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
